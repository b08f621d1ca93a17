"""Sanity tests of the PyTorch reference, the safetensors I/O and the committed fixtures.

Run from the repo root:  /usr/bin/python3 -m unittest tools.reference.test_modeling
"""

import json
import math
import os
import struct
import tempfile
import unittest

import numpy as np
import torch

from tools.pylib import safetensors_io as S
from tools.reference import modeling as M

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

FIXTURE_ROOT = os.path.join(REPO, "tests", "data", "reference")
FIXTURES = ["llada_mha", "llada_gqa_f32", "dream_gqa", "dream_f16"]


def tiny(family, heads=4, kv=2, hidden=32, vocab=40, seed=0):
    cfg = M.make_config(family, hidden, 2, heads, kv, 48, vocab, 10000.0, 1e-5, 64, vocab - 1,
                        vocab - 2, vocab - 2, vocab - 3)
    model = M.DiffusionLM(cfg).init_random(torch.Generator().manual_seed(seed))
    return model.double().eval(), cfg


def rel_err(a, b):
    return float((a - b).abs().max() / b.abs().max())


def naive_forward(t, cfg, ids):
    """Second implementation written with explicit loops over heads and positions, reading
    the HF-named tensors directly (checks the name mapping and the module code)."""
    llada = cfg["model_type"] == "llada"
    if llada:
        hid, nl, nh, nkv = cfg["d_model"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"]
        pre = "model.transformer."
        emb, fin, head = t[pre + "wte.weight"], t[pre + "ln_f.weight"], t[pre + "ff_out.weight"]
    else:
        hid, nl = cfg["hidden_size"], cfg["num_hidden_layers"]
        nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        emb, fin, head = t["model.embed_tokens.weight"], t["model.norm.weight"], t["lm_head.weight"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    d = hid // nh
    n = len(ids)

    def norm(x, w):
        return w * x / math.sqrt(float((x * x).mean()) + eps)

    def rope(v, p):
        out = v.clone()
        for j in range(d // 2):  # dim j pairs with dim j + d/2
            ang = p * (1.0 / theta ** (2 * j / d))
            c, s = math.cos(ang), math.sin(ang)
            out[j] = v[j] * c - v[j + d // 2] * s
            out[j + d // 2] = v[j + d // 2] * c + v[j] * s
        return out

    def lin(name, x):
        y = t[name + ".weight"] @ x
        return y + t[name + ".bias"] if name + ".bias" in t else y

    h = [emb[i].clone() for i in ids]
    for layer in range(nl):
        if llada:
            p = f"model.transformer.blocks.{layer}."
            names = dict(an="attn_norm", q="q_proj", k="k_proj", v="v_proj", o="attn_out",
                         fn="ff_norm", g="ff_proj", u="up_proj", dn="ff_out")
        else:
            p = f"model.layers.{layer}."
            names = dict(an="input_layernorm", q="self_attn.q_proj", k="self_attn.k_proj",
                         v="self_attn.v_proj", o="self_attn.o_proj",
                         fn="post_attention_layernorm", g="mlp.gate_proj", u="mlp.up_proj",
                         dn="mlp.down_proj")
        nm = {k: p + v for k, v in names.items()}
        a = [norm(x, t[nm["an"] + ".weight"]) for x in h]
        q = [lin(nm["q"], x) for x in a]
        k = [lin(nm["k"], x) for x in a]
        v = [lin(nm["v"], x) for x in a]
        attn = []
        for i in range(n):
            heads = []
            for hh in range(nh):
                kvh = hh // (nh // nkv)
                qi = rope(q[i][hh * d:(hh + 1) * d], i)
                scores = torch.stack([
                    qi @ rope(k[j][kvh * d:(kvh + 1) * d], j) / math.sqrt(d) for j in range(n)])
                w = torch.softmax(scores, 0)
                heads.append(sum(w[j] * v[j][kvh * d:(kvh + 1) * d] for j in range(n)))
            attn.append(torch.cat(heads))
        h = [h[i] + lin(nm["o"], attn[i]) for i in range(n)]
        m = [norm(x, t[nm["fn"] + ".weight"]) for x in h]
        h = [h[i] + lin(nm["dn"], torch.nn.functional.silu(lin(nm["g"], m[i])) * lin(nm["u"], m[i]))
             for i in range(n)]
    return torch.stack([head @ norm(x, fin) for x in h])


class RopeTest(unittest.TestCase):
    def test_position_zero_is_identity(self):
        cos, sin = M.rope_cos_sin(torch.arange(3), 16, 500000.0)
        x = torch.randn(2, 3, 16, dtype=torch.float64)
        self.assertTrue(torch.equal(M.apply_rope(x, cos, sin)[:, 0], x[:, 0]))
        self.assertFalse(torch.allclose(M.apply_rope(x, cos, sin)[:, 1], x[:, 1]))

    def test_scores_depend_on_relative_position_only(self):
        cos, sin = M.rope_cos_sin(torch.arange(12), 8, 10000.0)
        q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
        qs = M.apply_rope(q.expand(12, 8), cos, sin)
        ks = M.apply_rope(k.expand(12, 8), cos, sin)
        self.assertAlmostEqual(float(qs[5] @ ks[2]), float(qs[9] @ ks[6]), places=5)
        self.assertAlmostEqual(float(qs[3].norm()), float(q.norm()), places=5)

    def test_rotate_half_pairs_j_with_j_plus_half(self):
        x = torch.arange(1.0, 7.0)
        self.assertEqual(M.rotate_half(x).tolist(), [-4.0, -5.0, -6.0, 1.0, 2.0, 3.0])


class ModelTest(unittest.TestCase):
    def test_matches_naive_loop_implementation(self):
        for family in ("llada", "Dream"):
            for heads, kv in ((4, 4), (4, 2), (4, 1)):
                with self.subTest(family=family, heads=heads, kv=kv):
                    model, cfg = tiny(family, heads, kv)
                    ids = [3, 7, 39, 39, 1, 20]
                    got = model(torch.tensor([ids]))[0]
                    want = naive_forward(M.hf_state_dict(model), cfg, ids)
                    # The module builds RoPE tables in fp32 like the checkpoints' code, the
                    # loop version in fp64: ~1e-7 apart (with fp64 tables they agree to 1e-15).
                    self.assertLess(rel_err(got, want), 1e-6)

    def test_gqa_equals_mha_with_duplicated_kv_heads(self):
        for family in ("llada", "Dream"):
            gqa, cfg = tiny(family, heads=4, kv=2)
            mha_cfg = dict(cfg)
            mha_cfg["n_kv_heads" if family == "llada" else "num_key_value_heads"] = 4
            mha = M.DiffusionLM(mha_cfg).double().eval()
            t = M.hf_state_dict(gqa)
            d = gqa.arch.head_dim
            for name in list(t):
                if any(s in name for s in ("k_proj", "v_proj")):
                    # kv head j serves q heads 2j and 2j+1: duplicate its rows in place.
                    rows = t[name].reshape(2, d, *t[name].shape[1:])
                    t[name] = rows.repeat_interleave(2, dim=0).reshape(4 * d, *t[name].shape[1:])
            M.load_hf_state_dict(mha, t)
            ids = torch.tensor([[1, 5, 9, 39, 39]])
            self.assertLess(rel_err(mha(ids), gqa(ids)), 1e-12)

    def test_attention_is_bidirectional(self):
        model, _ = tiny("llada")
        a = model(torch.tensor([[1, 2, 3, 4]]))
        b = model(torch.tensor([[1, 2, 3, 5]]))
        self.assertGreater(float((a[0, 0] - b[0, 0]).abs().max()), 1e-6)

    def test_hf_names(self):
        llada, _ = tiny("llada")
        names = set(M.hf_state_dict(llada))
        for n in ("model.transformer.wte.weight", "model.transformer.ff_out.weight",
                  "model.transformer.ln_f.weight", "model.transformer.blocks.1.up_proj.weight",
                  "model.transformer.blocks.0.attn_out.weight"):
            self.assertIn(n, names)
        self.assertEqual(len(names), 3 + 2 * 9)
        dream, _ = tiny("Dream")
        names = set(M.hf_state_dict(dream))
        for n in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
                  "model.layers.1.self_attn.k_proj.bias", "model.layers.0.mlp.down_proj.weight"):
            self.assertIn(n, names)
        self.assertEqual(len(names), 3 + 2 * 12)

    def test_load_rejects_mismatch(self):
        model, _ = tiny("Dream")
        t = M.hf_state_dict(model)
        del t["lm_head.weight"]
        with self.assertRaises(ValueError):
            M.load_hf_state_dict(model, t)
        t = M.hf_state_dict(model)
        t["model.norm.weight"] = torch.ones(3)
        with self.assertRaises(ValueError):
            M.load_hf_state_dict(model, t)

    def test_make_config_has_real_keys(self):
        c = M.make_config("llada", 32, 2, 4, 4, 64, 100, 5e5, 1e-5, 64, 99, 98, 98, 97)
        for k in ("d_model", "n_layers", "n_heads", "n_kv_heads", "mlp_hidden_size",
                  "embedding_size", "vocab_size", "rope_theta", "rms_norm_eps",
                  "include_qkv_bias", "max_sequence_length", "mask_token_id", "eos_token_id",
                  "pad_token_id", "weight_tying", "rope_full_precision", "block_type"):
            self.assertIn(k, c)
        self.assertEqual((c["model_type"], c["architectures"]), ("llada", ["LLaDAModelLM"]))
        c = M.make_config("Dream", 32, 2, 4, 2, 64, 100, 1e6, 1e-6, 64, 99, 98, 98, 98)
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "intermediate_size", "vocab_size", "rope_theta",
                  "rms_norm_eps", "max_position_embeddings", "tie_word_embeddings",
                  "mask_token_id", "bos_token_id"):
            self.assertIn(k, c)
        self.assertEqual((c["model_type"], c["architectures"]), ("Dream", ["DreamModel"]))


class SafetensorsTest(unittest.TestCase):
    def test_round_trip_exact_and_layout(self):
        g = torch.Generator().manual_seed(0)
        tensors = {"b.w": torch.randn(3, 5, generator=g).to(torch.bfloat16),
                   "a.h": torch.randn(7, generator=g).to(torch.float16),
                   "c.f": torch.randn(2, 2, 2, generator=g),
                   "d.scalar": torch.tensor(1.5)}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.safetensors")
            S.save_file(tensors, path, {"format": "pt"})
            back, meta = S.load_file(path, with_metadata=True)
            self.assertEqual(meta, {"format": "pt"})
            for k, v in tensors.items():
                self.assertEqual(back[k].dtype, v.dtype)
                self.assertTrue(torch.equal(back[k], v), k)
            raw = open(path, "rb").read()
            (n,) = struct.unpack("<Q", raw[:8])
            self.assertEqual((8 + n) % 8, 0)
            header = json.loads(raw[8:8 + n])
            self.assertEqual(header["b.w"]["dtype"], "BF16")
            self.assertEqual(header["a.h"]["dtype"], "F16")
            self.assertEqual(header["c.f"]["shape"], [2, 2, 2])
            names = [k for k in header if k != "__metadata__"]
            self.assertEqual(names, sorted(names))
            end = 0
            for k in names:  # contiguous and fully covering the data section
                self.assertEqual(header[k]["data_offsets"][0], end)
                end = header[k]["data_offsets"][1]
            self.assertEqual(end, len(raw) - 8 - n)
            # bf16 bytes are the top halves of the fp32 bits
            w = tensors["b.w"].float().view(torch.int32) >> 16
            start = 8 + n + header["b.w"]["data_offsets"][0]
            got = np.frombuffer(raw[start:start + 30], dtype="<i2")
            self.assertEqual(got.tolist(), w.flatten().to(torch.int16).tolist())

    def test_bad_files_raise(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.safetensors")
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", 1000) + b"{}")
            with self.assertRaises(ValueError):
                S.load_file(path)
            S.save_file({"x": torch.zeros(4)}, path)
            raw = open(path, "rb").read()
            with open(path, "wb") as f:
                f.write(raw[:-4])  # truncated data
            with self.assertRaises(ValueError):
                S.load_file(path)

    def test_sharded_round_trip(self):
        g = torch.Generator().manual_seed(1)
        tensors = {f"t{i}": torch.randn(10 + i, generator=g) for i in range(9)}
        with tempfile.TemporaryDirectory() as d:
            files = S.save_sharded(tensors, d, max_shard_bytes=150)
            self.assertGreater(len(files), 2)
            self.assertEqual(files[0], f"model-00001-of-{len(files):05d}.safetensors")
            index = json.load(open(os.path.join(d, S.INDEX_FILE)))
            self.assertEqual(index["metadata"]["total_size"],
                             sum(t.numel() * 4 for t in tensors.values()))
            self.assertEqual(set(index["weight_map"]), set(tensors))
            for f in files:
                shard = S.load_file(os.path.join(d, f))
                self.assertLessEqual(sum(t.numel() * 4 for t in shard.values()), 150)
            back = S.load_dir(d)
            for k, v in tensors.items():
                self.assertTrue(torch.equal(back[k], v))

    def test_checkpoint_round_trip(self):
        for family, dtype, shard in (("llada", torch.float32, None),
                                     ("Dream", torch.float32, 20000),
                                     ("Dream", torch.bfloat16, None)):
            model, cfg = tiny(family)
            model = model.float()
            with tempfile.TemporaryDirectory() as d:
                M.save_checkpoint(model, cfg, d, dtype=dtype, max_shard_bytes=shard)
                back, cfg2 = M.load_checkpoint(d)
                self.assertEqual(cfg2["torch_dtype"], {torch.float32: "float32",
                                                       torch.bfloat16: "bfloat16"}[dtype])
                a, b = M.hf_state_dict(model), M.hf_state_dict(back)
                for k in a:
                    self.assertTrue(torch.equal(a[k].to(dtype).float(), b[k]), k)


class FixtureTest(unittest.TestCase):
    def test_goldens_reproduce_and_are_consistent(self):
        for name in FIXTURES:
            with self.subTest(fixture=name):
                d = os.path.join(FIXTURE_ROOT, name)
                model, cfg = M.load_checkpoint(d, torch.float64)
                golden = json.load(open(os.path.join(d, "golden.json")))
                self.assertGreaterEqual(len(golden["cases"]), 2)
                for case in golden["cases"]:
                    n, v = case["rows"], case["vocab"]
                    want = np.fromfile(os.path.join(d, case["logits_file"]), dtype="<f4")
                    self.assertEqual(want.size, n * v)
                    want = torch.from_numpy(want.reshape(n, v)).double()
                    h0 = np.fromfile(os.path.join(d, case["hidden_after_layer0_file"]),
                                     dtype="<f4").reshape(n, case["hidden"])
                    logits, hidden = model(torch.tensor([case["input_ids"]]), return_hidden=True)
                    self.assertLess(rel_err(logits[0], want), 1e-6)
                    self.assertLess(rel_err(hidden[0][0], torch.from_numpy(h0).double()), 1e-6)
                    self.assertEqual(case["argmax"], want.argmax(-1).tolist())
                    self.assertIn(cfg["mask_token_id"], case["input_ids"])
                    if "prompt_tokens" in case:
                        k = case["prompt_tokens"]
                        self.assertEqual(case["input_ids"][k:], [cfg["mask_token_id"]] * (n - k))
                size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
                self.assertLess(size, 300 * 1024)

    def test_tokenizer_ids_match_config(self):
        for name in FIXTURES:
            d = os.path.join(FIXTURE_ROOT, name)
            cfg = json.load(open(os.path.join(d, "config.json")))
            if cfg["model_type"] == "llada":
                tok = json.load(open(os.path.join(d, "tokenizer.json")))
                added = {t["content"]: t["id"] for t in tok["added_tokens"]}
                vocab = tok["model"]["vocab"]
                mask, eos = added["<|mdm_mask|>"], added["<|endoftext|>"]
                self.assertEqual(len(tok["model"]["merges"]) + 256, len(vocab))
            else:
                added = json.load(open(os.path.join(d, "added_tokens.json")))
                vocab = json.load(open(os.path.join(d, "vocab.json")))
                mask, eos = added["<|mask|>"], added["<|endoftext|>"]
                self.assertEqual(cfg["bos_token_id"], eos)
            self.assertEqual(cfg["mask_token_id"], mask)
            self.assertEqual(cfg["eos_token_id"], eos)
            self.assertEqual(cfg["pad_token_id"], eos)
            ids = sorted(list(vocab.values()) + list(added.values()))
            self.assertEqual(ids, list(range(len(ids))))  # dense, no duplicates
            self.assertLessEqual(len(ids), cfg["vocab_size"])


if __name__ == "__main__":
    unittest.main()
