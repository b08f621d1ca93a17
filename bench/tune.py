#!/usr/bin/env python3
"""One tuning protocol for every cache method: search on the val split, report on test.

Every method gets the same budget, BUDGET settings of its own knobs, fixed here before any run
(GRID): EntropyCache its threshold tau, recent k, schedule (block 32, window 16, window 32) and
decoding threshold (and our variants their own BUDGET each: entropy-min with the recent
tokens' entropy floor, entropy-end without the recent end tokens); the Fast-dLLM prefix and
dual caches their threshold and block; d2Cache rollout_p and current_k; Elastic-Cache gamma
and beta (its sliding window's width). Each setting runs on the val split (one thread, batch 1)
against vanilla on the same items, paired.

  val    MODEL_DIR   runs vanilla on val once (stored with dllm-bench --answers-out), then every
                     GRID setting against it (--baseline-from); resumable within one session
                     (the same boot): settings already in the val rows are not run again, and
                     rows from another session (or a vanilla stored without its session) stop
                     the run, since CPU time does not compare across sessions.
  test   MODEL_DIR   runs vanilla on all test items once (stored), then each method's chosen
                     front points (below) against it.
  report MODEL_DIR   prints the markdown: each method's val front, the test rows and the goal
                     figures (docs/results/tune-<model>.md is this output).
  defaults MODEL_DIR prints the point the family's defaults take (default_point) as JSON:
                     {"decoding": SPEC, "policy": SPEC} (tests/e2e checks the served defaults).

For each method, the val front is the Pareto front of paired accuracy against CPU-time speed-up
over vanilla (dllm-bench's speedup_vs_baseline_cpu: CPU seconds per answer token, which a
shared machine does not distort as it does wall time). Of a front, test measures at most
TEST_POINTS: the first of the fastest point within 1 point of vanilla on val, the most accurate
point and the fastest point, without repeats. Test items are never seen by the search.

Files (docs/results/): tune-<model>-val.jsonl and tune-<model>-test.jsonl (dllm-bench rows, each
with a "tune" object naming its method and specs), tune-<model>-vanilla-{val,test}.answers.jsonl
(the stored baselines).

Usage: bench/tune.py val|test|report|defaults MODEL_DIR [--bench PATH] [--limit N] [--out DIR]
                                            [--methods M1,M2,...]
                                            [--vanilla-from DIR [--vanilla-sample N]]
"""
import argparse
import json
import os
import subprocess
import sys

BUDGET = 6
TEST_POINTS = 2
# Paired accuracy difference, in accuracy units, that counts as "within 1 point of vanilla".
WITHIN = -0.01

BLOCK = "block:block_length=32,threshold=0.9"

