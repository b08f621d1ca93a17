"""Decoding dynamics of a long-form model: how many tokens a threshold decode
commits per forward and how uncertain the committed tokens were.

Threshold decoding as the C++ engine's Decoder implements it (engine/decoding/decoder.{h,cc},
schedule kBlock with confidence_threshold > 0, Fast-dLLM's rule): blocks of --block (32) left
to right; each step runs one forward (no cache) and, among the still-masked positions of the
current block, commits every one whose top probability (token_prob, fp32 softmax) is
>= --threshold (0.9), and at least one: the most confident (ties -> lowest position) when
none passes. The block advances once it has no masks. A sequence is finished when no answer
mask remains or as soon as its first mask-or-end position holds an end token (the output is
cut there; evaluate.answers_finished). The entropy of a committed token is that of the full
softmax at its position at the step it was committed, in nats.

Printed (per task family and overall): tokens per forward (committed tokens / forwards,
every committed token counted, end and padding tokens included, as the engine counts them),
mean committed-token entropy, the fraction of steps whose largest committed entropy is
> 0.5 nats, a histogram of committed entropies, and exact match of the `#### ` line. With
--vanilla (default on) also the vanilla sampler: blocks of 32, one token per step
(evaluate.py's sampler), its exact match and the same entropy statistics.

Usage: /usr/bin/python3 -m tools.train.dynamics_probe MODEL_DIR [--split test] [--items N]
       [--batch B] [--no-vanilla] [--json OUT]
  --split test|val|PATH: tools/tasks/data_cot/<split>.jsonl by default; the first N items
  (round-robin over the families) are decoded.
"""
import argparse
import json
import os
import time

from tools.train import blas_env  # before torch: threads, OpenBLAS core type, malloc

blas_env.configure(threads=1)

import torch  # noqa: E402

from tools.tasks import longform  # noqa: E402
from tools.train import common, evaluate  # noqa: E402

BINS = [0.01, 0.1, 0.5, 1.0]  # histogram edges (nats)


@torch.no_grad()
def decode(model, family, sp, prompts, gen_length, block, threshold):
    """prompts: list of id lists. threshold None = one token per step (vanilla). Returns
    (answer ids [B][G], per row list of steps, each the list of committed (pos, entropy))."""
    b = len(prompts)
    plens = torch.tensor([len(q) for q in prompts])
    n = int(plens.max()) + gen_length
    x = torch.full((b, n), sp.pad, dtype=torch.long)
    keys = torch.zeros((b, n), dtype=torch.bool)
    for i, q in enumerate(prompts):
        x[i, :len(q)] = torch.as_tensor(q)
        x[i, len(q):len(q) + gen_length] = sp.mask
        keys[i, :len(q) + gen_length] = True
    shift = 1 if family == "dream" else 0
    idx = plens[:, None] + torch.arange(gen_length)[None, :]
    steps = [[] for _ in range(b)]
    active = list(range(b))
    pos = torch.arange(gen_length)
    while active:
        a = torch.tensor(active)
        logits = model(x[a], key_mask=keys[a]).float()
        rows = torch.arange(len(active))[:, None]
        logits = logits[rows, idx[a] - shift]
        logp = torch.log_softmax(logits, dim=-1)
        probs = logp.exp()
        conf, tok = probs.max(dim=-1)  # first maximal id on ties
        ent = -(probs * logp).sum(dim=-1)
        ans = x[a[:, None], idx[a]]
        masked = ans == sp.mask
        still = []
        for r, i in enumerate(active):
            m = masked[r]
            first = int(m.nonzero()[0]) if bool(m.any()) else gen_length
            blk = first // block
            cand = m & (pos >= blk * block) & (pos < (blk + 1) * block)
            c = torch.where(cand, conf[r], torch.full_like(conf[r], -float("inf")))
            if threshold is None:
                picks = [int(c.argmax())]
            else:
                picks = (cand & (conf[r] >= threshold)).nonzero()[:, 0].tolist()
                if not picks:
                    picks = [int(c.argmax())]  # first maximal position on ties
            for p in picks:
                x[i, plens[i] + p] = tok[r, p]
            steps[i].append([(p, float(ent[r, p])) for p in picks])
            row = x[i, idx[i]][None]
            if bool((row != sp.mask).all()) or bool(
                    evaluate.answers_finished(row, sp.mask, sp.end)[0]):
                continue
            still.append(i)
        active = still
    return x[torch.arange(b)[:, None], idx].tolist(), steps


