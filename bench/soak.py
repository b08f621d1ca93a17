#!/usr/bin/env python3
"""Soak bench: 80 client streams against one dllm-server for 10 minutes.

Four `dllm-client load` processes over gRPC, and HTTP keep-alive clients, run side by side,
16 closed-loop streams each:
  unary      Generate, a short answer
  stream     GenerateStream, a short answer
  cancel     GenerateStream of a long answer, cancelled by the client after 2 committed deltas
  deadline   Generate of a long answer under a tight deadline (some finish, most expire)
  http       POST /v1/chat/completions, a short answer, each stream on one keep-alive
             connection (a new one only when the server closes it)
The server's resident set size is sampled from /proc every few seconds.

It reports, and fails (exit 1) unless every goal holds:
  lost       requests whose end the server and client do not agree on: for every gRPC status,
             |client count - server's dllm_requests_total| summed, plus client calls without a
             definite status. Goal: 0. Replies that cross the client's deadline or cancel in
             transit (server OK, client DEADLINE_EXCEEDED or CANCELLED) are reported apart as
             races, and calls the client saw end UNAVAILABLE that never reached the service
             (a GOAWAY race) as refused in transit.
  RSS drift  (mean RSS over the last tenth of the run - RSS after warm-up) / RSS after warm-up,
             warm-up being the first tenth of the run (at least 10 s). Goal: <= 10%.
  refused    requests of the mixes the server refused as invalid (INVALID_ARGUMENT): every mix
             sends valid requests, so a refusal means the soak stopped exercising its path.
             Goal: 0.
and p50/p99 latency of OK calls per mix.

Usage: bench/soak.py --bin-dir build/bin [--minutes 10 | --seconds S] [--model DIR]
                  [--json-out FILE]
The default model is the e2e fixture (tests/data/reference/llada_mha with 1024 positions).
"""

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, SOURCE_DIR)
from tests.e2e import e2e_test  # noqa: E402
from tests.e2e.e2e_test import Server, free_port, make_model  # noqa: E402
from tests.e2e.reliability_test import DEFINITE, wait_counts  # noqa: E402

# name, extra dllm-client load arguments; 16 streams each.
MIXES = [
    ("unary", ["--max-new-tokens", "16"]),
    ("stream", ["--max-new-tokens", "16", "--stream"]),
    ("cancel", ["--max-new-tokens", "64", "--schedule", "block", "--block-length", "16",
                "--stream", "--cancel-after", "2"]),
    ("deadline", ["--max-new-tokens", "64", "--schedule", "block", "--block-length", "16",
                  "--timeout", "0.3"]),
]
STREAMS_PER_MIX = 16
# HTTP statuses by the gRPC code the server counts them under (docs/http.md).
HTTP_CODES = {200: "OK", 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED",
              499: "CANCELLED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED", 500: "INTERNAL"}


