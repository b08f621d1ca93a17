#!/usr/bin/env python3
"""Trains a tiny masked-diffusion model (LLaDA or Dream format) on the tools/tasks suite.

Objective (LLaDA SFT, GUIDELINES.md): every training sequence is the chat-rendered prompt
followed by a fixed answer region of G tokens (answer, end-of-turn, EOS padding). Per
sequence t ~ U(0,1) (stratified over the batch), p = (1 - eps) t + eps; each answer-region
token is replaced by MASK with probability p (the prompt is never masked); the loss is the
cross entropy on masked positions weighted by 1/p, summed and divided by (batch * G), i.e.
normalized by the answer length as in LLaDA. LLaDA predicts token i from logits row i; Dream
predicts token i from row i-1 (shifted objective, as its sampler reads the logits).

The tokenizer is trained first (byte-level BPE on rendered training conversations), then the
model (tools/reference/modeling.py DiffusionLM, fp32). Every `--eval-every` steps the model
is rounded to bf16 and decoded on the validation split with the evaluation sampler; the best
checkpoint by exact match is written to --out (bf16 safetensors + config + tokenizer files),
so a run killed by the wall-clock cap still leaves its best model. Seeded; deterministic for
a fixed thread count (the wall-clock cap only decides where the run stops).

Example (from the repo root; tools/ is a package, pyproject.toml):
  python3 -m tools.train.train --family llada --out models/llada-tiny --gen-length 12 --seed 1
"""
import argparse
import collections
import itertools
import os
import random
import sys
import time

from tools.train import blas_env  # thread counts and OpenBLAS core type, before torch loads

BLAS_NOTE = blas_env.configure(threads=1)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tools.reference import modeling  # noqa: E402
from tools.tasks import tasks  # noqa: E402
from tools.train import bpe, common, evaluate, longtrain  # noqa: E402
from tools.train.training import (  # noqa: E402
    init_weights, log, lr_at, optimizer_step, rounded_copy, save_model)


