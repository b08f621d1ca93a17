"""bench/bench_table.py: the markdown table of dllm-bench rows (scripts/bench-long)."""
import json
import subprocess
import sys
import unittest

from bench import bench_table
from tests import unittest_exit

SCRIPT = bench_table.__file__  # also run as the command scripts/bench-long runs


def row(**kw):
    r = {"model": "llada", "decoding": {"schedule": "block", "block_length": 32, "steps": 0,
                                        "remasking": "low_confidence"},
         "policy": "none", "params": {}, "tasks": 4, "gen_length": 192, "batch": 1,
         "accuracy": 0.75, "tokens_per_s": 1234.5, "speedup_vs_baseline": 2.5,
         "steps_per_token": 0.0581, "rows_per_step": 548.2, "full_step_ratio": 1.0,
         "full_time_frac": 1.0, "ms_per_full_step": 46.1, "ms_per_partial_step": 0.0,
         "decision_overhead_frac": 0.00002}
    r.update(kw)
    return r


class BenchTableTest(unittest.TestCase):
    def test_setting_names(self):
        self.assertEqual(bench_table.setting_name(row(baseline="vanilla")), "vanilla (baseline)")
        self.assertEqual(bench_table.setting_name(row()), "block 32, none")
        r = row(decoding={"schedule": "window", "window": 32, "threshold": 0.9, "steps": 0},
                policy="entropy", params={"k": 32, "tau": 0.5})
        self.assertEqual(bench_table.setting_name(r),
                         "window 32 + threshold 0.9, entropy tau=0.5 k=32")
        r = row(decoding={"schedule": "timestep", "steps": 64, "eps": 0.001}, policy="interval",
                params={"n": 8, "k": 16})
        self.assertEqual(bench_table.setting_name(r), "timestep + 64 steps, interval k=16 n=8")
        r["logprobs"] = 5
        self.assertEqual(bench_table.setting_name(r),
                         "timestep + 64 steps, interval k=16 n=8, logprobs=5")
        r["infill"] = "middle"
        self.assertEqual(bench_table.setting_name(r),
                         "timestep + 64 steps, interval k=16 n=8, logprobs=5, infill middle")

    def test_table_cells_and_rejected_rows(self):
        rows = [row(baseline="vanilla", speedup_vs_baseline=1.0,
                    accuracy_by_family={"sub": 0.5, "add": 1.0}),
                row(policy="dual", full_step_ratio=0.25, full_time_frac=0.61,
                    vs_baseline={"tasks": 4, "changed": 2, "gained": 1, "lost": 0,
                                 "accuracy_diff": 0.25, "accuracy_diff_se": 0.25},
                    dynamics={"tokens_per_forward": 3.714, "mean_token_entropy": 0.1254,
                              "step_max_entropy": {"frac_above_0.5": 0.125}}),
                row(decoding={"schedule": "window", "window": 32, "steps": 0},
                    policy="dual", error="INVALID_ARGUMENT: dual needs block")]
        lines = bench_table.table(rows)
        self.assertEqual(lines[0].count("|"), len(bench_table.COLUMNS) + 1)
        # The baseline row predates the dynamics columns: "-" there.
        # ... and the cost columns: "-" for rows without CPU time.
        self.assertEqual(lines[2], "| vanilla (baseline) | 0.750 (add 1.00, sub 0.50) | "
                         "1,234.5 | - | 1.00 | - | - | - | - | - | 0.058 | - | - | - | 548 | "
                         "1.00 | 1.00 | 46.10 | 0.00 | 0.002% |")
        self.assertIn("| block 32, dual | 0.750 | 1,234.5 | - | 2.50 | - | - | - | - | "
                      "2 (+1/-0; +25.0±25.0 pt) | 0.058 | 3.71 | 0.125 | 0.12 |", lines[3])
        self.assertIn("| 0.25 | 0.61 |", lines[3])
        self.assertEqual(len([ln for ln in lines if ln.startswith("| ")]), 3)  # header + 2
        self.assertIn("rejected: window + dual: INVALID_ARGUMENT: dual needs block",
                      "\n".join(lines))

    def test_paper_layout(self):
        rows = [row(baseline="vanilla", speedup_vs_baseline=1.0),
                row(decoding={"schedule": "block", "block_length": 32, "threshold": 0.9},
                    policy="entropy", params={"tau": 1.5, "k": 32}, full_step_ratio=0.25,
                    decision_overhead_frac=0.0003,
                    vs_baseline={"tasks": 4, "changed": 3, "gained": 0, "lost": 1,
                                 "accuracy_diff": -0.25, "accuracy_diff_se": 0.25}),
                row(decoding={"schedule": "window", "window": 16, "threshold": 0.9},
                    policy="d2cache", params={"current_k": 32}, decision_overhead_frac=0.39)]
        lines = bench_table.table(rows, bench_table.PAPER_COLUMNS)
        self.assertEqual(lines[2], "| none | vanilla | 0.750 | 1,234.5 | - | 1.00x | - | - | "
                         "1.00 / 0.00 | 548 | 0.002% | - |")
        self.assertEqual(lines[3], "| entropy tau=1.5 k=32 | block 32 + thr 0.9 | 0.750 | "
                         "1,234.5 | - | 2.50x | 3 (+0/-1; -25.0±25.0 pt) | - | 0.25 / 0.75 | "
                         "548 | 0.030% | 0.5% |")
        self.assertEqual(lines[4], "| d2cache | window 16 + thr 0.9 | 0.750 | 1,234.5 | - | "
                         "2.50x | - | - | 1.00 / 0.00 | 548 | 39.000% | 9.2% |")

    def test_cost_columns_and_wall_cpu_flag(self):
        """CPU-time speed-up and per-token costs from the row; wall/CPU flagged when more than
        10% off the run's median (1.025 here: the third row's 1.2 is flagged, 1.05 and 1.0 are
        not)."""
        costs = dict(cpu_s_per_token=0.0123, rows_per_token=38.25, macs_per_token=153486113)
        rows = [row(baseline="vanilla", speedup_vs_baseline_cpu=1.0, wall_s=10.0, cpu_s=10.0,
                    **costs),
                row(policy="dual", speedup_vs_baseline_cpu=3.456, wall_s=10.5, cpu_s=10.0,
                    **costs),
                row(policy="entropy", speedup_vs_baseline_cpu=7.0, wall_s=12.0, cpu_s=10.0,
                    **costs),
                row(policy="elastic", speedup_vs_baseline_cpu=2.0, wall_s=1.0, cpu_s=1.0)]
        lines = bench_table.table(rows)
        self.assertIn("| 1,234.5 | 3.46 | 2.50 | 12.30 | 38.2 | 0.153 | 1.05 | ", lines[3])
        self.assertIn("| 1,234.5 | 7.00 | 2.50 | 12.30 | 38.2 | 0.153 | 1.20 ! | ", lines[4])
        self.assertIn("| 2.00 | 2.50 | - | - | - | 1.00 | ", lines[5])
        self.assertIn("! wall/CPU more than 10% off", "\n".join(lines))
        paper = bench_table.table(rows, bench_table.PAPER_COLUMNS)
        self.assertIn("| 1,234.5 | 7.00x | 2.50x | - | 38.2 |", paper[4])

    def test_paper_layout_names_changed_defaults(self):
        """d2Cache and Elastic-Cache rows name the parameters that differ from the published
        defaults (scripts/bench-paper-tuned), and only those."""
        d2 = {"current_k": 32, "rollout_p": 0.1, "sigma": 10.0}
        self.assertEqual(bench_table.method_name(row(policy="d2cache", params=d2)), "d2cache")
        self.assertEqual(bench_table.method_name(
            row(policy="d2cache", params=dict(d2, rollout_p=0.05))), "d2cache rollout_p=0.05")
        self.assertEqual(bench_table.method_name(
            row(policy="d2cache", params=dict(d2, current_k=16, sigma=5))),
            "d2cache current_k=16 sigma=5")
        self.assertEqual(bench_table.method_name(row(policy="elastic", params={"gamma": 0.9})),
                         "elastic")
        self.assertEqual(bench_table.method_name(row(policy="elastic", params={"gamma": 0.95})),
                         "elastic gamma=0.95")
        # EntropyCache by tau and k; tau = +inf is written "inf" in the rows (JSON).
        self.assertEqual(bench_table.method_name(
            row(policy="entropy", params={"tau": 2.0, "k": 16})), "entropy tau=2 k=16")
        self.assertEqual(bench_table.method_name(
            row(policy="entropy", params={"tau": "inf", "k": 0})), "entropy tau=inf k=0")

    def test_shadow_layout(self):
        rows = [row(autotune="0.02", policy="entropy", params={"tau": 1.0, "k": 32},
                    speedup_vs_none=4.2,
                    full_step_ratio=0.13,
                    shadow={"samples": 480, "mismatch_rate": 0.0417,
                            "token_mismatch_rate": 0.0083, "mean_kl": 0.01234,
                            "tau_scale": 0.5, "time_fraction": 0.021}),
                row()]
        lines = bench_table.table(rows, bench_table.SHADOW_COLUMNS)
        self.assertEqual(lines[2], "| 0.02 | block 32, entropy tau=1 k=32 | 0.750 | 1,234.5 | "
                         "4.20 | 0.13 | 480 | 0.042 | 0.008 | 0.0123 | 0.500 | 0.021 |")
        self.assertEqual(lines[3], "| - | block 32, none | 0.750 | 1,234.5 | 1.00 | 1.00 | - | "
                         "- | - | - | - | - |")

    def test_compare_runs_side_by_side(self):
        thr = {"schedule": "block", "block_length": 32, "threshold": 0.9}
        paired = {"tasks": 4, "changed": 1, "gained": 0, "lost": 0, "accuracy_diff": 0.0,
                  "accuracy_diff_se": 0.0}
        a = [row(baseline="vanilla", speedup_vs_baseline=1.0),
             row(decoding=thr, policy="dual", vs_baseline=paired),
             row(decoding=thr, policy="entropy", params={"tau": 0.5, "k": 32}, accuracy=0.5),
             # The sweep re-runs a listed setting: shown once, as first measured.
             row(decoding=thr, policy="entropy", params={"tau": 0.5, "k": 32}, accuracy=0.25),
             row(decoding={"schedule": "window", "window": 32}, policy="none"),
             row(policy="dual", error="rejected")]
        b = [row(baseline="vanilla", speedup_vs_baseline=1.0, tasks=2),
             row(decoding=thr, policy="dual", tokens_per_s=99.0, speedup_vs_baseline=8.0,
                 speedup_vs_baseline_cpu=3.1)]
        lines = bench_table.compare([("m1", a), ("m2", b)])
        self.assertEqual(lines[0], "| setting | m1 accuracy | tok/s | speed-up | answers changed "
                         "| m2 accuracy | tok/s | speed-up | answers changed |")
        # Rows without CPU time show the wall-time speed-up, marked as such.
        self.assertEqual(lines[2], "| vanilla (baseline) | 0.750 | 1,234.5 | 1.00x (wall) | - | "
                         "0.750 | 1,234.5 | 1.00x (wall) | - |")
        self.assertEqual(lines[3], "| block 32 + threshold 0.9, dual | 0.750 | 1,234.5 | "
                         "2.50x (wall) | 1 (+0/-0; +0.0±0.0 pt) | 0.750 | 99.0 | 3.10x | - |")
        self.assertEqual(lines[4], "| block 32 + threshold 0.9, entropy tau=0.5 k=32 | 0.500 | "
                         "1,234.5 | 2.50x (wall) | - | - | - | - | - |")
        self.assertEqual(len([ln for ln in lines if ln.startswith("| ")]), 4)  # no window row
        self.assertEqual(lines[-1], "\nm1: 4 tasks; m2: 2 tasks")

    def test_command_line_errors(self):
        def run(text):
            return subprocess.run([sys.executable, SCRIPT], input=text, capture_output=True,
                                  text=True)
        ok = run(json.dumps(row(baseline="vanilla")) + "\n\n")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("| vanilla (baseline) |", ok.stdout)
        bad = run("{not json\n")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("line 1: not JSON", bad.stderr)
        self.assertIn("no rows", run("").stderr)
        self.assertIn("lacks 'schedule'", run('{"policy": "none", "decoding": {}}\n').stderr)
        paper = subprocess.run([sys.executable, SCRIPT, "--layout", "paper"],
                               input=json.dumps(row(baseline="vanilla")), capture_output=True,
                               text=True)
        self.assertEqual(paper.returncode, 0, paper.stderr)
        self.assertIn("| none | vanilla |", paper.stdout)
        bad = subprocess.run([sys.executable, SCRIPT, "--layout", "wide"], input="",
                             capture_output=True, text=True)
        self.assertIn("unknown layout 'wide'", bad.stderr)
        missing = subprocess.run([sys.executable, SCRIPT, "--compare", "/nonexistent.jsonl"],
                                 capture_output=True, text=True)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("cannot read /nonexistent.jsonl", missing.stderr)


if __name__ == "__main__":
    unittest_exit.main()  # a skip exits 77: ctest shows it
