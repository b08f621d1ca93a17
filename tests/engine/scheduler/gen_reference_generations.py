"""Writes data/reference_generations.json: token-by-token expectations for the engine's
decoding loop on the random-weight fixtures in tests/data/reference/, computed with the
independent PyTorch model in tools/reference/modeling.py (float64).

Run: /usr/bin/python3 -m tests.engine.scheduler.gen_reference_generations   (from the repo root)

Samplers (temperature 0, full forward every step, no cache), as in the reference code:
  llada_block  LLaDA generate.py: block_length B, steps S, low_confidence; confidence =
               softmax(logits)[argmax] at row p; top-quota per block step, ties lowest position.
  dream_<alg>  Dream _sample: shifted logits (row p-1 predicts p); timesteps = the linspace
               formula of docs/models.md §3.6 in float32; k = int(nm * (1 - s/t)); conf per alg
               (maskgit_plus: max prob; entropy: sum p log p; topk_margin: p1 - p2).
Cases with `suffix` put those token ids after the answer canvas (infilling): fixed, read at
every step, never committed. Cases with `canvas` start from a seeded answer: its non-null ids
are fixed like the prompt, and only the null positions are masks the sampler fills.
`mask_committed` says whether the sampler ever picked the mask id itself (random weights can
propose it); the reference then re-masks the position, the engine treats it as decided, so
the C++ test skips those cases.
Every case records `min_gap`: the smallest gap, over all steps, between the last committed
and the first uncommitted confidence and between the top-2 token probabilities of committed
rows. The C++ test only asserts on cases whose gap clears the fp32-vs-fp64 noise.
Every committed position also records `logprobs[i]`: log_softmax of its row at the step that
committed it, for the committed token and for the TOP_LOGPROBS most probable tokens
(`top_ids`, `top_logprobs`), the reference for the engine's logprobs.
"""
import json
import os

import torch

from tools.reference import modeling

TOP_LOGPROBS = 5
SUFFIX = [64, 19, 201, 7]  # token ids after the answer in the infilling cases
SEEDED = [None, None, 33, None, None, None, None, None, None, 120, None, None, None, None, None,
          88]  # a seeded 16-token canvas: fixed ids, None where the sampler generates
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def spec_linspace(start, end, n):
    start_t = torch.tensor(start, dtype=torch.float32)
    end_t = torch.tensor(end, dtype=torch.float32)
    step = (end_t - start_t) / (n - 1)
    return torch.stack([start_t + step * i if i < n // 2 else end_t - step * (n - 1 - i)
                        for i in range(n)])


