"""Independent PyTorch reference of the two diffusion-LM architectures served by dllm-serve.

Written from docs/models.md (sections 2.1-2.3 LLaDA, 3.1-3.3 Dream), not
from the C++ engine, so that it can serve as a check on it.

Both families are a pre-norm Llama-style transformer with:
  - RMSNorm (weight only): x * rsqrt(mean(x^2) + eps), statistics in fp32, then * weight;
  - RoPE rotate-half (NeoX) over the full head dim at absolute positions 0..N-1:
      inv_freq[j] = 1 / theta^(2j/d), angle = pos * inv_freq, emb = cat(angle, angle),
      out = x*cos + rotate_half(x)*sin with rotate_half(x) = cat(-x[d/2:], x[:d/2]);
  - GQA: kv head j serves q heads j*r .. j*r+r-1 (r = heads / kv_heads);
  - bidirectional attention (no mask), scale 1/sqrt(head_dim);
  - SwiGLU MLP: down(silu(gate(x)) * up(x));
  - untied LM head; Dream's q/k/v projections have a bias.

`DiffusionLM.forward(ids[B,N])` returns UNSHIFTED logits [B,N,V]: row i is the model output
at position i. Dream's sampler uses row i-1 for token i; callers apply that shift.

The module computes in the dtype of its parameters (fp32, or fp64 for the goldens; norm
statistics, RoPE and softmax use fp32 when the parameters are 16-bit). The bf16
rounding points of the production PyTorch code (docs/models.md section 5) are not emulated.

Everything here is inference only; no training code.
"""

import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from tools.pylib import safetensors_io

LLADA = "llada"
DREAM = "Dream"

_DTYPE_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}


# ----------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------


def make_config(family, hidden, layers, heads, kv_heads, intermediate, vocab, rope_theta, eps,
                max_positions, mask_id, eos_id, pad_id, bos_id, torch_dtype="bfloat16"):
    """Returns a complete HF-style config.json dict with the real key names of the family.

    family: "llada" or "Dream". For LLaDA, bos_id is not a config.json key in the released
    checkpoint (it lives in generation_config.json); see make_generation_config.
    """
    if family == LLADA:
        return {
            "activation_type": "silu",
            "alibi": False,
            "alibi_bias_max": 8.0,
            "architectures": ["LLaDAModelLM"],
            "attention_dropout": 0.0,
            "attention_layer_norm": False,
            "attention_layer_norm_with_affine": True,
            "auto_map": {
                "AutoConfig": "configuration_llada.LLaDAConfig",
                "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
                "AutoModel": "modeling_llada.LLaDAModelLM",
            },
            "bias_for_layer_norm": False,
            "block_group_size": 1,
            "block_type": "llama",
            "d_model": hidden,
            "embedding_dropout": 0.0,
            "embedding_size": vocab,
            "eos_token_id": eos_id,
            "flash_attention": False,
            "include_bias": False,
            "include_qkv_bias": False,
            "init_cutoff_factor": None,
            "init_device": "meta",
            "init_fn": "mitchell",
            "init_std": 0.02,
            "input_emb_norm": False,
            "layer_norm_type": "rms",
            "layer_norm_with_affine": True,
            "mask_token_id": mask_id,
            "max_sequence_length": max_positions,
            "mlp_hidden_size": intermediate,
            "mlp_ratio": 4,
            "model_type": "llada",
            "multi_query_attention": None,
            "n_heads": heads,
            "n_kv_heads": kv_heads,
            "n_layers": layers,
            "pad_token_id": pad_id,
            "precision": "amp_bf16",
            "residual_dropout": 0.0,
            "rms_norm_eps": eps,
            "rope": True,
            "rope_full_precision": True,
            "rope_theta": float(rope_theta),
            "scale_logits": False,
            "transformers_version": "4.46.3",
            "use_cache": False,
            "vocab_size": vocab,
            "weight_tying": False,
            "torch_dtype": torch_dtype,
        }
    if family == DREAM:
        return {
            "architectures": ["DreamModel"],
            "attention_dropout": 0.0,
            "auto_map": {
                "AutoConfig": "configuration_dream.DreamConfig",
                "AutoModel": "modeling_dream.DreamModel",
            },
            "bos_token_id": bos_id,
            "eos_token_id": eos_id,
            "hidden_act": "silu",
            "hidden_size": hidden,
            "initializer_range": 0.02,
            "intermediate_size": intermediate,
            "mask_token_id": mask_id,
            "max_position_embeddings": max_positions,
            "max_window_layers": layers,
            "model_type": "Dream",
            "num_attention_heads": heads,
            "num_hidden_layers": layers,
            "num_key_value_heads": kv_heads,
            "pad_token_id": pad_id,
            "rms_norm_eps": eps,
            "rope_scaling": None,
            "rope_theta": float(rope_theta),
            "sliding_window": None,
            "tie_word_embeddings": False,
            "torch_dtype": torch_dtype,
            "transformers_version": "4.46.2",
            "use_cache": True,
            "use_mrope": False,
            "use_sliding_window": False,
            "vocab_size": vocab,
        }
    raise ValueError(f"unknown family {family!r} (expected 'llada' or 'Dream')")


