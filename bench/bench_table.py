#!/usr/bin/env python3
"""Markdown table of dllm-bench JSON rows (one per setting, as `scripts/bench-long` writes
them), so that the README's benchmark table is the output of one command.

Columns: the setting (decoding, then cache policy and its parameters), accuracy (and per
family when the tasks carry one), tokens/s, speed-up against the run's baseline in CPU time
(process CPU seconds per answer token: what a shared machine does not distort) and in wall
time, the costs per answer token (CPU ms, rows computed, multiply-adds) and wall/CPU, flagged
with "!" when it is more than 10% off the run's median (that setting shared its cores more or
less than the others: trust its CPU figures, not its wall ones), the answers
that changed against the baseline's (paired: gained and lost correct answers, the accuracy
difference and its standard error), steps per generated token, tokens per forward, the mean
committed-token entropy and the share of steps whose max committed entropy exceeds 0.5 nats
(the decoding dynamics; "-" for rows written before dllm-bench reported them), rows per step,
full-step ratio, the share of step time spent in full steps, ms per full / partial step and
the cache decision's share of wall time. Rows
that dllm-bench reports as rejected (an "error" field) are listed under the table with their
error.

`--layout paper` prints the paper's comparison instead (docs/paper-comparison.md): method,
decoding, accuracy, tokens/s, speed-up against vanilla in CPU time and in wall time, rows per
answer token, full / partial step split, rows per step, decision overhead, and the overhead
the paper reports for the method (EntropyCache 0.5%, d2Cache 9.2%, Elastic-Cache 14.5%) beside
ours.

`--layout shadow` prints the shadow checks of a `--shadow` run (scripts/bench-autotune): the
autotuner's budget (the "autotune" field scripts/bench-autotune adds; "fixed" for none), the
setting, accuracy, tokens/s, speed-up against `none`, full-step ratio, shadow samples, the
decision- and token-mismatch rates (the autotuner steers by the second), mean
KL(full || partial), the autotuner's final tau scale and the shadow's share of the time.

`--compare A.jsonl B.jsonl ...` prints the README's side-by-side table of several models'
runs (scripts/bench-long): one line per block-decoding setting (and the baseline) in the
first file's order, a repeated setting (the tau sweep re-runs a listed one) shown once, and
per model its accuracy, tokens/s, speed-up against its own baseline and the paired answer
changes; the speed-up is in CPU time where the rows carry it. Compare tokens/s across models
only when the runs shared a machine.

Usage: bench/bench_table.py [--layout default|paper|shadow] ROWS.jsonl   (or rows on stdin)
       bench/bench_table.py --compare ROWS.jsonl ROWS.jsonl ...
"""
import json
import os
import sys


def decoding_label(d, threshold_word="threshold", steps=True):
    """A row's "decoding" object as e.g. `window 32 + threshold 0.9` or `timestep + 64 steps`
    (the step count only with `steps`, and only when there is no threshold)."""
    label = d["schedule"] + "".join(f" {d[k]}" for k in ("block_length", "window") if k in d)
    if "threshold" in d:
        label += f" + {threshold_word} {d['threshold']:g}"
    elif steps and d.get("steps"):
        label += f" + {d['steps']} steps"
    return label


def setting_name(row):
    """`vanilla` for the baseline row, else e.g. `window 32 + threshold 0.9, entropy tau=0.5
    k=32`."""
    if "baseline" in row:
        return f"{row['baseline']} (baseline)"
    policy = row["policy"]
    p = row.get("params", {})
    order = [k for k in ("tau", "k", "n") if k in p] + sorted(set(p) - {"tau", "k", "n"})
    params = " ".join(f"{k}={p[k]:g}" if isinstance(p[k], (int, float)) else f"{k}={p[k]}"
                      for k in order)
    logprobs = f", logprobs={row['logprobs']}" if "logprobs" in row else ""
    infill = f", infill {row['infill']}" if "infill" in row else ""
    return (decoding_label(row["decoding"]) + f", {policy}" + (f" {params}" if params else "")
            + logprobs + infill)


