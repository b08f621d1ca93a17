"""Writes the seed corpus for safetensors_header_fuzz into tests/fuzz/corpus/.

Run from the repository root: python3 tests/fuzz/make_corpus.py
Seeds are small valid files (one per dtype, several tensors, metadata, empty and scalar
tensors) plus a few near-misses, so that mutations start close to interesting boundaries.
"""

import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I8": 1, "F64": 8}


def build(tensors, metadata=None, pad=True, header_len=None, data_extra=b""):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        nbytes = n * SIZES[dtype]
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + nbytes]}
        data += bytes((i * 37 + 11) % 256 for i in range(nbytes))
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    n = len(text) if header_len is None else header_len
    return struct.pack("<Q", n) + text + data + data_extra


SEEDS = {
    "empty_header": build([]),
    "one_f32": build([("w", "F32", [2, 3])]),
    "one_bf16": build([("w", "BF16", [4])]),
    "one_f16": build([("w", "F16", [2, 2])]),
    "mixed_meta": build([("a", "F32", [3]), ("b", "BF16", [2, 2]), ("c", "F16", [1])],
                        metadata={"format": "pt"}),
    "scalar_and_empty": build([("s", "F32", []), ("e", "BF16", [0, 7])]),
    "layer": build([("model.layers.0.self_attn.q_proj.weight", "BF16", [4, 4]),
                    ("model.layers.0.self_attn.q_proj.bias", "BF16", [4]),
                    ("model.norm.weight", "F32", [4])]),
    "trailing_bytes": build([("w", "F32", [2])], data_extra=b"\0" * 5),
    "unpadded": build([("w", "BF16", [3])], pad=False),
    "unsupported_i8": build([("w", "I8", [3])]),
    "truncated_header": build([("w", "F32", [2])], header_len=4096),
}


def main():
    out = os.path.join(HERE, "corpus")
    os.makedirs(out, exist_ok=True)
    for name, blob in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