def make_generation_config(family, eos_id, pad_id, bos_id):
    """generation_config.json contents in the style of the released checkpoints."""
    if family == LLADA:
        return {"_from_model_config": True, "bos_token_id": bos_id, "eos_token_id": eos_id,
                "pad_token_id": pad_id, "transformers_version": "4.46.3"}
    return {"alg": "origin", "alg_temp": None, "bos_token_id": bos_id, "eos_token_id": eos_id,
            "eps": 0.001, "mask_token_id": None, "pad_token_id": pad_id, "steps": 512,
            "temperature": 0.0, "top_k": None, "top_p": None, "transformers_version": "4.46.2"}


class Arch:
    """Architecture facts extracted from an HF config dict (family-independent names)."""

    def __init__(self, cfg):
        mt = cfg.get("model_type")
        if mt == LLADA:
            self.family = LLADA
            for key, bad in (("include_bias", True), ("weight_tying", True), ("alibi", True),
                             ("input_emb_norm", True), ("scale_logits", True)):
                if cfg.get(key, False) == bad:
                    raise ValueError(f"LLaDA config option {key}={bad} is not supported")
            if cfg.get("block_type", "llama") != "llama":
                raise ValueError(f"LLaDA block_type {cfg.get('block_type')!r} not supported")
            self.hidden = int(cfg["d_model"])
            self.layers = int(cfg["n_layers"])
            self.heads = int(cfg["n_heads"])
            kv = cfg.get("n_kv_heads")
            self.kv_heads = int(kv) if kv is not None else self.heads
            self.intermediate = int(cfg["mlp_hidden_size"])
            self.vocab = int(cfg.get("embedding_size") or cfg["vocab_size"])
            self.qkv_bias = bool(cfg.get("include_qkv_bias", False))
            self.max_positions = int(cfg["max_sequence_length"])
        elif mt == DREAM:
            self.family = DREAM
            if cfg.get("tie_word_embeddings", False):
                raise ValueError("Dream tie_word_embeddings=true is not supported")
            if cfg.get("rope_scaling") is not None:
                raise ValueError("Dream rope_scaling is not supported")
            self.hidden = int(cfg["hidden_size"])
            self.layers = int(cfg["num_hidden_layers"])
            self.heads = int(cfg["num_attention_heads"])
            self.kv_heads = int(cfg.get("num_key_value_heads") or self.heads)
            self.intermediate = int(cfg["intermediate_size"])
            self.vocab = int(cfg["vocab_size"])
            self.qkv_bias = True
            self.max_positions = int(cfg["max_position_embeddings"])
        else:
            raise ValueError(f"unknown model_type {mt!r} (expected 'llada' or 'Dream')")
        self.rope_theta = float(cfg["rope_theta"])
        self.eps = float(cfg["rms_norm_eps"])
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError("heads must divide hidden and kv_heads must divide heads")
        self.head_dim = self.hidden // self.heads
        if self.head_dim % 2:
            raise ValueError("head_dim must be even for rotate-half RoPE")


# ----------------------------------------------------------------------------------------
# Modules
# ----------------------------------------------------------------------------------------


