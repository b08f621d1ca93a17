"""Writes a LLaDA-8B-Instruct-shaped checkpoint folder with seeded random bf16 weights.

Real weights cannot be downloaded on the CI/dev machines, so this is the closest check that an
unmodified 8B folder loads and runs (bench/llada8b_shaped.sh, dllm-load-bench). The folder
has what the published one has for the engine (docs/models.md section 2):

  config.json                         the published LLaDA-8B-Instruct config (same keys and
                                      values as tools/reference/modeling.py make_config)
  generation_config.json              bos 126080, eos 126081
  model-0000{1..6}-of-00006.safetensors
  model.safetensors.index.json        weight_map + total_size

No tokenizer: the real tokenizer.json is not available, and the tiny LLaDA tokenizer's
special ids (eos 507, mask 508) would contradict config.json (126081, 126336), so
dllm-load-bench builds the Transformer from config.json + checkpoint, not via LoadModel.

Tensor names and shapes are the published ones, all BF16, [out, in] for Linear weights.
Sharding: like the real index, one layer's tensors are spread over several shards. Block 0
is placed exactly as in the published index (attn_out in shard 1, ff_out in 2,
q/k/attn_norm/ff_norm in 3, v/ff_proj in 4, up_proj in 5); block N shifts every tensor N
shards further (mod 6), which keeps the shards within about 2.3-3.4 GB. wte is in shard 1,
ln_f and the LM head (model.transformer.ff_out) in shard 6. (The exact published placement
of blocks 1-31 is not known here; the loader must resolve every tensor through weight_map
anyway.)

Values: every weight is a random sign and 7-bit mantissa with the fixed exponent 2^-7, i.e.
|w| in [0.0078, 0.0156): finite, no denormals, small enough that 32 layers of activations
stay finite. Norm weights are 1.0. Each tensor's stream is seeded by (--seed, crc32(name)),
so the bytes do not depend on the shard layout. Tensors are generated and written in chunks
(32 MiB), so memory stays small; each finished shard is fsync'ed and dropped from the page
cache (the disk and RAM are shared with other work).

Usage: python3 -m bench.make_llada8b_shaped OUT_DIR [--seed S] [--small]   (from the repo root)
  --small: same names, sharding and config keys, small shapes (d_model 128, 2 layers; the
           vocab stays 126464 so the special ids fit): a seconds-long self-check.
Needs only python3 and numpy.
"""

import argparse
import json
import os
import time
import zlib

import numpy as np

from tools.pylib import safetensors_io

NUM_SHARDS = 6
PREFIX = "model.transformer."
CHUNK_ELEMENTS = 16 << 20  # 32 MiB of bf16 per write
BF16_ONE = 0x3F80
# bf16 bits: sign(1) exponent(8) mantissa(7). Exponent field 120 = 2^(120-127) = 2^-7.
RANDOM_EXPONENT_BITS = 120 << 7
KEEP_SIGN_AND_MANTISSA = 0x807F

# Shard (0-based) of each block-0 tensor in the published index; block N adds N (mod 6).
BLOCK0_SHARD = {
    "attn_out": 0,
    "ff_out": 1,
    "q_proj": 2,
    "k_proj": 2,
    "attn_norm": 2,
    "ff_norm": 2,
    "v_proj": 3,
    "ff_proj": 3,
    "up_proj": 4,
}


def llada_config(d_model, n_layers, n_heads, mlp_hidden, vocab):
    """LLaDA-8B-Instruct's config.json (docs/models.md section 2.1) for the given shapes."""
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
            "AutoModel": "modeling_llada.LLaDAModelLM",
            "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
        },
        "bias_for_layer_norm": False,
        "block_group_size": 1,
        "block_type": "llama",
        "d_model": d_model,
        "embedding_dropout": 0.0,
        "embedding_size": vocab,
        "eos_token_id": 126081,
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
        "mask_token_id": 126336,
        "max_sequence_length": 4096,
        "mlp_hidden_size": mlp_hidden,
        "mlp_ratio": 4,
        "model_type": "llada",
        "multi_query_attention": None,
        "n_heads": n_heads,
        "n_kv_heads": n_heads,
        "n_layers": n_layers,
        "pad_token_id": 126081,
        "precision": "amp_bf16",
        "residual_dropout": 0.0,
        "rms_norm_eps": 1e-05,
        "rope": True,
        "rope_full_precision": True,
        "rope_theta": 500000.0,
        "scale_logits": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.46.3",
        "use_cache": False,
        "vocab_size": vocab,
        "weight_tying": False,
    }