# method -> BUDGET (decoding spec, policy spec) pairs, chosen before any run.
GRID = {
    "entropy": [
        (BLOCK, "entropy:tau=1,k=32"),
        (BLOCK, "entropy:tau=1,k=16"),
        (BLOCK, "entropy:tau=2,k=16"),
        ("block:block_length=32,threshold=0.8", "entropy:tau=1,k=32"),
        ("window:w=16,threshold=0.9", "entropy:tau=1,k=16"),
        ("window:w=32,threshold=0.9", "entropy:tau=1,k=32"),
    ],
    # Our variant (docs/method.md): the same partial step, but of the recent tokens committed
    # before the last step only those committed with entropy >= min_entropy (nats).
    "entropy-min": [
        (BLOCK, "entropy:tau=1,k=32,min_entropy=0.05"),
        (BLOCK, "entropy:tau=1,k=32,min_entropy=0.3"),
        (BLOCK, "entropy:tau=1,k=32,min_entropy=inf"),
        (BLOCK, "entropy:tau=2,k=32,min_entropy=0.3"),
        ("window:w=16,threshold=0.9", "entropy:tau=1,k=16,min_entropy=0.3"),
        ("window:w=32,threshold=0.9", "entropy:tau=1,k=32,min_entropy=0.3"),
    ],
    # A second variant (docs/method.md): of the recent tokens committed before the last step,
    # no end tokens (the end padding, which drifts least: docs/entropy-drift.md).
    "entropy-end": [
        (BLOCK, "entropy:tau=1,k=32,max_end=0"),
        (BLOCK, "entropy:tau=1,k=16,max_end=0"),
        (BLOCK, "entropy:tau=2,k=16,max_end=0"),
        ("window:w=16,threshold=0.9", "entropy:tau=1,k=16,max_end=0"),
        ("window:w=16,threshold=0.9", "entropy:tau=1,k=32,max_end=0"),
        ("window:w=16,threshold=0.9", "entropy:tau=2,k=16,max_end=0"),
    ],
    "dual": [
        (BLOCK, "dual"),
        ("block:block_length=16,threshold=0.9", "dual"),
        ("block:block_length=64,threshold=0.9", "dual"),
        ("block:block_length=32,threshold=0.7", "dual"),
        ("block:block_length=32,threshold=0.8", "dual"),
        ("block:block_length=32,threshold=0.95", "dual"),
    ],
    "prefix": [
        (BLOCK, "prefix"),
        ("block:block_length=16,threshold=0.9", "prefix"),
        ("block:block_length=64,threshold=0.9", "prefix"),
        ("block:block_length=32,threshold=0.7", "prefix"),
        ("block:block_length=32,threshold=0.8", "prefix"),
        ("block:block_length=32,threshold=0.95", "prefix"),
    ],
    "d2cache": [
        (BLOCK, f"d2cache:rollout_p={p},current_k={k}")
        for p in (0.05, 0.1, 0.2) for k in (16, 32)
    ],
    "elastic": [
        (f"window:w={w},threshold=0.9", f"elastic:gamma={g}")
        for g in (0.8, 0.9, 0.95) for w in (16, 32)
    ],
}


def tasks_for(model, split):
    """The model's `split` (val or test) task file, beside the test split tools.tasks.splits
    names."""
    test = subprocess.run([sys.executable, "-m", "tools.tasks.splits", model],
                          capture_output=True, text=True)
    if test.returncode != 0:
        sys.exit(f"tune: {test.stderr.strip()}")
    return os.path.join(os.path.dirname(test.stdout.strip()), f"{split}.jsonl")


