#!/usr/bin/env python3
"""Pure-Python byte-level BPE: trainer, encoder/decoder and writers for both HF formats.

The encoder implements exactly the Hugging Face pipeline the C++ tokenizer must reproduce:
  1. split out added tokens (leftmost, longest match; they are never normalized),
  2. normalize the other segments (NFC for Dream, none for LLaDA),
  3. regex pre-tokenization (matches and any gaps both become pieces, HF `Isolated`),
  4. GPT-2 byte -> unicode map of each piece's UTF-8 bytes,
  5. BPE: repeatedly merge the adjacent pair with the lowest merge rank (leftmost first),
  6. vocabulary lookup.

Formats written:
  llada: tokenizer.json (fast format: BPE model, added_tokens, Split(regex, Isolated) +
         ByteLevel(use_regex=false) pre-tokenizer, ByteLevel decoder) + tokenizer_config.json
  dream: vocab.json + merges.txt (#version: 0.2) + added_tokens.json + tokenizer_config.json
"""
import collections
import json
import os
import unicodedata

import regex

from tools.pylib import tokenizer_json
from tools.pylib.byte_level import bytes_to_unicode

# docs/models.md §2.5 (BAILINGMOE / LLaDA, possessive quantifiers) and §3.5 (Qwen2 / Dream).
LLADA_REGEX = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

LLADA_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|mdm_mask|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|eot_id|>"]
DREAM_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]

LLADA_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + "
    "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}")
DREAM_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def render_chat(family, prompt):
    """Single user turn rendered by the family's chat template (docs/models.md §2.4 / §3.4)."""
    if family == "llada":
        return ("<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n" + prompt.strip() +
                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    if family == "dream":
        return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" +
                prompt + "<|im_end|>\n<|im_start|>assistant\n")
    raise ValueError(family)


BYTE_ENCODER = bytes_to_unicode()
BYTE_DECODER = {v: k for k, v in BYTE_ENCODER.items()}


def family_regex(family):
    return regex.compile(LLADA_REGEX if family == "llada" else QWEN2_REGEX)


def family_specials(family):
    return LLADA_SPECIALS if family == "llada" else DREAM_SPECIALS


def split_added(text, added):
    """[(segment, is_added)] splitting on added tokens, leftmost-longest match."""
    out, buf, i = [], [], 0
    by_first = collections.defaultdict(list)
    for t in sorted(added, key=len, reverse=True):
        by_first[t[0]].append(t)
    while i < len(text):
        hit = None
        for t in by_first.get(text[i], ()):
            if text.startswith(t, i):
                hit = t
                break
        if hit is None:
            buf.append(text[i])
            i += 1
            continue
        if buf:
            out.append(("".join(buf), False))
            buf = []
        out.append((hit, True))
        i += len(hit)
    if buf:
        out.append(("".join(buf), False))
    return out


def pretokenize(rx, text):
    """HF Split(behavior=Isolated): every match and every non-empty gap is a piece."""
    pieces, last = [], 0
    for m in rx.finditer(text):
        if m.start() > last:
            pieces.append(text[last:m.start()])
        if m.end() > m.start():
            pieces.append(m.group(0))
        last = m.end()
    if last < len(text):
        pieces.append(text[last:])
    return pieces


def byte_level(piece):
    return "".join(BYTE_ENCODER[b] for b in piece.encode("utf-8"))


def train_bpe(family, texts, vocab_size):
    """Trains merges on `texts` (special tokens are split out, not learned).

    Returns (vocab: {token: id}, merges: [(a, b)]). The first 256 ids are the byte symbols in
    GPT-2 order; each merge adds one token. Ties in pair frequency break on the smallest pair.
    """
    rx = family_regex(family)
    specials = family_specials(family)
    words = collections.Counter()
    for text in texts:
        for seg, is_added in split_added(text, specials):
            if is_added:
                continue
            if family == "dream":
                seg = unicodedata.normalize("NFC", seg)
            for p in pretokenize(rx, seg):
                words[tuple(byte_level(p))] += 1
    vocab = {}
    for b in range(256):
        vocab[BYTE_ENCODER[b]] = len(vocab)
    merges = []
    words = {w: c for w, c in words.items()}
    while len(vocab) < vocab_size:
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if best[1] < 2:
            break
        a, b = best[0]
        new = a + b
        merges.append((a, b))
        if new not in vocab:
            vocab[new] = len(vocab)
        nw = {}
        for w, c in words.items():
            if len(w) < 2:
                nw[w] = nw.get(w, 0) + c
                continue
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            t = tuple(out)
            nw[t] = nw.get(t, 0) + c
        words = nw
    return vocab, merges


