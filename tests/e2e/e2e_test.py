#!/usr/bin/env python3
"""End-to-end tests of dllm-serve: the real dllm-server and dllm-client binaries on loopback.

Each test starts its own server (free ports, temporary config) on a copy of the tiny LLaDA
reference fixture whose position limit is raised (RoPE has no learned positions), so that a
long answer takes a few seconds on CPU: long enough to cancel, expire or drain it
deterministically, short enough for CI. Metrics are scraped by a real Prometheus server
(Debian's `prometheus`) and read back through its HTTP query API. TLS material is made with
`openssl` at test time.

Usage: e2e_test.py --bin-dir build/bin [unittest args, e.g. E2ETest.test_unary]
Only the Python standard library is used (run with /usr/bin/python3).
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from tests import unittest_exit
from tools.loopback import free_port  # noqa: F401 (re-exported to the other e2e tests)

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(SOURCE_DIR, "tests", "data", "reference", "llada_mha")
BIN_DIR = None  # set by main()

# A long answer on the fixture model (~1-3 s on a loaded CPU): cancellation, deadlines and
# drain act long before it would finish by itself. (256 tokens took under 0.5 s once the CPU
# backend got its own GEMM and vector exp: a 0.5 s deadline no longer expired.)
LONG_TOKENS = 768


def make_model(directory):
    """Copies the fixture and raises max_sequence_length so long answers fit."""
    model = os.path.join(directory, "model")
    shutil.copytree(FIXTURE, model)
    path = os.path.join(model, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["max_sequence_length"] = 1024
    with open(path, "w") as f:
        json.dump(config, f)
    return model


def deep_merge(base, extra):
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class Server:
    """A dllm-server process with a temporary JSON-as-YAML config and a JSON log."""

    def __init__(self, workdir, model, overrides=None, env=None, extra_args=(), wait=True,
                 use_flags_for_ports=False, open_file_limit=None):
        self.workdir = workdir
        self.port = free_port()
        self.metrics_port = free_port()
        config = {
            # A drain serves open gRPC connections until each was sent its GOAWAY at this
            # age (docs/operations.md): short, so that stopping a test server is quick.
            "server": {"address": "127.0.0.1:%d" % self.port, "drain_timeout_seconds": 30,
                       "max_connection_age_seconds": 2},
            "engine": {"model": model, "max_batch_sequences": 4, "queue_capacity": 8,
                       "cpu_threads": 1},
            "decoding": {"max_new_tokens": 16},
            "limits": {"max_new_tokens": 1000, "max_prompt_tokens": 64, "max_block_length": 1000},
            "metrics": {"address": "127.0.0.1", "port": self.metrics_port},
            "logging": {"format": "json"},
        }
        if use_flags_for_ports:
            config["server"]["address"] = "127.0.0.1:1"
            config["metrics"]["port"] = 1
        config = deep_merge(config, overrides or {})
        self.config_path = os.path.join(workdir, "server-%d.yaml" % self.port)
        with open(self.config_path, "w") as f:
            json.dump(config, f)  # JSON is YAML
        self.log_path = os.path.join(workdir, "server-%d.log" % self.port)
        self.log_file = open(self.log_path, "w")
        args = [os.path.join(BIN_DIR, "dllm-server"), "--config", self.config_path]
        if use_flags_for_ports:
            args += ["--port", str(self.port), "--metrics-port", str(self.metrics_port)]
        args += list(extra_args)

        def limit_files():
            if open_file_limit:
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_file_limit, open_file_limit))
        self.proc = subprocess.Popen(args, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})),
                                     preexec_fn=limit_files)
        self.address = "127.0.0.1:%d" % self.port
        if wait:
            self.wait_serving()

    def wait_serving(self, client_args=()):
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("server exited early (rc=%s):\n%s" %
                                     (self.proc.returncode, self.log()))
            r = self.client("health", *client_args, "--timeout", "1")
            if r.returncode == 0 and r.stdout.strip() == "SERVING":
                return
            time.sleep(0.1)
        raise AssertionError("server not SERVING after 60 s:\n" + self.log())

    def client(self, *args, address=None, env=None, timeout=120):
        cmd = [os.path.join(BIN_DIR, "dllm-client"), args[0], "--address",
               address or self.address] + list(args[1:])
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, **(env or {})))

    def client_async(self, *args):
        cmd = [os.path.join(BIN_DIR, "dllm-client"), args[0], "--address", self.address] + \
            list(args[1:])
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def log(self):
        if not self.log_file.closed:
            self.log_file.flush()
        with open(self.log_path) as f:
            return f.read()

    def records(self, event=None):
        out = []
        for line in self.log().splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if event is None or record.get("event") == event:
                out.append(record)
        return out

    def wait_record(self, predicate, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for r in self.records("request_done"):
                if predicate(r):
                    return r
            time.sleep(0.05)
        raise AssertionError("no matching request_done record:\n" + self.log())

    def metrics_text(self):
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.log_file.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.log_file.closed:
            self.log_file.close()


def error_code(result):
    """The gRPC code name from dllm-client's 'error: CODE: message' line."""
    for line in result.stderr.splitlines():
        if line.startswith("error: "):
            return line.split(":")[1].strip()
    return None


