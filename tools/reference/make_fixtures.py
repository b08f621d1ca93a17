"""Writes the tiny golden fixture models under tests/data/reference/<name>/.

Usage (from the repo root):  /usr/bin/python3 -m tools.reference.make_fixtures [--out DIR]

Each fixture is a complete HF-style model folder (config.json, generation_config.json,
safetensors weights, tokenizer files) with seeded random weights, plus golden.json and raw
little-endian float32 logits/hidden-state files computed by modeling.py. Goldens are
computed in float64 from the STORED (bf16/f16-rounded) weights and then rounded to f32.

Output is deterministic: the same command regenerates byte-identical weights and configs
(goldens can differ in the last f32 bit across BLAS builds).
"""

import argparse
import json
import os
import re
import shutil
from collections import Counter

import torch

from tools.pylib import tokenizer_json
from tools.pylib.byte_level import bytes_to_unicode
from tools.reference import modeling

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

# ----------------------------------------------------------------------------------------
# Byte-level BPE vocabulary (GPT-2 byte<->unicode map, merges learned from a tiny corpus)
# ----------------------------------------------------------------------------------------


BYTE_ENC = bytes_to_unicode()

CORPUS = """You are a helpful assistant. What is the capital of France? The capital of France is
Paris. Please answer the question in one sentence. The user asked the assistant a question and
the assistant gave the answer. Write a short story about a cat and a dog. There is a cat in the
house and the dog is in the garden. Hello there, how are you today? I am fine, thank you.
""" + "system\nuser\nassistant\n You are a helpful assistant.\n who are you?\n" * 4

