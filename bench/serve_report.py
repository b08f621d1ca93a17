#!/usr/bin/env python3
"""The tables of docs/serving.md from bench/serve_sweep.py's rows (a test checks that the
document shows exactly this output for the committed rows).

  bench/serve_report.py docs/results/serving-llada-cot-b8.jsonl [...]
  bench/serve_report.py --plot OUT.png ROWS.jsonl   (needs gnuplot: per setting, output
      throughput and E2EL p50 / p99 against concurrency, from the closed-loop rows, and E2EL
      p50 / p99 against the offered rate, from the open-loop rows)
  bench/serve_report.py --plot OUT.png PROJECTION.jsonl   (bench/serve_sim.py sweep's rows: per
      max batch, output tokens/s against p99 E2EL per setting)
  bench/serve_report.py --update docs/serving.md   (fills each block of the document
      between "<!-- serve_report: PATH -->" and "<!-- /serve_report -->" with PATH's tables)

Per rows file:
  1. the closed-loop sweep: per setting and concurrency, accuracy, request and output-token
     throughput, goodput and correct goodput at the run's SLO, TTFT/TPOT/E2EL percentiles,
     and the server's CPU milliseconds and query rows per output token;
  2. per setting: saturation (the best closed-loop output-token throughput, and the request
     rate there), its ratio to the single-stream throughput of the same setting, and the
     front end's median share of a request at concurrency 1;
  3. the open-loop runs: p99 E2EL and goodput at fractions of saturation;
  4. the mixed run, per setting.
Rows of bench/serve_sim.py (protocol "sim") get one table: validation (measured against
simulated, with the errors) or projection (per max batch, setting and offered rate).
"""
import json
import os
import re
import subprocess
import sys


def fmt(v, digits=1):
    return "-" if v is None else "%.*f" % (digits, v)


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def closed_table(rows):
    body = []
    for r in rows:
        ok = r["by_status"].get("OK", 0)
        body.append([r["settings"][0], str(r["concurrency"]), "%d/%d" % (ok, r["requests"]),
                     fmt(r["accuracy"], 3), fmt(r["request_throughput"], 2),
                     fmt(r["output_throughput"], 1), fmt(r["goodput"], 2),
                     fmt(r["correct_goodput"], 2),
                     "%s / %s" % (fmt(r["ttft_ms"]["median"], 0), fmt(r["ttft_ms"]["p99"], 0)),
                     fmt(r["tpot_ms"]["median"], 1),
                     "%s / %s" % (fmt(r["e2el_ms"]["median"], 0), fmt(r["e2el_ms"]["p99"], 0)),
                     fmt(r.get("server_cpu_ms_per_token"), 2), fmt(r.get("rows_per_token"), 1)])
    return table(["setting", "concurrency", "ok/requests", "accuracy", "req/s", "out tok/s",
                  "goodput (req/s)", "correct goodput", "TTFT p50 / p99 ms", "TPOT p50 ms",
                  "E2EL p50 / p99 ms", "server CPU ms/token", "rows/token"], body)


def saturation_table(rows):
    body = []
    for setting in dict.fromkeys(r["settings"][0] for r in rows):
        mine = [r for r in rows if r["settings"][0] == setting]
        best = max(mine, key=lambda r: r["output_throughput"])
        single = next((r for r in mine if r["concurrency"] == 1), None)
        ratio = (best["output_throughput"] / single["output_throughput"]
                 if single and single["output_throughput"] else None)
        frontend = (single.get("frontend_ms") or {}).get("median") if single else None
        body.append([setting, fmt(best["output_throughput"], 1), str(best["concurrency"]),
                     fmt(best["request_throughput"], 2), fmt(ratio, 2),
                     fmt(best["correct_goodput"], 2), fmt(frontend, 2)])
    return table(["setting", "saturation out tok/s", "at concurrency", "req/s there",
                  "vs single stream", "correct goodput there", "front end p50 ms (c=1)"], body)


def open_table(rows):
    body = [[r["settings"][0], "%.1f" % r["saturation_fraction"], fmt(r["rate"], 2),
             fmt(r["request_throughput"], 2), fmt(r["goodput"], 2), fmt(r["correct_goodput"], 2),
             "%s / %s" % (fmt(r["e2el_ms"]["median"], 0), fmt(r["e2el_ms"]["p99"], 0))]
            for r in rows]
    return table(["setting", "x saturation", "offered req/s", "served req/s", "goodput",
                  "correct goodput", "E2EL p50 / p99 ms"], body)


