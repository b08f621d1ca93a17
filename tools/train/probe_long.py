"""Teacher-forced probes of a long-form model on the validation split's lookup and count items:
what a skill gets right when everything else is visible, and where lookup's value digits
attend. Exact match needs 70-190 answer tokens all right, so it says nothing about a skill
that is half learned; these do (models/README.md, "Retrieval is what the models lack").

    /usr/bin/python3 tools/train/probe_long.py MODEL_DIR [--items N]

Prints one JSON object:
- lookup_value_digit{1,2,3}: accuracy of each value digit with every value digit and the
  `####` line masked (the line would otherwise give the values away); keys, table and
  question visible.
- count_tally_{all,one}: accuracy of the tallies' digits with all tallies masked, and with one
  tally masked at a time (its neighbours visible); count_errors: one-masked errors by whether
  the word increments the tally.
- table_attention: per layer and head, the attention mass that a masked first value digit
  puts on its key's table entry (8 tokens) and the mean mass on another entry. Retrieval
  shows as the first well above the second; equal numbers mean the head does not match keys.
"""
import argparse
import collections
import json
import math
import os
import sys

import blas_env

blas_env.configure(threads=1)
import torch  # noqa: E402

import common  # noqa: E402
from common import bpe, modeling  # noqa: E402

ENTRY_TOKENS = 8  # ` 88=741,`: space, two key digits, `=`, three value digits, comma


