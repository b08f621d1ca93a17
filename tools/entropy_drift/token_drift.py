"""Per-token K/V drift: how far a decoded token's keys and values move after it is committed,
by steps since its first recompute and by the entropy it was committed at.

EntropyCache's partial step recomputes the k most recent commits (the paper's observation 2: a
token's features keep moving for a few steps after it is unmasked); our variant
(cache.recent_min_entropy, docs/method.md section 3.9) recomputes only those committed at or
above an entropy floor, on the idea that a near-certain commit moves little. This measures both
ideas directly with the PyTorch reference model (tools/reference/modeling.py), independent of
the engine and its cache: every step is a full forward, so every K/V read here is exact.

Decoding: the sliding window of docs/method.md section 2.2 (the W leftmost masked answer
positions; each step commits every one whose top probability is >= the threshold, at least the
most confident), stopped as the engine stops (evaluate.answers_finished). Batch 1, greedy.

For each answer token p committed at step s (its token enters the canvas after step s's
forward) with entropy e_p (nats, the full softmax at p at step s), F_t[p] is the concatenation
over layers of its K and V at step t (pre-RoPE: the rotation is the same at every step, so it
changes no distance). Step s+1 is its first recompute, the cache entry EntropyCache writes for
it; age a = t - (s+1). Recorded for every later step t:
  - step drift      |F_t[p] - F_{t-1}[p]| / |F_t[p]|  (how much one step moves it);
  - staleness       |F_t[p] - F_{s+1}[p]| / |F_t[p]|  (the error of a cache entry written at
                     its first recompute and never refreshed, read at step t).
Printed, for the answer's tokens: medians by age bucket and commit-entropy bucket, and the
Spearman correlation of entropy with staleness at fixed age. Apart, for scale: the end tokens
that fill the canvas after the answer (window decoding commits them too, often before the
answer's last token), and the prompt's tokens.

Usage: /usr/bin/python3 -m tools.entropy_drift.token_drift MODEL_DIR [--split val]
       [--items 24] [--window 16] [--threshold 0.9] [--out REPORT.md]
"""
import argparse
import os

from tools.train import blas_env  # before torch: threads, OpenBLAS core type, malloc

blas_env.configure(threads=1)

import torch  # noqa: E402

from tools.entropy_drift import analyze  # noqa: E402
from tools.tasks import longform  # noqa: E402
from tools.train import common, evaluate  # noqa: E402

AGE_BUCKETS = [(1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 10 ** 9)]
ENTROPY_EDGES = [0.01, 0.1, 0.3, 1.0]  # nats; buckets <0.01, <0.1, <0.3, <1, >=1


def entropy_bucket(e):
    return sum(e >= b for b in ENTROPY_EDGES)


def entropy_label(i):
    edges = ["0"] + [str(b) for b in ENTROPY_EDGES] + ["inf"]
    return f"[{edges[i]}, {edges[i + 1]})"


def age_label(lo, hi):
    return str(lo) if lo == hi else (f"{lo}-{hi}" if hi < 10 ** 9 else f">={lo}")


@torch.no_grad()
def features(model, x):
    """x: int64 [N]. Returns (logits [N,V] fp32, F [N, layers*2*kv_dim]): each layer's K and V
    before RoPE, from the block's own input (the embedding for layer 0)."""
    logits, hidden = model(x, return_hidden=True)
    inputs = [model.embed(x[None])] + hidden[:-1]
    parts = []
    for blk, h in zip(model.blocks, inputs):
        normed = blk.attn_norm(h)
        parts.append(blk.k_proj(normed)[0])
        parts.append(blk.v_proj(normed)[0])
    return logits[0].float(), torch.cat(parts, dim=-1).float()