class E2ETest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="dllm-e2e-")
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

    def generate_json(self, server, *args, **kwargs):
        r = server.client("generate", "--json", *args, **kwargs)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    # ------------------------------------------------------------------ generation

    def test_unary(self):
        s = self.start()
        a = self.generate_json(s, "--max-new-tokens", "16", "--request-id", "unary-1", "Hello")
        self.assertEqual(a["request_id"], "unary-1")
        self.assertIn(a["finish_reason"], ("FINISH_REASON_LENGTH", "FINISH_REASON_EOS"))
        self.assertGreater(a["cache_stats"]["steps"], 0)
        self.assertLessEqual(a["usage"]["generated_tokens"], 16)
        self.assertEqual(len(a["token_ids"]), a["usage"]["generated_tokens"])
        # Greedy decoding is deterministic: the same request gives the same answer.
        b = self.generate_json(s, "--max-new-tokens", "16", "Hello")
        self.assertEqual(a["token_ids"], b["token_ids"])
        # Tokenize agrees with the prompt length the engine reports.
        t = s.client("tokenize", "--json", "Hello")
        self.assertEqual(t.returncode, 0, t.stderr)
        self.assertEqual(len(json.loads(t.stdout)["token_ids"]), a["usage"]["prompt_tokens"])
        # Chat input goes through the chat template: more prompt tokens than the bare text.
        c = self.generate_json(s, "--chat", "Hello", "--max-new-tokens", "8")
        self.assertGreater(c["usage"]["prompt_tokens"], a["usage"]["prompt_tokens"])
        info = s.client("info")
        self.assertEqual(info.returncode, 0, info.stderr)
        info = json.loads(info.stdout)
        self.assertEqual(info["vocab_size"], 320)
        self.assertEqual(info["default_max_new_tokens"], 16)
        self.assertEqual(info["limits"]["max_new_tokens"], 1000)
        self.assert_tuned_defaults(info, "llada-cot")
        # One structured log line per finished request.
        rec = s.wait_record(lambda r: r["id"] == "unary-1")
        self.assertEqual(rec["status"], "OK")
        self.assertEqual(rec["steps"], a["cache_stats"]["steps"])
        self.assertIn("latency_ms", rec)
        self.assertIn("refresh_ratio", rec)

    def test_stream(self):
        s = self.start()
        args = ["--max-new-tokens", "32", "--schedule", "block", "--block-length", "16", "--cache",
                "entropy",
                "Once upon a time"]
        r = s.client("stream", "--json", "--canvas-every", "1", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        messages = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertIn("final", messages[-1])
        self.assertTrue(all("final" not in m for m in messages[:-1]))
        committed = "".join(m["committed"]["text"] for m in messages if "committed" in m)
        final = messages[-1]["final"]
        self.assertEqual(committed, final["text"])
        steps = [m["committed"]["step"] for m in messages if "committed" in m]
        self.assertEqual(steps, sorted(steps))
        positions = [p for m in messages if "committed" in m for p in m["committed"]["positions"]]
        self.assertEqual(len(positions), len(set(positions)))  # each position committed once
        # Snapshots are best effort (dropped while the client lags): a 32-token answer can now
        # finish before the first one is written, so they are checked on a 256-step answer.
        long = s.client("stream", "--json", "--canvas-every", "1", "--max-new-tokens", "256",
                        "--schedule", "block", "--block-length", "16", "Once upon a time")
        self.assertEqual(long.returncode, 0, long.stderr)
        canvases = [json.loads(line)["canvas"] for line in long.stdout.splitlines()
                    if "canvas" in json.loads(line)]
        self.assertGreaterEqual(len(canvases), 1)
        self.assertIn("\u2592", canvases[0]["text"])  # masked positions are visible
        # The stream produces exactly the unary answer.
        unary = self.generate_json(s, *args)
        self.assertEqual(unary["token_ids"], final["token_ids"])
        self.assertEqual(unary["cache_stats"]["steps"], final["cache_stats"]["steps"])
        # Plain-text mode prints the committed text.
        plain = s.client("stream", *args)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual(plain.stdout.rstrip("\n"), final["text"])

    def assert_tuned_defaults(self, info, cot_model):
        """The served defaults are the point the tuning protocol's committed results give the
        family (bench/tune.py default_point on docs/results/tune-<cot_model>-*.jsonl)."""
        from bench import tune
        results = os.path.join(SOURCE_DIR, "docs", "results")
        rows = {split: tune.read_rows(tune.paths(results, cot_model, split)["rows"])
                for split in ("val", "test")}
        point = tune.default_point(rows["val"], rows["test"])
        self.assertIsNotNone(point, cot_model)
        names = {"w": "window", "threshold": "confidence_threshold", "tau": "entropy_threshold",
                 "k": "recent_k", "b": "block_length"}
        for spec, served in ((point["decoding"], info["default_decoding"]),
                             (point["policy"], info["default_cache"])):
            head, _, knobs = spec.partition(":")
            if served is info["default_decoding"]:
                self.assertEqual(served["schedule"], "SCHEDULE_" + head.upper(), spec)
            else:
                self.assertEqual(served["policy"], "CACHE_POLICY_" + head.upper(), spec)
            for knob in filter(None, knobs.split(",")):
                key, _, value = knob.partition("=")
                self.assertAlmostEqual(float(served[names.get(key, key)]), float(value),
                                       places=5, msg=spec)

    def test_dream_model(self):
        dream = os.path.join(SOURCE_DIR, "tests", "data", "reference", "dream_gqa")
        s = self.start(extra_args=["--model", dream])
        info = json.loads(s.client("info").stdout)
        self.assert_tuned_defaults(info, "dream-cot")
        args = ["--chat", "Hi", "--system", "Be brief.", "--max-new-tokens", "16"]
        unary = self.generate_json(s, *args)
        r = s.client("stream", "--json", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        final = json.loads(r.stdout.splitlines()[-1])["final"]
        self.assertEqual(final["token_ids"], unary["token_ids"])
        t = json.loads(s.client("tokenize", "--json", *args[:4]).stdout)
        self.assertEqual(len(t["token_ids"]), unary["usage"]["prompt_tokens"])

    def test_cancel_mid_stream(self):
        s = self.start()
        r = s.client("stream", "--request-id", "to-cancel", "--cancel-after", "1",
                     "--max-new-tokens", str(LONG_TOKENS), "--schedule", "block", "--block-length",
                     str(LONG_TOKENS),
                     "Hello")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual(error_code(r), "CANCELLED")
        rec = s.wait_record(lambda r: r["id"] == "to-cancel")
        self.assertEqual(rec["status"], "CANCELLED")
        self.assertEqual(rec["finish_reason"], "cancelled")
        self.assertLess(rec["steps"], LONG_TOKENS)
        # The server keeps serving.
        self.generate_json(s, "Hi")

    def test_deadline(self):
        s = self.start()
        # On a loaded machine the 0.5 s can pass before the server even reads the request
        # (a record without engine fields); the engine path is what this test is about, so
        # such an attempt is checked for its status and tried again.
        for attempt in range(3):
            rid = f"late{attempt}"
            r = s.client("generate", "--request-id", rid, "--timeout", "0.5",
                         "--max-new-tokens", str(LONG_TOKENS), "--schedule", "block",
                         "--block-length", str(LONG_TOKENS),
                         "Hello")
            self.assertEqual(r.returncode, 1)
            self.assertEqual(error_code(r), "DEADLINE_EXCEEDED")
            rec = s.wait_record(lambda r: r["id"] == rid)
            self.assertEqual(rec["status"], "DEADLINE_EXCEEDED")
            if "finish_reason" in rec:
                break
        # The client's deadline also cancels the call on the server (gRPC). Within
        # EngineRequestLink::kDeadlineSlack of the server's deadline that cancel is left to the
        # engine, which ends the request as `deadline`; on a loaded machine the server can
        # read the headers (and so start its deadline) more than the slack after the client
        # started its own, and then the cancel arrives first: `cancelled`. The status is
        # DEADLINE_EXCEEDED either way.
        self.assertIn(rec["finish_reason"], ("deadline", "cancelled"))
        self.assertLess(rec["steps"], LONG_TOKENS)
        self.generate_json(s, "Hi")

    def test_queue_overflow(self):
        s = self.start(overrides={"engine": {"max_batch_sequences": 1, "queue_capacity": 1}})
        r = s.client("load", "--json", "--concurrency", "6", "--requests", "6",
                     "--max-new-tokens", "128", "--schedule", "block", "--block-length", "128",
                     "Hello")
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads(r.stdout)
        self.assertEqual(report["requests"], 6)
        self.assertGreaterEqual(report["by_status"].get("OK", 0), 1)
        self.assertGreaterEqual(report["by_status"].get("RESOURCE_EXHAUSTED", 0), 1)
        self.assertEqual(report["by_status"].get("OK", 0) +
                         report["by_status"].get("RESOURCE_EXHAUSTED", 0), 6)

    def test_choices_admitted_all_or_none(self):
        """GenerateRequest.n: when one choice is refused (the queue is full), the call fails
        with that refusal alone: the choices already queued are cancelled, and a stream sends
        no message of theirs. Every choice is counted with its own status."""
        import grpc
        s = self.start(overrides={"engine": {"max_batch_sequences": 1, "queue_capacity": 1}})

        def field(number, payload):  # a length-delimited protobuf field, hand-encoded
            return bytes([number << 3 | 2, len(payload)]) + payload
        # GenerateRequest{prompt: "Hi" (2), max_new_tokens: 128 (5), n: 8 (12)}: one runs,
        # one waits, and the queue has no room for the third.
        request = field(2, b"Hi") + bytes([5 << 3, 0x80, 0x01, 12 << 3, 8])
        with grpc.insecure_channel(s.address) as channel:
            for kind, method in (("unary", "Generate"), ("stream", "GenerateStream")):
                call = getattr(channel, "unary_unary" if kind == "unary" else "unary_stream")(
                    "/dllm.v1.DiffusionLM/" + method, request_serializer=lambda m: m,
                    response_deserializer=lambda m: m)
                with self.assertRaises(grpc.RpcError) as refused:
                    reply = call(request, timeout=60)
                    messages = list(reply) if kind == "stream" else [reply]
                    self.fail("%s: n=8 accepted: %d messages" % (kind, len(messages)))
                self.assertEqual(refused.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 refused.exception.details())
        metrics = s.metrics_text()
        # Each call: the refused choice, and the (one or two) choices cancelled before it.
        refused = re.search(r'dllm_requests_total\{protocol="grpc",status="RESOURCE_EXHAUSTED"\} '
                            r'(\d+)', metrics)
        cancelled = re.search(r'dllm_requests_total\{protocol="grpc",status="CANCELLED"\} (\d+)',
                              metrics)
        self.assertEqual(refused.group(1) if refused else None, "2", metrics)
        self.assertTrue(cancelled and 2 <= int(cancelled.group(1)) <= 4, metrics)
        self.assertIn('dllm_requests_total{protocol="grpc",status="OK"} 0', metrics)

    def test_late_requests_refused_at_arrival(self):
        """Cost-aware admission over gRPC: behind a long request in the only batch slot, a
        call whose deadline the backlog rules out is refused at once, RESOURCE_EXHAUSTED with
        the forecast in its message and gRPC's retry pushback trailer; a call without a
        deadline still queues. The forecast has its measurements from the start-up warm-up."""
        import grpc
        s = self.start(overrides={"engine": {"max_batch_sequences": 1, "queue_capacity": 4}})
        # One long request runs and three wait: thousands of steps ahead, seconds of work
        # even on a machine several times faster than this one.
        long_calls = [s.client_async("generate", "--max-new-tokens", "960", "--schedule", "block",
                                     "--block-length",
                                     "960", "--steps", "960", "Hello") for _ in range(4)]
        deadline = time.time() + 30
        while not all(g in s.metrics_text() for g in ("dllm_num_requests_running 1\n",
                                                      "dllm_num_requests_waiting 3\n")):
            self.assertLess(time.time(), deadline, s.log())
            time.sleep(0.02)

        def field(number, payload):  # a length-delimited protobuf field, hand-encoded
            return bytes([number << 3 | 2, len(payload)]) + payload
        # GenerateRequest{prompt: "Hi" (2), max_new_tokens: 896 (5), 28 blocks of 32}
        request = field(2, b"Hi") + bytes([5 << 3, 0x80, 0x07])
        with grpc.insecure_channel(s.address) as channel:
            grpc.channel_ready_future(channel).result(timeout=10)  # connected: no setup time
            generate = channel.unary_unary("/dllm.v1.DiffusionLM/Generate",
                                           request_serializer=lambda m: m,
                                           response_deserializer=lambda m: m)
            started = time.time()
            with self.assertRaises(grpc.RpcError) as refused:
                generate(request, timeout=0.5)
            elapsed = time.time() - started
            err = refused.exception
            self.assertEqual(err.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, err.details())
            self.assertIn("cannot finish before its deadline", err.details())
            self.assertLess(elapsed, 0.5)  # refused, not expired
            pushback = dict(err.trailing_metadata() or ()).get("grpc-retry-pushback-ms")
            self.assertIsNotNone(pushback, err.trailing_metadata())
            self.assertGreaterEqual(int(pushback), 1000)  # at least 1 s
            # Without a deadline: queued behind the long request, not refused.
            patient = generate.future(request)
            time.sleep(0.3)
            self.assertFalse(patient.done())
            patient.cancel()
        for call in long_calls:
            call.kill()
            call.wait()
        self.assertIn('dllm_requests_total{protocol="grpc",status="RESOURCE_EXHAUSTED"} 1',
                      s.metrics_text())

    def test_policy_knobs_per_request(self):
        # Every cache policy's knobs are request fields (engine/core/param_fields.cc): set per
        # request through dllm-client's flags (gRPC) and through HTTP's "cache" object, they
        # reach the policy: d2Cache's attention-rollout nucleus mass decides how many other
        # tokens each partial step recomputes, so 1 computes more rows than 0.
        http_port = free_port()
        s = self.start(overrides={"http": {"address": "127.0.0.1", "port": http_port}})
        base = ["--max-new-tokens", "16", "--cache", "d2cache", "Once upon a time"]
        lo = self.generate_json(s, "--d2-rollout-p", "0", *base)
        hi = self.generate_json(s, "--rollout-p", "1", *base)
        self.assertLess(int(lo["cache_stats"]["rows_computed"]),
                        int(hi["cache_stats"]["rows_computed"]))

        # The same knob over HTTP, with the HTTP API's one spelling.
        def post(cache):
            body = json.dumps({"model": os.path.basename(self.model), "prompt": "Once upon a time",
                               "max_tokens": 16, "cache": cache}).encode()
            req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % http_port,
                                         data=body,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())
        status, http_hi = post({"policy": "d2cache", "d2_rollout_p": 1})
        self.assertEqual(status, 200, http_hi)
        self.assertEqual(http_hi["cache_stats"]["rows_computed"],
                         int(hi["cache_stats"]["rows_computed"]))
        # Elastic-Cache's gamma: -1 never detects drift, so no deep-layer recompute passes.
        for gamma in ("-1", "1"):
            r = self.generate_json(s, "--cache", "elastic", "--elastic-gamma", gamma,
                                   "--max-new-tokens", "16", "Hello")
            self.assertGreater(r["cache_stats"]["steps"], 0)
        # Out of range: a 400 / INVALID_ARGUMENT naming the field and its range.
        status, err = post({"policy": "elastic", "elastic_gamma": 2})
        self.assertEqual(status, 400, err)
        self.assertIn("cache.elastic_gamma: 2 is outside [-1, 1]", err["error"]["message"])
        r = s.client("generate", "--cache", "d2cache", "--d2-sigma", "0", "x")
        self.assertEqual(error_code(r), "INVALID_ARGUMENT", r.stderr)
        self.assertIn("cache.d2_sigma: 0 must be positive and finite", r.stderr)
        # The field table the playground reads, with no token.
        with urllib.request.urlopen("http://127.0.0.1:%d/v1/dllm/fields" % http_port,
                                    timeout=5) as r:
            names = [f["name"] for f in json.loads(r.read())["fields"]]
        self.assertIn("d2_rollout_p", names)
        self.assertIn("elastic_gamma", names)

    def test_bad_requests(self):
        s = self.start(overrides={
            "server": {"max_receive_message_bytes": 4096},
            "limits": {"max_steps": 64, "max_temperature": 1.0,
                       "allowed_cache_policies": ["none", "entropy"]}})
        cases = [
            ([], "INVALID_ARGUMENT", "input"),
            (["--max-new-tokens", "0", "x"], "INVALID_ARGUMENT", "max_new_tokens"),
            (["--max-new-tokens", "5000", "x"], "INVALID_ARGUMENT", "limits.max_new_tokens (1000)"),
            (["--steps", "65", "x"], "INVALID_ARGUMENT", "limits.max_steps (64)"),
            (["--temperature", "1.5", "x"], "INVALID_ARGUMENT", "limits.max_temperature"),
            (["--top-p", "0", "x"], "INVALID_ARGUMENT", "decoding.top_p"),
            (["--threshold", "2", "x"], "INVALID_ARGUMENT", "decoding.confidence_threshold"),
            (["--cache", "interval", "x"], "INVALID_ARGUMENT", "limits.allowed_cache_policies"),
            (["--ids", "1,2,320"], "INVALID_ARGUMENT", "token_ids.ids[2]"),
            (["--request-id", "has space", "x"], "INVALID_ARGUMENT", "request_id"),
            (["y" * 200], "INVALID_ARGUMENT", "limits.max_prompt_tokens (64)"),
            # Engine-side validation passes through with the field name.
            (["--schedule", "block", "--block-length", "5", "x"], "INVALID_ARGUMENT",
             "decoding.block_length: 5 must divide max_new_tokens"),
            # A knob the request's schedule would ignore (the default schedule is the window).
            (["--block-length", "8", "x"], "INVALID_ARGUMENT",
             "decoding.block_length: the block schedule reads it, and this request decodes "
             "with the window schedule"),
            (["--schedule", "window", "--cache", "entropy", "--window", "0", "x"],
             "INVALID_ARGUMENT", "decoding.window"),
            # Transport limit: server.max_receive_message_bytes.
            (["z" * 5000], "RESOURCE_EXHAUSTED", ""),
        ]
        for args, code, needle in cases:
            with self.subTest(args=[a[:20] for a in args]):
                r = s.client("generate", *args)
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertEqual(error_code(r), code, r.stderr)
                self.assertIn(needle, r.stderr)
        # Streaming validates identically.
        r = s.client("stream", "--max-new-tokens", "0", "x")
        self.assertEqual(error_code(r), "INVALID_ARGUMENT")
        self.assertIn("max_new_tokens", r.stderr)
        # The server is unharmed.
        self.generate_json(s, "Hi")

    def test_auth(self):
        tokens = os.path.join(self.tmp, "tokens")
        with open(tokens, "w") as f:
            f.write("# operator tokens\nfile-token\n")
        s = self.start(overrides={"auth": {"tokens_file": tokens, "tokens_env": "E2E_TOKENS"}},
                       env={"E2E_TOKENS": "env-token-1, env-token-2"})
        r = s.client("generate", "Hi")
        self.assertEqual(error_code(r), "UNAUTHENTICATED", r.stderr)
        r = s.client("generate", "--token", "nope", "Hi")
        self.assertEqual(error_code(r), "UNAUTHENTICATED", r.stderr)
        self.assertNotIn("nope", r.stderr)
        r = s.client("info", "--token", "nope")
        self.assertEqual(error_code(r), "UNAUTHENTICATED", r.stderr)
        self.assertEqual(s.client("generate", "--token", "file-token", "Hi").returncode, 0)
        self.assertEqual(s.client("generate", "--token", "env-token-2", "Hi").returncode, 0)
        self.assertEqual(s.client("stream", "Hi", env={"DLLM_TOKEN": "env-token-1"}).returncode, 0)
        token_file = os.path.join(self.tmp, "client-token")
        with open(token_file, "w") as f:
            f.write("file-token\n")
        self.assertEqual(s.client("generate", "--token-file", token_file, "Hi").returncode, 0)
        # Health checks need no token.
        h = s.client("health")
        self.assertEqual((h.returncode, h.stdout.strip()), (0, "SERVING"))
        text = s.metrics_text()
        self.assertIn('dllm_requests_total{protocol="grpc",status="UNAUTHENTICATED"} 2', text)

    def test_health_not_serving_while_loading(self):
        """A readiness probe that reaches the server before the model is attached reads
        NOT_SERVING, and the first SERVING means calls are served. The probe is a health check
        queued (wait_for_ready) as soon as the port listens, so it is answered at the first
        moment gRPC takes connections: the start of any window in which the health service
        still holds its default ("" SERVING)."""
        import grpc
        check = "/grpc.health.v1.Health/Check"
        serving, not_serving = b"\x08\x01", b"\x08\x02"  # HealthCheckResponse.status
        for attempt in range(3):
            s = self.start(wait=False)
            deadline = time.time() + 60
            while True:  # the port listens once it is bound; gRPC may not take calls yet
                self.assertLess(time.time(), deadline, s.log())
                self.assertIsNone(s.proc.poll(), s.log())
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", s.port)) == 0:
                        break
                time.sleep(0.002)
            seen = []
            with grpc.insecure_channel(s.address) as channel:
                call = channel.unary_unary(check, request_serializer=lambda m: m,
                                           response_deserializer=lambda m: m)
                while not seen or seen[-1] != serving:
                    self.assertLess(time.time(), deadline, (seen, s.log()))
                    seen.append(call(b"", timeout=10, wait_for_ready=True))
                    if seen[-1] == serving:
                        r = s.client("generate", "--max-new-tokens", "4", "Hi")
                        self.assertEqual(r.returncode, 0, (attempt, seen, r.stderr))
            self.assertTrue(set(seen) <= {serving, not_serving}, seen)
            s.stop()

    def test_health_reflection_and_canvas(self):
        s = self.start()
        for service in ("", "dllm.v1.DiffusionLM"):
            h = s.client("health", "--service", service)
            self.assertEqual((h.returncode, h.stdout.strip()), (0, "SERVING"), h.stderr)
        h = s.client("health", "--service", "no.such.Service")
        self.assertEqual(h.returncode, 1)
        # Server reflection lists the services (what grpcurl relies on).
        r = s.client("services")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(set(r.stdout.split()),
                         {"dllm.v1.DiffusionLM", "grpc.health.v1.Health",
                          "grpc.reflection.v1alpha.ServerReflection"})
        # --show-canvas redraws the forming canvas, masks visible, then the final text.
        r = s.client("stream", "--show-canvas", "--max-new-tokens", "16", "Hi")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("\x1b[2J\x1b[H", r.stdout)
        self.assertIn("\u2592", r.stdout)
        final = self.generate_json(s, "--max-new-tokens", "16", "Hi")
        self.assertTrue(r.stdout.rstrip("\n").endswith(final["text"]))
        # Text load report.
        r = s.client("load", "--concurrency", "2", "--duration", "0.5", "Hi")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("latency (ok): p50", r.stdout)
        self.assertIn("by status: OK=", r.stdout)

    # ------------------------------------------------------------------ TLS

    def make_pki(self):
        d = os.path.join(self.tmp, "pki")
        os.makedirs(d)

        def ssl(*args):
            subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)

        ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
            "/CN=dllm-e2e-ca", "-keyout", "ca.key", "-out", "ca.pem")
        with open(os.path.join(d, "server.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        for name, ext in (("server", ["-extfile", "server.ext"]), ("client", [])):
            ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name, "-keyout",
                name + ".key", "-out", name + ".csr")
            ssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "1", "-out", name + ".pem", *ext)
        # A second, unrelated CA: its client certificates must be refused.
        ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
            "/CN=rogue", "-keyout", "rogue.key", "-out", "rogue.pem")
        return d

    def test_tls(self):
        pki = self.make_pki()
        s = self.start(overrides={"tls": {"cert": os.path.join(pki, "server.pem"),
                                          "key": os.path.join(pki, "server.key")}},
                       wait=False)
        ca = ["--ca", os.path.join(pki, "ca.pem")]
        s.wait_serving(ca)
        r = s.client("generate", *ca, "Hi")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = s.client("generate", *ca, "Hi", address="localhost:%d" % s.port)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Plaintext against a TLS port, and TLS without trusting the CA, both fail.
        self.assertEqual(error_code(s.client("generate", "Hi", "--timeout", "5")), "UNAVAILABLE")
        self.assertEqual(error_code(s.client("generate", "--tls", "Hi", "--timeout", "5")),
                         "UNAVAILABLE")

    def test_mtls(self):
        pki = self.make_pki()

        def p(name):
            return os.path.join(pki, name)

        s = self.start(overrides={"tls": {"cert": p("server.pem"), "key": p("server.key"),
                                          "client_ca": p("ca.pem")}},
                       wait=False)
        good = ["--ca", p("ca.pem"), "--cert", p("client.pem"), "--key", p("client.key")]
        s.wait_serving(good)
        r = s.client("stream", *good, "Hi")
        self.assertEqual(r.returncode, 0, r.stderr)
        # No client certificate, or one from another CA: the handshake is refused.
        r = s.client("generate", "--ca", p("ca.pem"), "Hi", "--timeout", "5")
        self.assertEqual(error_code(r), "UNAVAILABLE", r.stderr)
        r = s.client("generate", "--ca", p("ca.pem"), "--cert", p("rogue.pem"), "--key",
                     p("rogue.key"), "Hi", "--timeout", "5")
        self.assertEqual(error_code(r), "UNAVAILABLE", r.stderr)

    # ------------------------------------------------------------------ lifecycle

    def test_sigterm_drains_in_flight_requests(self):
        # The drain must outlast three 768-token requests on a loaded 2-core CI machine (30 s
        # did not, at load 8): what is tested is that they finish, not how fast.
        s = self.start(overrides={"server": {"drain_timeout_seconds": 240,
                                             "lame_duck_seconds": 5}})
        clients = [s.client_async("stream", "--json", "--max-new-tokens", str(LONG_TOKENS),
                                  "--schedule", "block", "--block-length", str(LONG_TOKENS),
                                  "--request-id",
                                  "inflight-%d" % i, "Hello %d" % i) for i in range(3)]
        for c in clients:  # each has received at least one message: it is in flight
            self.assertTrue(c.stdout.readline())
        s.proc.send_signal(signal.SIGTERM)
        # Lame duck: health says NOT_SERVING, so balancers move away, yet a new call is
        # still accepted (it may finish during the drain).
        deadline = time.time() + 10
        state = None
        while time.time() < deadline:
            state = s.client("health", "--timeout", "2").stdout.strip()
            if state == "NOT_SERVING":
                break
            time.sleep(0.02)
        self.assertEqual(state, "NOT_SERVING")
        late = s.client_async("generate", "Hi", "--timeout", "200")
        # Draining: the port refuses new connections (a balancer retries elsewhere).
        deadline = time.time() + 30
        while time.time() < deadline and "draining" not in [r["event"] for r in s.records()]:
            time.sleep(0.05)
        r = s.client("generate", "Hi", "--timeout", "5")
        self.assertEqual(error_code(r), "UNAVAILABLE", r.stderr)
        out, err = late.communicate(timeout=300)
        self.assertEqual(late.returncode, 0, err)
        for c in clients:
            out, err = c.communicate(timeout=300)
            self.assertEqual(c.returncode, 0, err)
            last = json.loads(out.splitlines()[-1])
            self.assertIn(last["final"]["finish_reason"],
                          ("FINISH_REASON_LENGTH", "FINISH_REASON_EOS"))
        rc = s.stop(timeout=60)
        self.assertEqual(rc, 0, s.log())
        events = [r["event"] for r in s.records()]
        self.assertLess(events.index("lame_duck"), events.index("draining"))
        self.assertEqual(events[-1], "stopped")

    def test_sigterm_drain_timeout_cancels(self):
        s = self.start(overrides={"server": {"drain_timeout_seconds": 0.2}})
        c = s.client_async("stream", "--json", "--max-new-tokens", "900", "--schedule", "block",
                           "--block-length", "300",
                           "Hello")
        self.assertTrue(c.stdout.readline())
        s.proc.send_signal(signal.SIGTERM)
        out, err = c.communicate(timeout=60)
        self.assertEqual(c.returncode, 1)
        self.assertIn("UNAVAILABLE", err)
        rc = s.stop()
        self.assertEqual(rc, 0, s.log())

    def test_flags_and_bad_config(self):
        s = self.start(use_flags_for_ports=True, extra_args=["--model", self.model])
        self.assertEqual(s.client("generate", "Hi").returncode, 0)
        self.assertIn("dllm_requests_total", s.metrics_text())
        self.assertEqual(s.stop(), 0)
        # A load test whose every call failed (the server is gone) exits 1, not 0.
        r = s.client("load", "--requests", "3", "--timeout", "5", "Hi")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("none of 3 calls succeeded", r.stderr)
        bad = os.path.join(self.tmp, "bad.yaml")
        with open(bad, "w") as f:
            f.write("engine:\n  modle: x\n")
        r = subprocess.run([os.path.join(BIN_DIR, "dllm-server"), "--config", bad],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("engine.modle: unknown key", r.stderr)
        r = subprocess.run([os.path.join(BIN_DIR, "dllm-server"), "--bogus"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--bogus", r.stderr)
        # An empty value (a templated command line with an unset variable) names the flag; it
        # never means the built-in config (no tokens, every interface).
        for empty in (["--config", ""], ["--model="], ["--backend", ""]):
            r = subprocess.run([os.path.join(BIN_DIR, "dllm-server")] + empty,
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, empty)
            self.assertIn(f"{empty[0].rstrip('=')}: empty value", r.stderr)
        # Under an open-file limit too low for http.max_connections (4096) beside what the
        # rest needs, HTTP takes fewer connections and says so.
        tight = self.start(open_file_limit=600)
        [lowered] = tight.records("open_file_limit")
        self.assertEqual((lowered["open_file_limit"], lowered["configured"],
                          lowered["max_connections"]), (600, 4096, 344))
        self.assertEqual(tight.stop(), 0)
        missing = self.start(wait=False, extra_args=["--model", os.path.join(self.tmp, "none")])
        self.assertEqual(missing.proc.wait(timeout=30), 1)
        failed = missing.records("startup_failed")
        self.assertEqual(failed[0]["stage"], "load_model")

    # ------------------------------------------------------------------ metrics

    def test_metrics_scraped_by_prometheus(self):
        s = self.start()
        responses = [self.generate_json(s, "--max-new-tokens", "16", "--cache", "entropy",
                                        "--entropy-threshold", "5.2", "Hello %d" % i)
                     for i in range(3)]
        r = s.client("stream", "--json", "--max-new-tokens", "32", "--schedule", "block",
                     "--block-length", "16", "Hi")
        self.assertEqual(r.returncode, 0, r.stderr)
        responses.append(json.loads(r.stdout.splitlines()[-1])["final"])
        self.assertEqual(error_code(s.client("generate", "--max-new-tokens", "0", "x")),
                         "INVALID_ARGUMENT")

        prom_port = free_port()
        prom_dir = os.path.join(self.tmp, "prometheus")
        os.makedirs(prom_dir)
        prom_config = os.path.join(prom_dir, "prometheus.yml")
        with open(prom_config, "w") as f:
            json.dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                       "scrape_configs": [{
                           "job_name": "dllm",
                           "static_configs": [{"targets": ["127.0.0.1:%d" % s.metrics_port]}]}]},
                      f)
        prom_log = open(os.path.join(prom_dir, "log"), "w")
        prom = subprocess.Popen(
            ["prometheus", "--config.file=" + prom_config,
             "--storage.tsdb.path=" + os.path.join(prom_dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % prom_port],
            stdout=prom_log, stderr=subprocess.STDOUT)
        try:
            def query(expr):
                url = "http://127.0.0.1:%d/api/v1/query?%s" % (
                    prom_port, urllib.parse.urlencode({"query": expr}))
                with urllib.request.urlopen(url, timeout=5) as resp:
                    body = json.load(resp)
                self.assertEqual(body["status"], "success")
                return {json.dumps(item["metric"], sort_keys=True): float(item["value"][1])
                        for item in body["data"]["result"]}

            def scalar(expr):
                values = list(query(expr).values())
                return values[0] if len(values) == 1 else None

            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    if scalar('dllm_requests_total{status="OK",protocol="grpc",job="dllm"}') == 4:
                        break
                except (OSError, AssertionError):
                    pass
                time.sleep(0.5)
            # Independent reference: the numbers the client received in its responses.
            generated = sum(x["usage"]["generated_tokens"] for x in responses)
            prompt = sum(x["usage"]["prompt_tokens"] for x in responses)
            steps = sum(x["cache_stats"]["steps"] for x in responses)
            full = sum(x["cache_stats"]["full_steps"] for x in responses)
            # Warm-up (4 tokens) also went through the engine; its counts are in the totals.
            self.assertEqual(scalar('dllm_requests_total{status="OK",protocol="grpc"}'), 4)
            self.assertEqual(
                scalar('dllm_requests_total{status="INVALID_ARGUMENT",protocol="grpc"}'), 1)
            self.assertEqual(
                scalar('dllm_requests_total{status="RESOURCE_EXHAUSTED",protocol="grpc"}'), 0)
            self.assertEqual(scalar("dllm_request_duration_seconds_count") - 1, 4)
            warm_generated = scalar("dllm_generated_tokens_total") - generated
            self.assertTrue(0 <= warm_generated <= 4, warm_generated)
            warm_steps = scalar("dllm_denoise_steps_total") - steps
            self.assertTrue(1 <= warm_steps <= 4, warm_steps)
            warm_prompt = scalar("dllm_prompt_tokens_total") - prompt
            self.assertTrue(1 <= warm_prompt <= 8, warm_prompt)
            self.assertEqual(scalar("dllm_full_refresh_steps_total") +
                             scalar("dllm_partial_steps_total"),
                             scalar("dllm_denoise_steps_total"))
            self.assertGreaterEqual(scalar("dllm_full_refresh_steps_total"), full)
            self.assertGreater(scalar("dllm_partial_steps_total"), 0)  # entropy cache worked
            by_kind = query("dllm_step_duration_seconds_count")
            self.assertEqual(sum(by_kind.values()), scalar("dllm_batch_size_count"))
            # One entropy per committed canvas token (answer tokens plus any after EOS).
            self.assertGreaterEqual(scalar("dllm_decoded_token_entropy_count"),
                                    scalar("dllm_generated_tokens_total"))
            ratio = scalar("dllm_cache_refresh_ratio")
            self.assertTrue(0 < ratio < 1, ratio)
            self.assertEqual(scalar("dllm_num_requests_running"), 0)
            self.assertEqual(scalar("dllm_num_requests_waiting"), 0)
            self.assertIsNotNone(scalar("dllm_kv_cache_usage_ratio"))
            self.assertGreater(scalar("dllm_step_seconds_total"), 0)
            self.assertIsNotNone(scalar("dllm_decision_overhead_seconds_total"))
            self.assertEqual(scalar("dllm_time_to_first_commit_seconds_count"), 5)
            self.assertEqual(scalar("dllm_queue_wait_seconds_count"), 5)
            self.assertGreater(scalar("dllm_rows_per_step_sum"), 0)
        finally:
            prom.terminate()
            prom.wait(timeout=30)
            prom_log.close()


def main():
    global BIN_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    args, rest = parser.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin_dir)
    unittest_exit.main(argv=[sys.argv[0]] + rest)  # a skip exits 77: ctest shows it


if __name__ == "__main__":
    main()
