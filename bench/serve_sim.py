#!/usr/bin/env python3
"""Serving in virtual time: serve.py's open-loop measurements, predicted by the real engine
(dllm-serve-sim) with each step priced by a latency profile.

The engine in process decides every token with the model's real logits and schedules with
the production worker; only the clock is simulated. Requests, arrivals (serve.arrival_times,
the same seed) and settings are those of bench/serve.py and bench/serve_sweep.py, and the rows
are serve.py's (serve.row_metrics), so bench/serve_report.py tables them alike.

  # the calibration: a CPU profile from timed steps of real runs, every policy, batch 1-16
  bench/serve_sim.py calibrate --model models/llada-cot --out bench/profiles/cpu-llada-cot.json

  # validation: each open-loop row of a measured sweep below saturation, simulated
  bench/serve_sim.py validate --profile bench/profiles/cpu-llada-cot.json \\
      --measured docs/results/serving-llada-cot-b8.jsonl --out docs/results/sim-....jsonl

  # projection: rates x batches at another machine's costs; without --profile the same
  # sweep runs in real time on this machine (the engine in process)
  bench/serve_sim.py sweep --model models/llada-cot \\
      --profile bench/profiles/h100-llada8b-tp1.json --batches 16,64 --rates 5,10,20 \\
      --settings entropy,dual --out rows.jsonl

docs/serving-simulation.md has the method, the profiles and the validation.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

from bench import serve
from bench import serve_report
from bench import serve_sweep

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOAD = os.path.join(ROOT, "tools", "tasks", "data_cot", "test.jsonl")
# The calibration fits on the val split, so that validation and reports on test never saw
# their own items.
CALIBRATION_WORKLOAD = os.path.join(ROOT, "tools", "tasks", "data_cot", "val.jsonl")
# The calibration's runs: every request at once (batch sizes from max_batch down to 1 as the
# run drains), each policy of the sweep, at two max batches.
CALIBRATION_SETTINGS = ["entropy", "dual", "elastic", "d2cache", "threshold"]
FEATURES = ["rows", "key_rows", "map_key_rows", "predicted_rows", "sequences"]


# ------------------------------------------------------------------ pure functions (tested)

def timed_requests(tasks, settings, n, warmup, rate, burstiness, seed, max_tokens):
    """The requests serve.py's run_row measures for `rate`: tasks and settings in plan order
    after the warm-up, sent at serve.arrival_times."""
    plan = [(tasks[i % len(tasks)], settings[i % len(settings)]) for i in range(warmup + n)]
    measured = plan[warmup:]
    times = serve.arrival_times(len(measured), rate, burstiness, random.Random(seed))
    return [{"arrival_s": t, "prompt": task["prompt"], "max_tokens": max_tokens,
             "label": label, "setting": setting, "task": task}
            for t, (task, (label, setting)) in zip(times, measured)]


def as_result(request, r):
    """serve.run_one's record of one simulated request (no front end, so no frontend time)."""
    return serve.record(request["task"], r["label"], r["status"], r["output_tokens"], r["text"],
                        r["arrival_s"], r["chunks_s"], r["end_s"], None)


def sim_row(requests, results, rate, settings, slo, profile_name):
    """serve.run_row's row for one simulated open-loop run."""
    records = [as_result(q, r) for q, r in zip(requests, results)]
    wall = max(r["end_s"] for r in results) - min(q["arrival_s"] for q in requests)
    row = {"mode": "rate", "rate": rate, "protocol": "sim", "profile": profile_name,
           "settings": [label for label, _ in settings], "slo_s": slo,
           **serve.row_metrics(records, wall, slo)}
    # A diffusion model's pace: the time between one sequence's consecutive denoising steps
    # (ITL, between text chunks, also waits for the prefix to complete).
    row["step_interval_ms"] = serve.summary_ms(
        [b - a for r in results if r["status"] == "OK"
         for a, b in zip(r["steps_s"], r["steps_s"][1:])])
    # How long a refusal took to come back (cost-aware admission refuses at arrival).
    refused = [r["end_s"] - r["arrival_s"] for r in results if r["status"] == "RESOURCE_EXHAUSTED"]
    if refused:
        row["refusal_ms"] = serve.summary_ms(refused)
    rows = sum(r["rows"] for r in results if r["status"] == "OK")
    tokens = sum(r["output_tokens"] for r in results if r["status"] == "OK")
    row["rows_per_token"] = rows / tokens if tokens else None
    return row


