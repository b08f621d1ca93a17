"""Robustness scenarios that need the real binaries (found by a hostile probe of the service).

Reuses the e2e harness (tests/e2e/e2e_test.py: Server, make_model, error_code): each test
starts its own dllm-server on free loopback ports with a copy of the tiny reference model.

  port_in_use                   a second server on a busy port exits 1 naming the cause
  tls_key_mismatch              a key that does not match the certificate is named at start-up
  client_help                   `dllm-client load --help` prints usage and exits 0
  build_info_and_process        /metrics has dllm_build_info{version,backend,model} and the
                                process_* series
  config_port_range             server.address with port 99999 is a config error
  invalid_utf8_logged           invalid UTF-8 over the wire: INVALID_ARGUMENT, logged, counted,
                                no raw libprotobuf line in the (JSON) log
  load_counts_match             32 streams (16 unary + 16 streaming) for 15 s: every request
                                ends with a definite status; server metrics == client counts
  drain_under_load              SIGTERM under load: in-flight requests finish, the rest are
                                refused with UNAVAILABLE, every OK the client saw is logged OK
  zeroed_model_startup_failed   a model whose weights were overwritten with zeros while it
                                loaded: warm-up refuses it, exit 1 with a startup_failed
                                line (stage warmup), never SERVING
  deadline_storm_counts_match   48 clients with 50 ms deadlines against queue 64 + batch 8:
                                server counts == client counts, and RESOURCE_EXHAUSTED stays
                                a small share: under 25% (0.05-1.5% measured on 2 busy cores;
                                88% before the fix, when expired requests held their slots; the
                                exact rule is tested in queue_deadline_test.cc)

Usage (from the repo root): python3 -m tests.e2e.reliability_test --bin-dir build/bin
       [unittest args]
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from tests.e2e import e2e_test
from tests.e2e.e2e_test import Server, error_code, make_model

DEFINITE = {"OK", "CANCELLED", "DEADLINE_EXCEEDED", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED",
            "UNAVAILABLE", "UNAUTHENTICATED", "INTERNAL"}


def server_counts(server):
    """dllm_requests_total by status (summed over protocols) from the server's /metrics."""
    counts = {}
    for line in server.metrics_text().splitlines():
        m = re.match(r'dllm_requests_total\{protocol="[a-z]+",status="([A-Z_]+)"\} ([0-9.e+]+)$',
                     line)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + int(float(m.group(2)))
    return {k: v for k, v in counts.items() if v}


def wait_counts(server, total, timeout=30, settle=None):
    """Server counts once they add up to `total` (the last calls may still be recording), or,
    with `settle`, once they have not changed for that many seconds."""
    deadline = time.time() + timeout
    counts, since = {}, time.time()
    while time.time() < deadline:
        now = server_counts(server)
        if now != counts:
            counts, since = now, time.time()
        if sum(counts.values()) >= total:
            break
        if settle is not None and time.time() - since >= settle:
            break
        time.sleep(0.1)
    return counts


def first_errors(reports):
    """The first error message per status of each load report; every non-OK status of a
    report must have one (dllm-client load records it)."""
    out = []
    for rep in reports:
        errors = rep["first_error_by_status"]
        assert set(errors) == set(rep["by_status"]) - {"OK"}, rep
        out.append(errors)
    return out


