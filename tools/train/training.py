"""The pieces both training loops use: train.py (the tiny tasks) and longtrain.py (the
long-form and cot suites, `train.py --tasks long|cot`).

They lived in train.py, which made longtrain.py import train.py while train.py dispatches to
longtrain.py; here they import neither. Import tools.train.blas_env and configure it before
this module (it loads torch).
"""
import copy
import json
import math
import os
import time

import torch

from tools.reference import modeling
from tools.train import common


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def init_weights(model, seed):
    """Width-aware init: matrices ~ N(0, 1/fan_in) (residual outputs o/down additionally
    / sqrt(2 * layers)), embedding rows ~ N(0, 1), norms 1, biases 0. (A GPT-2 style fixed
    std of 0.02 is far too small at width 64 and left the attention uniform for thousands of
    steps.)"""
    g = torch.Generator().manual_seed(seed)
    n_layers = model.arch.layers
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith(".bias"):
                p.zero_()
            elif name == "embed.weight":
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                std = 1.0 / math.sqrt(p.shape[1])
                if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                    std /= math.sqrt(2 * n_layers)
                p.copy_(torch.randn(p.shape, generator=g) * std)


def lr_at(step, max_steps, lr, warmup):
    if step < warmup:
        return lr * (step + 1) / warmup
    q = min(1.0, (step - warmup) / max(1, max_steps - warmup))
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * q)))


def optimizer_step(model, opt, lr, loss, ema_loss):
    """One optimizer step on `loss` at learning rate `lr`, the gradient clipped to norm 1.
    Returns the loss's moving average, which starts at the first step's loss (ema_loss None)."""
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item() if ema_loss is None else 0.98 * ema_loss + 0.02 * loss.item()


def rounded_copy(model):
    m = copy.deepcopy(model)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    m.eval()
    return m


def save_model(model, cfg, tok, family, gen_length, out_dir, info):
    os.makedirs(out_dir, exist_ok=True)
    modeling.save_checkpoint(model, cfg, out_dir, dtype=torch.bfloat16)
    max_len = cfg.get("max_sequence_length", cfg.get("max_position_embeddings"))
    tok.save(out_dir, model_max_length=max_len)
    sp = common.Specials(family, tok)
    gen = modeling.make_generation_config(cfg["model_type"], sp.eos, sp.pad, sp.bos)
    # Settings of the sampler the model was validated with (tools/train/evaluate.py).
    gen.update({"gen_length": gen_length, "steps": gen_length, "temperature": 0.0})
    if family == "llada":
        gen.update({"block_length": gen_length, "remasking": "low_confidence"})
    else:
        gen.update({"max_new_tokens": gen_length, "alg": "maskgit_plus"})
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out_dir, "training_state.json"), "w") as f:
        json.dump(info, f, indent=2, sort_keys=True)
        f.write("\n")