def quota(n, spb):
    return [n // spb + (1 if i < n % spb else 0) for i in range(spb)]


@torch.no_grad()
def generate(model, cfg, prompt, gen, mode, block_length=None, steps=None, alg=None,
             suffix=(), canvas=None):
    mask = cfg["mask_token_id"]
    shift = model.family != modeling.LLADA
    answer = [mask] * gen if canvas is None else [mask if t is None else t for t in canvas]
    x = torch.tensor(prompt + answer + list(suffix), dtype=torch.long)
    p = len(prompt)
    min_gap = float("inf")
    mask_committed = False
    logprobs = [None] * gen

    def row_stats():
        logits = model(x[None])[0].double()
        rows = logits[p - 1:p + gen - 1] if shift else logits[p:p + gen]
        probs = torch.softmax(rows, dim=-1)
        top2 = torch.topk(probs, 2, dim=-1)
        row_stats.log_probs = torch.log_softmax(rows, dim=-1)
        return probs, top2.values[:, 0], top2.indices[:, 0], top2.values[:, 0] - top2.values[:, 1]

    def record(i, token):
        lp = row_stats.log_probs[i]
        top = torch.topk(lp, TOP_LOGPROBS)
        logprobs[i] = {"logprob": float(lp[token]), "top_ids": top.indices.tolist(),
                       "top_logprobs": top.values.tolist()}

    def commit(scores, k):
        nonlocal min_gap
        masked = (x[p:p + gen] == mask).nonzero().flatten().tolist()
        order = sorted(masked, key=lambda i: (-scores[i], i))
        if 0 < k < len(order):
            min_gap = min(min_gap, abs(scores[order[k - 1]] - scores[order[k]]))
        return order[:k]

    if mode == "llada_block":
        nb = gen // block_length
        spb = steps // nb
        for b in range(nb):
            lo, hi = b * block_length, (b + 1) * block_length
            n_b = int((x[p + lo:p + hi] == mask).sum())
            for k in quota(n_b, spb):
                probs, conf, tok, margin = row_stats()
                scores = [float(conf[i]) if lo <= i < hi else -float("inf") for i in range(gen)]
                picks = commit(scores, k)
                for i in picks:
                    min_gap = min(min_gap, float(margin[i]))
                    mask_committed |= int(tok[i]) == mask
                    record(i, int(tok[i]))
                    x[p + i] = tok[i]
    else:
        ts = spec_linspace(1.0, 1e-3, steps + 1)
        for i in range(steps):
            nm = (x[p:p + gen] == mask).sum() / 1
            t, s = ts[i], ts[i + 1]
            k = int(nm * (1 - s / t)) if i < steps - 1 else int(nm)
            probs, conf, tok, margin = row_stats()
            if alg == "maskgit_plus":
                scores = conf.tolist()
            elif alg == "entropy":
                scores = (probs * torch.log(probs + 1e-10)).sum(-1).tolist()
            else:
                scores = margin.tolist()
            picks = commit(scores, k)
            for j in picks:
                min_gap = min(min_gap, float(margin[j]))
                mask_committed |= int(tok[j]) == mask
                record(j, int(tok[j]))
                x[p + j] = tok[j]
    return x[p:p + gen].tolist(), min_gap, mask_committed, logprobs


def main():
    cases = []
    for name in ["llada_mha", "llada_gqa_f32", "dream_gqa", "dream_f16"]:
        model_dir = os.path.join(ROOT, "tests", "data", "reference", name)
        model, cfg = modeling.load_checkpoint(model_dir, dtype=torch.float64)
        model.eval()
        with open(os.path.join(model_dir, "golden.json")) as f:
            golden = json.load(f)
        c0 = golden["cases"][0]
        prompts = [c0["input_ids"][:c0["prompt_tokens"]], [5, 77, 123, 9, 42, 250, 17, 3]]
        gen = 16
        for pi, prompt in enumerate(prompts):
            if model.family == modeling.LLADA:
                runs = [("llada_block", dict(block_length=8, steps=16)),
                        ("llada_block", dict(block_length=16, steps=8)),
                        ("llada_block", dict(block_length=4, steps=16))]
            else:
                runs = [("dream", dict(steps=16, alg=a)) for a in
                        ["maskgit_plus", "entropy", "topk_margin"]] + \
                       [("dream", dict(steps=6, alg="maskgit_plus"))]
            for mode, kw in runs:
                out, gap, mask_committed, logprobs = generate(model, cfg, prompt, gen, mode,
                                                              **kw)
                cases.append({"fixture": name, "prompt_ids": prompt, "gen_length": gen,
                              "mode": mode, **kw, "output_ids": out, "min_gap": gap,
                              "mask_committed": mask_committed, "logprobs": logprobs})
            # Infilling: the same first run with a fixed suffix after the answer.
            mode, kw = runs[0]
            kw = dict(kw, suffix=SUFFIX)
            out, gap, mask_committed, logprobs = generate(model, cfg, prompt, gen, mode, **kw)
            cases.append({"fixture": name, "prompt_ids": prompt, "gen_length": gen,
                          "mode": mode, **kw, "output_ids": out, "min_gap": gap,
                          "mask_committed": mask_committed, "logprobs": logprobs})
            # A seeded canvas: fixed tokens inside the answer (null: generate), with a suffix.
            kw = dict(kw, canvas=SEEDED)
            out, gap, mask_committed, logprobs = generate(model, cfg, prompt, gen, mode, **kw)
            cases.append({"fixture": name, "prompt_ids": prompt, "gen_length": gen,
                          "mode": mode, **kw, "output_ids": out, "min_gap": gap,
                          "mask_committed": mask_committed, "logprobs": logprobs})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                        "reference_generations.json")
    with open(path, "w") as f:
        json.dump({"cases": cases}, f, indent=1)
    print(path, len(cases), "cases; min gaps:", [round(c["min_gap"], 5) for c in cases])


if __name__ == "__main__":
    main()