def stats(steps):
    """Aggregates for a list of per-item step lists."""
    forwards = sum(len(s) for s in steps)
    ents = [e for s in steps for st in s for _, e in st]
    high = sum(1 for s in steps for st in s if max(e for _, e in st) > 0.5)
    hist = [0] * (len(BINS) + 1)
    for e in ents:
        hist[sum(e >= b for b in BINS)] += 1
    return {"forwards": forwards, "tokens": len(ents),
            "tokens_per_forward": len(ents) / max(1, forwards),
            "mean_entropy": sum(ents) / max(1, len(ents)),
            "frac_steps_max_entropy_gt_0.5": high / max(1, forwards),
            "entropy_hist": hist}


def run(model, tok, family, items, gen_length, block, threshold, batch):
    sp = common.Specials(family, tok)
    enc = [common.prompt_ids(tok, family, it["prompt"]) for it in items]
    order = sorted(range(len(items)), key=lambda i: len(enc[i]))
    outs, steps = [None] * len(items), [None] * len(items)
    for s in range(0, len(order), batch):
        chunk = order[s:s + batch]
        o, st = decode(model, family, sp, [enc[i] for i in chunk], gen_length, block, threshold)
        for j, i in enumerate(chunk):
            outs[i], steps[i] = o[j], st[j]
    correct = [longform.check(common.cut_answer(tok, sp, outs[i]), it["final"])
               for i, it in enumerate(items)]
    res = {"all": {**stats(steps), "exact": sum(correct) / len(items), "items": len(items)}}
    for f in sorted({it["family"] for it in items}):
        ii = [i for i, it in enumerate(items) if it["family"] == f]
        res[f] = {**stats([steps[i] for i in ii]),
                  "exact": sum(correct[i] for i in ii) / len(ii), "items": len(ii)}
    texts = [common.cut_answer(tok, sp, outs[i]) for i in range(len(items))]
    return res, texts


def show(name, res):
    print(f"{name}: family  items  exact  tok/fwd  mean_H  frac>0.5  "
          f"hist[<.01,<.1,<.5,<1,>=1]")
    for f, r in res.items():
        print(f"  {f:8s} {r['items']:4d}  {r['exact']:.3f}  {r['tokens_per_forward']:6.2f}  "
              f"{r['mean_entropy']:.3f}  {r['frac_steps_max_entropy_gt_0.5']:.3f}     "
              f"{r['entropy_hist']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--split", default="test")
    ap.add_argument("--items", type=int, default=50)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-vanilla", action="store_true")
    ap.add_argument("--json", default=None, help="write the results (and outputs) here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    path = common.cot_split_path(args.split)
    items = longform.load_jsonl(path)[:args.items]
    model, family, tok, g = common.load_model_dir(args.model, torch.float32)
    step = None
    ts = os.path.join(args.model, "training_state.json")
    if os.path.exists(ts):
        with open(ts) as f:
            step = json.load(f).get("step")
    print(f"{args.model} ({family}, step {step}), {len(items)} items of {path}, G {g}, "
          f"block {args.block}")
    out = {"model": args.model, "step": step, "split": path, "items": len(items)}
    t0 = time.time()
    res, texts = run(model, tok, family, items, g, args.block, args.threshold, args.batch)
    show(f"threshold {args.threshold} ({time.time() - t0:.0f}s)", res)
    out["threshold"], out["threshold_texts"] = res, texts
    if not args.no_vanilla:
        t0 = time.time()
        res, texts = run(model, tok, family, items, g, args.block, None, args.batch)
        show(f"vanilla, 1 token/step ({time.time() - t0:.0f}s)", res)
        out["vanilla"], out["vanilla_texts"] = res, texts
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
