#!/usr/bin/python3
"""Writes data/schedule_expectations.json: LLaDA block quotas and Dream per-step commit counts
computed with PyTorch exactly as the reference samplers do (docs/models.md §2.6, §3.6).

Run with Debian's torch: /usr/bin/python3 tests/engine/decoding/gen_schedule_expectations.py

Dream: two timestep variants are recorded per case.
  counts_spec:  the linspace formula of docs/models.md §3.6 evaluated with float32 torch tensor ops
                (step = (end-start)/(n-1); start + step*i for i < n/2 else end - step*(n-1-i)),
                which is what the CUDA kernel computes (the engine's arithmetic).
  counts_torch_cpu: torch.linspace on this CPU. Its vectorised kernel (arange within SIMD
                chunks) differs from the formula by an ulp for some elements, which changes a
                count for a few (G, steps) pairs; `cpu_agrees` says whether it matches here.
The count loop is Dream's _sample: nm = mask.sum() / B (float32), k = int(nm * (1 - s / t))
for i < steps - 1, else int(nm); the confidence algorithms commit exactly k tokens.
"""
import json
import os
import random

import torch


def llada_quota(masks, steps):
    # LLaDA generate.py get_num_transfer_tokens, batch of one.
    mask_index = torch.zeros(1, max(masks, 1), dtype=torch.bool)
    mask_index[0, :masks] = True
    mask_num = mask_index.sum(dim=1, keepdim=True)
    base = mask_num // steps
    remainder = mask_num % steps
    out = torch.zeros(1, steps, dtype=torch.int64) + base
    out[0, : remainder[0]] += 1
    return out[0].tolist()


def spec_linspace(start, end, n):
    start_t = torch.tensor(start, dtype=torch.float32)
    end_t = torch.tensor(end, dtype=torch.float32)
    if n == 1:
        return start_t.reshape(1)
    step = (end_t - start_t) / (n - 1)
    vals = []
    for i in range(n):
        if i < n // 2:
            vals.append(start_t + step * i)
        else:
            vals.append(end_t - step * (n - 1 - i))
    return torch.stack(vals)


def dream_counts(timesteps, gen_length, steps):
    x_mask = torch.ones(1, gen_length, dtype=torch.bool)
    counts = []
    for i in range(steps):
        num_mask_token = x_mask.sum() / x_mask.shape[0]
        t = timesteps[i]
        s = timesteps[i + 1]
        k = int(num_mask_token * (1 - s / t)) if i < steps - 1 else int(num_mask_token)
        counts.append(k)
        remaining = int(x_mask.sum())
        x_mask[0, :] = False
        x_mask[0, : remaining - k] = True
    return counts


def main():
    random.seed(1234)
    llada = []
    for masks, spb in [(32, 32), (32, 8), (32, 5), (32, 64), (7, 3), (256, 100), (1, 1), (0, 4),
                       (64, 63), (128, 7)]:
        llada.append({"masks": masks, "steps_per_block": spb, "quota": llada_quota(masks, spb)})
    cases = set()
    for g in [1, 2, 3, 8, 16, 31, 32, 48, 64, 100, 128, 256, 512]:
        for steps in {1, 2, max(1, g // 4), max(1, g // 2), g, 2 * g, 7}:
            cases.add((g, steps, 1e-3))
    for _ in range(150):
        cases.add((random.randint(1, 1024), random.randint(1, 1100),
                   random.choice([1e-3, 1e-2, 0.05, 0.1, 0.3])))
    dream = []
    for g, steps, eps in sorted(cases):
        spec = dream_counts(spec_linspace(1.0, eps, steps + 1), g, steps)
        cpu = dream_counts(torch.linspace(1, eps, steps + 1), g, steps)
        dream.append({"gen_length": g, "steps": steps, "eps": eps, "counts_spec": spec,
                      "counts_torch_cpu": cpu, "cpu_agrees": spec == cpu})
    out = {"torch_version": torch.__version__, "llada_quota": llada, "dream": dream}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                        "schedule_expectations.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(path, len(llada), len(dream), sum(1 for d in dream if not d["cpu_agrees"]))


if __name__ == "__main__":
    main()
