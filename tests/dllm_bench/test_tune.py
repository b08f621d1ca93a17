"""bench/tune.py: equal budgets, Pareto fronts, the test picks and the goal figures; and one
real val search on one item of a trained model (DLLM_BENCH names the dllm-bench binary)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from bench import tune
from tests import unittest_exit


def row(method, acc_diff, speedup, rows_per_token=50.0, overhead=0.001, decoding="block",
        policy="p"):
    return {"tune": {"method": method, "decoding": decoding, "policy": f"{policy}{speedup}"},
            "vs_baseline": {"accuracy_diff": acc_diff, "accuracy_diff_se": 0.01},
            "speedup_vs_baseline_cpu": speedup, "speedup_vs_baseline": speedup,
            "rows_per_token": rows_per_token, "decision_overhead_frac": overhead,
            "accuracy": 0.9 + acc_diff, "cpu_s_per_token": 0.001, "macs_per_token": 1e8,
            "full_step_ratio": 0.1, "wall_s": 2.0, "cpu_s": 1.0}


class TuneTest(unittest.TestCase):
    def test_every_method_has_the_same_budget(self):
        self.assertTrue(all(len(p) == tune.BUDGET for p in tune.GRID.values()))
        self.assertEqual(len({(d, p) for m in tune.GRID.values() for d, p in m}),
                         tune.BUDGET * len(tune.GRID))  # no setting twice

    def test_front_drops_dominated_points(self):
        rows = [row("dual", 0.00, 10), row("dual", -0.02, 12), row("dual", -0.03, 11),
                row("dual", 0.01, 5), row("dual", 0.00, 9)]
        front = tune.front(rows)
        # (-0.03, 11) is beaten by (-0.02, 12); (0.00, 9) by (0.00, 10).
        self.assertEqual([(r["vs_baseline"]["accuracy_diff"], r["speedup_vs_baseline_cpu"])
                          for r in front], [(-0.02, 12), (0.00, 10), (0.01, 5)])

    def test_test_points(self):
        rows = [row("dual", 0.00, 10), row("dual", -0.02, 12), row("dual", 0.01, 5)]
        picks = tune.test_points(rows)
        # The fastest within 1 point (10x), then the most accurate (5x); the fastest (12x)
        # would come third.
        self.assertEqual(tune.TEST_POINTS, 2)
        self.assertEqual([r["speedup_vs_baseline_cpu"] for r in picks], [10, 5])
        # No point within 1 point: the most accurate and the fastest only.
        self.assertEqual([r["speedup_vs_baseline_cpu"]
                          for r in tune.test_points([row("d2cache", -0.05, 20),
                                                     row("d2cache", -0.02, 8)])], [8, 20])

    def test_default_point(self):
        # Fastest within 1 point on val first, unless its test row lost more than 1 point;
        # other methods and points beyond 1 point never count.
        val = [row("entropy", 0.02, 30.0), row("entropy", 0.0, 20.0), row("entropy", -0.05, 40.0),
               row("entropy", 0.05, 10.0), row("elastic", 0.03, 50.0)]
        lost = dict(row("entropy", -0.07, 31.0), tune=val[0]["tune"])
        held = dict(row("entropy", 0.01, 19.0), tune=val[1]["tune"])
        self.assertEqual(tune.default_point(val, []),
                         {"decoding": "block", "policy": "p30.0"})
        self.assertEqual(tune.default_point(val, [lost, held]),
                         {"decoding": "block", "policy": "p20.0"})
        self.assertEqual(tune.default_point(val, [lost]),  # untested points count as held
                         {"decoding": "block", "policy": "p20.0"})
        self.assertIsNone(tune.default_point([val[2], val[4]], []))

    def test_goal_figures(self):
        rows = [row("entropy", -0.005, 30, rows_per_token=20),
                row("entropy-min", -0.02, 60, rows_per_token=10),  # not within 1 point
                row("elastic", 0.0, 12, overhead=0.03),
                row("dual", 0.0, 14, rows_per_token=40),
                row("d2cache", -0.001, 9, overhead=0.05)]
        text = "\n".join(tune.goals(rows, [r for r in rows if r["tune"]["method"] == "dual"]))
        self.assertIn("30.00x vanilla", text)
        self.assertIn("Fastest other method within 1 point: dual", text)
        self.assertIn("EntropyCache / it = 2.14 (goal >= 2)", text)
        self.assertIn("ratio 0.50 (goal <= 0.6)", text)
        self.assertIn("d2cache decision overhead: 5.00-5.00% (goal <= 9.2%)", text)
        self.assertIn("elastic decision overhead: 3.00-3.00% (goal <= 14.5%)", text)
        self.assertEqual(tune.goals([row("dual", 0.0, 14)], []),
                         ["- No EntropyCache setting is within 1 point of vanilla."])

    def test_table_cells(self):
        lines = tune.md_table([row("dual", 0.0, 10)])
        self.assertEqual(len(lines[0].split("|")), len(tune.HEAD) + 2)
        self.assertEqual(lines[2], "| dual | block | p10 | 0.900 | +0.0±1.0 | 10.00x | 10.00x | "
                         "1.00 | 50.0 | 0.100 | 0.10 | 0.10% | 2.00 |")

    @unittest.skipUnless(os.environ.get("DLLM_BENCH"), "DLLM_BENCH names no dllm-bench")
    def test_val_search_on_one_item(self):
        """The whole val grid on one item of models/llada-cot: vanilla stored once, one row per
        setting paired against it, and a second run measures nothing again."""
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, tune.__file__, "val", "models/llada-cot", "--limit", "1",
                   "--out", out, "--bench", os.environ["DLLM_BENCH"]]
            first = subprocess.run(cmd, capture_output=True, text=True)
            self.assertEqual(first.returncode, 0, first.stderr)
            with open(os.path.join(out, "tune-llada-cot-val.jsonl"), encoding="utf-8") as f:
                rows = [json.loads(line) for line in f]
            self.assertEqual(len(rows), tune.BUDGET * len(tune.GRID))
            for r in rows:
                self.assertEqual(r["vs_baseline"]["tasks"], 1)
                self.assertGreater(r["speedup_vs_baseline_cpu"], 0)
                self.assertGreater(r["rows_per_token"], 0)
            self.assertIn("Val fronts", first.stdout)
            again = subprocess.run(cmd, capture_output=True, text=True)
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertNotIn("tune: val", again.stderr)  # nothing measured twice
            with open(os.path.join(out, "tune-llada-cot-val.jsonl"), encoding="utf-8") as f:
                self.assertEqual(len(f.readlines()), len(rows))

    @unittest.skipUnless(os.environ.get("DLLM_BENCH"), "DLLM_BENCH names no dllm-bench")
    def test_vanilla_answers_from_an_earlier_session(self):
        """--vanilla-from: vanilla runs on the sample only, its answers equal the committed
        run's (measured in another session, so this also checks that they reproduce), its
        cost is this session's; a stored answer that differs stops the run, naming the item."""
        committed = os.path.join("docs", "results", "tune-llada-cot-vanilla-val.answers.jsonl")
        with open(committed, encoding="utf-8") as f:
            line = json.loads(f.readline())

        def run(out, vanilla_from):
            return subprocess.run(
                [sys.executable, tune.__file__, "val", "models/llada-cot", "--limit", "1",
                 "--out", out, "--bench", os.environ["DLLM_BENCH"], "--methods", "dual",
                 "--vanilla-from", vanilla_from], capture_output=True, text=True)
        with tempfile.TemporaryDirectory() as out:
            r = run(out, os.path.dirname(committed))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("measured on 1 item,", r.stderr)
            stored = os.path.join(out, os.path.basename(committed))
            with open(stored, encoding="utf-8") as f:
                vanilla = json.loads(f.readline())
            self.assertEqual(vanilla["answers"], line["answers"][:1])
            self.assertEqual(vanilla["row"]["cost_sampled_items"], 1)
            self.assertNotEqual(vanilla["row"]["cpu_s_per_token"], line["row"]["cpu_s_per_token"])
            with open(stored + ".session.json", encoding="utf-8") as f:
                self.assertEqual(json.load(f), tune.this_session())
            with open(os.path.join(out, "tune-llada-cot-val.jsonl"), encoding="utf-8") as f:
                self.assertEqual(len(f.readlines()), tune.BUDGET)
        with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as earlier:
            line["answers"][0] = "not what vanilla answers"
            with open(os.path.join(earlier, os.path.basename(committed)), "w",
                      encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
            r = run(out, earlier)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("vanilla's answer to item 0 differs", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(out, "tune-llada-cot-val.jsonl")))

    def test_rows_of_another_session_stop_a_resumed_run(self):
        """A resumed search appends rows only in the session that measured the stored vanilla
        and the rows so far: CPU time per token does not compare across sessions. Rows name
        their session (boot id, CPU)."""
        with tempfile.TemporaryDirectory() as out:
            def run(methods):
                return subprocess.run(
                    [sys.executable, tune.__file__, "val", "models/llada-cot", "--limit", "1",
                     "--out", out, "--bench", os.environ["DLLM_BENCH"], "--methods", methods],
                    capture_output=True, text=True)
            first = run("dual")
            self.assertEqual(first.returncode, 0, first.stderr)
            rows_path = os.path.join(out, "tune-llada-cot-val.jsonl")
            with open(rows_path, encoding="utf-8") as f:
                rows = [json.loads(line) for line in f]
            self.assertEqual(len(rows), tune.BUDGET)
            for r in rows:
                self.assertEqual(r["tune"]["session"], tune.this_session())
            # The same session resumes.
            self.assertEqual(run("dual,prefix").returncode, 0)
            with open(rows_path, encoding="utf-8") as f:
                self.assertEqual(len(f.readlines()), 2 * tune.BUDGET)
            # The stored vanilla from another boot: nothing more is measured.
            sidecar = os.path.join(out, "tune-llada-cot-vanilla-val.answers.jsonl.session.json")
            with open(sidecar, "w", encoding="utf-8") as f:
                json.dump({"boot_id": "another-boot", "cpu": "another CPU"}, f)
            again = run("dual,prefix,d2cache")
            self.assertNotEqual(again.returncode, 0)
            self.assertIn("another session (boot id another-boot, another CPU", again.stderr)
            with open(rows_path, encoding="utf-8") as f:
                self.assertEqual(len(f.readlines()), 2 * tune.BUDGET)
            # Everything asked for already measured: a report, whatever the session.
            self.assertEqual(run("dual").returncode, 0)


if __name__ == "__main__":
    unittest_exit.main()  # a skip exits 77: ctest shows it
