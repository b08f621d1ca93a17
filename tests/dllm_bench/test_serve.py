"""bench/serve.py against a scripted HTTP server whose timings and failures are known: the
percentile maths, the arrival process, TTFT/TPOT/ITL/E2EL, goodput and correct goodput with a
slow and a failing request, and the check of the server's counters (a miscount is caught).

  /usr/bin/python3 -m tests.dllm_bench.test_serve      (from the repository root)
"""
import contextlib
import io
import json
import os
import random
import socket
import statistics
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench import serve
from tests import unittest_exit

CHUNK_GAP_S = 0.02
SLOW_S = 1.0
CPU_S_PER_REQUEST = 0.006
ROWS_PER_REQUEST = 90


class ScriptedServer:
    """An OpenAI-style streaming server whose replies depend on the prompt:
      "slow ..."  the first chunk after SLOW_S, then as a normal one;
      "fail"      HTTP 500 (code internal);
      "full"      HTTP 429 (code queue_full);
      "miscount"  a normal reply, counted twice in /metrics (a server that miscounts);
      anything    three tokens in chunks "12", " 34", " 56" CHUNK_GAP_S apart, then usage.
    /metrics counts replies by status like dllm-server (TCP_NODELAY, as dllm-server: without
    it Nagle's algorithm holds a chunk back until the client's delayed ACK)."""

    def __init__(self):
        self.counts = {}
        self.deadlines = []  # each POST's X-Request-Timeout-Ms (None: absent)
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def reply(self, status, body, content_type="application/json"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models":
                    self.reply(200, json.dumps({"data": [{"id": "scripted"}]}))
                elif self.path == "/metrics":
                    with outer.lock:
                        counts = dict(outer.counts)
                    lines = ['dllm_requests_total{protocol="http",status="%s"} %d' % kv
                             for kv in counts.items()]
                    lines.append('dllm_requests_total{protocol="grpc",status="OK"} 999')
                    # Server costs: ROWS_PER_REQUEST rows and CPU_S_PER_REQUEST per OK reply.
                    ok = counts.get("OK", 0)
                    lines.append("process_cpu_seconds_total %g" % (CPU_S_PER_REQUEST * ok))
                    lines.append("dllm_rows_per_step_sum %d" % (ROWS_PER_REQUEST * ok))
                    # As if every request with a deadline switched its tau.
                    with outer.lock:
                        switched = sum(1 for d in outer.deadlines if d is not None)
                    lines.append("dllm_requests_tau_switched_total %d" % switched)
                    self.reply(200, "\n".join(lines) + "\n", "text/plain")
                else:
                    self.reply(404, "{}")

            def count(self, status):
                with outer.lock:
                    outer.counts[status] = outer.counts.get(status, 0) + 1

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert body["model"] == "scripted" and body["stream"], body
                prompt = body["messages"][0]["content"]
                with outer.lock:
                    outer.deadlines.append(self.headers.get("X-Request-Timeout-Ms"))
                if prompt == "fail":
                    self.count("INTERNAL")
                    return self.reply(500, json.dumps({"error": {"code": "internal"}}))
                if prompt == "full":
                    self.count("RESOURCE_EXHAUSTED")
                    return self.reply(429, json.dumps({"error": {"code": "queue_full"}}))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def event(payload):
                    data = ("data: %s\n\n" % payload).encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()

                if prompt.startswith("slow"):
                    time.sleep(SLOW_S)
                for chunk in ["12", " 34", " 56"]:
                    time.sleep(CHUNK_GAP_S)
                    event(json.dumps({"choices": [{"delta": {"content": chunk}}]}))
                event(json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}],
                                  "usage": {"completion_tokens": 3},
                                  "timings": {"total_seconds": CHUNK_GAP_S}}))
                event("[DONE]")
                self.count("OK")
                if prompt == "miscount":
                    self.count("OK")
                self.wfile.write(b"0\r\n\r\n")

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # a burst of connections (socketserver's default is 5)
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.address = "127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def workload(tasks):
    f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    for t in tasks:
        f.write(json.dumps(t) + "\n")
    f.close()
    return f.name


