"""Long-form training mode of train.py (`train.py --tasks long`): the tools/tasks/longform.py
suite, prompts of 150-400 tokens, a fixed answer region of G tokens (default 192).

What differs from the tiny-task loop in train.py (the objective, init, optimizer, schedule,
bf16-rounded validation and the saved model folder are shared):

- Data is generated per step, not pooled: the batches of steps 4k..4k+3 come from one seeded
  draw of 4 x batch items (sorted by length, split into 4 batches, so padding stays small),
  seeded by (seed, k). A resumed run therefore sees exactly the batches an uninterrupted one
  would.
- Sequences of different lengths are right-padded; padding keys are masked out of attention.
- Curriculum over the first --curriculum-steps steps: item sizes grow from 20% to 100% of
  their range (longform `level`) and few-shot examples from 0 to the splits' 2-6.
- --shots MIN,MAX: the few-shot range after the curriculum (default the splits' 2,6). Fewer
  shots make shorter sequences, so a drill of one family gets more of its items per second;
  prompts still hold >= longform.PROMPT_MIN tokens (items add shots until they do).
- --shot-mask-prob: that fraction of sequences also masks (at the same rate) the answers of
  the solved examples inside the prompt, so one forward pass trains on 2-6x more answer
  tokens; the rest is the plain SFT objective (prompt never masked).
- --block-mask-prob: that fraction of sequences is masked the way block decoding sees the
  answer instead of uniformly: a random block j of --block-length tokens is masked at the
  sequence's rate, the blocks before it are clean context and every block after it is fully
  masked (trained with weight 1, the rate they are masked at). Uniform masking almost never
  shows "the first j blocks clean, the rest masked", yet that is every step of inference.
- State (fp32 weights, AdamW moments, step, RNG, best validation) goes to
  --state-dir/ckpt.pt every --ckpt-minutes (atomically) and when SIGTERM or SIGINT stops the
  run (after the current step), with a bf16 model folder of the
  latest weights in --state-dir/latest (for tools/train/snapshot_long.sh). --resume continues
  from ckpt.pt; --warm-start DIR starts from a saved model folder (weights, tokenizer and the
  step in its training_state.json; fresh optimizer).
- Validation: exact match of the `#### ` line on the first --val-items of the validation split
  (round-robin over families), decoded with the vanilla sampler in blocks of --block-length;
  the best checkpoint is saved to --out; the curve is logged and appended to
  --state-dir/val_curve.jsonl. Exact match needs 60-190 answer tokens all right, so it stays 0
  long after training makes progress; the log also gives a smooth measure of the same items:
  teacher-free token accuracy of one forward pass with the whole answer region masked (`tf`,
  EOS padding excluded) and per answer block of --block-length tokens.
"""
import json
import os
import random
import re
import signal
import sys
import time

import torch
import torch.nn.functional as F

from tools.reference import modeling
from tools.tasks import cot, longform
from tools.train import bpe, common, evaluate, training

# --tasks long: the v6 suite (tools/tasks/longform.py); --tasks cot: suite v7 with free
# wording (tools/tasks/cot.py). Both have the same interface and prompt bounds.
SUITES = {"long": longform, "cot": cot}


def suite_of(args):
    return SUITES[getattr(args, "tasks", "long") or "long"]


log = training.log
_SHOT_RX = re.compile(r"A: (.*?\n#### [^\n]*)", re.S)


def curriculum(step, steps, shots=(2, 6)):
    """(level, (min shots, max shots), prompt range) at `step`; `shots` once it is done."""
    q = 1.0 if steps <= 0 else min(1.0, step / steps)
    if q >= 1.0:
        return 1.0, shots, (longform.PROMPT_MIN, longform.PROMPT_MAX)
    hi = int(round(6 * q))
    return 0.2 + 0.8 * q, (min(hi, 2 if q >= 0.5 else 0), hi), (0, longform.PROMPT_MAX)


def encode_item(tok, family, sp, item, g_len):
    """(ids, prompt length, shot-answer token mask over the prompt)."""
    text = bpe.render_chat(family, item["prompt"])
    ids = tok.encode(text)
    base = text.index(item["prompt"])
    spans = [(base + m.start(1), base + m.end(1)) for m in _SHOT_RX.finditer(item["prompt"])]
    shot = [False] * len(ids)
    if spans:
        pos = 0
        for i, t in enumerate(ids):
            piece = tok.decode([t], skip_special=False)
            end = pos + len(piece)
            shot[i] = any(s <= pos and end <= e for s, e in spans)
            pos = end
    region = common.answer_region(tok, sp, item["answer"], g_len)
    if region is None:
        return None
    return ids + region, len(ids), shot


