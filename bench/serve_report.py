#!/usr/bin/env python3
"""The tables of docs/serving.md from bench/serve_sweep.py's rows (a test checks that the
document shows exactly this output for the committed rows).

  bench/serve_report.py docs/results/serving-llada-cot-b8.jsonl [...]

Per rows file:
  1. the closed-loop sweep: per setting and concurrency, accuracy, request and output-token
     throughput, goodput and correct goodput at the run's SLO, TTFT/TPOT/E2EL percentiles;
  2. per setting: saturation (the best closed-loop output-token throughput, and the request
     rate there), its ratio to the single-stream throughput of the same setting, and the
     front end's median share of a request at concurrency 1;
  3. the open-loop runs: p99 E2EL and goodput at fractions of saturation;
  4. the mixed run, per setting.
"""
import json
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
                     "%s / %s" % (fmt(r["e2el_ms"]["median"], 0), fmt(r["e2el_ms"]["p99"], 0))])
    return table(["setting", "concurrency", "ok/requests", "accuracy", "req/s", "out tok/s",
                  "goodput (req/s)", "correct goodput", "TTFT p50 / p99 ms", "TPOT p50 ms",
                  "E2EL p50 / p99 ms"], body)


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


def mixed_table(row):
    body = []
    for setting, m in row["per_setting"].items():
        body.append([setting, "%d" % m["requests"], fmt(m["accuracy"], 3),
                     fmt(m["output_throughput"], 1), fmt(m["correct_goodput"], 2),
                     "%s / %s" % (fmt(m["e2el_ms"]["median"], 0), fmt(m["e2el_ms"]["p99"], 0))])
    return table(["setting (concurrency %s, one server)" % row["concurrency"], "requests",
                  "accuracy", "out tok/s", "correct goodput", "E2EL p50 / p99 ms"], body)


def report(path):
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        return ["%s: no rows" % path]
    first = rows[0]
    out = ["**%s, max batch %d** (`%s`; SLO %s)" % (
        first["model"], first["max_batch"], path.split("/")[-1],
        ", ".join("%s <= %g ms" % (k, 1e3 * v) for k, v in first["slo_s"].items())), ""]
    closed = [r for r in rows if r["phase"] == "closed"]
    opened = [r for r in rows if r["phase"] == "open"]
    mixed = [r for r in rows if r["phase"] == "mixed"]
    if closed:
        out += closed_table(closed) + [""] + saturation_table(closed) + [""]
    if opened:
        out += open_table(opened) + [""]
    for row in mixed:
        out += mixed_table(row) + [""]
    return out


def main(paths):
    if not paths:
        sys.exit(__doc__)
    lines = []
    for p in paths:
        lines += report(p)
    print("\n".join(lines).rstrip("\n"))


if __name__ == "__main__":
    main(sys.argv[1:])
