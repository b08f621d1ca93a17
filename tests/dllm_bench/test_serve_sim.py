"""bench/serve_sim.py and dllm-serve-sim: the request plan and arrivals are serve.py's, the
records are computed as serve.run_one computes them, the fit recovers known costs, and the
simulator's virtual time is exact: a request alone takes its rows times the profile's cost
per row, a burst takes its steps times a constant step cost, the tokens are those of a
real-time run, and two virtual runs agree to the bit.

  DLLM_BIN_DIR=build/bin /usr/bin/python3 -m tests.dllm_bench.test_serve_sim
"""
import argparse
import contextlib
import io
import json
import math
import os
import random
import subprocess
import tempfile
import unittest

from bench import serve
from bench import serve_sim
from bench import serve_sweep
from tests import unittest_exit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class PureTest(unittest.TestCase):
    def test_requests_are_serves_plan(self):
        tasks = [{"prompt": "p%d" % i, "answer": str(i)} for i in range(5)]
        settings = [("a", {"cache": {"policy": "none"}}), ("b", {"cache": {"policy": "dual"}})]
        reqs = serve_sim.timed_requests(tasks, settings, 6, 2, 3.0, 1.0, 7, 32)
        times = serve.arrival_times(6, 3.0, 1.0, random.Random(7))
        self.assertEqual([q["arrival_s"] for q in reqs], times)
        # serve.run_row's plan: task i % len(tasks), setting i % len(settings), after warm-up.
        self.assertEqual([q["prompt"] for q in reqs], ["p2", "p3", "p4", "p0", "p1", "p2"])
        self.assertEqual([q["label"] for q in reqs], ["a", "b", "a", "b", "a", "b"])
        self.assertTrue(all(q["max_tokens"] == 32 for q in reqs))

    def test_record_like_run_one(self):
        q = {"task": {"prompt": "x", "answer": "42"}}
        r = {"label": "s", "status": "OK", "output_tokens": 5, "text": "42",
             "arrival_s": 1.0, "chunks_s": [1.5, 1.75, 2.5], "end_s": 3.0}
        rec = serve_sim.as_result(q, r)
        self.assertAlmostEqual(rec["ttft"], 0.5)
        self.assertAlmostEqual(rec["e2el"], 2.0)
        self.assertAlmostEqual(rec["tpot"], 1.5 / 4)
        self.assertEqual([round(x, 9) for x in rec["itl"]], [0.25, 0.75])
        self.assertTrue(rec["correct"])
        r.update(status="DEADLINE_EXCEEDED", chunks_s=[])
        rec = serve_sim.as_result(q, r)
        self.assertIsNone(rec["ttft"])
        self.assertFalse(rec["correct"])

    def test_fit_recovers_known_costs(self):
        rng = random.Random(1)
        steps = []
        for _ in range(200):
            s = {"rows": rng.uniform(10, 2000), "key_rows": rng.uniform(1e3, 1e6),
                 "map_key_rows": 0.0, "predicted_rows": rng.uniform(1, 100),
                 "sequences": rng.randint(1, 16)}
            s["seconds"] = (0.003 + 2e-5 * s["rows"] + 1e-8 * s["key_rows"]
                            + 1e-4 * s["predicted_rows"] + 5e-4 * s["sequences"])
            steps.append(s)
        p = serve_sim.fit_profile(steps, "synthetic", "test")
        self.assertAlmostEqual(p["rows_seconds"][0][1], 0.003, places=6)
        top = p["rows_seconds"][1][0]
        self.assertAlmostEqual((p["rows_seconds"][1][1] - 0.003) / top, 2e-5, places=9)
        self.assertAlmostEqual(p["key_row_seconds"], 1e-8, places=12)
        self.assertAlmostEqual(p["map_key_row_seconds"], 0, places=15)  # no data: none
        self.assertAlmostEqual(p["predicted_row_seconds"], 1e-4, places=8)
        self.assertAlmostEqual(p["sequence_seconds"], 5e-4, places=8)
        self.assertLess(p["fit"]["p90_abs_error"], 1e-6)

    def test_shipped_cpu_profiles_are_the_fit_of_their_steps(self):
        # bench/profiles/cpu-*.json come from the committed calibration steps, refitted here.
        for model in ("llada-cot", "dream-cot"):
            with open(os.path.join(ROOT, "bench", "profiles", "cpu-%s.json" % model)) as f:
                shipped = json.load(f)
            with open(os.path.join(ROOT, "docs", "results",
                                   "sim-calibration-steps-%s.jsonl" % model)) as f:
                steps = [json.loads(line) for line in f if line.strip()]
            fitted = serve_sim.fit_profile(steps, shipped["name"], shipped["source"])
            for key in ("rows_seconds", "key_row_seconds", "map_key_row_seconds",
                        "predicted_row_seconds", "sequence_seconds", "fit"):
                self.assertEqual(json.dumps(fitted[key]), json.dumps(shipped[key]),
                                 (model, key))

    def test_projection_plot_is_drawn(self):
        # bench/serve_report.py --plot of a projection rows file: one panel per max batch.
        import shutil
        import subprocess
        if shutil.which("gnuplot") is None:
            self.skipTest("gnuplot is not installed (scripts/deps installs it)")
        rows = os.path.join(ROOT, "docs", "results", "sim-projection-h100-llada-cot.jsonl")
        with tempfile.TemporaryDirectory() as tmp:
            png = os.path.join(tmp, "p.png")
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "serve_report.py"),
                            "--plot", png, rows], check=True)
            with open(png, "rb") as f:
                head = f.read(24)
        self.assertEqual(head[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual(int.from_bytes(head[16:20], "big"), 4 * 420 + 200)  # 4 batches

    def test_nnls_never_negative(self):
        # y falls with the second column: plain least squares would give it a negative cost.
        x = [[1, i, 10 - i] for i in range(10)]
        y = [1 + 2 * i - 0.5 * (10 - i) for i in range(10)]
        coef = serve_sim.nnls(x, y)
        self.assertTrue(all(c >= 0 for c in coef), coef)


def fifo_reference(steps, slots):
    """(end step of each request, batch size of each step) when requests that all arrive at
    once, needing `steps[i]` steps each, run first-in-first-out in `slots` slots, the first
    starting alone and the others queued by the end of its first step (the simulator's
    rule for a burst into an idle engine)."""
    queue, active, ends, sizes, t = [0], [], [0] * len(steps), [], 0
    while queue or active:
        if t == 1:
            queue += list(range(1, len(steps)))
        while queue and len(active) < slots:
            i = queue.pop(0)
            active.append([i, steps[i]])
        sizes.append(len(active))
        t += 1
        for a in active:
            a[1] -= 1
            if a[1] == 0:
                ends[a[0]] = t
        active = [a for a in active if a[1] > 0]
    return ends, sizes


@unittest.skipUnless(os.environ.get("DLLM_BIN_DIR"), "DLLM_BIN_DIR names the built binaries")
class SimulatorTest(unittest.TestCase):
    def setUp(self):
        self.args = argparse.Namespace(bin_dir=os.environ["DLLM_BIN_DIR"], threads=1,
                                       model=os.path.join(ROOT, "models", "llada-tiny"))
        self.dir = tempfile.TemporaryDirectory(prefix="dllm-test-serve-sim-")
        self.workload = os.path.join(ROOT, "tools", "tasks", "data", "test.jsonl")
        with open(self.workload) as f:
            self.tasks = [json.loads(line) for line in f if line.strip()]
        self.settings = [("entropy", serve_sweep.SETTINGS["entropy"]),
                         ("dual", serve_sweep.SETTINGS["dual"])]

    def tearDown(self):
        self.dir.cleanup()

    def profile(self, body):
        path = os.path.join(self.dir.name, "profile-%d.json" % len(os.listdir(self.dir.name)))
        with open(path, "w") as f:
            json.dump(dict(name="test", **body), f)
        return path

    def test_alone_a_request_costs_its_rows(self):
        # One request at a time (100 s apart); 1 ms per row and nothing else: each request's
        # E2EL is its own rows (the engine's count) in ms, its first chunk a whole number of
        # steps after arrival.
        per_row = self.profile({"rows_seconds": [[0, 0], [1000, 1.0]]})
        reqs = serve_sim.timed_requests(self.tasks, self.settings, 4, 0, 0.01, 1.0, 0, 16)
        self.assertEqual({q["label"] for q in reqs}, {"entropy", "dual"})
        for i, q in enumerate(reqs):
            q["arrival_s"] = 100.0 * i
        results = serve_sim.run_sim(self.args, reqs, 4, profile=per_row)
        for q, r in zip(reqs, results):
            self.assertEqual(r["status"], "OK", r)
            self.assertGreater(r["rows"], 0)
            self.assertAlmostEqual(r["end_s"] - q["arrival_s"], r["rows"] * 1e-3, places=6)
            self.assertGreater(len(r["chunks_s"]), 0)

    def test_burst_follows_fifo_batching_at_a_constant_step_cost(self):
        # Every request at once, 4 slots, 10 ms per step whatever it computes. Given each
        # request's own step count, first-in-first-out continuous batching (a freed slot
        # taken at the next step) fixes every end time and each step's batch size; the
        # simulator must match that reference exactly.
        flat = self.profile({"rows_seconds": [[0, 0.01]]})
        one_per_step = [("one", {"decoding": {"schedule": "block", "block_length": 16,
                                              "confidence_threshold": 0},
                                 "cache": {"policy": "entropy"}})]
        reqs = serve_sim.timed_requests(self.tasks, one_per_step, 10, 0, math.inf, 1.0, 0, 16)
        steps = os.path.join(self.dir.name, "steps.jsonl")
        results = serve_sim.run_sim(self.args, reqs, 4, profile=flat, steps_out=steps)
        with open(steps) as f:
            records = [json.loads(line) for line in f if line.strip()]
        self.assertTrue(all(r["status"] == "OK" for r in results), results)
        ends, batch_sizes = fifo_reference([r["steps"] for r in results], 4)
        self.assertEqual([r["sequences"] for r in records], batch_sizes)
        for r, end in zip(results, ends):
            self.assertAlmostEqual(r["end_s"], end * 0.01, places=6)
            # One time per step, the last at the end; a running sequence steps every 10 ms.
            self.assertEqual(len(r["steps_s"]), r["steps"])
            self.assertAlmostEqual(r["steps_s"][-1], r["end_s"], places=6)
            for a, b in zip(r["steps_s"], r["steps_s"][1:]):
                self.assertAlmostEqual(b - a, 0.01, places=6)
            for t in r["chunks_s"]:
                self.assertAlmostEqual(t / 0.01, round(t / 0.01), places=4)
        self.assertGreater(len(set(ends)), 1)  # some requests waited for a slot

    def test_virtual_runs_repeat_and_keep_the_real_tokens(self):
        h100 = os.path.join(ROOT, "bench", "profiles", "h100-llada8b-tp1.json")
        reqs = serve_sim.timed_requests(self.tasks, self.settings, 8, 0, 20.0, 1.0, 3, 16)
        a = serve_sim.run_sim(self.args, reqs, 4, profile=h100)
        b = serve_sim.run_sim(self.args, reqs, 4, profile=h100)
        self.assertEqual(a, b)
        real = serve_sim.run_sim(self.args, reqs, 4)
        self.assertEqual([r["text"] for r in a], [r["text"] for r in real])
        self.assertTrue(all(r["status"] == "OK" for r in a))
        # The rows a serve.py row reads.
        row = serve_sim.sim_row(reqs, a, 20.0, self.settings, {"e2el": 1.0}, "h100")
        self.assertEqual(row["by_status"], {"OK": 8})
        self.assertEqual(row["protocol"], "sim")
        self.assertGreater(row["output_throughput"], 0)

    def sweep_rows(self, *extra):
        out = os.path.join(self.dir.name, "rows-%d.jsonl" % len(os.listdir(self.dir.name)))
        serve_sim.main(["sweep", "--model", self.args.model, "--bin-dir", self.args.bin_dir,
                        "--workload", self.workload, "--threads", "1", "--warmup", "0",
                        "--out", out] + list(extra))
        with open(out) as f:
            return [json.loads(line) for line in f if line.strip()]

    def test_sweep_admission_modes(self):
        # One slot, 0.3 s per step, 4 requests a second: far past saturation. Without
        # deadlines every request is served, late; with 1 s deadlines and admission off some
        # expire after using steps; with it on some are refused at arrival (in no virtual
        # time at all) and fewer expire.
        slow = self.profile({"rows_seconds": [[0, 0.3]]})
        rows = self.sweep_rows("--profile", slow, "--requests", "24", "--rates", "4",
                               "--batches", "1", "--settings", "entropy", "--deadline", "1",
                               "--admission", "none,expire,refuse")
        by = {r["admission"]: r for r in rows}
        self.assertEqual(sorted(by), ["expire", "none", "refuse"])
        self.assertEqual(by["none"]["by_status"], {"OK": 24})
        self.assertIsNone(by["none"]["deadline_s"])
        self.assertEqual(by["expire"]["deadline_s"], 1)
        self.assertGreater(by["expire"]["by_status"].get("DEADLINE_EXCEEDED", 0), 0)
        self.assertNotIn("RESOURCE_EXHAUSTED", by["expire"]["by_status"])
        self.assertNotIn("refusal_ms", by["expire"])
        refused = by["refuse"]["by_status"].get("RESOURCE_EXHAUSTED", 0)
        self.assertGreater(refused, 0)
        self.assertLess(by["refuse"]["by_status"].get("DEADLINE_EXCEEDED", 0),
                        by["expire"]["by_status"]["DEADLINE_EXCEEDED"])
        self.assertLess(by["refuse"]["refusal_ms"]["p99"], 1e-3)
        with self.assertRaises(SystemExit) as e:
            self.sweep_rows("--admission", "refuse")
        self.assertIn("needs --deadline", str(e.exception))
        with self.assertRaises(SystemExit) as e:
            self.sweep_rows("--admission", "drop", "--deadline", "1")
        self.assertIn("none, refuse, expire", str(e.exception))

    def test_sweep_slack_ratios(self):
        # SLO-aware tau: a setting with a tau under load runs once per slack ratio in each
        # mode with deadlines, and the row counts the requests that switched. One slot, 10 ms
        # per step, 10 s deadlines: at ratio 1000 every request with more than one step left
        # behind a finished one is at risk; at ratio 0 none switches; without deadlines none
        # can, and the row has no ratio.
        fast = self.profile({"rows_seconds": [[0, 0.01]]})
        rows = self.sweep_rows("--profile", fast, "--requests", "8", "--rates", "4",
                               "--batches", "1", "--settings", "entropy-slack", "--deadline", "10",
                               "--admission", "none,refuse", "--slack-ratios", "0,1000")
        self.assertEqual([(r["admission"], r.get("tau_switch_slack_ratio")) for r in rows],
                         [("none", None), ("refuse", 0.0), ("refuse", 1000.0)])
        self.assertNotIn("tau_switched", rows[0])
        self.assertEqual(rows[1]["tau_switched"], 0)
        self.assertGreater(rows[2]["tau_switched"], 0)

    def test_sweep_mismatch_budgets(self):
        # The switch's quality budget: with shadow samples at rate 1, a setting with a tau
        # under load runs once per budget; its row splits the samples of switched steps from
        # the others (every request here switches at ratio 1000 after the first), and a
        # setting without one runs once, autotune off. A budget without shadow samples is a
        # usage error.
        fast = self.profile({"rows_seconds": [[0, 0.01]]})
        rows = self.sweep_rows("--profile", fast, "--requests", "8", "--rates", "4",
                               "--batches", "1", "--settings", "entropy,entropy-slack",
                               "--deadline", "10", "--admission", "refuse",
                               "--slack-ratios", "1000", "--shadow-sample-rate", "1",
                               "--mismatch-budgets", "0,0.5")
        self.assertEqual([(r["settings"][0], r["mismatch_budget"]) for r in rows],
                         [("entropy", 0), ("entropy-slack", 0), ("entropy-slack", 0.5)])
        plain, switching = rows[0], rows[1]
        self.assertEqual(plain["shadow"]["samples_under_load"], 0)
        self.assertIsNone(plain["mean_tau_nats"]["switched"])
        self.assertGreater(switching["tau_switched"], 0)
        self.assertGreater(switching["shadow"]["samples_under_load"], 0)
        self.assertEqual(switching["shadow"]["token_mismatch_rate_under_load"],
                         switching["shadow"]["token_mismatches_under_load"]
                         / switching["shadow"]["samples_under_load"])
        # Without autotune a switched request plans at its tau under load (2) throughout.
        self.assertAlmostEqual(switching["mean_tau_nats"]["switched"], 2.0, places=5)
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
            serve_sim.main(["sweep", "--model", self.args.model, "--mismatch-budgets", "0.05"])
        self.assertIn("--shadow-sample-rate", err.getvalue())

    def test_bad_engine_options_are_refused_naming_the_option(self):
        # dllm-serve-sim builds its engine from a loaded model; that path validates the
        # engine's options as Engine::Create does (a budget of 1.5 is out of (0, 1)).
        req_path = os.path.join(self.dir.name, "requests.jsonl")
        with open(req_path, "w") as f:
            f.write(json.dumps({"arrival_s": 0, "prompt": "add 1 2", "max_tokens": 8}) + "\n")
        run = subprocess.run(
            [os.path.join(self.args.bin_dir, "dllm-serve-sim"), "--model", self.args.model,
             "--requests", req_path, "--out", os.path.join(self.dir.name, "out.jsonl"),
             "--threads", "1", "--shadow-sample-rate", "1", "--mismatch-budget", "1.5"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("shadow.tau_autotune.mismatch_budget", run.stderr)

    def test_validate_reuses_the_real_runs(self):
        # A refitted profile is validated against an earlier validation's in-process
        # real-time runs of the same point, without running them again.
        flat = self.profile({"rows_seconds": [[0, 0.01]]})
        measured = os.path.join(self.dir.name, "measured.jsonl")
        earlier = os.path.join(self.dir.name, "earlier.jsonl")
        point = {"settings": ["entropy"], "rate": 2.0, "max_batch": 1}
        with open(measured, "w") as f:
            f.write(json.dumps(dict(point, phase="open", model="llada-tiny", requests=4,
                                    slo_s={"e2el": 4.0}, output_throughput=10.0,
                                    e2el_ms={"median": 500, "p99": 900}, accuracy=0.5,
                                    saturation_fraction=0.5)) + "\n")
        with open(earlier, "w") as f:
            f.write(json.dumps(dict(point, real={"output_throughput": [10.0, 12.0],
                                                 "e2el_median": [400.0, 420.0],
                                                 "e2el_p99": [800.0, 880.0]})) + "\n")
        out = os.path.join(self.dir.name, "validated.jsonl")
        serve_sim.main(["validate", "--profile", flat, "--measured", measured,
                        "--reuse-real", earlier, "--workload", self.workload, "--warmup", "0",
                        "--bin-dir", self.args.bin_dir, "--threads", "1", "--out", out])
        with open(out) as f:
            (row,) = [json.loads(line) for line in f if line.strip()]
        self.assertEqual(row["real"], {"output_throughput": [10.0, 12.0],
                                       "e2el_median": [400.0, 420.0], "e2el_p99": [800.0, 880.0]})
        self.assertAlmostEqual(row["errors_vs_real_mean"]["output_throughput"],
                               (row["output_throughput"] - 11.0) / 11.0)
        self.assertAlmostEqual(row["errors_vs_real_mean"]["e2el_p99"],
                               (row["e2el_ms"]["p99"] - 840.0) / 840.0)
        self.assertAlmostEqual(row["real_spread"]["e2el_median"], 10.0 / 410.0)
        self.assertAlmostEqual(row["errors"]["e2el_median"],
                               (row["e2el_ms"]["median"] - 500) / 500)

    def test_bad_input_is_named(self):
        bad = os.path.join(self.dir.name, "bad.jsonl")
        out = os.path.join(self.dir.name, "out.jsonl")
        binary = os.path.join(self.args.bin_dir, "dllm-serve-sim")
        cases = [
            ('{"prompt": "x"}', "arrival_s"),
            ('{"arrival_s": 1, "prompt": "x"}\n{"arrival_s": 0.5, "prompt": "y"}', "in order"),
            ('{"arrival_s": 0, "prompt": "x", "setting": {"cache": {"taux": 1}}}',
             "unknown field cache.taux"),
            ('{"arrival_s": 0, "prompt": "x", "setting": {"decoding": {"schedule": "zig"}}}',
             "decoding.schedule"),
            ("not json", "not a JSON object"),
        ]
        import subprocess
        for text, message in cases:
            with open(bad, "w") as f:
                f.write(text + "\n")
            p = subprocess.run([binary, "--model", self.args.model, "--requests", bad,
                                "--out", out, "--threads", "1"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 2, (text, p.stderr))
            self.assertIn(message, p.stderr, text)
            self.assertIn("bad.jsonl:", p.stderr)
        p = subprocess.run([binary, "--model", self.args.model, "--requests", bad, "--out", out,
                            "--profile", os.path.join(self.dir.name, "none.json")],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2)
        self.assertIn("none.json", p.stderr)


if __name__ == "__main__":
    unittest_exit.main()