def tensors_and_shards(d_model, n_layers, mlp_hidden, vocab):
    """Returns {name: (shape, shard index, is_norm)} for the published tensor names."""
    out = {
        PREFIX + "wte.weight": ([vocab, d_model], 0, False),
        PREFIX + "ln_f.weight": ([d_model], NUM_SHARDS - 1, True),
        PREFIX + "ff_out.weight": ([vocab, d_model], NUM_SHARDS - 1, False),
    }
    shapes = {
        "attn_norm": [d_model],
        "q_proj": [d_model, d_model],
        "k_proj": [d_model, d_model],
        "v_proj": [d_model, d_model],
        "attn_out": [d_model, d_model],
        "ff_norm": [d_model],
        "ff_proj": [mlp_hidden, d_model],
        "up_proj": [mlp_hidden, d_model],
        "ff_out": [d_model, mlp_hidden],
    }
    for n in range(n_layers):
        for kind, shape in shapes.items():
            shard = (BLOCK0_SHARD[kind] + n) % NUM_SHARDS
            out[f"{PREFIX}blocks.{n}.{kind}.weight"] = (shape, shard, kind.endswith("norm"))
    return out


def write_tensor(f, name, shape, is_norm, seed):
    count = 1
    for s in shape:
        count *= s
    if is_norm:
        np.full(count, BF16_ONE, dtype="<u2").tofile(f)
        return
    rng = np.random.Generator(np.random.PCG64([seed, zlib.crc32(name.encode())]))
    done = 0
    while done < count:
        n = min(CHUNK_ELEMENTS, count - done)
        bits = np.frombuffer(rng.bytes(2 * n), dtype="<u2").copy()
        bits &= KEEP_SIGN_AND_MANTISSA
        bits |= RANDOM_EXPONENT_BITS
        bits.tofile(f)
        done += n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--small", action="store_true", help="tiny shapes, same layout")
    args = ap.parse_args()

    vocab = 126464  # kept in --small too: the special ids in config.json must fit
    if args.small:
        d_model, n_layers, n_heads, mlp_hidden = 128, 2, 2, 384
    else:
        d_model, n_layers, n_heads, mlp_hidden = 4096, 32, 32, 12288

    os.makedirs(args.out_dir, exist_ok=True)
    start = time.time()
    specs = tensors_and_shards(d_model, n_layers, mlp_hidden, vocab)
    weight_map = {}
    total = 0
    for shard in range(NUM_SHARDS):
        fname = safetensors_io.shard_name(shard, NUM_SHARDS)
        names = sorted(n for n, (_, s, _) in specs.items() if s == shard)
        header = safetensors_io.encode_header([(n, "BF16", specs[n][0]) for n in names],
                                              {"format": "pt"})
        path = os.path.join(args.out_dir, fname)
        tmp = path + ".tmp"
        shard_bytes = 0
        with open(tmp, "wb") as f:
            f.write(header)
            for n in names:
                shape, _, is_norm = specs[n]
                write_tensor(f, n, shape, is_norm, args.seed)
                weight_map[n] = fname
            shard_bytes = f.tell() - len(header)
            f.flush()
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        os.replace(tmp, path)
        total += shard_bytes
        print(f"{fname}: {len(names)} tensors, {shard_bytes / 1e9:.2f} GB "
              f"({time.time() - start:.0f} s)", flush=True)
    safetensors_io.write_index(args.out_dir, weight_map, total)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(llada_config(d_model, n_layers, n_heads, mlp_hidden, vocab), f,
                  indent=2)
        f.write("\n")
    with open(os.path.join(args.out_dir, "generation_config.json"), "w") as f:
        json.dump({"_from_model_config": True, "bos_token_id": 126080, "eos_token_id": 126081,
                   "transformers_version": "4.38.2"}, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out_dir}: {len(specs)} tensors, {total / 1e9:.2f} GB in "
          f"{time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