def accuracy_cell(row):
    cell = f"{row['accuracy']:.3f}"
    fam = row.get("accuracy_by_family")
    if fam:
        cell += " (" + ", ".join(f"{k} {v:.2f}" for k, v in sorted(fam.items())) + ")"
    return cell


def dynamics(key, fmt, sub=None):
    """A cell of the row's "dynamics" object (or of its `sub` object), "-" when absent."""
    def cell(row):
        d = row.get("dynamics", {})
        if sub is not None:
            d = d.get(sub, {})
        return fmt.format(d[key]) if key in d else "-"
    return cell


def paired_cell(row):
    """Answers that differ from the baseline's, with gained and lost correct ones, and the
    accuracy difference +- its paired standard error; "-" for the baseline row itself and rows
    written before dllm-bench reported the comparison."""
    p = row.get("vs_baseline")
    if not p:
        return "-"
    return (f"{p['changed']} (+{p['gained']}/-{p['lost']}; "
            f"{100 * p['accuracy_diff']:+.1f}±{100 * p['accuracy_diff_se']:.1f} pt)")


def cpu_speedup(row, suffix=""):
    """The CPU-time speed-up against the baseline; "-" for rows written before dllm-bench
    measured CPU time."""
    v = row.get("speedup_vs_baseline_cpu")
    return f"{v:.2f}{suffix}" if v is not None else "-"


def cost(key, fmt, scale=1.0):
    """A per-token cost cell, "-" for rows written before dllm-bench reported it."""
    return lambda r: fmt.format(r[key] * scale) if key in r else "-"


def wall_cpu_cell(row):
    """wall_s / cpu_s, with "!" when table() found it more than 10% off the run's median."""
    if not row.get("cpu_s"):
        return "-"
    return f"{row['wall_s'] / row['cpu_s']:.2f}" + (" !" if row.get("_wall_cpu_off") else "")