def deadline_table(rows):
    """Open-loop rows with and without per-request deadlines (serve.py --deadline-ms): what
    admission refused, what expired, how many requests switched tau (SLO-aware tau)."""
    def status(r, name):
        return r["by_status"].get(name, 0)
    body = [[r["settings"][0], "%d ms" % r["deadline_ms"] if r.get("deadline_ms") else "none",
             fmt(r["rate"], 2),
             "%d / %d" % (status(r, "RESOURCE_EXHAUSTED"), status(r, "DEADLINE_EXCEEDED")),
             str(r.get("tau_switched", "-")), "%d/%d" % (status(r, "OK"), r["requests"]),
             fmt(r["accuracy"], 3), fmt(r["slo_attainment"], 2), fmt(r["correct_goodput"], 2),
             "%s / %s" % (fmt(r["e2el_ms"]["median"], 0), fmt(r["e2el_ms"]["p99"], 0)),
             fmt(r.get("rows_per_token"), 1)] for r in rows]
    return table(["setting", "deadline", "offered req/s", "refused / expired", "tau switched",
                  "ok/requests", "accuracy", "SLO attainment", "correct goodput",
                  "E2EL p50 / p99 ms", "rows/token"], body)


def mixed_table(row):
    body = []
    for setting, m in row["per_setting"].items():
        body.append([setting, "%d" % m["requests"], fmt(m["accuracy"], 3),
                     fmt(m["output_throughput"], 1), fmt(m["correct_goodput"], 2),
                     "%s / %s" % (fmt(m["e2el_ms"]["median"], 0), fmt(m["e2el_ms"]["p99"], 0))])
    return table(["setting (concurrency %s, one server)" % row["concurrency"], "requests",
                  "accuracy", "out tok/s", "correct goodput", "E2EL p50 / p99 ms"], body)


def pct(v):
    return "-" if v is None else "%+.0f%%" % (100 * v)


def validate_table(rows):
    """bench/serve_sim.py validate: each measured open-loop row against its simulation, and
    against the same requests run in real time in process (mean of the repeats, and how far
    single repeats fell from their mean: the noise floor)."""
    def cell(r, key, measured, simulated, digits):
        text = "%s / " % fmt(measured, digits)
        if "real" in r:
            values = r["real"][key]
            text += "%s ±%s / " % (fmt(sum(values) / len(values), digits),
                                   pct(r["real_spread"][key])[1:])
        text += "%s (%s" % (fmt(simulated, digits), pct(r["errors"][key]))
        if "real" in r:
            text += ", %s" % pct(r["errors_vs_real_mean"][key])
        return text + ")"
    body = []
    for r in rows:
        m = r["measured"]
        body.append([r["settings"][0], "%.1f" % r["saturation_fraction"], fmt(r["rate"], 2),
                     cell(r, "output_throughput", m["output_throughput"],
                          r["output_throughput"], 0),
                     cell(r, "e2el_median", m["e2el_median_ms"], r["e2el_ms"]["median"], 0),
                     cell(r, "e2el_p99", m["e2el_p99_ms"], r["e2el_ms"]["p99"], 0),
                     "%s / %s" % (fmt(m["accuracy"], 3), fmt(r["accuracy"], 3))])
    head = ("HTTP / in-process real (spread) / simulated (error vs HTTP, vs real)"
            if any("real" in r for r in rows) else "measured / simulated (error)")
    return table(["setting", "x saturation", "offered req/s", "out tok/s: " + head,
                  "E2EL p50 ms", "E2EL p99 ms", "accuracy HTTP / simulated"], body)


