"""Per-line accuracy of the column arithmetic (add, sub) of a long model, teacher-forced.

For each trace line `x+y+c=ss, write d, carry c` (sub: `x-y-b+bb=d, write d, borrow c`) the
probe keeps the prompt, the earlier lines and the line's operands, masks everything from the
line's result on (as block decoding sees it when it commits the result: the line's `write`
and `carry` digits repeat the result, and later lines and the final `####` line would give
it away), runs one forward and scores the argmax at the result digits. An item of n lines is
right only if all n are, so a per-line rate p bounds its exact match near p^n: this measures
the arithmetic itself, with ~7 lines per item, where 15 validation items cannot separate
80% from 90%.

Usage: /usr/bin/python3 -m tools.train.line_probe MODEL_DIR [--items N] [--split FILE]
"""
import argparse
import collections
import json
import os
import re

from tools.train import blas_env  # before torch: threads, OpenBLAS core type, malloc

blas_env.configure(threads=1)

import torch  # noqa: E402

from tools.reference import modeling  # noqa: E402
from tools.train import bpe, common  # noqa: E402

LINE_RX = re.compile(r"=(\d+), write \d, (?:carry|borrow) \d$")


def token_offsets(tok, ids):
    """Character offset of each token of `ids` in tok.decode(ids)."""
    offs, pos = [], 0
    for t in ids:
        offs.append(pos)
        pos += len(tok.decode([t]))
    return offs


def probe_masks(tok, answer):
    """(answer ids, [(result token indices, masked token indices)] per arithmetic line); the
    masked indices are the result's first token and every token after it."""
    ids = tok.encode(answer)
    offs = token_offsets(tok, ids)
    if tok.decode(ids) != answer:
        raise ValueError("the answer does not round-trip through the tokenizer")
    at = {o: i for i, o in enumerate(offs)}
    out, start = [], 0
    for line in answer.split("\n"):
        m = LINE_RX.search(line)
        if m:
            first = start + m.start(1)
            result = [at[first + j] for j in range(len(m.group(1)))]
            out.append((result, list(range(result[0], len(ids)))))
        start += len(line) + 1
    return ids, out


@torch.no_grad()
def probe(model, tok, family, items):
    """{task family: (lines, lines with every result digit right)}."""
    sp = common.Specials(family, tok)
    shift = 1 if family == "dream" else 0
    stats = collections.defaultdict(lambda: [0, 0])
    for it in items:
        p = common.prompt_ids(tok, family, it["prompt"])
        ids, lines = probe_masks(tok, it["answer"])
        for result, masked in lines:
            x = torch.tensor(p + ids)[None]
            x[0, [len(p) + i for i in masked]] = sp.mask
            logits = model(x)[0]
            right = all(int(logits[len(p) + i - shift].argmax()) == ids[i] for i in result)
            stats[it["family"]][0] += 1
            stats[it["family"]][1] += int(right)
    return {f: tuple(v) for f, v in stats.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--items", type=int, default=12, help="items per family")
    ap.add_argument("--split", default=os.path.join(common.ROOT, "tools", "tasks", "data_long",
                                                    "test.jsonl"))
    args = ap.parse_args()
    model, cfg = modeling.load_checkpoint(args.model, torch.float32)
    family = common.family_of(cfg)
    tok = bpe.load(args.model)
    with open(args.split, encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    chosen = []
    for fam in ("add", "sub"):
        chosen += [x for x in items if x["family"] == fam][:args.items]
    for fam, (n, right) in sorted(probe(model, tok, family, chosen).items()):
        print(f"{fam}: {right}/{n} lines right ({right / n:.3f})")


if __name__ == "__main__":
    main()