class AttentionRecorder:
    """Wraps modeling.Block.attention to keep each layer's softmax (batch row 0)."""

    def __init__(self):
        self.maps, self._orig = [], modeling.Block.attention

    def __enter__(self):
        orig, maps = self._orig, self.maps

        def attention(block, x, cos, sin, key_mask=None):
            a = block.a
            b, n, _ = x.shape
            q = block.q_proj(x).view(b, n, a.heads, a.head_dim).transpose(1, 2)
            k = block.k_proj(x).view(b, n, a.kv_heads, a.head_dim).transpose(1, 2)
            q, k = modeling.apply_rope(q, cos, sin), modeling.apply_rope(k, cos, sin)
            k = k.repeat_interleave(a.heads // a.kv_heads, dim=1)
            s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(a.head_dim)
            maps.append(torch.softmax(s, dim=-1)[0])
            return orig(block, x, cos, sin, key_mask)

        modeling.Block.attention = attention
        return self

    def __exit__(self, *exc):
        modeling.Block.attention = self._orig


def table_entries(prompt_pieces):
    """{key: prompt positions of its table entry (ENTRY_TOKENS, from the space before it)}."""
    start = prompt_pieces.index("Table")
    end = next(i for i in range(start, len(prompt_pieces)) if "\n" in prompt_pieces[i])
    return {prompt_pieces[t - 2] + prompt_pieces[t - 1]: range(t - 3, t - 3 + ENTRY_TOKENS)
            for t in range(start, end) if prompt_pieces[t] == "="}


class Probe:
    def __init__(self, model_dir):
        self.model, cfg = modeling.load_checkpoint(model_dir, torch.float32)
        self.tok = bpe.load(model_dir)
        self.family = common.family_of(cfg)
        self.sp = common.Specials(self.family, self.tok)
        self.shift = 1 if self.family == "dream" else 0  # Dream: row i-1 predicts token i
        self.stats = collections.defaultdict(lambda: [0, 0])

    def pieces(self, ids):
        return [self.tok.decode([t], skip_special=False) for t in ids]

    def forward(self, p, a, masked_rows):
        """Logits for len(masked_rows) copies of prompt + answer, row r masking masked_rows[r]."""
        x = torch.tensor(p + a)[None].repeat(len(masked_rows), 1)
        for r, masked in enumerate(masked_rows):
            for i in masked:
                x[r, len(p) + i] = self.sp.mask
        with torch.no_grad():
            return self.model(x).float()

    def score(self, name, logits, row, p, a, idx):
        pred = logits[row, [len(p) + i - self.shift for i in idx]].argmax(-1).tolist()
        s = self.stats[name]
        s[0] += sum(int(pred[j] == a[i]) for j, i in enumerate(idx))
        s[1] += len(idx)
        return pred

    def lookup(self, item, attention):
        p = common.prompt_ids(self.tok, self.family, item["prompt"])
        a = self.tok.encode(item["answer"])
        pa, pp = self.pieces(a), self.pieces(p)
        fin = pa.index("####")
        eq = [i for i in range(fin) if pa[i] == "="]
        masked = [i + d for i in eq for d in (1, 2, 3)] + list(range(fin, len(a)))
        with AttentionRecorder() as rec:
            logits = self.forward(p, a, [masked])
        for d in (1, 2, 3):
            self.score(f"lookup_value_digit{d}", logits, 0, p, a, [i + d for i in eq])
        entries = table_entries(pp)
        for i in eq:
            key = pa[i - 2] + pa[i - 1]
            if key not in entries:
                continue
            q = len(p) + i + 1
            for layer, m in enumerate(rec.maps):
                att = m[:, q]
                right = att[:, list(entries[key])].sum(-1)
                other = torch.stack([att[:, list(s)].sum(-1)
                                     for k, s in entries.items() if k != key]).mean(0)
                attention[layer][0] += right
                attention[layer][1] += other
            attention["queries"] += 1

    def count(self, item, errors):
        p = common.prompt_ids(self.tok, self.family, item["prompt"])
        a = self.tok.encode(item["answer"])
        pa = self.pieces(a)
        fin = pa.index("####")
        tallies = [i for i in range(1, fin)
                   if pa[i].isdigit() and pa[i - 1] == " " and pa[i + 1].isdigit()]
        final = list(range(fin, len(a)))
        both = tallies + [i + 1 for i in tallies]
        logits = self.forward(p, a, [both + final])
        self.score("count_tally_all", logits, 0, p, a, both)
        logits = self.forward(p, a, [[i, i + 1] + final for i in tallies])
        prev = 0
        for r, i in enumerate(tallies):
            want = int(pa[i] + pa[i + 1])
            pred = self.score("count_tally_one", logits, r, p, a, [i, i + 1])
            kind = "increment" if want != prev else "same"
            if pred != a[i:i + 2]:
                got = self.tok.decode(pred, skip_special=False)
                errors[f"{kind}: {got if not got.isdigit() else int(got) - want:+}"] += 1
            self.stats[f"count_{kind}_one"][0] += int(pred == a[i:i + 2])
            self.stats[f"count_{kind}_one"][1] += 1
            prev = want


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--items", type=int, default=20, help="items per family (validation)")
    ap.add_argument("--split", default=os.path.join(common.ROOT, "tools", "tasks", "data_long",
                                                     "val.jsonl"))
    args = ap.parse_args()
    probe = Probe(args.model_dir)
    items = [json.loads(line) for line in open(args.split)]
    layers = len(probe.model.blocks)
    attention = {layer: [0, 0] for layer in range(layers)}
    attention["queries"] = 0
    errors = collections.Counter()
    for family, fn in (("lookup", lambda it: probe.lookup(it, attention)),
                       ("count", lambda it: probe.count(it, errors))):
        for it in [x for x in items if x["family"] == family][:args.items]:
            fn(it)
    out = {k: round(v[0] / v[1], 4) for k, v in sorted(probe.stats.items()) if v[1]}
    out["count_errors"] = dict(errors.most_common(6))
    n = max(attention["queries"], 1)
    out["table_attention"] = {
        "queries": attention["queries"],
        "right/other entry, by layer and head": [
            " ".join(f"{float(r[h]) / n:.3f}/{float(o[h]) / n:.3f}" for h in range(len(r)))
            for r, o in (attention[layer] for layer in range(layers))]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