def flag_wall_cpu(rows):
    """Marks (`_wall_cpu_off`) the rows whose wall/CPU ratio is more than 10% off the median of
    the rows that have one."""
    ratios = sorted(r["wall_s"] / r["cpu_s"] for r in rows if r.get("cpu_s"))
    if not ratios:
        return
    median = ratios[len(ratios) // 2] if len(ratios) % 2 else \
        (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
    for r in rows:
        if r.get("cpu_s"):
            r["_wall_cpu_off"] = abs(r["wall_s"] / r["cpu_s"] / median - 1) > 0.10


COLUMNS = [
    ("setting", setting_name),
    ("accuracy", accuracy_cell),
    ("tok/s", lambda r: f"{r['tokens_per_s']:,.1f}"),
    ("speed-up vs baseline (CPU)", cpu_speedup),
    ("speed-up (wall)", lambda r: f"{r['speedup_vs_baseline']:.2f}"),
    ("CPU ms/token", cost("cpu_s_per_token", "{:.2f}", 1e3)),
    ("rows/token", cost("rows_per_token", "{:.1f}")),
    ("GMACs/token", cost("macs_per_token", "{:.3f}", 1e-9)),
    ("wall/CPU", wall_cpu_cell),
    ("answers changed (+gained/-lost)", paired_cell),
    ("steps/token", lambda r: f"{r['steps_per_token']:.3f}"),
    ("tok/forward", dynamics("tokens_per_forward", "{:.2f}")),
    ("mean entropy", dynamics("mean_token_entropy", "{:.3f}")),
    ("steps E>0.5", dynamics("frac_above_0.5", "{:.2f}", "step_max_entropy")),
    ("rows/step", lambda r: f"{r['rows_per_step']:.0f}"),
    ("full-step ratio", lambda r: f"{r['full_step_ratio']:.2f}"),
    ("full-step time share", lambda r: f"{r['full_time_frac']:.2f}"),
    ("ms/full step", lambda r: f"{r['ms_per_full_step']:.2f}"),
    ("ms/partial step", lambda r: f"{r['ms_per_partial_step']:.2f}"),
    ("decision overhead", lambda r: f"{100 * r['decision_overhead_frac']:.3f}%"),
]


# The decision overheads the EntropyCache paper reports (share of inference time).
PAPER_OVERHEAD = {"entropy": "0.5%", "d2cache": "9.2%", "elastic": "14.5%"}


def decoding_name(row):
    """`vanilla` for the paper's baseline, else e.g. `block 32 + thr 0.9`."""
    if "baseline" in row:
        return row["baseline"]
    return decoding_label(row["decoding"], "thr", steps=False)


# The published defaults of the methods the paper compares against (d2cache_policy.h,
# elastic_policy.h): the paper layout names a d2Cache or Elastic-Cache row by the parameters
# it changes (scripts/bench-paper-tuned), so that rows at the defaults read as the method.
PUBLISHED_DEFAULTS = {"d2cache": {"current_k": 32, "rollout_p": 0.1, "sigma": 10},
                      "elastic": {"gamma": 0.9}}


def method_name(row):
    p = row.get("params", {})
    policy = row["policy"]
    if policy == "entropy" and p:
        # tau may be "inf" (JSON has no infinity): printed as given.
        tau = p.get("tau", 0)
        return f"entropy tau={tau:g} k={p.get('k', 0):g}" if isinstance(tau, (int, float)) \
            else f"entropy tau={tau} k={p.get('k', 0):g}"
    defaults = PUBLISHED_DEFAULTS.get(policy, {})
    changed = [f"{k}={p[k]:g}" for k in sorted(defaults) if k in p and p[k] != defaults[k]]
    return " ".join([policy] + changed)


PAPER_COLUMNS = [
    ("method", method_name),
    ("decoding", decoding_name),
    ("accuracy", lambda r: f"{r['accuracy']:.3f}"),
    ("tok/s", lambda r: f"{r['tokens_per_s']:,.1f}"),
    ("speed-up vs vanilla (CPU)", lambda r: cpu_speedup(r, "x")),
    ("speed-up (wall)", lambda r: f"{r['speedup_vs_baseline']:.2f}x"),
    ("answers changed (+gained/-lost)", paired_cell),
    ("rows/token", cost("rows_per_token", "{:.1f}")),
    ("full / partial steps",
     lambda r: f"{r['full_step_ratio']:.2f} / {1 - r['full_step_ratio']:.2f}"),
    ("rows/step", lambda r: f"{r['rows_per_step']:.0f}"),
    ("decision overhead", lambda r: f"{100 * r['decision_overhead_frac']:.3f}%"),
    ("paper's overhead", lambda r: PAPER_OVERHEAD.get(r["policy"], "-")),
]


def shadow(key, fmt):
    """A cell of the row's "shadow" object, "-" when the row has none."""
    def cell(row):
        q = row.get("shadow", {})
        return fmt.format(q[key]) if key in q else "-"
    return cell


SHADOW_COLUMNS = [
    ("autotune budget", lambda r: str(r.get("autotune", "-"))),
    ("setting", setting_name),
    ("accuracy", lambda r: f"{r['accuracy']:.3f}"),
    ("tok/s", lambda r: f"{r['tokens_per_s']:,.1f}"),
    ("speed-up vs none", lambda r: f"{r.get('speedup_vs_none', 1.0):.2f}"),
    ("full-step ratio", lambda r: f"{r['full_step_ratio']:.2f}"),
    ("shadow samples", shadow("samples", "{}")),
    ("decision mismatch rate", shadow("mismatch_rate", "{:.3f}")),
    ("token mismatch rate", shadow("token_mismatch_rate", "{:.3f}")),
    ("mean KL", shadow("mean_kl", "{:.4f}")),
    ("final tau scale", shadow("tau_scale", "{:.3f}")),
    ("shadow time share", shadow("time_fraction", "{:.3f}")),
]

LAYOUTS = {"default": COLUMNS, "paper": PAPER_COLUMNS, "shadow": SHADOW_COLUMNS}


def table(rows, columns=None):
    """The markdown lines for `rows` (parsed JSON objects, in run order)."""
    columns = columns or COLUMNS
    ok = [r for r in rows if "error" not in r]
    flag_wall_cpu(ok)
    out = ["| " + " | ".join(name for name, _ in columns) + " |",
           "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(cell(r) for _, cell in columns) + " |" for r in ok]
    for r in rows:
        if "error" in r:
            out.append(f"\nrejected: {r['decoding']['schedule']} + {r['policy']}: {r['error']}")
    if ok:
        r = ok[0]
        out.append(f"\n{r['tasks']} tasks, model {r['model']}, gen_length {r['gen_length']}, "
                   f"batch {r['batch']}")
        if any(x.get("_wall_cpu_off") for x in ok):
            out.append("\n! wall/CPU more than 10% off the run's median: that setting's wall "
                       "time is distorted by other work on the machine; compare its CPU figures.")
    return out


def compare(runs):
    """The markdown lines comparing `runs` [(label, rows)] setting by setting."""
    def block_rows(rows):
        out = {}
        for r in rows:
            if "error" in r or ("baseline" not in r and r["decoding"]["schedule"] != "block"):
                continue
            out.setdefault(setting_name(r), r)
        return out
    tables = [(label, block_rows(rows)) for label, rows in runs]
    head = ["setting"]
    for label, _ in tables:
        head += [f"{label} accuracy", "tok/s", "speed-up", "answers changed"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in tables[0][1]:
        cells = [name]
        for _, t in tables:
            r = t.get(name)
            if not r:
                cells += ["-"] * 4
                continue
            speedup = cpu_speedup(r, "x") if "speedup_vs_baseline_cpu" in r else \
                f"{r['speedup_vs_baseline']:.2f}x (wall)"
            cells += [f"{r['accuracy']:.3f}", f"{r['tokens_per_s']:,.1f}", speedup,
                      paired_cell(r)]
        out.append("| " + " | ".join(cells) + " |")
    notes = [f"{label}: {next(iter(t.values()))['tasks']} tasks" for label, t in tables if t]
    out.append("\n" + "; ".join(notes))
    return out


def read_rows(src, what):
    rows = []
    for n, line in enumerate(src, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            sys.exit(f"bench_table: {what} line {n}: not JSON ({e})")
    if not rows:
        sys.exit(f"bench_table: no rows in {what}")
    return rows


def open_rows(path):
    try:
        return open(path, encoding="utf-8")
    except OSError as e:
        sys.exit(f"bench_table: cannot read {path}: {e.strerror}")


def main():
    args = sys.argv[1:]
    if args[:1] == ["--compare"]:
        if len(args) < 2:
            sys.exit("bench_table: --compare needs at least one ROWS.jsonl")
        runs = []
        for path in args[1:]:
            label = os.path.basename(path).removesuffix(".jsonl")
            runs.append((label.removeprefix("bench-long-"), read_rows(open_rows(path), path)))
        try:
            print("\n".join(compare(runs)))
        except KeyError as e:
            sys.exit(f"bench_table: a row lacks {e} (not dllm-bench output?)")
        return
    columns = COLUMNS
    if args[:1] == ["--layout"] or (args and args[0].startswith("--layout=")):
        layout = args[1] if args[0] == "--layout" and len(args) > 1 else args[0][9:]
        args = args[2:] if args[0] == "--layout" else args[1:]
        if layout not in LAYOUTS:
            sys.exit(f"bench_table: unknown layout '{layout}' ({', '.join(LAYOUTS)})")
        columns = LAYOUTS[layout]
    src = open_rows(args[0]) if args else sys.stdin
    rows = read_rows(src, args[0] if args else "stdin")
    try:
        print("\n".join(table(rows, columns)))
    except KeyError as e:
        sys.exit(f"bench_table: a row lacks {e} (not dllm-bench output?)")


if __name__ == "__main__":
    main()
