"""Compares a logits dump from another implementation (e.g. the C++ engine) to a golden case.

Usage:
  /usr/bin/python3 -m tools.reference.check_cpp tests/data/reference/llada_mha 0 dump.f32 \
      [--tol 1e-4] [--shifted]

dump.f32 is raw little-endian float32 [rows, vocab], unshifted (row i = output at position i)
unless --shifted is given, in which case row i is taken to be the output at position i-1
(Dream's sampler view, row 0 = output at 0); the golden is shifted the same way first.
Prints max abs error, relative error max|a-b|/max|b| and top-1 agreement; exits 1 when the
relative error exceeds --tol.
"""

import argparse
import json
import os
import sys

import numpy as np


def compare(fixture_dir, case_index, dump_path, tol, shifted=False):
    with open(os.path.join(fixture_dir, "golden.json")) as f:
        golden = json.load(f)
    cases = golden["cases"]
    if not 0 <= case_index < len(cases):
        raise SystemExit(f"case {case_index} out of range (fixture has {len(cases)})")
    case = cases[case_index]
    n, v = case["rows"], case["vocab"]
    want = np.fromfile(os.path.join(fixture_dir, case["logits_file"]), dtype="<f4").reshape(n, v)
    got = np.fromfile(dump_path, dtype="<f4")
    if got.size != n * v:
        raise SystemExit(f"{dump_path}: {got.size} floats, expected {n}x{v}={n * v}")
    got = got.reshape(n, v)
    if shifted:  # compare against the golden in the sampler's view: row i = output at i-1
        want = np.concatenate([want[:1], want[:-1]], axis=0)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    rel = float(diff.max() / np.abs(want).max())
    top1 = float((got.argmax(-1) == want.argmax(-1)).mean())
    print(f"rows={n} vocab={v} max_abs={diff.max():.3e} rel={rel:.3e} top1_agree={top1:.3f} "
          f"worst_row={int(diff.max(-1).argmax())}")
    return rel <= tol


def main():
    ap = argparse.ArgumentParser(description="compare a logits dump to a golden case")
    ap.add_argument("fixture_dir")
    ap.add_argument("case", type=int)
    ap.add_argument("dump")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--shifted", action="store_true")
    args = ap.parse_args()
    sys.exit(0 if compare(args.fixture_dir, args.case, args.dump, args.tol, args.shifted) else 1)


if __name__ == "__main__":
    main()