def projection_table(rows):
    """bench/serve_sim.py sweep: per max batch, setting and offered rate (and row budget, for
    the rows of the row-budget experiment that have one; admission mode with the requests
    refused at arrival and cut at their deadline, for rows with deadlines)."""
    budgets = any("max_step_rows" in r for r in rows)
    admission = any(r.get("admission", "none") != "none" for r in rows)
    # SLO-aware tau: requests that switched to their tau under load, at the row's slack ratio.
    switching = any("tau_switched" in r for r in rows)
    # Its quality budget: rows with shadow samples (serve_sim.py --shadow-sample-rate).
    shadowed = any("shadow" in r for r in rows)

    def quality(r):
        if "shadow" not in r:
            return ["-", "-", "-"]
        sh, budget = r["shadow"], r.get("mismatch_budget")
        rate = sh["token_mismatch_rate_under_load"]
        return ["%g%%" % (100 * budget) if budget else "off",
                "-" if rate is None else "%.1f%% of %d" % (100 * rate, sh["samples_under_load"]),
                fmt(r["mean_tau_nats"]["switched"], 2)]

    def switched(r):
        if "tau_switched" not in r:
            return ["-"]
        return ["%d (ratio %g)" % (r["tau_switched"], r["tau_switch_slack_ratio"])]

    def admitted(r):
        s = r["by_status"]
        return ["%s%s" % (r.get("admission", "none"),
                          " %gs" % r["deadline_s"] if r.get("deadline_s") else ""),
                "%d / %d" % (s.get("RESOURCE_EXHAUSTED", 0), s.get("DEADLINE_EXCEEDED", 0)) +
                ("" if r.get("profile") != "real time" or not r.get("refusal_ms") else
                 " (refused in p99 %s ms)" % fmt(r["refusal_ms"]["p99"], 2))]
    body = [[str(r["max_batch"]), r["settings"][0], fmt(r["rate"], 2)] +
            ([str(r.get("max_step_rows") or "-")] if budgets else []) +
            (admitted(r) if admission else []) +
            (switched(r) if switching else []) +
            (quality(r) if shadowed else []) +
            ["%d/%d" % (r["by_status"].get("OK", 0), r["requests"]), fmt(r["accuracy"], 3),
             fmt(r["request_throughput"], 2), fmt(r["output_throughput"], 0),
             fmt(r["slo_attainment"], 2), fmt(r["correct_goodput"], 2),
             "%s / %s" % (fmt(r["e2el_ms"]["median"], 0), fmt(r["e2el_ms"]["p99"], 0)),
             "%s / %s" % (fmt(r["step_interval_ms"]["median"], 0),
                          fmt(r["step_interval_ms"]["p99"], 0)),
             fmt(r.get("rows_per_token"), 1)] for r in rows]
    return table(["max batch", "setting", "offered req/s"] + (["row budget"] if budgets else []) +
                 (["deadline", "refused / expired"] if admission else []) +
                 (["tau switched"] if switching else []) +
                 (["quality budget", "switched steps' token mismatches",
                   "mean tau switched"] if shadowed else []) +
                 ["ok/requests", "accuracy", "served req/s", "out tok/s", "SLO attainment",
                  "correct goodput", "E2EL p50 / p99 ms", "step interval p50 / p99 ms",
                  "rows/token"], body)


def report(path):
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        return ["%s: no rows" % path]
    first = rows[0]
    if first.get("protocol") == "sim":
        out = ["**%s, %s** (`%s`; profile `%s`; SLO %s)" % (
            first["model"], "validation" if first["phase"] == "validate" else
            "in process, real time" if first["profile"] == "real time" else "simulated",
            os.path.basename(path), first["profile"],
            ", ".join("%s <= %g ms" % (k, 1e3 * v) for k, v in first["slo_s"].items())), ""]
        if first["phase"] == "validate":
            return out + validate_table(rows) + [""]
        return out + projection_table(rows) + [""]
    out = ["**%s, max batch %d** (`%s`; SLO %s)" % (
        first["model"], first["max_batch"], os.path.basename(path),
        ", ".join("%s <= %g ms" % (k, 1e3 * v) for k, v in first["slo_s"].items())), ""]
    matched = sum(1 for r in rows if r.get("counts_match"))
    out += ["The server's request counters grew by exactly the generator's counts in %d of %d "
            "rows." % (matched, len(rows)), ""]
    closed = [r for r in rows if r["phase"] == "closed"]
    opened = [r for r in rows if r["phase"] == "open"]
    mixed = [r for r in rows if r["phase"] == "mixed"]
    deadlines = [r for r in rows if r["phase"] == "deadline"]
    if deadlines:
        out += deadline_table(deadlines) + [""]
    if closed:
        out += closed_table(closed) + [""] + saturation_table(closed) + [""]
    if opened:
        out += open_table(opened) + [""]
    for row in mixed:
        out += mixed_table(row) + [""]
    return out


BLOCK = re.compile(r"(<!-- serve_report: (\S+) -->\n)(.*?)(<!-- /serve_report -->)", re.S)


def filled(document, root="."):
    """`document` with each serve_report block holding its rows file's tables."""
    return BLOCK.sub(lambda m: m.group(1) + "\n".join(report(os.path.join(root, m.group(2)))) +
                     "\n" + m.group(4), document)


