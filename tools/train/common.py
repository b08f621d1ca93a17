"""Shared pieces of the tiny-model training and evaluation scripts.

Families use the names "llada" and "dream" here; the config.json model_type is "llada" /
"Dream" (tools/reference/modeling.py constants).
"""
import json
import os

from tools.reference import modeling
from tools.train import bpe

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def long_snapshot(name):
    """The newest snapshot of a long model: tools/train/warm_start/<name> when one is kept
    (it differs from the shipped model), else the shipped models/<name>."""
    kept = os.path.join(HERE, "warm_start", name)
    if os.path.exists(os.path.join(kept, "model.safetensors")):
        return kept
    return os.path.join(ROOT, "models", name)


MODEL_TYPE = {"llada": modeling.LLADA, "dream": modeling.DREAM}


def cot_split_path(split):
    """tools/tasks/data_cot/<split>.jsonl for "test" or "val"; any other value is a path."""
    if split in ("test", "val"):
        return os.path.join(ROOT, "tools", "tasks", "data_cot", split + ".jsonl")
    return split


def load_model_dir(model_dir, dtype):
    """(model, family, tokenizer, gen_length) of an HF-style model folder: the reference model
    in `dtype`, its family name, its tokenizer and generation_config.json's gen_length."""
    model, cfg = modeling.load_checkpoint(model_dir, dtype)
    with open(os.path.join(model_dir, "generation_config.json")) as f:
        gen_length = json.load(f)["gen_length"]
    return model, family_of(cfg), bpe.load(model_dir), gen_length


class Specials:
    """Token ids the objective and the sampler need."""

    def __init__(self, family, tok):
        if family == "llada":
            self.mask = tok.token_id("<|mdm_mask|>")
            self.eot = tok.token_id("<|eot_id|>")
            self.eos = tok.token_id("<|endoftext|>")
            self.bos = tok.token_id("<|startoftext|>")
        else:
            self.mask = tok.token_id("<|mask|>")
            self.eot = tok.token_id("<|im_end|>")
            self.eos = tok.token_id("<|endoftext|>")
            self.bos = self.eos  # Dream: bos = eos = pad = <|endoftext|>
        self.pad = self.eos
        self.end = (self.eot, self.eos)


def family_of(cfg):
    return "llada" if cfg["model_type"] == modeling.LLADA else "dream"


def prompt_ids(tok, family, prompt):
    return tok.encode(bpe.render_chat(family, prompt))


def answer_region(tok, sp, answer, gen_length):
    """answer tokens, end-of-turn, then EOS up to gen_length. None when it does not fit."""
    ids = tok.encode(answer) + [sp.eot]
    if len(ids) > gen_length:
        return None
    return ids + [sp.eos] * (gen_length - len(ids))


def cut_answer(tok, sp, output_ids):
    """Text of the answer region up to the first end token (<|eot|>-like or EOS)."""
    out = []
    for i in output_ids:
        if i in sp.end:
            break
        out.append(i)
    return tok.decode(out, skip_special=True)
