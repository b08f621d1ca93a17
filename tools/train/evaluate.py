"""Vanilla masked-diffusion decoding and exact-match evaluation of a tiny model folder.

Sampler (the one the C++ engine is checked against, token for token):
  canvas = prompt ids + G x MASK; G steps, one token committed per step;
  per step: one full forward over the canvas (fp32 compute, weights = the bf16 values stored
  in model.safetensors), logits for answer position p are row p (LLaDA) or row p-1 (Dream,
  shifted); probs = softmax(logits) in fp32; proposal = argmax (ties -> lowest id),
  confidence = its probability; among still-masked answer positions commit the one with the
  highest confidence (ties -> lowest position). This is LLaDA generate.py with steps =
  gen_length = block_length, temperature 0, remasking low_confidence (up to the confidence
  being fp32 rather than bf16), and Dream's confidence-ranked sampling with one token per
  step. Output text is cut at the first end token.

Usage (from the repo root):
  python3 -m tools.train.evaluate --model models/llada-tiny --split tools/tasks/data/test.jsonl \
      --out tools/train/out/llada-tiny_test_generations.jsonl
"""
import argparse
import collections
import json
import os
import time

from tools.train import blas_env  # before torch: threads, OpenBLAS core type, malloc

blas_env.configure(threads=1)

import torch  # noqa: E402

from tools.reference import modeling  # noqa: E402
from tools.tasks import longform, tasks  # noqa: E402
from tools.train import bpe, common  # noqa: E402


def answers_finished(answers, mask_id, end_ids):
    """[B] bool: the row's answer is final, i.e. its first position that is a mask or an end
    token holds an end token. Output is cut there, and later steps only fill positions after
    it, so stopping then changes no output text (the C++ engine stops at the same point)."""
    stop = answers == mask_id
    for e in end_ids:
        stop |= answers == e
    first = stop.int().argmax(dim=1)  # 0 where there is none: stop.any() rules those out
    return stop.any(dim=1) & (answers.gather(1, first[:, None])[:, 0] != mask_id)


@torch.no_grad()
def decode_batch(model, family, prompts, gen_length, mask_id, block_length=None):
    """prompts: int64 [B,P] (all the same length). Returns the answer region [B,G].
    block_length (default G): semi-autoregressive blocks; a step commits the most confident
    masked position of the current block only (LLaDA generate.py, steps = gen_length)."""
    return decode_padded(model, family, list(prompts), gen_length, mask_id,
                         block_length, pad_id=0)


@torch.no_grad()
def decode_padded(model, family, prompts, gen_length, mask_id, block_length=None, pad_id=0,
                  end_ids=None):
    """prompts: list of int64 [P_i] of any lengths. Each canvas is prompt + G masks, right
    padded to the longest with keys masked out (the same sampler as unpadded decoding, up
    to rounding). Returns the answer regions [B,G]. end_ids: stop once every row's answer
    is final (answers_finished); positions after its end token may then still be masks."""
    blk = block_length or gen_length
    if gen_length % blk:
        raise ValueError(f"gen_length {gen_length} is not a multiple of block {blk}")
    b = len(prompts)
    plens = torch.tensor([len(q) for q in prompts])
    n = int(plens.max()) + gen_length
    x = torch.full((b, n), pad_id, dtype=torch.long)
    keys = torch.zeros((b, n), dtype=torch.bool)
    for i, q in enumerate(prompts):
        x[i, :len(q)] = torch.as_tensor(q)
        x[i, len(q):len(q) + gen_length] = mask_id
        keys[i, :len(q) + gen_length] = True
    padded = bool((~keys).any())
    rows = torch.arange(b)
    shift = 1 if family == "dream" else 0
    idx = plens[:, None] + torch.arange(gen_length)[None, :]  # answer positions [B,G]
    for step in range(gen_length):
        logits = model(x, key_mask=keys if padded else None).float()
        logits = logits[rows[:, None], idx - shift]
        probs = torch.softmax(logits, dim=-1)
        conf, x0 = probs.max(dim=-1)  # first maximal index on ties
        masked = x[rows[:, None], idx] == mask_id
        block = step // blk
        in_block = torch.zeros(gen_length, dtype=torch.bool)
        in_block[block * blk:(block + 1) * blk] = True
        conf = torch.where(masked & in_block, conf, torch.full_like(conf, -float("inf")))
        pos = conf.argmax(dim=-1)  # first maximal position on ties
        x[rows, plens + pos] = x0[rows, pos]
        if end_ids and bool(answers_finished(x[rows[:, None], idx], mask_id, end_ids).all()):
            break
    return x[rows[:, None], idx]


