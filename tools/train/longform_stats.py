"""Token-length statistics of the long-form splits, measured with a model's own tokenizer.

Prompt tokens = the chat-rendered prompt (what the engine prefills); answer tokens = the
answer text (trace + `#### ` line) without the end-of-turn token, which must fit G - 1.

Usage: python3 -m tools.train.longform_stats --tokenizer models/llada-long [--family llada]
           [--split test]
"""
import argparse
import collections
import json
import os

from tools.tasks import longform
from tools.train import bpe, common


def stats(tok, family, items):
    by = collections.defaultdict(lambda: {"prompt": [], "answer": [], "prompt_text": []})
    for it in items:
        d = by[it["family"]]
        d["prompt"].append(len(common.prompt_ids(tok, family, it["prompt"])))
        d["prompt_text"].append(len(tok.encode(it["prompt"])))
        d["answer"].append(len(tok.encode(it["answer"])))
    out = {}
    for f in longform.FAMILIES + ["all"]:
        if f == "all":
            d = {k: sum((by[g][k] for g in by), []) for k in ("prompt", "answer", "prompt_text")}
        else:
            d = by[f]
        out[f] = {k: {"min": min(v), "max": max(v), "mean": round(sum(v) / len(v), 1)}
                  for k, v in d.items()}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="a model folder or tokenizer folder")
    ap.add_argument("--split", default="test")
    args = ap.parse_args()
    tok = bpe.load(args.tokenizer)
    family = tok.family
    items = longform.load_jsonl(os.path.join(longform.DATA_DIR, args.split + ".jsonl"))
    s = stats(tok, family, items)
    print(f"{family} tokenizer {args.tokenizer}, {args.split} split, {len(items)} items")
    print(f"{'family':8s} {'prompt (chat) min/mean/max':>28s} {'prompt text':>18s} "
          f"{'answer min/mean/max':>22s}")
    for f, d in s.items():
        p, t, a = d["prompt"], d["prompt_text"], d["answer"]
        print(f"{f:8s} {p['min']:>12} {p['mean']:>7} {p['max']:>6} "
              f"{t['min']:>6} {t['mean']:>6} {t['max']:>5} "
              f"{a['min']:>8} {a['mean']:>7} {a['max']:>5}")
    print(json.dumps(s))


if __name__ == "__main__":
    main()
