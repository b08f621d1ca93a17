"""The Hugging Face fast-tokenizer file (tokenizer.json) of a byte-level BPE, as the repo's
writers make it: the trainer's LLaDA tokenizers (tools/train/bpe.py), the golden fixtures
(tools/reference/make_fixtures.py) and the fast twin of a Dream tokenizer that
tools/train/check_tokenizer.py hands to the Rust library.

They differ only in the added tokens, the normalizer, the pre-tokenizer, the decoder and the
BPE model's subword affixes. The rest of the skeleton (its fields, values and key order) is
built here once, so the files the C++ tokenizer loads cannot drift apart.
"""
import json


def added_token(tid, content, special=True):
    """An entry of tokenizer.json's added_tokens."""
    return {"id": tid, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": special}


def added_tokens(added):
    """The added_tokens entries of {content: id}, special, in id order."""
    return [added_token(i, t) for t, i in sorted(added.items(), key=lambda kv: kv[1])]


def byte_level(add_prefix_space, trim_offsets, use_regex):
    """A ByteLevel pre-tokenizer or decoder."""
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
            "trim_offsets": trim_offsets, "use_regex": use_regex}


def split_byte_level(pattern, trim_offsets):
    """The pre-tokenizer Split(pattern, Isolated), where every regex match and every gap
    between them is a piece, then ByteLevel without a regex of its own."""
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
         "invert": False},
        byte_level(False, trim_offsets, use_regex=False)]}


def bpe_tokenizer(vocab, merges, added, pre_tokenizer, decoder, normalizer=None,
                  subword_affix=None):
    """The tokenizer.json object. merges: (a, b) pairs in rank order; added: the
    added_tokens entries (added_tokens()); subword_affix: the model's continuing_subword_prefix and
    end_of_word_suffix (None, or "" as Qwen2TokenizerFast writes them)."""
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": decoder,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": subword_affix, "end_of_word_suffix": subword_affix,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
    }


def write(path, tokenizer, indent=None):
    """Writes the object (UTF-8, non-ASCII kept as is) and a final newline."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=indent)
        f.write("\n")