def evaluate(model, tok, family, items, gen_length, batch_size=64, block_length=None,
             check=tasks.check, answer_key="answer", padded=False, stop_at_end=False):
    """Returns a list of generation records in the order of `items`. check(text, item
    [answer_key]) scores an output. padded: batch prompts of different lengths together
    (faster; for validation) instead of grouping equal lengths (the recorded generations).
    stop_at_end: stop a batch once every answer is final (same texts; output_ids may end
    in masks instead of the end tokens a full decode would write)."""
    sp = common.Specials(family, tok)
    enc = [common.prompt_ids(tok, family, it["prompt"]) for it in items]
    groups = collections.defaultdict(list)
    for i in sorted(range(len(enc)), key=lambda i: len(enc[i])):
        groups[0 if padded else len(enc[i])].append(i)
    records = [None] * len(items)
    for plen in sorted(groups):
        idx = groups[plen]
        for s in range(0, len(idx), batch_size):
            chunk = idx[s:s + batch_size]
            out = decode_padded(model, family, [enc[i] for i in chunk], gen_length, sp.mask,
                                block_length, sp.pad, sp.end if stop_at_end else None)
            for j, i in enumerate(chunk):
                ids = out[j].tolist()
                text = common.cut_answer(tok, sp, ids)
                it = items[i]
                records[i] = {"prompt": it["prompt"], "family": it["family"],
                              "answer": it["answer"], "prompt_ids": enc[i],
                              "gen_length": gen_length, "output_ids": ids, "text": text,
                              "correct": check(text, it[answer_key])}
                if "final" in it:
                    records[i]["final"] = it["final"]
    return records


def summarize(records):
    by = collections.defaultdict(lambda: [0, 0])
    for r in records:
        by[r["family"]][0] += int(r["correct"])
        by[r["family"]][1] += 1
    total = sum(v[0] for v in by.values()) / max(1, len(records))
    return total, {f: v[0] / v[1] for f, v in sorted(by.items())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--split", default=os.path.join(tasks.DATA_DIR, "test.jsonl"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--gen-length", type=int, default=None,
                    help="default: gen_length from the model's generation_config.json")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="first N items only")
    ap.add_argument("--batch", type=int, default=4, help="long-form: prompts per batch")
    ap.add_argument("--padded", action="store_true",
                    help="long-form: batch prompts of different lengths (padding keys masked; "
                    "faster, equal up to rounding); default: equal lengths only, as recorded")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, cfg = modeling.load_checkpoint(args.model, torch.float32)
    family = common.family_of(cfg)
    tok = bpe.load(args.model)
    with open(os.path.join(args.model, "generation_config.json")) as f:
        gcfg = json.load(f)
    g = args.gen_length or gcfg["gen_length"]
    items = tasks.load_jsonl(args.split)
    if args.limit:
        items = items[:args.limit]
    t0 = time.time()
    if items and "final" in items[0]:
        # Long-form suite: score the "#### " line; the model's block length (vanilla = blocks
        # of 32, one token per step).
        records = evaluate(model, tok, family, items, g, batch_size=args.batch,
                           block_length=gcfg.get("block_length"), check=longform.check,
                           answer_key="final", padded=args.padded, stop_at_end=True)
    else:
        records = evaluate(model, tok, family, items, g)
    total, per = summarize(records)
    print(json.dumps({"model": args.model, "family": family, "items": len(records),
                      "gen_length": g, "exact_match": round(total, 4),
                      "per_family": {k: round(v, 4) for k, v in per.items()},
                      "seconds": round(time.time() - t0, 1)}))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps({k: r[k] for k in ("prompt", "prompt_ids", "gen_length",
                                                      "output_ids", "text", "correct",
                                                      "answer", "final", "family") if k in r},
                                   ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