def unavailable_in_transit(test, client, server, errors):
    """Client counts with the calls that a retired connection ended UNAVAILABLE put back
    under the status the server counted them with; fails unless they are few and of the
    two known kinds.

    At a connection's GOAWAY (server.max_connection_age_seconds, 2 s here) gRPC can end a
    call UNAVAILABLE on the client in two ways that are not losses: a call sent just as the
    connection is retired never reaches the service ("GOAWAY received"; the server has no
    record), and a call whose deadline expired on the server can see its connection close
    before its status ("Socket closed"; the server counted DEADLINE_EXCEEDED). Under CPU
    contention a run of ~10,000 calls saw 0-2. A call the server completed OK but its client
    saw UNAVAILABLE is a lost reply, never accepted here (the lingering close exists for it).
    """
    client = dict(client)
    unavailable = client.pop("UNAVAILABLE", 0)
    test.assertLessEqual(unavailable, 3 + sum(client.values()) // 1000, (client, errors))
    messages = {e["UNAVAILABLE"] for e in errors if "UNAVAILABLE" in e}
    test.assertTrue(messages <= {"GOAWAY received", "Socket closed"}, errors)
    expired = min(unavailable, max(0, server.get("DEADLINE_EXCEEDED", 0) -
                                   client.get("DEADLINE_EXCEEDED", 0)))
    if expired:
        client["DEADLINE_EXCEEDED"] = client.get("DEADLINE_EXCEEDED", 0) + expired
    return client


def wait_exit(server, timeout=60):
    try:
        return server.proc.wait(timeout=timeout)
    finally:
        server.log_file.close()


class ReliabilityTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="dllm-reliability-")
        self.model = make_model(self.tmp)
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, **kwargs):
        s = Server(self.tmp, self.model, **kwargs)
        self.servers.append(s)
        return s

    def client(self, *args, timeout=120):
        return subprocess.run([os.path.join(e2e_test.BIN_DIR, "dllm-client")] + list(args),
                              capture_output=True, text=True, timeout=timeout)

    def load(self, server, *args):
        return subprocess.Popen(
            [os.path.join(e2e_test.BIN_DIR, "dllm-client"), "load", "--json", "--address",
             server.address] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def report(self, proc, all_fail=False):
        """The load's JSON report; `all_fail`: every call is meant to fail, so the client
        exits 1 (none succeeded) after printing it."""
        out, err = proc.communicate(timeout=240)
        self.assertEqual(proc.returncode, 1 if all_fail else 0, err)
        return json.loads(out)

    def test_port_in_use(self):
        first = self.start()
        second = self.start(overrides={"server": {"address": first.address}}, wait=False)
        self.assertEqual(wait_exit(second), 1, second.log())
        log = second.log()
        self.assertIn("cannot listen on " + first.address, log)
        self.assertIn("Address already in use", log)
        for line in log.splitlines():  # gRPC's own error lines go through the JSON logger
            self.assertTrue(line.startswith("{"), line)
        # The first server still answers every call (no traffic split with a ghost).
        r = first.client("generate", "Hi")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_tls_key_mismatch(self):
        def ssl(*args):
            subprocess.run(["openssl"] + list(args), cwd=self.tmp, check=True,
                           capture_output=True)
        for name in ("one", "two"):
            ssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-days", "1", "-subj", "/CN=" + name, "-keyout", name + ".key",
                "-out", name + ".pem")
        cert = os.path.join(self.tmp, "one.pem")
        key = os.path.join(self.tmp, "two.key")
        s = self.start(overrides={"tls": {"cert": cert, "key": key}}, wait=False)
        self.assertEqual(wait_exit(s), 1, s.log())
        log = s.log()
        self.assertIn("does not match", log)
        self.assertIn(cert, log)
        self.assertIn(key, log)
        self.assertNotIn("cannot listen", log)

    def test_client_help(self):
        for args in (["load", "--help"], ["generate", "-h"], ["--help"]):
            r = self.client(*args)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            self.assertIn("usage: dllm-client", r.stdout)

    def test_build_info_and_process(self):
        s = self.start()
        text = s.metrics_text()
        m = re.search(r'^dllm_build_info\{([^}]*)\} 1$', text, re.M)
        self.assertIsNotNone(m, text)
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        self.assertEqual(labels["backend"], "cpu")
        self.assertEqual(labels["model"], self.model)
        self.assertNotEqual(labels["version"], "")
        rss = re.search(r'^process_resident_memory_bytes ([0-9.e+]+)$', text, re.M)
        self.assertIsNotNone(rss, text)
        with open("/proc/%d/statm" % s.proc.pid) as f:
            resident = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        self.assertAlmostEqual(float(rss.group(1)), resident, delta=0.2 * resident)
        self.assertRegex(text, r'(?m)^process_cpu_seconds_total [0-9.e+-]+$')

    def test_zeroed_model_startup_failed(self):
        path = os.path.join(self.model, "model.safetensors")
        with open(path, "r+b") as f:
            header_len = int.from_bytes(f.read(8), "little")
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(8 + header_len)
            f.write(bytes(size - 8 - header_len))
        s = self.start(wait=False)
        self.assertEqual(wait_exit(s), 1, s.log())
        failed = s.records("startup_failed")
        self.assertEqual(len(failed), 1, s.log())
        self.assertEqual(failed[0]["stage"], "warmup")
        self.assertIn("the model's output is degenerate", failed[0]["error"])
        self.assertEqual(s.records("serving"), [])
        self.assertEqual(len(s.records("model_loaded")), 1, s.log())

    def test_config_port_range(self):
        s = self.start(overrides={"server": {"address": "127.0.0.1:99999"}}, wait=False)
        self.assertEqual(wait_exit(s), 1, s.log())
        self.assertIn("server.address", s.log())
        self.assertIn("99999", s.log())
        self.assertNotIn("listening", s.log())

    def test_invalid_utf8_logged(self):
        s = self.start()
        cmd = [os.path.join(e2e_test.BIN_DIR, "dllm-client").encode(), b"generate",
               b"--address", s.address.encode(), b"--prompt", b"bad \xff\xfe byte"]
        r = subprocess.run(cmd, capture_output=True, timeout=60)
        r.stderr = r.stderr.decode(errors="replace")
        self.assertEqual(error_code(r), "INVALID_ARGUMENT", r.stderr)
        self.assertIn("prompt", r.stderr)
        record = s.wait_record(lambda rec: rec.get("status") == "INVALID_ARGUMENT")
        self.assertIn("UTF-8", record["error"])
        self.assertEqual(server_counts(s).get("INVALID_ARGUMENT"), 1)
        for line in s.log().splitlines():  # the JSON log stays JSON
            self.assertTrue(line.startswith("{"), line)

    def test_load_counts_match(self):
        s = self.start(overrides={"engine": {"max_batch_sequences": 8, "queue_capacity": 64}})
        unary = self.load(s, "--concurrency", "16", "--duration", "15", "--max-new-tokens", "16",
                          "Hello")
        stream = self.load(s, "--concurrency", "16", "--duration", "15", "--max-new-tokens",
                           "16", "--stream", "Hello")
        reports = [self.report(unary), self.report(stream)]
        client = {}
        for rep in reports:
            self.assertEqual(sum(rep["by_status"].values()), rep["requests"])
            for code, n in rep["by_status"].items():
                client[code] = client.get(code, 0) + n
        total = sum(client.values())
        self.assertGreater(client.get("OK", 0), 0, client)
        self.assertTrue(set(client) <= DEFINITE, client)
        errors = first_errors(reports)
        # Every call is counted once, as its client saw it (but see unavailable_in_transit).
        server = wait_counts(s, total, settle=3 if "UNAVAILABLE" in client else None)
        self.assertEqual(server, unavailable_in_transit(self, client, server, errors), errors)
        print("load: client", client, file=sys.stderr)

    def test_drain_under_load(self):
        s = self.start(overrides={"engine": {"max_batch_sequences": 4, "queue_capacity": 16},
                                  "server": {"drain_timeout_seconds": 60}})
        load = self.load(s, "--concurrency", "12", "--duration", "8", "--max-new-tokens", "64",
                         "--schedule", "block", "--block-length", "64", "Hello")
        time.sleep(3)
        s.proc.send_signal(signal.SIGTERM)
        self.assertEqual(wait_exit(s, timeout=120), 0, s.log())
        rep = self.report(load)
        client = rep["by_status"]
        self.assertTrue(set(client) <= {"OK", "UNAVAILABLE"}, client)
        server_ok = [r for r in s.records("request_done") if r["status"] == "OK"]
        self.assertEqual(len(server_ok), client.get("OK", 0), client)
        self.assertGreater(client.get("OK", 0), 0)
        events = [r["event"] for r in s.records()]
        self.assertLess(events.index("draining"), events.index("stopped"))
        print("drain: client", client, file=sys.stderr)

    def deadline_storm(self, s, duration_s):
        """48 clients calling with 50 ms deadlines for answers that cannot finish in time;
        checks that the server counted every call with the status its client got. Returns
        the report and the client's counts."""
        # 48, not 64, clients: the server's deadline for a call is later than the client's
        # by the transit time, so a client's next call can arrive while its previous one is
        # not yet expired server-side; 16 spare slots absorb most of that skew.
        load = self.load(s, "--concurrency", "48", "--duration", str(duration_s), "--timeout",
                         "0.05", "--max-new-tokens", "256", "--schedule", "block", "--block-length",
                         "256", "Hello")
        rep = self.report(load, all_fail=True)
        client = rep["by_status"]
        server = wait_counts(s, rep["requests"], settle=3)
        errors = first_errors([rep])
        self.assertTrue(set(client) <= {"DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "UNAVAILABLE"},
                        (client, errors))
        self.assertNotIn("UNAVAILABLE", server)
        client = unavailable_in_transit(self, client, server, errors)
        unexpected = [r for r in s.records("request_done") if r.get("status") not in client]
        self.assertTrue(set(server) <= set(client), (server, client, unexpected[:5]))
        # Every call the server saw is counted once with the status its client got. A call
        # whose 50 ms expire before it reaches the server's handler (a starved client that has
        # not sent it yet, or gRPC dropping it on arrival) never exists for the server: under
        # CPU contention 0.4-0.8% of the calls did. So the server may miss DEADLINE_EXCEEDED
        # calls, a few, and nothing else (the defect this guards against lost 11% and
        # counted 33% as CANCELLED).
        self.assertEqual(server.get("RESOURCE_EXHAUSTED", 0), client.get("RESOURCE_EXHAUSTED", 0))
        missing = client.get("DEADLINE_EXCEEDED", 0) - server.get("DEADLINE_EXCEEDED", 0)
        self.assertGreaterEqual(missing, 0, (server, client))
        self.assertLessEqual(missing, 0.02 * rep["requests"], (server, client))
        return rep, client

    def test_deadline_storm_counts_match(self):
        # Expiry, not refusal: with cost-aware admission on, the hopeless calls would be
        # refused at arrival instead (test_deadline_storm_refused_at_arrival).
        s = self.start(overrides={"engine": {"max_batch_sequences": 8, "queue_capacity": 64,
                                             "refuse_late_requests": False}})
        # Long answers: nothing can finish inside 50 ms, so every call must expire.
        rep, client = self.deadline_storm(s, 10)
        # Not zero: the server's deadline for a call trails the client's by the transit time,
        # so under CPU contention a client's next call can find its previous one still
        # queued and unexpired server-side.
        self.assertLess(4 * client.get("RESOURCE_EXHAUSTED", 0), rep["requests"], client)
        print("deadline storm: client", client, file=sys.stderr)

    def test_deadline_storm_refused_at_arrival(self):
        """The same storm with cost-aware admission on: once the batch is full, calls that
        cannot finish in their 50 ms are refused at arrival instead of queueing to expire, and
        the server still counts every call with the status its client got."""
        s = self.start(overrides={"engine": {"max_batch_sequences": 8, "queue_capacity": 64}})
        rep, client = self.deadline_storm(s, 5)
        # Most calls are refused at arrival; only those that found a free slot (and the
        # forecast's first measurements) ran and expired.
        self.assertGreater(client.get("RESOURCE_EXHAUSTED", 0), rep["requests"] / 2, client)
        refusals = [r for r in s.records("request_done") if r.get("status") == "RESOURCE_EXHAUSTED"]
        self.assertTrue(refusals)
        for r in refusals[:50]:
            self.assertIn("cannot finish before its deadline", r.get("error", ""), r)
        print("deadline storm, refused: client", client, file=sys.stderr)


if __name__ == "__main__":
    e2e_test.main()  # --bin-dir, then unittest
