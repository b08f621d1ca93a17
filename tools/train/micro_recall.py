"""Micro check of associative recall: can a small model of the reference architecture
(tools/reference/modeling.py, initialised like train.py) learn it at all, and does a plain
torch.nn.TransformerEncoder with learned positions do better? models/README.md, "Retrieval is
what the models lack", cites its output.

Task: `k1 v1 k2 v2 ... kP vP SEP q MASK` with P distinct keys (tokens 0-15) and random values
(16-31); the model predicts q's value at MASK (chance 1/16, 1/P among the values present).

    /usr/bin/python3 tools/train/micro_recall.py [--model diffusion|torch] [--pairs 8]
        [--steps 3000] [--lr 1e-3]
"""
import argparse
import time

import blas_env

blas_env.configure(threads=1)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import common  # noqa: E402,F401  (puts tools/reference on the path)
import train  # noqa: E402
from common import modeling  # noqa: E402

SEP, MASK, VOCAB, WIDTH, LAYERS, HEADS = 32, 33, 64, 64, 2, 4


class TorchEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(VOCAB, WIDTH), nn.Embedding(64, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, 2 * WIDTH, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.enc, self.out = nn.TransformerEncoder(layer, LAYERS), nn.Linear(WIDTH, VOCAB)

    def forward(self, x):
        return self.out(self.enc(self.emb(x) + self.pos(torch.arange(x.shape[1]))[None]))


def batch(gen, b, pairs):
    keys = torch.stack([torch.randperm(16, generator=gen)[:pairs] for _ in range(b)])
    vals = torch.randint(16, 32, (b, pairs), generator=gen)
    x = torch.stack([keys, vals], -1).reshape(b, -1)
    qi = torch.randint(0, pairs, (b,), generator=gen)
    rows = torch.arange(b)
    x = torch.cat([x, torch.full((b, 1), SEP), keys[rows, qi][:, None], torch.full((b, 1), MASK)],
                  1)
    return x, vals[rows, qi]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["diffusion", "torch"], default="diffusion")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.model == "diffusion":
        cfg = modeling.make_config(modeling.LLADA, WIDTH, LAYERS, HEADS, HEADS, 2 * WIDTH, VOCAB,
                                   10000.0, 1e-5, 512, MASK, 34, 35, 36)
        model = modeling.DiffusionLM(cfg)
        train.init_weights(model, 0)
    else:
        model = TorchEncoder()
    gen = torch.Generator().manual_seed(1)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    t0 = time.time()
    for step in range(1, args.steps + 1):
        x, ans = batch(gen, 64, args.pairs)
        loss = F.cross_entropy(model(x)[:, -1].float(), ans)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 250 == 0:
            with torch.no_grad():
                x, ans = batch(gen, 512, args.pairs)
                acc = (model(x)[:, -1].argmax(-1) == ans).float().mean().item()
            print(f"step {step} loss {loss.item():.3f} recall accuracy {acc:.3f} "
                  f"({time.time() - t0:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