class Tokenizer:
    """Encoder/decoder for one family; ids of added tokens follow the base vocabulary."""

    def __init__(self, family, vocab, merges, added):
        self.family = family
        self.vocab = dict(vocab)
        self.merges = [tuple(m) for m in merges]
        self.ranks = {m: i for i, m in enumerate(self.merges)}
        self.added = dict(added)  # content -> id
        self.rx = family_regex(family)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.id_to_added = {i: t for t, i in self.added.items()}
        self.cache = {}

    def __len__(self):
        return max(list(self.vocab.values()) + list(self.added.values())) + 1

    def bpe(self, piece):
        if piece in self.cache:
            return self.cache[piece]
        word = list(byte_level(piece))
        while len(word) > 1:
            best, best_rank = None, None
            for i in range(len(word) - 1):
                r = self.ranks.get((word[i], word[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            a, b = word[best], word[best + 1]
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        ids = [self.vocab[t] for t in word]
        self.cache[piece] = ids
        return ids

    def encode(self, text):
        ids = []
        for seg, is_added in split_added(text, self.added):
            if is_added:
                ids.append(self.added[seg])
                continue
            if self.family == "dream":
                seg = unicodedata.normalize("NFC", seg)
            for p in pretokenize(self.rx, seg):
                ids.extend(self.bpe(p))
        return ids

    def decode(self, ids, skip_special=True):
        out, buf = [], []
        for i in ids:
            if i in self.id_to_added:
                if buf:
                    out.append(bytes(buf).decode("utf-8", errors="replace"))
                    buf = []
                if not skip_special:
                    out.append(self.id_to_added[i])
                continue
            t = self.id_to_token.get(i)
            if t is not None:
                buf.extend(BYTE_DECODER[c] for c in t)
        if buf:
            out.append(bytes(buf).decode("utf-8", errors="replace"))
        return "".join(out)

    def token_id(self, content):
        return self.added[content]

    # ---- writers ---------------------------------------------------------------------------
    def _added_decoder(self):
        return {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                         "single_word": False, "special": True}
                for t, i in sorted(self.added.items(), key=lambda kv: kv[1])}

    def save(self, out_dir, model_max_length):
        os.makedirs(out_dir, exist_ok=True)
        if self.family == "llada":
            self._save_llada(out_dir, model_max_length)
        else:
            self._save_dream(out_dir, model_max_length)

    def _save_llada(self, out_dir, model_max_length):
        tj = tokenizer_json.bpe_tokenizer(
            self.vocab, self.merges, tokenizer_json.added_tokens(self.added),
            pre_tokenizer=tokenizer_json.split_byte_level(LLADA_REGEX, trim_offsets=True),
            decoder=tokenizer_json.byte_level(True, trim_offsets=True, use_regex=True))
        tokenizer_json.write(os.path.join(out_dir, "tokenizer.json"), tj, indent=2)
        cfg = {
            "add_bos_token": False,
            "add_eos_token": False,
            "added_tokens_decoder": self._added_decoder(),
            "bos_token": "<|startoftext|>",
            "chat_template": LLADA_CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|endoftext|>",
            "model_max_length": model_max_length,
            "pad_token": "<|endoftext|>",
            "tokenizer_class": "PreTrainedTokenizerFast",
        }
        with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=2)
            f.write("\n")

    def _save_dream(self, out_dir, model_max_length):
        with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(self.vocab, f, ensure_ascii=False)
            f.write("\n")
        with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            for a, b in self.merges:
                f.write(a + " " + b + "\n")
        with open(os.path.join(out_dir, "added_tokens.json"), "w", encoding="utf-8") as f:
            json.dump(dict(sorted(self.added.items(), key=lambda kv: kv[1])), f, ensure_ascii=False,
                      indent=2)
            f.write("\n")
        cfg = {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": self._added_decoder(),
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "bos_token": None,
            "chat_template": DREAM_CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|endoftext|>",
            "errors": "replace",
            "mask_token": "<|mask|>",
            "model_max_length": model_max_length,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "DreamTokenizer",
            "unk_token": None,
        }
        with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=2)
            f.write("\n")


def load(model_dir):
    """Loads a tokenizer written by Tokenizer.save (either family, detected from the files)."""
    tj = os.path.join(model_dir, "tokenizer.json")
    if os.path.exists(tj):
        with open(tj, encoding="utf-8") as f:
            d = json.load(f)
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                  for m in d["model"]["merges"]]
        added = {t["content"]: t["id"] for t in d["added_tokens"]}
        return Tokenizer("llada", d["model"]["vocab"], merges, added)
    with open(os.path.join(model_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    merges = []
    with open(os.path.join(model_dir, "merges.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#version"):
                continue
            a, b = line.split(" ")
            merges.append((a, b))
    with open(os.path.join(model_dir, "added_tokens.json"), encoding="utf-8") as f:
        added = json.load(f)
    return Tokenizer("dream", vocab, merges, added)


def build(family, texts, vocab_size):
    """Trains a tokenizer whose base vocab has (at most) vocab_size tokens, specials appended."""
    vocab, merges = train_bpe(family, texts, vocab_size)
    added = {t: len(vocab) + i for i, t in enumerate(family_specials(family))}
    return Tokenizer(family, vocab, merges, added)