def nnls(x, y):
    """Least squares with every coefficient >= 0 (Lawson-Hanson active set, small problems):
    a fitted cost per row, key or sequence is never negative."""
    import numpy as np
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    active = list(range(x.shape[1]))
    while True:
        coef = np.zeros(x.shape[1])
        if active:
            sol, *_ = np.linalg.lstsq(x[:, active], y, rcond=None)
            coef[active] = sol
        negative = [j for j in active if coef[j] < 0]
        if not negative:
            return coef
        # Drop the most negative and refit.
        active.remove(min(negative, key=lambda j: coef[j]))


def fit_profile(steps, name, source):
    """A latency profile fitted to step records (dllm-serve-sim --steps-out): a straight rows
    curve from an intercept plus the linear terms, all >= 0. The fit minimises relative error
    with every batch size (sequences in the step) weighing alike: a burst's calibration steps
    are mostly large batches, while open-loop serving below saturation runs mostly small ones,
    and a request's latency sums steps of every size."""
    import collections
    import numpy as np
    x = np.array([[1.0] + [s[f] for f in FEATURES] for s in steps])
    y = np.array([s["seconds"] for s in steps])
    per_size = collections.Counter(s["sequences"] for s in steps)
    weight = np.sqrt(np.array([1.0 / per_size[s["sequences"]] for s in steps])
                     / np.maximum(y, 1e-9))
    coef = nnls(x * weight[:, None], y * weight)
    top = max(s["rows"] for s in steps)
    pred = x @ coef
    rel = np.abs(pred - y) / np.maximum(y, 1e-9)
    profile = {
        "name": name, "source": source,
        "rows_seconds": [[0, coef[0]], [top, coef[0] + coef[1] * top]],
        "key_row_seconds": coef[2], "map_key_row_seconds": coef[3],
        "predicted_row_seconds": coef[4], "sequence_seconds": coef[5],
        "fit": {"steps": len(steps), "median_abs_error": float(np.median(rel)),
                "p90_abs_error": float(np.percentile(rel, 90)),
                "total_seconds_ratio": float(pred.sum() / y.sum())},
    }
    return json.loads(json.dumps(profile, default=float))


# ------------------------------------------------------------------ running dllm-serve-sim

def run_sim(args, requests, max_batch, profile=None, steps_out=None, refuse_late=True,
            slack_ratio=None, mismatch_budget=0):
    """dllm-serve-sim over `requests`; its per-request results, in order. refuse_late=False
    turns the engine's cost-aware admission off (requests with a deadline_s queue and
    expire). Shadow samples at args.shadow_sample_rate (if set); mismatch_budget > 0 turns
    cache.autotune on with it."""
    with tempfile.TemporaryDirectory(prefix="dllm-serve-sim-") as d:
        req_path, out_path = os.path.join(d, "requests.jsonl"), os.path.join(d, "out.jsonl")
        with open(req_path, "w") as f:
            for q in requests:
                f.write(json.dumps({k: v for k, v in q.items() if k != "task"}) + "\n")
        cmd = [os.path.join(args.bin_dir, "dllm-serve-sim"), "--model", args.model,
               "--requests", req_path, "--out", out_path, "--max-batch", str(max_batch),
               "--threads", str(args.threads)]
        if profile:
            cmd += ["--profile", profile]
        if steps_out:
            cmd += ["--steps-out", steps_out]
        if not refuse_late:
            cmd += ["--refuse-late-requests=false"]
        if slack_ratio is not None:
            cmd += ["--tau-switch-slack-ratio", str(slack_ratio)]
        if getattr(args, "shadow_sample_rate", 0):
            cmd += ["--shadow-sample-rate", str(args.shadow_sample_rate)]
        if mismatch_budget:
            cmd += ["--mismatch-budget", str(mismatch_budget)]
        subprocess.run(cmd, check=True)
        with open(out_path) as f:
            return [json.loads(line) for line in f if line.strip()]