def superstep_batches(k, args, tok, family, sp, exclude, weights):
    """The 4 batches of steps 4k..4k+3: lists of (ids, plen, shot mask)."""
    level, shots, prange = curriculum(4 * k, args.curriculum_steps, args.shots)
    st = suite_of(args).stream(args.seed * 1_000_003 + k, exclude, weights,
                               level=lambda: level, shots=lambda: shots, prompt_range=prange)
    enc = []
    while len(enc) < 4 * args.batch:
        e = encode_item(tok, family, sp, next(st), args.gen_length)
        if e is not None:
            enc.append(e)
    enc.sort(key=lambda e: len(e[0]))
    batches = [enc[i * args.batch:(i + 1) * args.batch] for i in range(4)]
    random.Random(k).shuffle(batches)
    return batches


def make_tensors(batch, g_len, sp, shot_mask_prob, gen):
    """x0, key mask, eligible-for-masking mask and the answer region's start per row."""
    b = len(batch)
    n = max(len(e[0]) for e in batch)
    x0 = torch.full((b, n), sp.pad, dtype=torch.long)
    keys = torch.zeros((b, n), dtype=torch.bool)
    eligible = torch.zeros((b, n), dtype=torch.bool)
    starts = torch.zeros(b, dtype=torch.long)
    use_shots = torch.rand(b, generator=gen) < shot_mask_prob
    for i, (ids, plen, shot) in enumerate(batch):
        x0[i, :len(ids)] = torch.tensor(ids)
        keys[i, :len(ids)] = True
        eligible[i, plen:plen + g_len] = True
        starts[i] = plen
        if use_shots[i]:
            eligible[i, :plen] = torch.tensor(shot, dtype=torch.bool)
    return x0, keys, eligible, starts


