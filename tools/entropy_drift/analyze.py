#!/usr/bin/python3
"""Entropy-drift analysis of dllm-bench shadow samples (docs/entropy-drift.md).

  analyze.py SAMPLES.csv [SAMPLES.csv ...] --out PREFIX

Each input is a `dllm-bench --shadow 1 --shadow-out` CSV. A sample is one partial step t+1;
its `entropy` column is E at step t (max entropy of the tokens committed at step t, the
number EntropyCache compares with tau) and the drift/KL columns are measured at step t+1.
Prints, per file and measure, the Spearman rank correlation between E and the measure with
its sample size and a two-sided p-value (normal approximation of the t statistic, fine for
n > 30), and the within-step ρ (ρ computed separately for every step index t+1, averaged
weighted by count) that removes any trend of both with the position in the generation, as a
Markdown table; then, per file, the median drift of the old decoded tokens by E quintile;
writes PREFIX_<name>.dat (E, drift) for gnuplot. Samples whose previous step committed nothing
(E = 0 by convention) are excluded: no token, no signal.
Standard library only.
"""
import argparse
import csv
import math
import pathlib

MEASURES = [
    ("drift_decoded_old", "K/V drift, decoded tokens older than recent k"),
    ("drift_prompt", "K/V drift, prompt"),
    ("drift_masks_outside", "K/V drift, masks outside the window"),
    ("drift_recomputed", "K/V drift, recomputed rows"),
    ("kl_mean", "KL(full || partial), mean over predicted rows"),
    ("max_prob_change", "max committed-probability change"),
]


def ranks(xs):
    """Average ranks (1-based), ties share the mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def pearson(a, b):
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    if saa == 0 or sbb == 0:
        return float("nan")
    return sab / math.sqrt(saa * sbb)


def spearman(a, b):
    return pearson(ranks(a), ranks(b))


def p_value(r, n):
    if n < 4 or math.isnan(r) or abs(r) >= 1:
        return float("nan") if math.isnan(r) else 0.0
    t = r * math.sqrt((n - 2) / (1 - r * r))
    return math.erfc(abs(t) / math.sqrt(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    print("| samples | measure | n | Spearman ρ(E_t, measure_t+1) | p | within-step ρ | median E "
          "| median measure |")
    print("|---|---|---|---|---|---|---|---|")
    quintiles = []
    for path in args.inputs:
        name = pathlib.Path(path).stem
        rows = list(csv.DictReader(open(path)))
        for col, label in MEASURES:
            kept = [r for r in rows if r.get(col, "") != "" and float(r["entropy"]) > 0]
            pairs = [(float(r["entropy"]), float(r[col])) for r in kept]
            if len(pairs) < 4:
                continue
            e = [p[0] for p in pairs]
            m = [p[1] for p in pairs]
            rho = spearman(e, m)
            by_step = {}
            for r, pair in zip(kept, pairs):
                by_step.setdefault(r["step"], []).append(pair)
            num = den = 0.0
            for group in by_step.values():
                if len(group) < 10:
                    continue
                g = spearman([x for x, _ in group], [y for _, y in group])
                if not math.isnan(g):
                    num += g * len(group)
                    den += len(group)
            within = num / den if den else float("nan")
            p = p_value(rho, len(pairs))
            p_text = "< 1e-300" if p < 1e-300 else f"{p:.2g}"
            print(f"| {name} | {label} | {len(pairs)} | {rho:.3f} | {p_text} | {within:.3f} "
                  f"| {sorted(e)[len(e) // 2]:.3g} | {sorted(m)[len(m) // 2]:.3g} |")
            if col == "drift_decoded_old":
                ordered = sorted(pairs)
                q = []
                for i in range(5):
                    part = ordered[i * len(ordered) // 5:(i + 1) * len(ordered) // 5]
                    ms = sorted(y for _, y in part)
                    q.append((part[0][0], part[-1][0], ms[len(ms) // 2]))
                quintiles.append((name, q))
            if col in ("drift_decoded_old", "kl_mean"):
                with open(f"{args.out}_{name}_{col}.dat", "w") as f:
                    for x, y in pairs:
                        f.write(f"{x} {y}\n")
    print()
    print("Median drift of the old decoded tokens at step t+1 by quintile of E_t:")
    print()
    print("| samples | Q1 | Q2 | Q3 | Q4 | Q5 |")
    print("|---|---|---|---|---|---|")
    for name, q in quintiles:
        cells = " | ".join(f"{m:.3g} (E {lo:.1e}..{hi:.1e})" for lo, hi, m in q)
        print(f"| {name} | {cells} |")


if __name__ == "__main__":
    main()
