"""Writes the safetensors fixtures in this folder with an independent writer.

Run with /usr/bin/python3 (needs torch) from the repository root:
    /usr/bin/python3 -m tests.data.safetensors.make_fixtures
Files are written by tools/pylib/safetensors_io.py, not by the C++ code under test, and the
expected fp32 values come from torch's own bf16/f16 -> fp32 conversion.

mixed.safetensors         F32, BF16 and F16 tensors with special values (signed zero, inf,
                          NaN, subnormals, extremes) and __metadata__.
mixed.expected.json       per tensor: dtype, shape and the fp32 bit pattern of every element.
unsupported_i8.safetensors / unsupported_f64.safetensors   a valid file whose tensor "w"
                          has a dtype the engine does not accept.
"""

import json
import os

import torch

from tools.pylib import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    inf = float("inf")
    nan = float("nan")
    tensors = {
        "a_f32": torch.tensor([[1.0, -0.0, 3.5], [inf, 1e-40, -123456.789]], dtype=torch.float32),
        "b_bf16": torch.tensor([1.0, -2.0, 3.14159, 1e-3, inf, -inf, 3.0e38, 1e-40, nan, 0.0],
                               dtype=torch.float32).to(torch.bfloat16),
        "c_f16": torch.tensor([[0.1, -0.0, 65504.0, 6e-8], [-inf, 1e-5, 2.0 ** -14, -1.5]],
                              dtype=torch.float32).to(torch.float16),
        "d_empty": torch.zeros((0, 4), dtype=torch.bfloat16),
    }
    safetensors_io.save_file(tensors, os.path.join(HERE, "mixed.safetensors"),
                             metadata={"format": "pt", "note": "dllm fixture"})
    expected = {}
    for name, t in tensors.items():
        bits = t.to(torch.float32).contiguous().view(torch.int32).flatten().tolist()
        expected[name] = {
            "dtype": safetensors_io.dtype_tag(t.dtype),
            "shape": list(t.shape),
            "f32_bits": [b & 0xFFFFFFFF for b in bits],
        }
    with open(os.path.join(HERE, "mixed.expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")

    safetensors_io.save_file({"w": torch.arange(6, dtype=torch.int8).reshape(2, 3)},
                             os.path.join(HERE, "unsupported_i8.safetensors"))
    safetensors_io.save_file({"w": torch.ones(3, dtype=torch.float64)},
                             os.path.join(HERE, "unsupported_f64.safetensors"))


if __name__ == "__main__":
    main()