class ServeBenchTest(unittest.TestCase):
    def setUp(self):
        self.server = ScriptedServer()
        self.files = []

    def tearDown(self):
        self.server.close()
        for f in self.files:
            os.unlink(f)

    def run_bench(self, tasks, *extra):
        path = workload(tasks)
        self.files.append(path)
        out = tempfile.TemporaryFile("w+")
        with contextlib.redirect_stdout(out):
            rc = serve.main(["--http", self.server.address, "--metrics", self.server.address,
                             "--workload", path, "--json", "--warmup", "0", *extra])
        out.seek(0)
        return rc, [json.loads(line) for line in out if line.strip()]

    def test_percentiles_are_numpys_linear_interpolation(self):
        self.assertEqual(serve.percentile([1, 2, 3, 4], 50), 2.5)
        self.assertAlmostEqual(serve.percentile(list(range(1, 101)), 99), 99.01)
        self.assertAlmostEqual(serve.percentile(list(range(1, 101)), 90), 90.1)
        self.assertEqual(serve.percentile([7], 99), 7)
        self.assertIsNone(serve.percentile([], 50))
        s = serve.summary_ms([0.001, 0.002, 0.003])
        self.assertAlmostEqual(s["mean"], 2.0)
        self.assertAlmostEqual(s["median"], 2.0)

    def test_arrivals_span_n_over_rate_and_burstiness_shapes_the_gaps(self):
        rng = random.Random(1)
        for burstiness, cv in ((1.0, 1.0), (4.0, 0.5), (0.25, 2.0)):
            t = serve.arrival_times(4000, 100.0, burstiness, rng)
            gaps = [b - a for a, b in zip(t, t[1:])]
            self.assertEqual(t[0], 0.0)
            self.assertLess(t[-1], 40.0)  # the last gap ends at n / rate = 40 s
            self.assertGreater(t[-1], 39.0)
            # A gamma process of shape k has gaps with coefficient of variation 1/sqrt(k).
            self.assertAlmostEqual(statistics.pstdev(gaps) / statistics.fmean(gaps), cv,
                                   delta=0.1 * cv)
        self.assertEqual(serve.arrival_times(3, float("inf"), 1.0, rng), [0.0, 0.0, 0.0])

    def test_correctness_rule_is_dllm_benchs(self):
        self.assertTrue(serve.correct({"answer": " 12 34 56 "}, "12 34 56"))
        self.assertFalse(serve.correct({"answer": "12 34"}, "12 34 56"))
        self.assertTrue(serve.correct({"answer": "x", "final": "7"}, "a\n#### 3\nb\n#### 7"))
        self.assertFalse(serve.correct({"answer": "x", "final": "7"}, "7"))

    def test_latencies_goodput_and_a_slow_and_a_failing_request(self):
        tasks = [{"prompt": "a", "answer": "12 34 56"}, {"prompt": "b", "answer": "wrong"},
                 {"prompt": "slow c", "answer": "12 34 56"}, {"prompt": "fail", "answer": ""},
                 {"prompt": "full", "answer": ""}, {"prompt": "d", "answer": "12 34 56"}]
        rc, rows = self.run_bench(tasks, "--requests", "6", "--concurrency", "1",
                                  "--slo", "e2el:%d" % (1000 * SLOW_S * 0.75))
        self.assertEqual(rc, 0)
        (row,) = rows
        self.assertEqual(row["by_status"], {"OK": 4, "INTERNAL": 1, "RESOURCE_EXHAUSTED": 1})
        self.assertTrue(row["counts_match"], row)
        self.assertEqual(row["server_counts"], row["by_status"])
        # 4 OK, 3 of them right; the slow one misses the E2EL SLO: goodput counts 3 requests,
        # correct goodput 2 (b is wrong), both over the row's wall time.
        self.assertAlmostEqual(row["goodput"] * row["wall_s"], 3, places=6)
        self.assertAlmostEqual(row["correct_goodput"] * row["wall_s"], 2, places=6)
        self.assertAlmostEqual(row["request_throughput"] * row["wall_s"], 4, places=6)
        self.assertAlmostEqual(row["output_throughput"] * row["wall_s"], 12, places=6)
        self.assertAlmostEqual(row["accuracy"], 0.75)
        self.assertAlmostEqual(row["slo_attainment"], 0.5)
        # The server's costs per output token (3 per OK reply).
        self.assertAlmostEqual(row["server_cpu_ms_per_token"], 1e3 * CPU_S_PER_REQUEST / 3)
        self.assertAlmostEqual(row["rows_per_token"], ROWS_PER_REQUEST / 3)
        # TTFT: one gap for the fast ones, SLOW_S more for the slow one; ITL: the gaps
        # between chunks; TPOT = (E2EL - TTFT) / 2 spans the same two gaps.
        ttft = row["ttft_ms"]
        self.assertGreater(ttft["median"], 0.8 * 1000 * CHUNK_GAP_S)
        self.assertLess(ttft["median"], 1000 * SLOW_S)  # the slow one is not the median
        self.assertGreater(ttft["p99"], 0.9 * 1000 * SLOW_S)  # p99 of 4: near the max
        self.assertGreater(row["itl_ms"]["median"], 0.8 * 1000 * CHUNK_GAP_S)
        self.assertLess(row["itl_ms"]["median"], 1000 * SLOW_S)
        self.assertGreater(row["tpot_ms"]["median"], 0.8 * 1000 * CHUNK_GAP_S)
        self.assertGreater(row["e2el_ms"]["p99"], 0.9 * 1000 * SLOW_S)
        # The front end's share: E2EL less the server's reported time (one gap here).
        self.assertAlmostEqual(row["frontend_ms"]["mean"],
                               row["e2el_ms"]["mean"] - 1000 * CHUNK_GAP_S, places=6)

    def test_open_loop_sends_at_the_rate(self):
        tasks = [{"prompt": "a", "answer": "12 34 56"}]
        rc, rows = self.run_bench(tasks, "--requests", "40", "--rate", "50,inf")
        self.assertEqual(rc, 0, rows)
        paced, burst = rows
        # The last of the 40 requests is sent at its arrival time (seed 0, as the run's).
        last_arrival = serve.arrival_times(40, 50.0, 1.0, random.Random(0))[-1]
        self.assertGreater(last_arrival, 0.5)
        self.assertGreaterEqual(paced["wall_s"], last_arrival)
        self.assertEqual(paced["by_status"], {"OK": 40})
        self.assertEqual(burst["by_status"], {"OK": 40})
        self.assertTrue(paced["counts_match"] and burst["counts_match"])

    def test_deadlines_are_sent_and_switches_read(self):
        """--deadline-ms sends every request's deadline as X-Request-Timeout-Ms, the row
        records it, and tau_switched is the server's counter's growth over the row."""
        tasks = [{"prompt": "a", "answer": "12 34 56"}]
        rc, rows = self.run_bench(tasks, "--requests", "4", "--concurrency", "2")
        self.assertEqual(rc, 0, rows)
        self.assertNotIn("deadline_ms", rows[0])
        self.assertEqual(rows[0]["tau_switched"], 0)
        rc, rows = self.run_bench(tasks, "--requests", "5", "--concurrency", "2",
                                  "--deadline-ms", "1500")
        self.assertEqual(rc, 0, rows)
        self.assertEqual(rows[0]["deadline_ms"], 1500)
        self.assertEqual(rows[0]["tau_switched"], 5)
        self.assertEqual(self.server.deadlines, [None] * 4 + ["1500"] * 5)

    def test_a_server_miscount_fails_the_run(self):
        rc, rows = self.run_bench([{"prompt": "miscount", "answer": ""}], "--requests", "3",
                                  "--concurrency", "1")
        self.assertEqual(rc, 1)
        self.assertFalse(rows[0]["counts_match"])

    def test_mixed_settings_are_reported_apart(self):
        rc, rows = self.run_bench([{"prompt": "a", "answer": "12 34 56"}], "--requests", "6",
                                  "--concurrency", "2",
                                  "--setting", 'x={"cache": {"policy": "entropy"}}',
                                  "--setting", 'y={"cache": {"policy": "dual"}}')
        self.assertEqual(rc, 0)
        self.assertEqual(rows[0]["settings"], ["x", "y"])
        self.assertEqual({k: v["requests"] for k, v in rows[0]["per_setting"].items()},
                         {"x": 3, "y": 3})

    def test_bad_arguments_are_named(self):
        for args, message in ((["--slo", "p99:5"], "--slo"),
                              (["--setting", "nolabel"], "--setting"),
                              (["--setting", 'x={"bogus": 1}'], "unknown keys")):
            with self.subTest(args=args):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), self.assertRaises(SystemExit):
                    serve.main(["--http", self.server.address, "--workload", "/dev/null",
                                "--concurrency", "1", *args])
                self.assertIn(message, err.getvalue())


if __name__ == "__main__":
    unittest_exit.main()