def paths(out, model, split):
    name = os.path.basename(os.path.normpath(model))
    base = os.path.join(out, f"tune-{name}")
    return {"rows": f"{base}-{split}.jsonl",
            "vanilla": f"{base}-vanilla-{split}.answers.jsonl",
            "report": f"{base}.md"}


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def bench(args, model, tasks, extra):
    """dllm-bench's rows for `extra` arguments (one thread, batch 1); exits on failure."""
    cmd = [args.bench, "--model", model, "--tasks", tasks, "--threads", "1", "--batch", "1"]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    run = subprocess.run(cmd + extra, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tune: {' '.join(cmd + extra)} failed:\n{run.stderr}")
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def this_session():
    """Where rows are measured: the kernel's boot id (each session of this project is a fresh
    machine) and the CPU's model name."""
    def read(path, key=None):
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if key is None:
                        return line.strip()
                    if line.startswith(key):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "unknown"
    return {"boot_id": read("/proc/sys/kernel/random/boot_id"),
            "cpu": read("/proc/cpuinfo", "model name")}


def ensure_vanilla(args, model, tasks, stored):
    """Runs and stores vanilla on `tasks` unless `stored` already holds it, with the session
    that measured it beside it (`stored`.session.json). With --vanilla-from, vanilla's answers
    come from an earlier session's stored run instead, and only its cost is measured here
    (sampled_vanilla)."""
    if os.path.exists(stored):
        return
    earlier = (os.path.join(args.vanilla_from, os.path.basename(stored))
               if args.vanilla_from else None)
    if earlier and os.path.exists(earlier):
        sampled_vanilla(args, model, tasks, earlier, stored)
    else:
        tmp = stored + ".part"
        bench(args, model, tasks, ["--none=false", "--answers-out", tmp])
        os.replace(tmp, stored)
    with open(stored + ".session.json", "w", encoding="utf-8") as f:
        json.dump(this_session(), f)


def sampled_vanilla(args, model, tasks, earlier, stored):
    """Vanilla from an earlier session's stored run, its cost measured in this one. The engine
    is exact and deterministic, so vanilla's answers do not depend on the session; its CPU
    time per token does (docs/paper-comparison.md). So vanilla runs here on the first
    --vanilla-sample items only: its answers must equal the stored ones item for item (else
    the run stops, naming the first that differs), and its CPU and wall time per answer token
    replace the stored ones. The answers, accuracy and rows come from `earlier`. This takes
    vanilla on 500 test items from about 45 CPU minutes to the sample's share."""
    with open(earlier, encoding="utf-8") as f:
        line = json.loads(f.readline())
    # A smoke run (--limit) measures exactly its items, so that their token count is known.
    n = args.limit if args.limit else min(args.vanilla_sample, len(line["answers"]))
    tmp = stored + ".sample"
    sample_args = argparse.Namespace(**{**vars(args), "limit": n})
    bench(sample_args, model, tasks, ["--none=false", "--answers-out", tmp])
    with open(tmp, encoding="utf-8") as f:
        sample = json.loads(f.readline())
    os.remove(tmp)
    for i, (here, there) in enumerate(zip(sample["answers"], line["answers"][:n])):
        if here != there:
            sys.exit(f"tune: vanilla's answer to item {i} differs from {earlier} "
                     f"({here!r} here, {there!r} there): its answers cannot be reused; run "
                     "without --vanilla-from")
    if args.limit:  # a smoke run: the stored answers of its items only
        for key in ("answers", "correct"):
            line[key] = line[key][:n]
        line["tokens"] = sample["tokens"]
        line["row"]["accuracy"] = sum(line["correct"]) / len(line["correct"])
        line["row"]["tasks"] = len(line["answers"])
    row, measured = line["row"], sample["row"]
    tokens = line["tokens"]
    row["cpu_s_per_token"] = measured["cpu_s_per_token"]
    row["cpu_s"] = measured["cpu_s"] / sample["tokens"] * tokens
    row["wall_s"] = measured["wall_s"] / sample["tokens"] * tokens
    row["tokens_per_s"] = tokens / row["wall_s"]
    row["cost_sampled_items"] = n
    row["answers_from"] = os.path.basename(earlier)
    with open(stored + ".part", "w", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    os.replace(stored + ".part", stored)
    print(f"tune: vanilla's answers from {earlier}; its cost measured on {n} "
          f"item{'' if n == 1 else 's'}, "
          f"{1e3 * row['cpu_s_per_token']:.2f} CPU ms/token", file=sys.stderr)


def check_one_session(stored, rows):
    """Exits unless the stored vanilla and every row were measured in this session. CPU time
    per token moves by up to ±25% between sessions (docs/paper-comparison.md), so a setting
    appended in another one would be compared with the rest through a CPU-time ratio that
    crosses machines."""
    now = this_session()
    try:
        with open(stored + ".session.json", encoding="utf-8") as f:
            vanilla = json.load(f)
    except (OSError, ValueError):
        vanilla = {"boot_id": "not recorded", "cpu": "unknown"}
    measured = [vanilla] + [r["tune"].get("session", {"boot_id": "not recorded"})
                            for r in rows]
    other = next((m for m in measured if m.get("boot_id") != now["boot_id"]), None)
    if other is not None:
        sys.exit(f"tune: {stored} and its rows were measured in another session (boot id "
                 f"{other.get('boot_id')}, {other.get('cpu', 'unknown')}; this one is "
                 f"{now['boot_id']}, {now['cpu']}): CPU-time speed-ups do not cross "
                 "sessions. Run the protocol whole in a fresh --out directory.")


def run_settings(args, model, split, settings):
    """Runs every (method, decoding, policy) of `settings` not yet in the split's rows against
    the stored vanilla, appending its row."""
    p = paths(args.out, model, split)
    tasks = tasks_for(model, split)
    ensure_vanilla(args, model, tasks, p["vanilla"])
    rows_so_far = read_rows(p["rows"])
    done = {(r["tune"]["decoding"], r["tune"]["policy"]) for r in rows_so_far}
    if any((decoding, policy) not in done for _, decoding, policy in settings):
        check_one_session(p["vanilla"], rows_so_far)
    for method, decoding, policy in settings:
        if (decoding, policy) in done:
            continue
        rows = bench(args, model, tasks, ["--none=false", "--baseline-from", p["vanilla"],
                                          "--decoding", decoding, "--policy", policy])
        measured = [r for r in rows if "baseline" not in r]
        if len(measured) != 1 or "error" in measured[0]:
            sys.exit(f"tune: {decoding} @ {policy}: expected one measured row, got {measured}")
        row = measured[0]
        row["tune"] = {"method": method, "decoding": decoding, "policy": policy,
                       "session": this_session()}
        with open(p["rows"], "a", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        print(f"tune: {split} {method} {decoding} @ {policy}: accuracy {row['accuracy']:.3f}, "
              f"{row['speedup_vs_baseline_cpu']:.2f}x CPU", file=sys.stderr)


def accuracy_diff(row):
    return row["vs_baseline"]["accuracy_diff"]


def front(rows):
    """The Pareto front of (paired accuracy difference, CPU speed-up), fastest first."""
    def dominated(r):
        return any(accuracy_diff(o) >= accuracy_diff(r)
                   and o["speedup_vs_baseline_cpu"] >= r["speedup_vs_baseline_cpu"]
                   and (accuracy_diff(o), o["speedup_vs_baseline_cpu"])
                   != (accuracy_diff(r), r["speedup_vs_baseline_cpu"]) for o in rows)
    return sorted((r for r in rows if not dominated(r)),
                  key=lambda r: -r["speedup_vs_baseline_cpu"])


def test_points(rows):
    """At most TEST_POINTS of a method's val front, the first of: the fastest within 1 point of
    vanilla, the most accurate, the fastest; without repeats."""
    f = front(rows)
    if not f:
        return []
    within = [r for r in f if accuracy_diff(r) >= WITHIN]
    picks = ([within[0]] if within else []) + [max(f, key=accuracy_diff), f[0]]
    out = []
    for r in picks:
        if r not in out:
            out.append(r)
    return out[:TEST_POINTS]


def by_method(rows):
    out = {}
    for r in rows:
        out.setdefault(r["tune"]["method"], []).append(r)
    return out


def grid_settings(methods):
    return [(m, d, p) for m in methods for d, p in GRID[m]]


def chosen_settings(out, model, methods):
    """Every method's test points, first picks first (so that a run cut short has measured
    each method's best point)."""
    val = by_method(read_rows(paths(out, model, "val")["rows"]))
    missing = [m for m in methods if len(val.get(m, [])) < len(GRID[m])]
    if missing:
        sys.exit(f"tune: the val search is not complete for {', '.join(missing)} "
                 f"(run bench/tune.py val {model})")
    picks = {m: test_points(val[m]) for m in methods}
    return [(m, picks[m][i]["tune"]["decoding"], picks[m][i]["tune"]["policy"])
            for i in range(TEST_POINTS) for m in methods if i < len(picks[m])]


def default_point(val_rows, test_rows, method="entropy"):
    """The family's defaults (engine/core/model_family.h): of `method`'s val rows within 1
    point of vanilla, fastest first (CPU time), the first whose test row (the same decoding and
    policy), where one was measured, is within 1 point too; None when no row qualifies."""
    tested = {(r["tune"]["decoding"], r["tune"]["policy"]): r
              for r in test_rows if r["tune"]["method"] == method}
    within = sorted((r for r in val_rows
                     if r["tune"]["method"] == method and accuracy_diff(r) >= WITHIN),
                    key=lambda r: -r["speedup_vs_baseline_cpu"])
    for r in within:
        t = tested.get((r["tune"]["decoding"], r["tune"]["policy"]))
        if t is None or accuracy_diff(t) >= WITHIN:
            return {"decoding": r["tune"]["decoding"], "policy": r["tune"]["policy"]}
    return None


def row_cells(r):
    p = r["vs_baseline"]
    return [r["tune"]["method"], r["tune"]["decoding"], r["tune"]["policy"],
            f"{r['accuracy']:.3f}",
            f"{100 * p['accuracy_diff']:+.1f}±{100 * p['accuracy_diff_se']:.1f}",
            f"{r['speedup_vs_baseline_cpu']:.2f}x", f"{r['speedup_vs_baseline']:.2f}x",
            f"{1e3 * r['cpu_s_per_token']:.2f}", f"{r['rows_per_token']:.1f}",
            f"{r['macs_per_token'] * 1e-9:.3f}", f"{r['full_step_ratio']:.2f}",
            f"{100 * r['decision_overhead_frac']:.2f}%", f"{r['wall_s'] / r['cpu_s']:.2f}"]


HEAD = ["method", "decoding", "policy", "accuracy", "vs vanilla (pt, paired)",
        "speed-up (CPU)", "speed-up (wall)", "CPU ms/token", "rows/token", "GMACs/token",
        "full-step ratio", "decision overhead", "wall/CPU"]


def md_table(rows):
    out = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    out += ["| " + " | ".join(row_cells(r)) + " |" for r in rows]
    return out


def goals(rows, dual_rows):
    """The issue's goal figures on one split's rows: the fastest EntropyCache setting within
    1 point of vanilla against the fastest baseline setting within 1 point, and its rows per
    token against the dual cache's (its fastest setting within 1 point, else its fastest)."""
    within = [r for r in rows if accuracy_diff(r) >= WITHIN]
    ours = [r for r in within if r["tune"]["method"].startswith("entropy")]
    theirs = [r for r in within if not r["tune"]["method"].startswith("entropy")]
    out = []
    if not ours:
        return ["- No EntropyCache setting is within 1 point of vanilla."]
    best = max(ours, key=lambda r: r["speedup_vs_baseline_cpu"])
    out.append(f"- EntropyCache (or our variant) within 1 point: {best['tune']['decoding']} @ "
               f"{best['tune']['policy']}, {best['speedup_vs_baseline_cpu']:.2f}x vanilla "
               f"(CPU time; goal >= 20x), decision overhead "
               f"{100 * best['decision_overhead_frac']:.2f}% (goal <= 0.5%).")
    if theirs:
        rival = max(theirs, key=lambda r: r["speedup_vs_baseline_cpu"])
        out.append(f"- Fastest other method within 1 point: {rival['tune']['method']} "
                   f"{rival['tune']['decoding']} @ {rival['tune']['policy']}, "
                   f"{rival['speedup_vs_baseline_cpu']:.2f}x; EntropyCache / it = "
                   f"{best['speedup_vs_baseline_cpu'] / rival['speedup_vs_baseline_cpu']:.2f} "
                   f"(goal >= 2).")
    if dual_rows:
        dw = [r for r in dual_rows if accuracy_diff(r) >= WITHIN] or dual_rows
        dual = max(dw, key=lambda r: r["speedup_vs_baseline_cpu"])
        out.append(f"- Rows per token: EntropyCache {best['rows_per_token']:.1f}, dual "
                   f"({dual['tune']['decoding']}) {dual['rows_per_token']:.1f}: ratio "
                   f"{best['rows_per_token'] / dual['rows_per_token']:.2f} (goal <= 0.6).")
    for m in ("d2cache", "elastic"):
        ms = [r for r in rows if r["tune"]["method"] == m]
        if ms:
            shares = [100 * r["decision_overhead_frac"] for r in ms]
            out.append(f"- {m} decision overhead: {min(shares):.2f}-{max(shares):.2f}% "
                       f"(goal <= {'9.2' if m == 'd2cache' else '14.5'}%).")
    return out


def vanilla_line(out, model, split):
    """One line on the stored vanilla baseline of `split`, or "" when there is none."""
    stored = read_rows(paths(out, model, split)["vanilla"])
    if not stored:
        return ""
    r = stored[0]["row"]
    return (f"Vanilla (the stored baseline): accuracy {r['accuracy']:.3f}, "
            f"{1e3 * r['cpu_s_per_token']:.2f} CPU ms/token, {r['rows_per_token']:.1f} rows/token, "
            f"wall/CPU {r['wall_s'] / r['cpu_s']:.2f}.")


def report(out_dir, model):
    val = read_rows(paths(out_dir, model, "val")["rows"])
    test = read_rows(paths(out_dir, model, "test")["rows"])
    name = os.path.basename(os.path.normpath(model))
    out = [f"# Tuning protocol: {name}", ""]
    if val:
        v = val[0]
        out += [f"Val split: {v['tasks']} items, gen_length {v['gen_length']}, one thread, "
                f"batch 1; {BUDGET} settings per method (bench/tune.py GRID). "
                f"{vanilla_line(out_dir, model, 'val')} Every val row:", ""]
        out += md_table(sorted(val, key=lambda r: (list(GRID).index(r["tune"]["method"]),
                                                   -r["speedup_vs_baseline_cpu"])))
        out += ["", "Val fronts (accuracy against CPU-time speed-up), per method:", ""]
        out += md_table([r for m, rs in by_method(val).items() for r in front(rs)])
        out += ["", "Goal figures on val:", ""]
        out += goals(val, [r for r in val if r["tune"]["method"] == "dual"])
    if test:
        t = test[0]
        out += ["", f"## Test: {t['tasks']} items, the chosen front points", "",
                vanilla_line(out_dir, model, "test"), ""]
        out += md_table(sorted(test, key=lambda r: (list(GRID).index(r["tune"]["method"]),
                                                    -r["speedup_vs_baseline_cpu"])))
        out += ["", "Goal figures on test:", ""]
        out += goals(test, [r for r in test if r["tune"]["method"] == "dual"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stage", choices=["val", "test", "report", "defaults"])
    ap.add_argument("model")
    ap.add_argument("--bench", default=os.environ.get("DLLM_BENCH", "build/bin/dllm-bench"))
    ap.add_argument("--limit", type=int, default=0, help="first N items only (smoke runs)")
    ap.add_argument("--out", default=os.path.join("docs", "results"),
                    help="where the rows and stored baselines go")
    ap.add_argument("--vanilla-from", default="",
                    help="a directory with an earlier session's stored vanilla answers (e.g. "
                    "docs/results): reuse its answers, measure only its cost (--vanilla-sample)")
    ap.add_argument("--vanilla-sample", type=int, default=100,
                    help="items vanilla runs on with --vanilla-from (default 100)")
    ap.add_argument("--methods", default=",".join(GRID),
                    help="comma-separated methods to run (default: all; e.g. two processes "
                    "sharing a model's work)")
    args = ap.parse_args()
    methods = args.methods.split(",")
    if not all(m in GRID for m in methods):
        sys.exit(f"tune: --methods: unknown method in {args.methods} (known: {', '.join(GRID)})")
    if args.stage == "defaults":
        print(json.dumps(default_point(read_rows(paths(args.out, args.model, "val")["rows"]),
                                       read_rows(paths(args.out, args.model, "test")["rows"]))))
        return
    os.makedirs(args.out, exist_ok=True)
    assert all(len(pairs) == BUDGET for pairs in GRID.values()), "unequal budgets"
    if args.stage == "val":
        run_settings(args, args.model, "val", grid_settings(methods))
    elif args.stage == "test":
        run_settings(args, args.model, "test", chosen_settings(args.out, args.model, methods))
    print("\n".join(report(args.out, args.model)))


if __name__ == "__main__":
    main()