def plot(png, path):
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    closed = [r for r in rows if r["phase"] == "closed"]
    opened = [r for r in rows if r["phase"] == "open"]
    settings = list(dict.fromkeys(r["settings"][0] for r in closed))
    open_settings = list(dict.fromkeys(r["settings"][0] for r in opened))
    first = rows[0]
    var = lambda s: "$" + s.replace("-", "_")  # noqa: E731
    script = ["set terminal pngcairo size %d,480 noenhanced" % (1800 if opened else 1200),
              "set output '%s'" % png,
              "set multiplot layout 1,%d title '%s, max batch %d, up to %d requests per point'" % (
                  3 if opened else 2, first["model"], first["max_batch"],
                  max(r["requests"] for r in closed)),
              "set key top left"]
    for s in settings:
        script.append("%s << EOD" % var(s))
        for r in (r for r in closed if r["settings"][0] == s):
            script.append("%d %f %f %f" % (r["concurrency"], r["output_throughput"],
                                           r["e2el_ms"]["median"] / 1e3, r["e2el_ms"]["p99"] / 1e3))
        script.append("EOD")
    for s in open_settings:
        script.append("%s_open << EOD" % var(s))
        for r in sorted((r for r in opened if r["settings"][0] == s), key=lambda r: r["rate"]):
            script.append("%f %f %f" % (r["rate"], r["e2el_ms"]["median"] / 1e3,
                                        r["e2el_ms"]["p99"] / 1e3))
        script.append("EOD")
    latency = "with linespoints pt 7 lc %d title '%s', %s using 1:%d with lines dt 2 lc %d notitle"
    script += ["set logscale x 2", "set xlabel 'concurrent clients'",
               "set title 'output tokens/s (higher is better)'", "unset logscale y",
               "set key below horizontal maxrows 2",
               "plot " + ", ".join("%s using 1:2 with linespoints pt 7 title '%s'" % (var(s), s)
                                   for s in settings),
               "set title 'E2EL p50 (solid) and p99 (dashed), seconds'", "set logscale y",
               "set key inside top left vertical",
               "plot " + ", ".join("%s using 1:3 " % var(s) + latency % (i + 1, s, var(s), 4, i + 1)
                                   for i, s in enumerate(settings))]
    if opened:
        script += ["unset logscale x", "set xlabel 'offered requests/s (Poisson arrivals)'",
                   "set title 'open loop: E2EL p50 (solid) and p99 (dashed), seconds'",
                   "plot " + ", ".join(
                       "%s_open using 1:2 " % var(s) +
                       latency % (settings.index(s) + 1, s, var(s) + "_open", 3,
                                  settings.index(s) + 1)
                       for s in open_settings)]
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)


def plot_projection(png, path):
    """bench/serve_sim.py sweep's rows: per max batch, served output tokens/s against p99
    E2EL, one line per setting through its offered rates."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    batches = list(dict.fromkeys(r["max_batch"] for r in rows))
    settings = list(dict.fromkeys(r["settings"][0] for r in rows))
    script = ["set terminal pngcairo size %d,480 noenhanced" % (420 * len(batches) + 200),
              "set output '%s'" % png,
              "set multiplot layout 1,%d title '%s at %s costs (simulated): output tokens/s "
              "against p99 E2EL, one point per offered rate'" % (
                  len(batches), rows[0]["model"], rows[0]["profile"]),
              "set key top left", "set logscale y", "set xlabel 'output tokens/s'",
              "set ylabel 'E2EL p99, seconds'"]
    for b in batches:
        for st in settings:
            script.append("$b%d_%s << EOD" % (b, st.replace("-", "_")))
            for r in sorted((r for r in rows if r["max_batch"] == b and r["settings"][0] == st),
                            key=lambda r: r["rate"]):
                script.append("%f %f" % (r["output_throughput"], r["e2el_ms"]["p99"] / 1e3))
            script.append("EOD")
    for b in batches:
        script += ["set title 'max batch %d'" % b,
                   "plot " + ", ".join("$b%d_%s using 1:2 with linespoints pt 7 title '%s'" % (
                       b, st.replace("-", "_"), st) for st in settings)]
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)


def main(args):
    if not args:
        sys.exit(__doc__)
    if args[0] == "--plot":
        with open(args[2], encoding="utf-8") as f:
            first = json.loads(f.readline())
        (plot_projection if first.get("phase") == "projection" else plot)(args[1], args[2])
        return
    if args[0] == "--update":
        for path in args[1:]:
            with open(path, encoding="utf-8") as f:
                text = filled(f.read())
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return
    lines = []
    for p in args:
        lines += report(p)
    print("\n".join(lines).rstrip("\n"))


if __name__ == "__main__":
    main(sys.argv[1:])