def acc_dtype(dtype):
    """Dtype for statistics/rotations: fp32 for 16-bit inputs, else the input dtype (so a
    float64 model stays float64 throughout)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.to(acc_dtype(x.dtype))
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_cos_sin(positions, head_dim, theta):
    """cos, sin of shape [len(positions), head_dim] in fp32 (cat(freqs, freqs) layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x, cos, sin):
    """x: [..., N, head_dim]; cos/sin: [N, head_dim] (fp32 tables as the checkpoints' code
    builds them). Rotated in fp32 (or x's dtype if wider), returned in x.dtype."""
    acc = acc_dtype(x.dtype)
    xf = x.to(acc)
    return (xf * cos.to(acc) + rotate_half(xf) * sin.to(acc)).to(x.dtype)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        kv_dim = a.kv_heads * a.head_dim
        self.attn_norm = RMSNorm(a.hidden, a.eps)
        self.q_proj = nn.Linear(a.hidden, a.hidden, bias=a.qkv_bias)
        self.k_proj = nn.Linear(a.hidden, kv_dim, bias=a.qkv_bias)
        self.v_proj = nn.Linear(a.hidden, kv_dim, bias=a.qkv_bias)
        self.o_proj = nn.Linear(a.hidden, a.hidden, bias=False)
        self.ffn_norm = RMSNorm(a.hidden, a.eps)
        self.gate_proj = nn.Linear(a.hidden, a.intermediate, bias=False)
        self.up_proj = nn.Linear(a.hidden, a.intermediate, bias=False)
        self.down_proj = nn.Linear(a.intermediate, a.hidden, bias=False)

    def attention(self, x, cos, sin, key_mask=None):
        a = self.a
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, a.heads, a.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, a.kv_heads, a.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, a.kv_heads, a.head_dim).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        r = a.heads // a.kv_heads
        if r > 1:  # kv head j -> q heads j*r .. j*r+r-1
            k = k.repeat_interleave(r, dim=1)
            v = v.repeat_interleave(r, dim=1)
        acc = acc_dtype(q.dtype)
        scores = (q.to(acc) @ k.to(acc).transpose(-1, -2)) / math.sqrt(a.head_dim)
        if key_mask is not None:  # padded batches: padding keys get no weight
            scores = scores.masked_fill(~key_mask[:, None, None, :], -float("inf"))
        p = torch.softmax(scores, dim=-1).to(v.dtype)  # no mask: fully bidirectional
        o = (p @ v).transpose(1, 2).reshape(b, n, a.hidden)
        return self.o_proj(o)

    def forward(self, h, cos, sin, key_mask=None):
        h = h + self.attention(self.attn_norm(h), cos, sin, key_mask)
        m = self.ffn_norm(h)
        return h + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))