class HttpKeepAliveLoad:
    """`streams` threads, each sending chat completions on its own keep-alive connection until
    `duration_s` has passed; counts final statuses by gRPC name, latencies of OK calls, and the
    connections each stream had to open."""

    def __init__(self, port, model, streams, duration_s):
        self.port, self.model, self.deadline = port, model, time.time() + duration_s
        self.by_status, self.latencies, self.connections = {}, [], 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run) for _ in range(streams)]

    def _run(self):
        body = json.dumps({"model": self.model, "max_tokens": 16,
                           "messages": [{"role": "user", "content": "Hello"}]})
        conn = None
        while time.time() < self.deadline:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                with self.lock:
                    self.connections += 1
            start = time.time()
            try:
                conn.request("POST", "/v1/chat/completions", body=body,
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                status = HTTP_CODES.get(resp.status, "HTTP %d" % resp.status)
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                status = "transport error: %s" % type(e).__name__
                conn.close()
                conn = None
            with self.lock:
                self.by_status[status] = self.by_status.get(status, 0) + 1
                if status == "OK":
                    self.latencies.append(time.time() - start)

    def start(self):
        for t in self.threads:
            t.start()

    def report(self):
        for t in self.threads:
            t.join()
        lat = sorted(self.latencies)

        def q(p):
            return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")

        return {"requests": sum(self.by_status.values()), "by_status": self.by_status,
                "connections": self.connections,
                "latency_seconds": {"p50": q(0.5), "p99": q(0.99)}}


def resident_bytes(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class RssSampler(threading.Thread):
    def __init__(self, pid, period_s):
        super().__init__(daemon=True)
        self.pid, self.period_s = pid, period_s
        self.samples = []  # (seconds since start, bytes)
        self.stop_event = threading.Event()
        self.start_time = time.time()

    def run(self):
        while not self.stop_event.is_set():
            try:
                self.samples.append((time.time() - self.start_time, resident_bytes(self.pid)))
            except OSError:
                return
            self.stop_event.wait(self.period_s)


def rss_drift(samples, duration_s):
    """(RSS after warm-up, mean RSS over the last tenth, drift fraction)."""
    warm_s = max(10.0, duration_s / 10)
    after_warm = [b for t, b in samples if t >= warm_s]
    if len(after_warm) < 2:
        raise SystemExit("soak: run too short to measure RSS drift (need > %.0f s)" % warm_s)
    tail = [b for t, b in samples if t >= duration_s * 0.9] or after_warm[-1:]
    base = after_warm[0]
    end = sum(tail) / len(tail)
    return base, end, (end - base) / base


def count_lost(client, server):
    """(lost, races, refused in transit) between client and server counts by status.

    One disagreement is not a loss: a reply the server completes while the client's end of
    the call (its deadline, or its cancel) is in transit is OK on the server and
    DEADLINE_EXCEEDED or CANCELLED on the client. Both ends still have a definite status.
    Those pairs are counted as races. A call that the client saw end UNAVAILABLE and the
    server never counted was refused by the transport before the service saw it (a call that
    raced its connection's GOAWAY at server.max_connection_age_seconds, when the client does
    not retry): a definite, retryable status, counted apart. A call the server ended
    DEADLINE_EXCEEDED whose client saw UNAVAILABLE ("Socket closed": its connection closed
    after its GOAWAY before the status reached it) is a race too. Every other difference,
    and any client call without a definite status, is lost.
    """
    diff = {c: client.get(c, 0) - server.get(c, 0) for c in set(client) | set(server)}
    races = 0
    for ended_by_server, seen_by_client in (("OK", "DEADLINE_EXCEEDED"), ("OK", "CANCELLED"),
                                            ("DEADLINE_EXCEEDED", "UNAVAILABLE")):
        paired = min(max(0, -diff.get(ended_by_server, 0)), max(0, diff.get(seen_by_client, 0)))
        diff[ended_by_server] = diff.get(ended_by_server, 0) + paired
        diff[seen_by_client] = diff.get(seen_by_client, 0) - paired
        races += paired
    refused = max(0, diff.get("UNAVAILABLE", 0))
    diff["UNAVAILABLE"] = diff.get("UNAVAILABLE", 0) - refused
    lost = sum(abs(d) for d in diff.values())
    lost += sum(n for c, n in client.items() if c not in DEFINITE)
    return lost, races, refused


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=os.path.join(SOURCE_DIR, "build", "bin"))
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seconds", type=float, help="overrides --minutes")
    parser.add_argument("--model", help="model folder (default: the e2e fixture)")
    parser.add_argument("--json-out", help="write the report here too")
    args = parser.parse_args()
    e2e_test.BIN_DIR = os.path.abspath(args.bin_dir)
    duration_s = args.seconds if args.seconds else args.minutes * 60

    tmp = tempfile.mkdtemp(prefix="dllm-soak-")
    server = None
    try:
        model = args.model or make_model(tmp)
        http_port = free_port()
        server = Server(tmp, model, overrides={
            # The shipped connection age (the test harness's default is shorter).
            "server": {"max_connection_age_seconds": 20},
            "engine": {"max_batch_sequences": 8, "queue_capacity": 80},
            "limits": {"max_prompt_tokens": 256},
            "http": {"address": "127.0.0.1", "port": http_port}})
        sampler = RssSampler(server.proc.pid, period_s=max(1.0, duration_s / 200))
        sampler.start()
        procs = []
        for name, extra in MIXES:
            cmd = [os.path.join(e2e_test.BIN_DIR, "dllm-client"), "load", "--json", "--address",
                   server.address, "--concurrency", str(STREAMS_PER_MIX), "--duration",
                   str(duration_s)] + extra + ["Hello"]
            procs.append((name, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True)))
        with urllib.request.urlopen("http://127.0.0.1:%d/v1/models" % http_port) as r:
            model_id = json.loads(r.read())["data"][0]["id"]
        http_load = HttpKeepAliveLoad(http_port, model_id, STREAMS_PER_MIX, duration_s)
        http_load.start()
        reports = {}
        for name, proc in procs:
            out, err = proc.communicate(timeout=duration_s + 300)
            # Exit 1 with a report: no call succeeded (possible in the deadline mix).
            if proc.returncode not in (0, 1) or not out.strip():
                raise SystemExit("soak: dllm-client load (%s) failed: %s" % (name, err))
            reports[name] = json.loads(out)
        reports["http"] = http_load.report()
        sampler.stop_event.set()
        sampler.join()

        client = {}
        for rep in reports.values():
            for code, n in rep["by_status"].items():
                client[code] = client.get(code, 0) + n
        total = sum(client.values())
        server_counts = wait_counts(server, total)
        lost, races, refused = count_lost(client, server_counts)
        base, end, drift = rss_drift(sampler.samples, duration_s)
        if server.stop() != 0:
            raise SystemExit("soak: server did not stop cleanly:\n" + server.log()[-4000:])

        result = {
            "duration_s": duration_s, "streams": STREAMS_PER_MIX * (len(MIXES) + 1),
            "http_keepalive_connections": reports["http"]["connections"],
            "requests": total, "client_by_status": client, "server_by_status": server_counts,
            "lost": lost, "races": races, "refused_in_transit": refused,
            "rss_after_warmup_bytes": base,
            "rss_end_bytes": end, "rss_drift": drift,
            "latency_s": {name: rep["latency_seconds"] for name, rep in reports.items()},
            "requests_by_mix": {name: rep["by_status"] for name, rep in reports.items()},
        }
        print("soak: %d streams x %.0f s, %d requests" % (result["streams"], duration_s, total))
        print("  client by status: %s" % client)
        print("  server by status: %s" % server_counts)
        print("  lost: %d (goal 0); races (server OK, client DEADLINE_EXCEEDED or CANCELLED; server"
              " DEADLINE_EXCEEDED, client UNAVAILABLE): %d;"
              " refused in transit (client UNAVAILABLE, never reached the service): %d"
              % (lost, races, refused))
        print("  RSS: %.1f MB after warm-up, %.1f MB at the end, drift %+.1f%% (goal <= 10%%)" %
              (base / 2**20, end / 2**20, 100 * drift))
        print("  http: %d keep-alive streams opened %d connections for %d requests" %
              (STREAMS_PER_MIX, reports["http"]["connections"], reports["http"]["requests"]))
        for name, rep in reports.items():
            lat = rep["latency_seconds"]
            print("  %-8s %6d requests  OK p50 %.3f s  p99 %.3f s  %s" %
                  (name, rep["requests"], lat["p50"], lat["p99"], rep["by_status"]))
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(result, f, indent=2)
        invalid = client.get("INVALID_ARGUMENT", 0)
        print("  refused as invalid: %d (goal 0)" % invalid)
        ok = lost == 0 and drift <= 0.10 and invalid == 0
        print("soak: %s" % ("PASS" if ok else "FAIL"))
        return 0 if ok else 1
    finally:
        if server is not None:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