# Same approximation of the GPT-2 split as tokenizers' ByteLevel(use_regex=True) for ASCII text.
_SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+"""
                    r"""|\s+(?!\S)|\s+""")


def learn_merges(n_merges):
    """Deterministic BPE training on CORPUS: most frequent pair, ties by lexical order."""
    words = Counter(tuple(BYTE_ENC[b] for b in w.encode()) for w in _SPLIT.findall(CORPUS))
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged = Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += c
        words = merged
    return merges


def base_vocab(merges):
    """Token string -> id: the 256 byte characters in byte order, then one id per merge."""
    vocab = {BYTE_ENC[b]: b for b in range(256)}
    for a, b in merges:
        vocab[a + b] = len(vocab)
    return vocab


class TinyBpe:
    """Encoder used only to build readable input id sequences for the golden cases."""

    def __init__(self, merges, vocab, added):
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.vocab = vocab
        self.added = added  # content -> id
        alts = "|".join(re.escape(t) for t in sorted(added, key=len, reverse=True))
        self.special = re.compile(f"({alts})")

    def _bpe(self, word):
        parts = [BYTE_ENC[b] for b in word.encode()]
        while len(parts) > 1:
            cands = [(self.ranks.get((a, b), 1 << 30), i)
                     for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(cands)
            if rank == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return [self.vocab[p] for p in parts]

    def encode(self, text):
        ids = []
        for seg in self.special.split(text):
            if seg in self.added:
                ids.append(self.added[seg])
            elif seg:
                for w in _SPLIT.findall(seg):
                    ids += self._bpe(w)
        return ids


def decoder_entry(e):
    return {k: e[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word",
                              "special")}


def write_json(path, obj, indent=2):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False, sort_keys=False)
        f.write("\n")


# ----------------------------------------------------------------------------------------
# Tokenizers
# ----------------------------------------------------------------------------------------

LLADA_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}")

DREAM_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


class LladaTokenizer:
    """Fast-tokenizer layout (tokenizer.json) like LLaDA-8B-Instruct's, scaled down."""
    N_MERGES = 24

    def __init__(self):
        self.merges = learn_merges(self.N_MERGES)
        self.vocab = base_vocab(self.merges)
        n = len(self.vocab)
        names = ["<|startoftext|>", "<|endoftext|>", "<|mdm_mask|>", "<|start_header_id|>",
                 "<|end_header_id|>", "<|eot_id|>"]
        self.added = {t: n + i for i, t in enumerate(names)}
        self.size = n + len(names)
        self.bos = self.added["<|startoftext|>"]
        self.eos = self.pad = self.added["<|endoftext|>"]
        self.mask = self.added["<|mdm_mask|>"]
        self.eot = self.added["<|eot_id|>"]
        self.bpe = TinyBpe(self.merges, self.vocab, self.added)

    def chat(self, user):
        return (f"<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n{user.strip()}"
                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")

    def write(self, d):
        added = tokenizer_json.added_tokens(self.added)
        tokenizer_json.write(os.path.join(d, "tokenizer.json"), tokenizer_json.bpe_tokenizer(
            self.vocab, self.merges, added,
            pre_tokenizer=tokenizer_json.byte_level(False, trim_offsets=True, use_regex=True),
            decoder=tokenizer_json.byte_level(True, trim_offsets=True, use_regex=True)))
        write_json(os.path.join(d, "tokenizer_config.json"), {
            "add_bos_token": False,
            "add_eos_token": False,
            "added_tokens_decoder": {str(e["id"]): decoder_entry(e) for e in added},
            "bos_token": "<|startoftext|>",
            "chat_template": LLADA_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|endoftext|>",
            "model_max_length": 1000000000000000019884624838656,
            "pad_token": "<|endoftext|>",
            "tokenizer_class": "PreTrainedTokenizerFast",
        })
        write_json(os.path.join(d, "special_tokens_map.json"), {
            "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>"})


class DreamTokenizer:
    """Slow-tokenizer layout (vocab.json + merges.txt + added_tokens.json) like Dream's."""
    N_MERGES = 30

    def __init__(self):
        self.merges = learn_merges(self.N_MERGES)
        self.vocab = base_vocab(self.merges)
        n = len(self.vocab)
        names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|beginoftext|>", "<|mask|>"]
        self.added = {t: n + i for i, t in enumerate(names)}
        self.size = n + len(names)
        self.bos = self.eos = self.pad = self.added["<|endoftext|>"]
        self.mask = self.added["<|mask|>"]
        self.eot = self.added["<|im_end|>"]
        self.bpe = TinyBpe(self.merges, self.vocab, self.added)

    def chat(self, user):
        return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")

    def write(self, d):
        write_json(os.path.join(d, "vocab.json"), self.vocab, indent=None)
        with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            for a, b in self.merges:
                f.write(f"{a} {b}\n")
        write_json(os.path.join(d, "added_tokens.json"), self.added)
        entries = tokenizer_json.added_tokens(self.added)
        write_json(os.path.join(d, "tokenizer_config.json"), {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": {str(e["id"]): decoder_entry(e) for e in entries},
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "auto_map": {"AutoTokenizer": ["tokenization_dream.DreamTokenizer", None]},
            "bos_token": "<|beginoftext|>",
            "chat_template": DREAM_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|endoftext|>",
            "errors": "replace",
            "mask_token": "<|mask|>",
            "model_max_length": 131072,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "DreamTokenizer",
            "unk_token": None,
        })
        write_json(os.path.join(d, "special_tokens_map.json"), {
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "bos_token": "<|beginoftext|>", "eos_token": "<|endoftext|>",
            "mask_token": "<|mask|>", "pad_token": "<|endoftext|>"})


# ----------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------

# name: (family, hidden, layers, heads, kv_heads, intermediate, vocab rows, theta, eps,
#        max_positions, dtype, max_shard_bytes or None, seed)
FIXTURES = {
    "llada_mha": ("llada", 32, 2, 2, 2, 64, 320, 500000.0, 1e-5, 64, torch.bfloat16, None, 1),
    "llada_gqa_f32": ("llada", 32, 2, 4, 2, 64, 320, 500000.0, 1e-5, 64, torch.float32,
                      64000, 2),
    "dream_gqa": ("Dream", 64, 2, 4, 2, 64, 320, 1000000.0, 1e-6, 128, torch.bfloat16, 80000,
                  3),
    "dream_f16": ("Dream", 48, 2, 6, 2, 96, 320, 10000.0, 1e-6, 128, torch.float16, None, 4),
}


CHAT_USER_MESSAGE = "Hi, who are you?"


def golden_cases(tok, vocab_rows, seed):
    """2-3 input sequences: a chat prompt + masks, a short one, and random ids with masks."""
    chat = tok.bpe.encode(tok.chat(CHAT_USER_MESSAGE)) + [tok.mask] * 6
    short = [tok.bos if isinstance(tok, LladaTokenizer) else tok.added["<|im_start|>"],
             tok.vocab["H"], tok.mask, tok.mask, tok.eos]
    g = torch.Generator().manual_seed(seed)
    rand = torch.randint(0, tok.size, (17,), generator=g).tolist()
    for i in (3, 4, 9, 16):
        rand[i] = tok.mask
    rand[12] = vocab_rows - 1  # an embedding row past the tokenizer (still a valid row)
    return [chat, short, rand]


def make_fixture(name, out_root):
    (family, hidden, layers, heads, kv, inter, vocab_rows, theta, eps, max_pos, dtype, shard,
     seed) = FIXTURES[name]
    tok = LladaTokenizer() if family == "llada" else DreamTokenizer()
    assert tok.size <= vocab_rows
    d = os.path.join(out_root, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    cfg = modeling.make_config(family, hidden, layers, heads, kv, inter, vocab_rows, theta, eps,
                               max_pos, tok.mask, tok.eos, tok.pad, tok.bos)
    model = modeling.DiffusionLM(cfg)
    model.init_random(torch.Generator().manual_seed(seed))
    modeling.save_checkpoint(model, cfg, d, dtype=dtype, max_shard_bytes=shard)
    write_json(os.path.join(d, "generation_config.json"),
               modeling.make_generation_config(family, tok.eos, tok.pad, tok.bos))
    tok.write(d)

    # Goldens from the stored (rounded) weights, computed in float64.
    ref, _ = modeling.load_checkpoint(d, dtype=torch.float64)
    cases = []
    for i, ids in enumerate(golden_cases(tok, vocab_rows, seed)):
        assert len(ids) <= 48, (name, len(ids))
        with torch.no_grad():
            logits, hidden_states = ref(torch.tensor([ids]), return_hidden=True)
        logits = logits[0].to(torch.float32).contiguous()
        h0 = hidden_states[0][0].to(torch.float32).contiguous()
        lf, hf = f"case{i}.f32", f"case{i}_hidden0.f32"
        with open(os.path.join(d, lf), "wb") as f:
            f.write(logits.numpy().tobytes())
        with open(os.path.join(d, hf), "wb") as f:
            f.write(h0.numpy().tobytes())
        case = {"input_ids": ids, "rows": len(ids), "vocab": vocab_rows,
                "logits_file": lf, "hidden_after_layer0_file": hf, "hidden": hidden,
                "argmax": logits.argmax(-1).tolist()}
        if i == 0:
            # input_ids[:prompt_tokens] is the tokenization of prompt_text (the chat template
            # applied to one user message); checked against @huggingface/tokenizers 0.2.0.
            case["prompt_text"] = tok.chat(CHAT_USER_MESSAGE)
            case["user_message"] = CHAT_USER_MESSAGE
            case["prompt_tokens"] = len(tok.bpe.encode(case["prompt_text"]))
        cases.append(case)
    write_json(os.path.join(d, "golden.json"), {
        "description": "UNSHIFTED logits: row i is the model output at position i (Dream "
                       "callers apply the i-1 shift themselves). Files are raw little-endian "
                       "float32, row-major [rows, vocab] (logits) and [rows, hidden] "
                       "(hidden state after block 0, residual stream). Computed in float64 "
                       "by tools/reference/modeling.py from the stored weights.",
        "family": family,
        "weights_dtype": str(dtype).replace("torch.", ""),
        "shift_logits": family == "Dream",
        "cases": cases,
    }, indent=1)
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print(f"{name}: {len(os.listdir(d))} files, {size} bytes, case rows "
          f"{[c['rows'] for c in cases]}")
    return size


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "reference"))
    ap.add_argument("--only", nargs="*", help="fixture names (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name in args.only or FIXTURES:
        make_fixture(name, args.out)


if __name__ == "__main__":
    main()