def block_masks(masked, p_mask, starts, g_len, block, prob, gen):
    """Re-masks the answer region of a `prob` fraction of rows as block decoding sees it (see
    the module doc). Returns (masked, weight): weight is the rate each position was masked
    at (the ELBO's 1/t factor), p_mask for the rest."""
    b, n = masked.shape
    rel = torch.arange(n)[None, :] - starts[:, None]
    in_answer = (rel >= 0) & (rel < g_len)
    rows = (torch.rand(b, generator=gen) < prob)[:, None]
    lo = (torch.randint(0, g_len // block, (b,), generator=gen) * block)[:, None]
    later = rel >= lo + block
    current = (rel >= lo) & ~later
    fresh = current & (torch.rand(b, n, generator=gen) < p_mask[:, None]) | later
    use = rows & in_answer
    masked = torch.where(use, fresh & in_answer, masked)
    weight = torch.where(use & later, torch.ones_like(p_mask)[:, None].expand(b, n),
                         p_mask[:, None].expand(b, n))
    return masked, weight


@torch.no_grad()
def masked_answer_accuracy(model, tok, family, items, g_len, block, batch_size):
    """One forward per item with the whole answer region masked: (accuracy over the answer's
    non-padding tokens, accuracy per answer block). A smooth companion of exact match."""
    sp = common.Specials(family, tok)
    shift = 1 if family == "dream" else 0
    n_blocks = g_len // block
    right, total = [0] * n_blocks, [0] * n_blocks
    enc = [encode_item(tok, family, sp, it, g_len) for it in items]
    enc = [e for e in enc if e is not None]
    for i in range(0, len(enc), batch_size):
        chunk = enc[i:i + batch_size]
        n = max(len(e[0]) for e in chunk)
        x0 = torch.full((len(chunk), n), sp.pad, dtype=torch.long)
        keys = torch.zeros((len(chunk), n), dtype=torch.bool)
        for r, (ids, plen, _) in enumerate(chunk):
            x0[r, :len(ids)] = torch.tensor(ids)
            keys[r, :len(ids)] = True
        x = x0.clone()
        for r, (ids, plen, _) in enumerate(chunk):
            x[r, plen:plen + g_len] = sp.mask
        logits = model(x, key_mask=keys)
        for r, (ids, plen, _) in enumerate(chunk):
            for j in range(g_len):
                target = ids[plen + j]
                if target in (sp.eos, sp.pad):
                    continue
                pred = int(logits[r, plen + j - shift].argmax())
                right[j // block] += int(pred == target)
                total[j // block] += 1
    acc = sum(right) / max(1, sum(total))
    return acc, [right[k] / total[k] if total[k] else None for k in range(n_blocks)]


# The token that opens a chat turn in each family's template (bpe.render_chat).
TURN_START = {"llada": "<|start_header_id|>", "dream": "<|im_start|>"}


def transferred_tokenizer(family, src_dir):
    """The BPE (vocabulary and merges) of the model in src_dir, of either family, with
    `family`'s special tokens appended: base token ids keep their meaning, so a model of one
    family can start from the other's weights (transfer_weights)."""
    src = bpe.load(src_dir)
    added = {t: len(src.vocab) + i for i, t in enumerate(bpe.family_specials(family))}
    return bpe.Tokenizer(family, src.vocab, src.merges, added)


def transfer_weights(model, tok, family, src_dir):
    """Initializes `model` (tokenizer `tok` = transferred_tokenizer(family, src_dir)) from the
    trained model in src_dir, which may be of the other family. Same widths and depth
    required. Embedding and LM-head rows: base tokens by id, specials by role (mask, end of
    turn, end of text, turn start); other specials keep their fresh init. K/V projections
    mean-pool groups of source heads when the target has fewer KV heads (GQA conversion,
    Ainslie et al. 2023). Tensors the source lacks (Dream's q/k/v biases) keep their init
    (biases 0). What is not transferred is Dream's shift (row i-1 predicts token i): the
    model learns it. Returns a log line."""
    src, scfg = modeling.load_checkpoint(src_dir, torch.float32)
    sfam = common.family_of(scfg)
    stok = bpe.load(src_dir)
    a, b = src.arch, model.arch
    for k in ("hidden", "layers", "heads", "intermediate", "head_dim"):
        if getattr(a, k) != getattr(b, k):
            raise SystemExit(f"--transfer-from {src_dir}: {k} {getattr(a, k)} != {getattr(b, k)}")
    if a.kv_heads % b.kv_heads:
        raise SystemExit(f"--transfer-from {src_dir}: {a.kv_heads} KV heads do not pool into "
                         f"{b.kv_heads}")
    if stok.vocab != tok.vocab:
        raise SystemExit("--transfer-from: the tokenizer must be transferred_tokenizer's")
    sp, ssp = common.Specials(family, tok), common.Specials(sfam, stok)
    rows = {i: i for i in range(len(stok.vocab))}
    rows.update({sp.mask: ssp.mask, sp.eot: ssp.eot, sp.eos: ssp.eos,
                 tok.token_id(TURN_START[family]): stok.token_id(TURN_START[sfam])})
    dst_rows, src_rows = map(list, zip(*sorted(rows.items())))
    sstate = src.state_dict()
    g = a.kv_heads // b.kv_heads
    copied = 0
    with torch.no_grad():
        for name, p in model.named_parameters():
            q = sstate.get(name)
            if q is None:
                continue
            if name in ("embed.weight", "lm_head.weight"):
                p[dst_rows] = q[src_rows]
            elif q.shape != p.shape and name.endswith(("k_proj.weight", "v_proj.weight")):
                p.copy_(q.view(b.kv_heads, g, a.head_dim, a.hidden).mean(dim=1)
                        .reshape(p.shape))
            elif q.shape != p.shape and name.endswith(("k_proj.bias", "v_proj.bias")):
                p.copy_(q.view(b.kv_heads, g, a.head_dim).mean(dim=1).reshape(p.shape))
            else:
                p.copy_(q)
            copied += 1
    return (f"transferred {copied} tensors from {src_dir} ({sfam}, {a.kv_heads} KV heads) "
            f"to {family} ({b.kv_heads} KV heads); {len(rows)} token rows")


def rewarmed_lr(step, warm_from, args):
    """The cosine schedule's rate at `step`; after a warm start (fresh AdamW moments, whose
    first updates are about lr per weight whatever the gradient) it ramps linearly from 0
    over args.rewarm_steps. --cosine-from S restarts the schedule (warmup, then cosine to
    --max-steps) at step S, for a new phase that starts from a trained model."""
    start = getattr(args, "cosine_from", None) or 0
    lr = training.lr_at(step - start, args.max_steps - start, args.lr, args.warmup)
    if warm_from is not None and args.rewarm_steps > 0:
        lr *= min(1.0, (step - warm_from + 1) / args.rewarm_steps)
    return lr


def save_state(path, model, opt, step, extra):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "torch_rng": torch.get_rng_state(), **extra}, tmp)
    os.replace(tmp, path)


def run(args):
    if not 0 <= args.shots[0] <= args.shots[1]:
        raise SystemExit(f"--shots {args.shots}: want 0 <= MIN <= MAX")
    t_start = time.time()
    torch.set_num_threads(args.threads)
    family, g_len = args.family, args.gen_length
    state_dir = args.state_dir
    os.makedirs(state_dir, exist_ok=True)
    ckpt_path = os.path.join(state_dir, "ckpt.pt")
    tok_dir = os.path.join(state_dir, "tokenizer")

    suite = suite_of(args)
    test, val, exclude = suite.load_splits()
    weights = None
    if args.family_weights:
        weights = {k.strip(): float(v) for k, _, v in
                   (item.partition("=") for item in args.family_weights.split(","))}
    val_items = val[:args.val_items]

    resume = args.resume and os.path.exists(ckpt_path)
    if resume:
        tok = bpe.load(tok_dir)
    elif args.warm_start:
        tok = bpe.load(args.warm_start)
    elif args.transfer_from:
        tok = transferred_tokenizer(family, args.transfer_from)
    else:
        st = suite.stream(suite.TRAIN_SEED + args.seed, exclude, weights)
        corpus = [next(st) for _ in range(args.tok_corpus)]
        tok = bpe.build(family, [bpe.render_chat(family, x["prompt"]) + x["answer"]
                                 for x in corpus], args.tok_vocab)
    max_pos = args.max_positions
    tok.save(tok_dir, model_max_length=max_pos)
    sp = common.Specials(family, tok)
    vocab_rows = (len(tok) + 63) // 64 * 64
    log(f"tokenizer: base {len(tok.vocab)} merges {len(tok.merges)} size {len(tok)} "
        f"rows {vocab_rows} mask {sp.mask} eot {sp.eot} eos {sp.eos}")

    kv = args.kv_heads or args.heads
    cfg = modeling.make_config(
        common.MODEL_TYPE[family], args.hidden, args.layers, args.heads, kv, args.intermediate,
        vocab_rows, args.rope_theta, 1e-5 if family == "llada" else 1e-6, max_pos,
        sp.mask, sp.eos, sp.pad, sp.bos)
    model = modeling.DiffusionLM(cfg)
    training.init_weights(model, args.seed)
    if args.transfer_from and not resume:
        log(transfer_weights(model, tok, family, args.transfer_from))
    step, best, best_step, ema_loss = 0, -1.0, -1, None
    warm_from = None  # the step a warm start began at (its fresh AdamW ramps up again)
    if args.warm_start and not resume:
        wm, wcfg = modeling.load_checkpoint(args.warm_start, torch.float32)
        if wcfg != {**cfg, "torch_dtype": wcfg.get("torch_dtype")}:
            raise SystemExit(f"--warm-start {args.warm_start}: config differs from the args")
        model.load_state_dict(wm.state_dict())
        with open(os.path.join(args.warm_start, "training_state.json")) as f:
            step = int(json.load(f)["step"])
        warm_from = step
        log(f"warm start from {args.warm_start} at step {step} (fresh optimizer, learning "
            f"rate ramped over {args.rewarm_steps} steps)")
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model {family}: {n_params} params ({2 * n_params / 1e6:.2f} MB bf16), "
        f"max positions {max_pos}, G {g_len}, block {args.block_length}")

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
    torch.manual_seed(args.seed)
    if resume:
        st = torch.load(ckpt_path)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        torch.set_rng_state(st["torch_rng"])
        step, best, best_step, ema_loss = st["step"], st["best"], st["best_step"], st["ema"]
        warm_from = st.get("warm_from")
        log(f"resumed from {ckpt_path} at step {step} (best val {best:.4f} at {best_step})")
    # The masking generator is re-seeded per step, so resumed runs mask like uninterrupted ones.
    gen = torch.Generator()

    def run_eval(step):
        nonlocal best, best_step
        m = training.rounded_copy(model)
        te = time.time()
        recs = evaluate.evaluate(m, tok, family, val_items, g_len, batch_size=args.eval_batch,
                                 block_length=args.block_length, check=suite.check,
                                 answer_key="final", padded=True, stop_at_end=True)
        acc, per = evaluate.summarize(recs)
        tf, tf_blocks = masked_answer_accuracy(m, tok, family, val_items, g_len,
                                               args.block_length, args.eval_batch)
        improved = acc > best
        log(f"eval step {step}: val exact {acc:.4f} "
            + " ".join(f"{k}={v:.2f}" for k, v in per.items())
            + f" tf {tf:.3f} by block "
            + " ".join("-" if v is None else f"{v:.2f}" for v in tf_blocks)
            + f" ({time.time() - te:.1f}s){' *best*' if improved else ''}")
        with open(os.path.join(state_dir, "val_curve.jsonl"), "a") as f:
            f.write(json.dumps({"step": step, "val_exact": acc, "per_family": per,
                                "masked_answer_accuracy": tf, "by_block": tf_blocks,
                                "loss_ema": ema_loss, "time": time.time()}) + "\n")
        if improved:
            best, best_step = acc, step
            save_model(step, args.out, {"val_exact_match": acc, "val_per_family": per,
                                        "val_items": len(val_items)})

    def save_model(step, out_dir, extra):
        info = {"family": family, "step": step, "argv": sys.argv, "args": vars(args),
                "params": n_params, "tokenizer_size": len(tok),
                "tasks": "cot" if suite is cot else "longform",
                "block_length": args.block_length, **extra}
        training.save_model(model, cfg, tok, family, g_len, out_dir, info)
        with open(os.path.join(out_dir, "generation_config.json")) as f:
            gcfg = json.load(f)
        gcfg["block_length"] = args.block_length
        with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
            json.dump(gcfg, f, indent=2, sort_keys=True)
            f.write("\n")

    def checkpoint(step):
        save_state(ckpt_path, model, opt, step, {"best": best, "best_step": best_step,
                                                 "ema": ema_loss, "warm_from": warm_from,
                                                 "args": vars(args)})
        save_model(step, os.path.join(state_dir, "latest"), {"loss_ema": ema_loss})
        log(f"checkpoint step {step} -> {ckpt_path}")

    # SIGTERM / SIGINT (a session ending, kill, Ctrl-C) finish the step, checkpoint and stop,
    # so a cut-off run loses nothing instead of up to --ckpt-minutes of work.
    stop_signal = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop_signal.append(signum))

    shift = 1 if family == "dream" else 0
    t_ckpt = time.time()
    t_train = time.time()
    step0 = step
    batches, batches_k = None, -1
    while step < args.max_steps:
        k = step // 4
        if k != batches_k:
            batches, batches_k = superstep_batches(k, args, tok, family, sp, exclude, weights), k
        gen.manual_seed(args.seed * 1_000_003 + step)
        x0, keys, eligible, starts = make_tensors(batches[step % 4], g_len, sp,
                                                  args.shot_mask_prob, gen)
        b, n = x0.shape
        t = (torch.arange(b, dtype=torch.float32) + torch.rand(b, generator=gen)) / b
        t = t[torch.randperm(b, generator=gen)]
        p_mask = (1 - args.eps) * t + args.eps
        masked = (torch.rand(b, n, generator=gen) < p_mask[:, None]) & eligible
        weight = p_mask[:, None].expand(b, n)
        if args.block_mask_prob > 0:
            masked, weight = block_masks(masked, p_mask, starts, g_len, args.block_length,
                                         args.block_mask_prob, gen)
        x = torch.where(masked, torch.full_like(x0, sp.mask), x0)
        logits = model(x, key_mask=keys)
        if shift:  # Dream: row i-1 predicts token i
            logits, tgt, msk, w = logits[:, :-1], x0[:, 1:], masked[:, 1:], weight[:, 1:]
        else:
            tgt, msk, w = x0, masked, weight
        sel = msk.nonzero(as_tuple=True)
        ce = F.cross_entropy(logits[sel], tgt[sel], reduction="none")
        loss = (ce / w[sel]).sum() / eligible.sum()
        ema_loss = training.optimizer_step(model, opt, rewarmed_lr(step, warm_from, args), loss,
                                           ema_loss)
        step += 1
        if args.bench and step - step0 >= args.bench:
            el = time.time() - t_train
            log(f"bench: {step - step0} steps in {el:.1f}s = {el / (step - step0):.3f}s/step "
                f"(batch {args.batch}, last length {n})")
            return
        if step % 25 == 0:
            level, shots, _ = curriculum(step, args.curriculum_steps, args.shots)
            log(f"step {step} loss {ema_loss:.4f} lr {opt.param_groups[0]['lr']:.2e} "
                f"level {level:.2f} shots {shots} len {n} "
                f"{(time.time() - t_train) / (step - step0):.2f}s/step "
                f"elapsed {time.time() - t_start:.0f}s")
        if step % args.eval_every == 0 or step == args.max_steps:
            run_eval(step)
        if time.time() - t_ckpt > args.ckpt_minutes * 60:
            checkpoint(step)
            t_ckpt = time.time()
        if time.time() - t_start > args.minutes * 60:
            log(f"wall-clock cap reached at step {step}")
            break
        if stop_signal:
            log(f"signal {stop_signal[0]}: stopping at step {step}")
            break
    checkpoint(step)
    log(f"done: best val exact {best:.4f} at step {best_step}, "
        f"total {time.time() - t_start:.0f}s")