def build_batches(seqs, plens, batch_size, rng):
    """Groups equal-length sequences (prompt lengths equal) into batches; shuffled order."""
    by = collections.defaultdict(list)
    for s, pl in zip(seqs, plens):
        by[pl].append(s)
    batches = []
    for pl, ss in by.items():
        rng.shuffle(ss)
        for i in range(0, len(ss), batch_size):
            chunk = ss[i:i + batch_size]
            if len(chunk) >= max(4, batch_size // 4):
                batches.append((pl, torch.tensor(chunk, dtype=torch.long)))
    rng.shuffle(batches)
    return batches


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=["llada", "dream"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gen-length", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=None)
    ap.add_argument("--intermediate", type=int, default=384)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--tok-vocab", type=int, default=512, help="BPE base vocab (before specials)")
    ap.add_argument("--tok-corpus", type=int, default=20000)
    ap.add_argument("--pool", type=int, default=300000, help="training examples generated")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--max-steps", type=int, default=3000)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--minutes", type=float, default=45.0, help="hard wall-clock cap")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eps", type=float, default=0.1,
                    help="p_mask = (1 - eps) t + eps; 0.1 bounds the 1/p weight at 10 (G ~ 10)")
    ap.add_argument("--family-weights", default=None,
                    help="training mix, e.g. add=3,sub=3,word=2 (others weigh 1); default uniform")
    ap.add_argument("--bench", type=int, default=0, help="time this many steps and exit")
    ap.add_argument("--init-from", default=None,
                    help="continue from a saved model folder (its weights and tokenizer)")
    long = ap.add_argument_group("long-form mode (--tasks long, tools/train/longtrain.py)")
    long.add_argument("--tasks", choices=["tiny", "long", "cot"], default="tiny",
                      help="long: the v6 long-form suite; cot: suite v7 (tools/tasks/cot.py)")
    long.add_argument("--state-dir", default=None,
                      help="checkpoint folder (default tools/train/out_long/<basename of --out>)")
    long.add_argument("--resume", action="store_true", help="continue from --state-dir/ckpt.pt")
    long.add_argument("--warm-start", default=None,
                      help="start from a saved model folder (weights, tokenizer, step)")
    long.add_argument("--transfer-from", default=None,
                      help="start from a trained model of either family (same widths): its "
                           "BPE with this family's specials, weights mapped by "
                           "longtrain.transfer_weights; a fresh run otherwise (step 0)")
    long.add_argument("--rewarm-steps", type=int, default=200,
                      help="after --warm-start, ramp the learning rate from 0 over this many steps")
    long.add_argument("--cosine-from", type=int, default=None,
                      help="restart the learning-rate schedule (warmup, cosine to --max-steps) "
                           "at this step (a new phase from a trained model)")
    long.add_argument("--ckpt-minutes", type=float, default=5.0)
    long.add_argument("--val-items", type=int, default=36)
    long.add_argument("--eval-batch", type=int, default=36)
    long.add_argument("--curriculum-steps", type=int, default=3000)
    long.add_argument("--shots", default="2,6", type=lambda v: tuple(int(x) for x in v.split(",")),
                      help="few-shot examples per item after the curriculum: MIN,MAX")
    long.add_argument("--shot-mask-prob", type=float, default=0.5)
    long.add_argument("--block-mask-prob", type=float, default=0.0,
                      help="fraction of sequences masked like block decoding sees them")
    long.add_argument("--block-length", type=int, default=32)
    long.add_argument("--max-positions", type=int, default=1024)
    args = ap.parse_args()
    print(time.strftime("%H:%M:%S"), BLAS_NOTE, flush=True)
    if args.tasks in ("long", "cot"):
        if args.state_dir is None:
            args.state_dir = os.path.join(common.HERE, "out_" + args.tasks,
                                          os.path.basename(os.path.normpath(args.out)))
        return longtrain.run(args)

    t_start = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    family = args.family
    g_len = args.gen_length

    test, val, exclude = tasks.load_splits()
    weights = None
    if args.family_weights:
        weights = {}
        for item in args.family_weights.split(","):
            name, _, value = item.partition("=")
            weights[name.strip()] = float(value)
    stream = tasks.stream(tasks.TRAIN_SEED + args.seed, exclude, weights)
    corpus = list(itertools.islice(stream, args.tok_corpus))
    if args.init_from:
        tok = bpe.load(args.init_from)
    else:
        tok = bpe.build(family,
                        [bpe.render_chat(family, x["prompt"]) + x["answer"] for x in corpus],
                        args.tok_vocab)
    sp = common.Specials(family, tok)
    vocab_rows = (len(tok) + 63) // 64 * 64  # embedding rows padded like the real checkpoints
    log(f"tokenizer: base {len(tok.vocab)} merges {len(tok.merges)} size {len(tok)} "
        f"rows {vocab_rows} mask {sp.mask} eot {sp.eot} eos {sp.eos}")

    seqs, plens = [], []
    for x in itertools.chain(corpus, itertools.islice(stream, args.pool - len(corpus))):
        pid = common.prompt_ids(tok, family, x["prompt"])
        ans = common.answer_region(tok, sp, x["answer"], g_len)
        if ans is None:
            raise SystemExit(f"answer does not fit in G={g_len}: {x}")
        seqs.append(pid + ans)
        plens.append(len(pid))
    log(f"pool {len(seqs)} examples, prompt lengths {min(plens)}..{max(plens)}")

    kv = args.kv_heads or args.heads
    cfg = modeling.make_config(
        common.MODEL_TYPE[family], args.hidden, args.layers, args.heads, kv, args.intermediate,
        vocab_rows, args.rope_theta,
        1e-5 if family == "llada" else 1e-6, 512 if family == "llada" else 1024,
        sp.mask, sp.eos, sp.pad, sp.bos)
    if args.init_from:
        model, cfg = modeling.load_checkpoint(args.init_from, torch.float32)
        model.train()
        log(f"initialized from {args.init_from}")
    else:
        model = modeling.DiffusionLM(cfg)
        init_weights(model, args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model {family}: {n_params} params ({2 * n_params / 1e6:.2f} MB bf16)")

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-8)

    batches, bi, epoch = [], 0, 0
    best, best_step, step = -1.0, -1, 0
    shift = 1 if family == "dream" else 0
    t_train = time.time()
    ema_loss = None

    def run_eval(step):
        nonlocal best, best_step
        m = rounded_copy(model)
        te = time.time()
        recs = evaluate.evaluate(m, tok, family, val, g_len)
        acc, per = evaluate.summarize(recs)
        improved = acc > best
        log(f"eval step {step}: val exact {acc:.4f} "
            + " ".join(f"{k}={v:.2f}" for k, v in per.items())
            + f" ({time.time() - te:.1f}s){' *best*' if improved else ''}")
        if improved:
            best, best_step = acc, step
            info = {"family": family, "step": step, "argv": sys.argv, "val_exact_match": acc,
                    "val_per_family": per,
                    "train_seconds": round(time.time() - t_train, 1), "args": vars(args),
                    "params": n_params, "tokenizer_size": len(tok)}
            save_model(model, cfg, tok, family, g_len, args.out, info)

    while step < args.max_steps:
        if bi >= len(batches):
            batches, bi = build_batches(seqs, plens, args.batch, rng), 0
            epoch += 1
        plen, x0 = batches[bi]
        bi += 1
        b = x0.shape[0]
        t = (torch.arange(b, dtype=torch.float32) + torch.rand(b)) / b
        t = t[torch.randperm(b)]
        p_mask = (1 - args.eps) * t + args.eps
        masked = torch.rand(b, g_len) < p_mask[:, None]
        x = x0.clone()
        region = x[:, plen:]
        region[masked] = sp.mask
        logits = model(x)[:, plen - shift:plen - shift + g_len]
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x0[:, plen:].reshape(-1),
                             reduction="none").view(b, g_len)
        loss = (ce * masked / p_mask[:, None]).sum() / (b * g_len)
        ema_loss = optimizer_step(model, opt, lr_at(step, args.max_steps, args.lr, args.warmup),
                                  loss, ema_loss)
        step += 1
        if args.bench and step >= args.bench:
            el = time.time() - t_train
            log(f"bench: {step} steps in {el:.1f}s = {el / step:.3f}s/step")
            return
        if step % 50 == 0:
            log(f"step {step} loss {ema_loss:.4f} lr {opt.param_groups[0]['lr']:.2e} "
                f"epoch {epoch} elapsed {time.time() - t_start:.0f}s")
        if step % args.eval_every == 0 or step == args.max_steps:
            run_eval(step)
        if time.time() - t_start > args.minutes * 60:
            log(f"wall-clock cap reached at step {step}")
            if step % args.eval_every:
                run_eval(step)
            break
    log(f"done: best val exact {best:.4f} at step {best_step}, "
        f"total {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
