#!/usr/bin/env python3
"""The tau sweep report: accuracy, speed-up, decision mismatch and K/V drift of
EntropyCache against its threshold tau, per model.

For every model, dllm-bench runs the same prompts twice at every tau:
  timing   no shadows, so tokens/s and speed-ups are clean (speed-up against `none` with the
           same decoding and against the paper's vanilla baseline, both in the same run);
  quality  --shadow 1: every partial step is checked against a full forward of the same
           canvas (decision mismatch rate, mean KL(full || partial), mean K/V drift by region).
Greedy decoding, so both runs decode the same tokens; only the timings differ.

Writes OUT/<model>.csv (one row per tau), OUT/tau-sweep.png (accuracy, speed-up, mismatch and
drift against tau, both models) and prints the markdown tables of docs/tau-sweep.md.

Usage: tools/tau_sweep/run.py [--bin-dir build/bin] [--out docs/results/tau-sweep] [--limit 300]
                              [--model NAME=DIR[,TASKS]]...
Needs gnuplot for the PNG.
"""

import argparse
import csv
import math
import os
import subprocess
import sys

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHORT_TASKS = os.path.join(SOURCE_DIR, "tools", "tasks", "data", "test.jsonl")
DEFAULT_MODELS = [
    ("llada-tiny", os.path.join(SOURCE_DIR, "models", "llada-tiny"), SHORT_TASKS),
    ("dream-tiny", os.path.join(SOURCE_DIR, "models", "dream-tiny"), SHORT_TASKS),
]
# Committed-token entropies of these models span decades (median ~1e-6 nats), so the grid is
# logarithmic; 0 refreshes after every step, inf never refreshes after the first.
TAUS = ["0", "1e-6", "1e-5", "1e-4", "1e-3", "1e-2", "0.1", "0.3", "1", "inf"]
RECENT_K = 2  # below the answer length, so "decoded tokens older than k" exists
QUALITY = ["shadow_samples", "mismatch_rate", "mean_kl", "drift_prompt", "drift_decoded_old",
           "drift_masks_outside", "drift_recomputed"]


def run_bench(bin_dir, model_dir, tasks, limit, prefix, shadow):
    cmd = [os.path.join(bin_dir, "dllm-bench"), "--model", model_dir, "--tasks", tasks,
           "--limit", str(limit), "--threads", "1",
           "--policy", "entropy:tau=0.5,k=%d" % RECENT_K,  # sets the sweep's k
           "--sweep", "tau=" + ",".join(TAUS), "--sweep-out", prefix]
    if shadow:
        cmd += ["--shadow", "1"]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit("tau sweep: %s failed:\n%s" % (" ".join(cmd), r.stderr))
    with open(prefix + ".csv") as f:
        rows = list(csv.DictReader(f))
    for suffix in (".csv", ".png", ".gp"):
        if os.path.exists(prefix + suffix):
            os.remove(prefix + suffix)
    return rows


def merge(timing, quality):
    """One row per tau: speed from the timing run, cache quality from the shadowed run."""
    rows = []
    for t, q in zip(timing, quality):
        if t["tau"] != q["tau"] or t["accuracy"] != q["accuracy"]:
            raise SystemExit("tau sweep: timing and shadow runs disagree at tau=%s "
                             "(accuracy %s vs %s): decoding is not deterministic" %
                             (t["tau"], t["accuracy"], q["accuracy"]))
        row = {k: t[k] for k in ("tau", "k", "accuracy", "tokens_per_s", "speedup_vs_none",
                                 "speedup_vs_baseline", "full_step_ratio", "rows_per_step")}
        row.update({k: q[k] for k in QUALITY})
        rows.append(row)
    return rows


def fmt(value, digits=3):
    if value == "":
        return "–"
    v = float(value)
    if v == 0 or math.isinf(v):
        return value
    return ("%." + str(digits) + "g") % v


def plot_x(tau):
    """Log-axis position: tau = 0 at 1e-8, inf at 10 (marked in the caption)."""
    v = float(tau)
    return 1e-8 if v == 0 else (10.0 if math.isinf(v) else v)


def write_plot(out_dir, names):
    script = ["set terminal pngcairo size 1200,900 noenhanced",
              "set output '%s'" % os.path.join(out_dir, "tau-sweep.png"),
              "set datafile separator ','", "set multiplot layout 2,2",
              "set logscale x", "set format x '%.0e'", "set key bottom left",
              "set xlabel 'tau (nats; 0 drawn at 1e-8, inf at 10)'"]
    panels = [("accuracy (exact match)", 2, ""), ("speed-up vs no cache (same decoding)", 3, ""),
              ("decision mismatch rate (shadowed partial steps)", 4, ""),
              ("K/V drift of the prompt (rel. L2, mean)", 5, "set logscale y")]
    for title, col, extra in panels:
        script += ["unset logscale y", extra, "set title '%s'" % title,
                   "plot " + ", ".join("'%s' using 1:%d with linespoints pt 7 title '%s'" %
                                       (os.path.join(out_dir, n + ".dat"), col, n)
                                       for n in names)]
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=os.path.join(SOURCE_DIR, "build", "bin"))
    parser.add_argument("--out", default=os.path.join(SOURCE_DIR, "docs", "results", "tau-sweep"))
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--model", action="append", default=[],
                        help="NAME=DIR[,TASKS] (default: the two tiny models)")
    args = parser.parse_args()
    models = []
    for spec in args.model:
        name, _, rest = spec.partition("=")
        model_dir, _, tasks = rest.partition(",")
        models.append((name, model_dir, tasks or SHORT_TASKS))
    models = models or DEFAULT_MODELS
    os.makedirs(args.out, exist_ok=True)

    print("| model | tau | accuracy | speed-up vs none | speed-up vs vanilla | full-step ratio "
          "| rows/step | mismatch rate | mean KL | drift: prompt | drift: decoded > k |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, model_dir, tasks in models:
        prefix = os.path.join(args.out, name)
        timing = run_bench(args.bin_dir, model_dir, tasks, args.limit, prefix + "-timing", False)
        quality = run_bench(args.bin_dir, model_dir, tasks, args.limit, prefix + "-shadow", True)
        rows = merge(timing, quality)
        with open(prefix + ".csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        # gnuplot input: x, accuracy, speed-up, mismatch, drift
        with open(prefix + ".dat", "w") as f:
            for r in rows:
                f.write("%g,%s,%s,%s,%s\n" % (plot_x(r["tau"]), r["accuracy"],
                                              r["speedup_vs_none"], r["mismatch_rate"] or "0",
                                              r["drift_prompt"] or "NaN"))
        for r in rows:
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, r["tau"], fmt(r["accuracy"]), fmt(r["speedup_vs_none"]),
                fmt(r["speedup_vs_baseline"]), fmt(r["full_step_ratio"]),
                fmt(r["rows_per_step"]), fmt(r["mismatch_rate"]), fmt(r["mean_kl"]),
                fmt(r["drift_prompt"]), fmt(r["drift_decoded_old"])))
        sys.stdout.flush()
    write_plot(args.out, [m[0] for m in models])
    for name, _, _ in models:
        os.remove(os.path.join(args.out, name + ".dat"))
    print("\nwrote %s/<model>.csv and %s/tau-sweep.png" % (args.out, args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