def load_tasks(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def calibrate(args):
    tasks = load_tasks(args.workload)
    steps = []
    for batch in args.batch_list:
        for name in args.setting_list:
            settings = [(name, serve_sweep.SETTINGS[name])]
            reqs = timed_requests(tasks, settings, args.requests, 0, float("inf"), 1.0, 0,
                                  serve_sweep.GEN)
            with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as f:
                run_sim(args, reqs, batch, steps_out=f.name)
                got = [json.loads(line) for line in f if line.strip()]
            # The first steps of a run pay for first touches of memory: left out.
            steps += got[2:]
            print("calibrate: %s batch %d: %d steps" % (name, batch, len(got)), file=sys.stderr)
    profile = fit_profile(steps, args.name or "cpu-" + os.path.basename(args.model.rstrip("/")),
                          args.source)
    with open(args.out, "w") as f:
        json.dump(profile, f, indent=1)
        f.write("\n")
    if args.steps_out:
        with open(args.steps_out, "w") as f:
            for s in steps:
                f.write(json.dumps(s) + "\n")
    print(json.dumps(profile["fit"]))


def error(sim, measured):
    return None if not measured else (sim - measured) / measured


def validate(args):
    with open(args.measured) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    open_rows = [r for r in rows if r.get("phase") == "open"
                 and r.get("saturation_fraction", 1) <= args.max_fraction]
    if not open_rows:
        sys.exit("validate: no open-loop row at or below %.2f of saturation in %s"
                 % (args.max_fraction, args.measured))
    model = os.path.join(ROOT, "models", open_rows[0]["model"])
    args.model = args.model or model
    tasks = load_tasks(args.workload)
    with open(args.profile) as f:
        profile_name = json.load(f)["name"]
    # In-process real-time figures of an earlier validation of the same points: they do not
    # depend on the profile, so a refitted profile is validated without running them again.
    earlier_real = {}
    if args.reuse_real:
        with open(args.reuse_real) as f:
            for r in (json.loads(line) for line in f if line.strip()):
                if "real" in r:
                    earlier_real[(tuple(r["settings"]), r["rate"], r["max_batch"])] = r["real"]
    out = []
    print("| setting | rate (req/s) | fraction | tok/s measured | sim | err | p50 E2EL ms "
          "measured | sim | err | p99 E2EL ms measured | sim | err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in open_rows:
        settings = [(label, serve_sweep.SETTINGS[label]) for label in m["settings"]]
        reqs = timed_requests(tasks, settings, m["requests"], args.warmup, m["rate"],
                              args.burstiness, args.seed, serve_sweep.GEN)
        results = run_sim(args, reqs, m["max_batch"], profile=args.profile)
        row = sim_row(reqs, results, m["rate"], settings, m["slo_s"], profile_name)
        # The same requests on this machine's clock, in process (the front end left out),
        # a few times: their mean is a second target and their spread the noise floor.
        real = [sim_row(reqs, run_sim(args, reqs, m["max_batch"]), m["rate"], settings,
                        m["slo_s"], "real time") for _ in range(args.real_repeats)]
        reused = earlier_real.get((tuple(m["settings"]), m["rate"], m["max_batch"]))
        if not real and reused:
            real = [{"output_throughput": t, "e2el_ms": {"median": p50, "p99": p99}}
                    for t, p50, p99 in zip(reused["output_throughput"], reused["e2el_median"],
                                           reused["e2el_p99"])]
        row.update(phase="validate", model=m["model"], max_batch=m["max_batch"],
                   saturation_fraction=m.get("saturation_fraction"),
                   measured={"output_throughput": m["output_throughput"],
                             "e2el_median_ms": m["e2el_ms"]["median"],
                             "e2el_p99_ms": m["e2el_ms"]["p99"], "accuracy": m["accuracy"]})
        row["errors"] = {
            "output_throughput": error(row["output_throughput"], m["output_throughput"]),
            "e2el_median": error(row["e2el_ms"]["median"], m["e2el_ms"]["median"]),
            "e2el_p99": error(row["e2el_ms"]["p99"], m["e2el_ms"]["p99"]),
        }
        if real:
            mean = lambda f: sum(f(r) for r in real) / len(real)  # noqa: E731
            figures = {"output_throughput": lambda r: r["output_throughput"],
                       "e2el_median": lambda r: r["e2el_ms"]["median"],
                       "e2el_p99": lambda r: r["e2el_ms"]["p99"]}
            row["real"] = {k: [f(r) for r in real] for k, f in figures.items()}
            row["errors_vs_real_mean"] = {k: error(f(row), mean(f))
                                          for k, f in figures.items()}
            # How far single real runs fall from their own mean: the noise floor.
            row["real_spread"] = {k: max(abs(error(f(r), mean(f))) for r in real)
                                  for k, f in figures.items()}
        out.append(row)
        e = row["errors"]
        print("| %s | %.3f | %.2f | %.1f | %.1f | %+.0f%% | %.0f | %.0f | %+.0f%% | %.0f | %.0f "
              "| %+.0f%% |" % (
                  "+".join(m["settings"]), m["rate"], m.get("saturation_fraction") or 0,
                  m["output_throughput"], row["output_throughput"],
                  100 * e["output_throughput"], m["e2el_ms"]["median"],
                  row["e2el_ms"]["median"], 100 * e["e2el_median"], m["e2el_ms"]["p99"],
                  row["e2el_ms"]["p99"], 100 * e["e2el_p99"]), flush=True)
    write_rows(args.out, out)


def sweep(args):
    tasks = load_tasks(args.workload)
    profile_name = "real time"  # no profile: the engine in process, on this machine's clock
    if args.profile:
        with open(args.profile) as f:
            profile_name = json.load(f)["name"]
    slo = serve.parse_slo(args.slo)
    # Admission modes: no deadline (every request served, however late), or each request's
    # deadline at --deadline seconds after arrival with the engine's cost-aware admission on
    # ("refuse") or off ("expire": late requests use compute until their deadline cuts them).
    modes = [m for m in args.admission.split(",") if m]
    for m in modes:
        if m not in ("none", "refuse", "expire"):
            sys.exit("sweep: --admission takes none, refuse, expire; got %r" % m)
        if m != "none" and not args.deadline:
            sys.exit("sweep: --admission %s needs --deadline" % m)
    out = []
    for batch in args.batch_list:
        for name in args.setting_list:
            settings = [(name, serve_sweep.SETTINGS[name])]
            # SLO-aware tau: a setting with a tau under load runs at each slack ratio (it
            # switches only requests with a deadline, so not in mode "none").
            switching = "entropy_threshold_under_load" in settings[0][1].get("cache", {})
            for rate in [float(r) for r in args.rates.split(",")]:
                for mode in modes:
                    can_switch = switching and mode != "none"
                    ratios = args.slack_ratio_list if can_switch else [None]
                    # The switch's quality budget (cache.autotune) at each value, 0 = off.
                    budgets = args.mismatch_budget_list if can_switch else [0]
                    for ratio, budget in [(r, b) for r in ratios for b in budgets]:
                        reqs = timed_requests(tasks, settings, args.requests, args.warmup, rate,
                                              args.burstiness, args.seed, serve_sweep.GEN)
                        if mode != "none":
                            for q in reqs:
                                q["deadline_s"] = args.deadline
                        results = run_sim(args, reqs, batch, profile=args.profile,
                                          refuse_late=mode != "expire", slack_ratio=ratio,
                                          mismatch_budget=budget)
                        row = sim_row(reqs, results, rate, settings, slo, profile_name)
                        row.update(phase="projection", max_batch=batch, admission=mode,
                                   deadline_s=args.deadline if mode != "none" else None,
                                   model=os.path.basename(args.model.rstrip("/")))
                        if ratio is not None:
                            row.update(tau_switch_slack_ratio=ratio, tau_switched=sum(
                                1 for r in results if r.get("tau_switch_step", -1) >= 0))
                        if args.shadow_sample_rate:
                            row.update(shadow_sample_rate=args.shadow_sample_rate,
                                       mismatch_budget=budget, **shadow_summary(results))
                        out.append(row)
                        print("\n".join(serve_report.projection_table([row])[2:]), flush=True)
    write_rows(args.out, out)


def shadow_summary(results):
    """A run's shadow samples, split into the steps of switched requests after their switch
    (under load) and the others, with their token-mismatch rates, and the mean EntropyCache
    tau of switched and unswitched requests' steps."""
    def total(key):
        return sum(r["shadow"][key] for r in results if "shadow" in r)
    own = total("samples") - total("samples_under_load")
    own_mm = total("token_mismatches") - total("token_mismatches_under_load")
    load, load_mm = total("samples_under_load"), total("token_mismatches_under_load")

    def mean_tau(switched):
        taus = [r["mean_tau_nats"] for r in results if r.get("mean_tau_nats") is not None
                and r["status"] == "OK" and (r.get("tau_switch_step", -1) >= 0) == switched]
        return sum(taus) / len(taus) if taus else None
    return {"shadow": {"samples": own, "token_mismatches": own_mm,
                       "token_mismatch_rate": own_mm / own if own else None,
                       "samples_under_load": load, "token_mismatches_under_load": load_mm,
                       "token_mismatch_rate_under_load": load_mm / load if load else None},
            "mean_tau_nats": {"switched": mean_tau(True), "unswitched": mean_tau(False)}}


def write_rows(path, rows):
    if not path:
        return
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("wrote %s" % path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["calibrate", "validate", "sweep"])
    ap.add_argument("--model", default="", help="model folder (validate: the rows' model)")
    ap.add_argument("--profile", help="latency profile (validate, sweep)")
    ap.add_argument("--measured", help="validate: serve_sweep.py's rows")
    ap.add_argument("--max-fraction", type=float, default=0.95,
                    help="validate: rows at most this fraction of saturation")
    ap.add_argument("--real-repeats", type=int, default=0,
                    help="validate: also run each point this many times in real time")
    ap.add_argument("--reuse-real", default="",
                    help="validate: take the in-process real-time runs from this earlier "
                    "validation's rows instead of running them")
    ap.add_argument("--workload", default="",
                    help="tasks JSONL (default: the cot test split; calibrate: the val split)")
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--warmup", type=int, default=2, help="serve.py's: skipped tasks")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--burstiness", type=float, default=1.0)
    ap.add_argument("--slo", default=serve_sweep.SLO)
    ap.add_argument("--rates", default="1")
    ap.add_argument("--deadline", type=float, default=0,
                    help="sweep: each request's deadline, seconds after its arrival")
    ap.add_argument("--admission", default="none",
                    help="sweep: comma-separated modes: none (no deadline), refuse (deadline, "
                    "cost-aware admission), expire (deadline, admission off)")
    ap.add_argument("--batches", default="8,16")
    ap.add_argument("--slack-ratios", default="3",
                    help="sweep: engine.tau_switch_slack_ratio values, for settings with a tau "
                    "under load (comma-separated)")
    ap.add_argument("--shadow-sample-rate", type=float, default=0,
                    help="sweep: cache.shadow_sample_rate (rows then count the samples)")
    ap.add_argument("--mismatch-budgets", default="0",
                    help="sweep: cache.autotune mismatch budgets, for settings with a tau under "
                    "load (comma-separated; 0 = autotune off)")
    ap.add_argument("--settings", default=",".join(CALIBRATION_SETTINGS))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--name", default="", help="calibrate: the profile's name")
    ap.add_argument("--source", default="", help="calibrate: where and how it was measured")
    ap.add_argument("--steps-out", help="calibrate: also write the step records")
    ap.add_argument("--out", help="rows (validate, sweep) or the profile (calibrate)")
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args(argv)
    args.workload = args.workload or (CALIBRATION_WORKLOAD if args.command == "calibrate"
                                      else WORKLOAD)
    args.batch_list = [int(b) for b in args.batches.split(",")]
    args.setting_list = [s for s in args.settings.split(",") if s]
    args.slack_ratio_list = [float(x) for x in args.slack_ratios.split(",") if x]
    args.mismatch_budget_list = [float(x) for x in args.mismatch_budgets.split(",") if x]
    if any(b > 0 for b in args.mismatch_budget_list) and not args.shadow_sample_rate:
        ap.error("--mismatch-budgets above 0 need --shadow-sample-rate (autotune learns from "
                 "shadow samples)")
    unknown = [s for s in args.setting_list if s not in serve_sweep.SETTINGS]
    if unknown:
        ap.error("unknown settings %s (serve_sweep.SETTINGS: %s)"
                 % (unknown, ", ".join(serve_sweep.SETTINGS)))
    if args.command == "calibrate":
        if not args.model or not args.out:
            ap.error("calibrate needs --model and --out")
        calibrate(args)
    elif args.command == "validate":
        if not args.profile or not args.measured:
            ap.error("validate needs --profile and --measured")
        validate(args)
    else:
        if not args.model:
            ap.error("sweep needs --model (and --profile for virtual time)")
        sweep(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