@torch.no_grad()
def decode_one(model, family, sp, prompt, gen_length, window, threshold):
    """One greedy window decode. Returns (answer ids, records, prompt drifts): records are
    (age, entropy, step drift, staleness, padding) per committed token and later step, padding
    true for a position after the answer's first end token (the end tokens that fill the rest
    of the canvas); prompt drifts the per-step drift of the prompt's tokens (median over the
    prompt, per step)."""
    plen = len(prompt)
    x = torch.full((plen + gen_length,), sp.mask, dtype=torch.long)
    x[:plen] = torch.as_tensor(prompt)
    shift = 1 if family == "dream" else 0
    committed = {}  # answer position -> (commit step, entropy)
    first_read = {}  # answer position -> F at its first recompute
    prev = None
    records, prompt_drift = [], []
    step = 0
    while True:
        logits, f = features(model, x)
        norms = f.norm(dim=-1).clamp_min(1e-30)
        if prev is not None:
            moved = (f - prev).norm(dim=-1) / norms
            prompt_drift.append(float(moved[:plen].median()))
            for p, (s, e) in committed.items():
                if step == s + 1:
                    first_read[p] = f[plen + p].clone()
                elif step > s + 1:
                    stale = float((f[plen + p] - first_read[p]).norm() / norms[plen + p])
                    records.append((step - s - 1, e, float(moved[plen + p]), stale, p))
        prev = f
        ans = x[plen:]
        masked = (ans == sp.mask).nonzero()[:, 0]
        if len(masked) == 0 or bool(evaluate.answers_finished(ans[None], sp.mask, sp.end)[0]):
            break
        rows = logits[plen - shift + masked[:window]]
        logp = torch.log_softmax(rows, dim=-1)
        probs = logp.exp()
        conf, tok = probs.max(dim=-1)
        ent = -(probs * logp).sum(dim=-1)
        picks = (conf >= threshold).nonzero()[:, 0].tolist() or [int(conf.argmax())]
        for i in picks:
            p = int(masked[i])
            x[plen + p] = tok[i]
            committed[p] = (step, float(ent[i]))
        step += 1
    ids = x[plen:].tolist()
    first_end = min((i for i, t in enumerate(ids) if t in sp.end), default=len(ids))
    records = [r[:4] + (r[4] > first_end,) for r in records]
    return ids, records, prompt_drift


def spearman(xs, ys):
    """Spearman's rho (analyze.spearman), nan below three samples."""
    return analyze.spearman(xs, ys) if len(xs) >= 3 else float("nan")


def median(v):
    s = sorted(v)
    return s[len(s) // 2] if s else float("nan")


def tables(records, prompt_drift):
    """Markdown tables of the records: the answer's tokens by age and commit entropy, then the
    end padding's and the prompt's drift for scale."""
    padding = [r for r in records if r[4]]
    records = [r for r in records if not r[4]]
    out = []
    out.append("| age (steps since first recompute) | records (token, step) | median step drift | "
               "median staleness | " + " | ".join(
                   f"staleness, entropy {entropy_label(i)}"
                   for i in range(len(ENTROPY_EDGES) + 1)) + " | ρ(entropy, staleness) |")
    out.append("|---" * (5 + len(ENTROPY_EDGES) + 1) + "|")
    for lo, hi in AGE_BUCKETS:
        rs = [r for r in records if lo <= r[0] <= hi]
        if not rs:
            continue
        cells = []
        for i in range(len(ENTROPY_EDGES) + 1):
            b = [r[3] for r in rs if entropy_bucket(r[1]) == i]
            cells.append(f"{median(b):.4f} ({len(b)})" if b else "-")
        rho = spearman([r[1] for r in rs], [r[3] for r in rs])
        out.append(f"| {age_label(lo, hi)} | {len(rs)} | {median([r[2] for r in rs]):.4f} | "
                   f"{median([r[3] for r in rs]):.4f} | " + " | ".join(cells) +
                   f" | {rho:.2f} |")
    out.append("")
    out.append("End padding (%d records): median staleness %s by age bucket; median commit "
               "entropy %.2g nats." % (
                   len(padding), " / ".join(
                       f"{median([r[3] for r in padding if lo <= r[0] <= hi]):.4f}"
                       for lo, hi in AGE_BUCKETS), median([r[1] for r in padding])))
    out.append(f"Prompt tokens, median per-step drift over all steps: {median(prompt_drift):.4f}")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--split", default="val")
    ap.add_argument("--items", type=int, default=24)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--out", default=None, help="also write the printed report here")
    args = ap.parse_args()
    path = common.cot_split_path(args.split)
    items = longform.load_jsonl(path)[:args.items]
    model, family, tok, gen_length = common.load_model_dir(args.model, torch.float32)
    sp = common.Specials(family, tok)
    records, prompt_drift, right = [], [], 0
    for it in items:
        ids, rs, pd = decode_one(model, family, sp, common.prompt_ids(tok, family, it["prompt"]),
                                 gen_length, args.window, args.threshold)
        records += rs
        prompt_drift += pd
        right += longform.check(common.cut_answer(tok, sp, ids), it["final"])
    head = (f"{args.model} ({family}), {len(items)} items of {os.path.relpath(path, common.ROOT)}, "
            f"window {args.window}, threshold {args.threshold}: {right}/{len(items)} right, "
            f"{len(records)} (token, later step) records, "
            f"{sum(1 for r in records if not r[4])} of them the answer's")
    text = head + "\n\n" + tables(records, prompt_drift)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