class DiffusionLM(nn.Module):
    """LLaDA or Dream transformer built from an HF config.json dict."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        self.arch = a = Arch(cfg)
        self.embed = nn.Embedding(a.vocab, a.hidden)
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.final_norm = RMSNorm(a.hidden, a.eps)
        self.lm_head = nn.Linear(a.hidden, a.vocab, bias=False)

    @property
    def family(self):
        return self.arch.family

    def forward(self, input_ids, return_hidden=False, key_mask=None):
        """input_ids: int64 [B,N]. Returns logits [B,N,V] (unshifted); with return_hidden
        also the list of hidden states after each block ([B,N,hidden] each). key_mask: bool
        [B,N], False for right-padding positions no row may attend to (training and batched
        evaluation of sequences of different lengths; positions are unchanged, so row i of a
        padded sequence equals row i of the unpadded one up to rounding)."""
        a = self.arch
        if input_ids.dim() == 1:
            input_ids = input_ids[None]
        n = input_ids.shape[1]
        if n > a.max_positions:
            raise ValueError(f"sequence length {n} exceeds max positions {a.max_positions}")
        if int(input_ids.min()) < 0 or int(input_ids.max()) >= a.vocab:
            raise ValueError("input id out of range of the embedding")
        cos, sin = rope_cos_sin(torch.arange(n), a.head_dim, a.rope_theta)
        h = self.embed(input_ids)
        hidden = []
        for blk in self.blocks:
            h = blk(h, cos, sin, key_mask)
            hidden.append(h)
        logits = self.lm_head(self.final_norm(h))
        return (logits, hidden) if return_hidden else logits

    def init_random(self, generator, gain=1.0, qk_gain=1.5, embed_std=0.02, bias_std=0.1,
                    norm_jitter=0.2):
        """Seeded random init for fixtures. Matrices ~ N(0, gain/sqrt(fan_in)) so that every
        block changes the residual stream by O(1) (with a fixed tiny std such as 0.02 the
        blocks would barely matter and attention would be near-uniform, making goldens
        insensitive to RoPE/attention bugs); q/k use qk_gain for peaky attention. Norm
        weights are 1 + U(-j, j), biases N(0, bias_std), embedding rows N(0, embed_std); the
        small embedding std (like real checkpoints) makes rms_norm_eps visible in the output."""
        def normal(shape, std):
            return std * torch.randn(shape, generator=generator)

        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    u = torch.rand(p.shape, generator=generator)
                    p.copy_(1.0 + norm_jitter * (2 * u - 1))
                elif name == "embed.weight":
                    p.copy_(normal(p.shape, embed_std))
                elif name.endswith(".bias"):
                    p.copy_(normal(p.shape, bias_std))
                else:
                    g = qk_gain if (".q_proj." in name or ".k_proj." in name) else gain
                    p.copy_(normal(p.shape, g / math.sqrt(p.shape[1])))
        return self


# ----------------------------------------------------------------------------------------
# HF tensor names and checkpoints
# ----------------------------------------------------------------------------------------


def _name_pairs(model):
    """[(hf_name, parameter)] in HF state_dict order."""
    a = model.arch
    pairs = []
    if a.family == LLADA:
        pairs.append(("model.transformer.wte.weight", model.embed.weight))
        for i, b in enumerate(model.blocks):
            p = f"model.transformer.blocks.{i}."
            pairs += [(p + "attn_out.weight", b.o_proj.weight),
                      (p + "attn_norm.weight", b.attn_norm.weight),
                      (p + "ff_norm.weight", b.ffn_norm.weight),
                      (p + "ff_out.weight", b.down_proj.weight),
                      (p + "ff_proj.weight", b.gate_proj.weight)]
            for proj in ("q_proj", "k_proj", "v_proj"):
                lin = getattr(b, proj)
                pairs.append((p + proj + ".weight", lin.weight))
                if lin.bias is not None:
                    pairs.append((p + proj + ".bias", lin.bias))
            pairs.append((p + "up_proj.weight", b.up_proj.weight))
        pairs.append(("model.transformer.ln_f.weight", model.final_norm.weight))
        pairs.append(("model.transformer.ff_out.weight", model.lm_head.weight))
    else:
        pairs.append(("model.embed_tokens.weight", model.embed.weight))
        for i, b in enumerate(model.blocks):
            p = f"model.layers.{i}."
            pairs.append((p + "input_layernorm.weight", b.attn_norm.weight))
            for proj in ("q_proj", "k_proj", "v_proj"):
                lin = getattr(b, proj)
                pairs.append((p + f"self_attn.{proj}.weight", lin.weight))
                pairs.append((p + f"self_attn.{proj}.bias", lin.bias))
            pairs += [(p + "self_attn.o_proj.weight", b.o_proj.weight),
                      (p + "post_attention_layernorm.weight", b.ffn_norm.weight),
                      (p + "mlp.gate_proj.weight", b.gate_proj.weight),
                      (p + "mlp.up_proj.weight", b.up_proj.weight),
                      (p + "mlp.down_proj.weight", b.down_proj.weight)]
        pairs.append(("model.norm.weight", model.final_norm.weight))
        pairs.append(("lm_head.weight", model.lm_head.weight))
    return pairs


def hf_state_dict(model, dtype=None):
    """{HF tensor name: tensor} (detached copies, optionally cast to `dtype`)."""
    return {n: p.detach().clone() if dtype is None else p.detach().to(dtype).clone()
            for n, p in _name_pairs(model)}


def load_hf_state_dict(model, tensors):
    """Copies HF-named tensors into `model` (cast to the parameter dtype). The key set and
    every shape must match exactly."""
    pairs = _name_pairs(model)
    expected = {n for n, _ in pairs}
    missing = sorted(expected - set(tensors))
    unexpected = sorted(set(tensors) - expected)
    if missing or unexpected:
        raise ValueError(f"state dict mismatch: missing {missing[:5]} unexpected {unexpected[:5]}")
    with torch.no_grad():
        for n, p in pairs:
            t = tensors[n]
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError(f"{n}: shape {tuple(t.shape)} != expected {tuple(p.shape)}")
            p.copy_(t.to(p.dtype))
    return model


def save_checkpoint(model, cfg, out_dir, dtype=torch.bfloat16, max_shard_bytes=None):
    """Writes config.json (torch_dtype set to `dtype`) and the weights as model.safetensors,
    or as shards + index when max_shard_bytes is given."""
    os.makedirs(out_dir, exist_ok=True)
    cfg = dict(cfg)
    cfg["torch_dtype"] = _DTYPE_NAMES[dtype]
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    tensors = hf_state_dict(model, dtype)
    meta = {"format": "pt"}
    if max_shard_bytes is None:
        safetensors_io.save_file(tensors, os.path.join(out_dir, safetensors_io.SINGLE_FILE), meta)
    else:
        safetensors_io.save_sharded(tensors, out_dir, max_shard_bytes, meta)


def load_checkpoint(model_dir, dtype=torch.float32):
    """Returns (DiffusionLM in `dtype`, config dict) from an HF-style model folder."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    model = DiffusionLM(cfg).to(dtype)
    load_hf_state_dict(model, safetensors_io.load_dir(model_dir))
    model.eval()
    return model, cfg
