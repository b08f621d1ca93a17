"""Cross-checks the pure-Python encoder (bpe.py) against the Hugging Face Rust `tokenizers`
library (through its Node binding, npm package `tokenizers`) on a model folder.

LLaDA folders are checked through their own tokenizer.json. Dream folders have the slow
format (vocab.json + merges.txt); they are checked through an equivalent tokenizer.json
built here the way Qwen2TokenizerFast is (NFC normalizer, Split(Qwen2 regex, Isolated),
ByteLevel(use_regex=false), added tokens), which is the fast twin of the slow tokenizer.

Usage: python3 -m tools.train.check_tokenizer models/llada-tiny \
           --node-modules /tmp/hftok/node_modules
Exit status 0 when every text encodes to identical ids and round-trips.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from tools.pylib import tokenizer_json
from tools.tasks import tasks
from tools.train import bpe, common

EXTRA = [
    "", " ", "  leading and trailing  ", "it's I'LL we've THEY'RE she'd", "a\r\nb\n\n\nc\t d",
    "x  y   z", "123 4567 89.5 -3 1e9 ٣٤ ½", "caf\u00e9 cafe\u0301 \u00c5ngstr\u00f6m \u212b",
    "emoji \U0001F600\U0001F680 ok", "中文 テキスト 한국어", "tab\tsep\tvalues", "!!! ??? ...",
    "<|endoftext|><|endoftext|>", "a<|eot_id|>b<|im_end|>c<|mask|>d<|mdm_mask|>e",
    "<|start_header_id|>user<|end_header_id|>", "<|im_start|>system\nhi<|im_end|>\n",
    "trailing newline\n", "   \n  \n", "What is 47 + 38?", "Sort these numbers: 7 2 9 4",
]


def dream_tokenizer_json(tok):
    return tokenizer_json.bpe_tokenizer(
        tok.vocab, tok.merges, tokenizer_json.added_tokens(tok.added),
        pre_tokenizer=tokenizer_json.split_byte_level(bpe.QWEN2_REGEX, trim_offsets=False),
        decoder=tokenizer_json.byte_level(False, trim_offsets=False, use_regex=False),
        normalizer={"type": "NFC"}, subword_affix="")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--node-modules", default="/tmp/hftok/node_modules")
    args = ap.parse_args()
    tok = bpe.load(args.model_dir)
    family = tok.family
    test, val, _ = tasks.load_splits()
    texts = list(EXTRA)
    for it in test + val:
        texts.append(bpe.render_chat(family, it["prompt"]))
        texts.append(it["answer"])
    with tempfile.TemporaryDirectory() as d:
        tj = os.path.join(args.model_dir, "tokenizer.json")
        if family == "dream":
            tj = os.path.join(d, "tokenizer.json")
            with open(tj, "w", encoding="utf-8") as f:
                json.dump(dream_tokenizer_json(tok), f, ensure_ascii=False)
        inp, outp = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        with open(inp, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
        env = dict(os.environ, NODE_PATH=args.node_modules)
        subprocess.run(["node", os.path.join(common.HERE, "hf_tokenize.js"), tj, inp, outp],
                       check=True, env=env)
        with open(outp, encoding="utf-8") as f:
            hf = [json.loads(line) for line in f if line.strip()]
    # An empty text gives an empty line that the node script skips; align on non-empty texts.
    texts_ne = texts
    assert len(hf) == len(texts_ne), (len(hf), len(texts_ne))
    bad = 0
    for t, h in zip(texts_ne, hf):
        mine = tok.encode(t)
        if mine != h["ids"]:
            bad += 1
            if bad <= 5:
                print("MISMATCH", repr(t), mine, h["ids"])
        dec = tok.decode(mine, skip_special=False)
        if family == "llada" and dec != t:
            bad += 1
            print("ROUNDTRIP", repr(t), repr(dec))
    print(f"{family}: {len(texts_ne)} texts, {bad} mismatches")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
