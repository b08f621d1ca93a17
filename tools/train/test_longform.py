"""Checks of the long-form task suite (tools/tasks/longform.py), the long-form training mode
(stop and resume) and the OpenBLAS core-type choice.

Run: /usr/bin/python3 -m unittest tools.train.test_longform   (from the repo root)
"""
import itertools
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

from tools.tasks import longform, splits
from tools.train import blas_env, bpe, common, longtrain


def question_of(item):
    return item["prompt"].rsplit("Q: ", 1)[1]


def solve(question, prompt):
    """Independent answer from the question text (and the table in the prompt)."""
    m = re.fullmatch(r"What is (\d+) ([+-]) (\d+)\?", question)
    if m:
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        # Zero-padded to the widest result: one digit more than the longer operand for +,
        # the minuend's width for -.
        width = max(len(m.group(1)), len(m.group(3))) + (op == "+")
        return str(a + b if op == "+" else a - b).zfill(width)
    m = re.fullmatch(r"Reverse the string ((?:\d\d )*\d\d) in 2s\.", question)
    if m:
        return " ".join(p[1] + p[0] for p in m.group(1).split(" "))
    m = re.fullmatch(r"Reverse the string (\d+)\.", question)
    if m:
        return m.group(1)[::-1]
    m = re.fullmatch(r"write the string (\d+)\.", question)
    if m:
        return m.group(1)
    raise AssertionError(f"unknown question {question!r}")


class LongformSuiteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.test, cls.val, cls.exclude = longform.load_splits()

    def test_committed_splits_are_reproducible(self):
        test = longform.test_split()
        self.assertEqual(test, self.test)
        self.assertEqual(longform.val_split(test), self.val)
        self.assertGreaterEqual(len(self.test), 500)
        self.assertEqual({x["family"] for x in self.test}, set(longform.FAMILIES))
        self.assertGreaterEqual(len(longform.FAMILIES), 5)

    def test_splits_are_disjoint_and_training_excludes_them(self):
        tk, vk = {x["key"] for x in self.test}, {x["key"] for x in self.val}
        self.assertEqual(len(tk), len(self.test))
        self.assertFalse(tk & vk)
        st = longform.stream(longform.TRAIN_SEED + 1, self.exclude)
        for _ in range(300):
            self.assertNotIn(next(st)["key"], self.exclude)
        # The training stream draws from the same distribution, so held-out keys do occur in
        # it and are skipped: an excluded key is never produced even when drawn.
        key = self.test[0]["key"]
        st = longform.stream(longform.TRAIN_SEED + 1, frozenset([key]))
        self.assertNotIn(key, {next(st)["key"] for _ in range(300)})

    def test_answers_are_right(self):
        for x in self.test + self.val:
            q = question_of(x)
            self.assertEqual(x["final"], solve(q, x["prompt"]), q)
            self.assertTrue(x["answer"].endswith("\n#### " + x["final"]))
            self.assertTrue(longform.check(x["answer"], x["final"]))

    def test_few_shot_examples_are_right_and_counted(self):
        for x in self.test + self.val:
            self.assertTrue(x["prompt"].startswith("Q: "))
            shots = x["prompt"][len("Q: "):].split("\n\nQ: ")
            solved = shots[:-1]
            self.assertTrue(2 <= len(solved) <= 6, x["prompt"])
            for s in solved:
                q, a = s.split("\nA: ", 1)
                self.assertEqual(longform.extract_final(a), solve(q, x["prompt"]), q)
                self.assertNotEqual(q, question_of(x))

    def test_traces(self):
        # The trace is the worked solution, not decoration: its written digits/lines give the
        # answer independently of the final line.
        for x in self.test:
            trace = x["answer"].rsplit("\n#### ", 1)[0].split("\n")
            f = x["family"]
            q = question_of(x)
            if f in ("add", "sub"):
                digits = [re.search(r"write (\d)", ln).group(1) for ln in trace[1:]]
                self.assertEqual("".join(reversed(digits)), x["final"])
            elif f == "reverse":
                # Chunks from the string's end; the final line is the right-hand sides in order.
                s = re.fullmatch(r"Reverse the string (\d+)\.", q).group(1)
                lefts = [ln.split(": ", 1)[1].split(" -> ")[0] for ln in trace]
                self.assertEqual("".join(reversed(lefts)), s)
                self.assertTrue(all(len(c) == 10 for c in lefts))
                self.assertEqual("".join(ln.split(" -> ")[1] for ln in trace), x["final"])
            elif f == "copy":
                # Chunks of 10 from the string's start, numbered; the final line is the chunks
                # in order.
                s = re.fullmatch(r"write the string (\d+)\.", q).group(1)
                self.assertEqual([ln.split(": ", 1)[0] for ln in trace],
                                 [str(i + 1) for i in range(len(trace))])
                chunks = [ln.split(": ", 1)[1] for ln in trace]
                self.assertTrue(all(len(c) == 10 for c in chunks))
                self.assertEqual("".join(chunks), s)
                self.assertEqual(s, x["final"])
            elif f == "swap":
                # Pairs written spaced; lines of 5 swapped pairs from the start, numbered; the
                # final line is the lines' pairs in order.
                pairs = re.fullmatch(r"Reverse the string ([\d ]+) in 2s\.", q).group(1)
                pairs = pairs.split(" ")
                self.assertTrue(all(len(p) == 2 and p.isdigit() for p in pairs), q)
                self.assertEqual([ln.split(": ", 1)[0] for ln in trace],
                                 [str(i + 1) for i in range(len(trace))])
                lines = [ln.split(": ", 1)[1].split(" ") for ln in trace]
                self.assertTrue(all(len(ln) == 5 for ln in lines))
                out = [p for ln in lines for p in ln]
                self.assertEqual([p[1] + p[0] for p in out], pairs)
                self.assertEqual(" ".join(out), x["final"])
            else:
                self.fail(f"no trace check for family {f}")

    def test_answer_layout_is_fixed_by_the_question(self):
        # Where each token of an answer falls depends only on the question's shape (digits as
        # D, words as W), never on a computed value; the suite's own dependence on this is in
        # the module doc. Every shape of a family that occurs twice must agree.
        def shape(text):
            return re.sub(r"\d", "D", re.sub(r"[A-Za-z]+", "W", text))

        layouts, repeated = {}, 0
        for x in self.test + self.val:
            key = (x["family"], shape(question_of(x)))
            if key in layouts:
                repeated += 1
                self.assertEqual(layouts[key], shape(x["answer"]), (key, x["answer"]))
            layouts[key] = shape(x["answer"])
        self.assertGreater(repeated, 300)

    def test_lengths(self):
        for x in self.test + self.val:
            self.assertTrue(150 <= longform.approx_tokens(x["prompt"]) <= 400)
            self.assertTrue(64 <= longform.approx_tokens(x["answer"]) <= 190)

    def test_committed_long_models_load_and_count_like_the_suite(self):
        # The snapshots a fresh checkout continues from (tools/train/warm_start/<name>) and the
        # finished models (models/<name>-long) once they exist: the suite's approx_tokens,
        # which sizes every prompt, must be the real token count.
        import torch
        from tools.reference import modeling
        root = os.path.join(common.HERE, "warm_start")
        dirs = [os.path.join(root, n) for n in sorted(os.listdir(root))] \
            if os.path.isdir(root) else []
        dirs += [d for d in (os.path.join(common.ROOT, "models", n)
                             for n in ("llada-long", "dream-long")) if os.path.isdir(d)]
        if not dirs:
            self.skipTest("no long model or warm-start snapshot committed")
        for d in dirs:
            name = os.path.relpath(d, common.ROOT)
            self.assertLessEqual(os.path.getsize(os.path.join(d, "model.safetensors")), 20e6)
            model, cfg = modeling.load_checkpoint(d, torch.float32)
            self.assertGreaterEqual(cfg.get("max_sequence_length",
                                            cfg.get("max_position_embeddings")), 512)
            tok = bpe.load(d)
            for x in self.test[:60]:
                self.assertEqual(len(tok.encode(x["answer"])), longform.approx_tokens(x["answer"]),
                                 (name, x["answer"]))
                self.assertEqual(len(tok.encode(x["prompt"])), longform.approx_tokens(x["prompt"]),
                                 (name, x["family"]))

    def test_checker(self):
        self.assertEqual(longform.extract_final("a\n#### 12 3 \n"), "12 3")
        self.assertEqual(longform.extract_final("#### 1\nx\n#### 2"), "2")
        self.assertIsNone(longform.extract_final("no final line #### 5"))
        self.assertTrue(longform.check("t\n#### 42", "42"))
        self.assertFalse(longform.check("t\n#### 421", "42"))
        self.assertFalse(longform.check("t\n42", "42"))

    def test_curriculum(self):
        prev = (0.0, 0)
        for step in range(0, 3001, 100):
            level, (lo, hi), (pmin, pmax) = longtrain.curriculum(step, 2500)
            self.assertTrue(0 < level <= 1 and 0 <= lo <= hi <= 6 and pmax == 400)
            self.assertGreaterEqual((level, hi), prev)
            prev = (level, hi)
        self.assertEqual(longtrain.curriculum(2500, 2500),
                         (1.0, (2, 6), (longform.PROMPT_MIN, longform.PROMPT_MAX)))
        # A drill's shot range (--shots) applies once the curriculum is done; items still
        # reach the prompt minimum, adding shots up to the range's maximum to get there.
        self.assertEqual(longtrain.curriculum(3000, 2500, (0, 2))[1], (0, 2))
        self.assertEqual(longtrain.curriculum(1500, 2500, (0, 2))[1], (2, 4))
        # (make_item's length estimate counts 2 tokens per separator, hence the slack.)
        st = longform.stream(11, frozenset(), level=lambda: 1.0, shots=lambda: (0, 2))
        n_shots = []
        for it in itertools.islice(st, 60):
            n_shots.append(it["prompt"].count("\nA: "))
            self.assertGreaterEqual(longform.approx_tokens(it["prompt"]), longform.PROMPT_MIN - 8)
        self.assertLessEqual(max(n_shots), 2)
        self.assertLessEqual(min(n_shots), 1)  # fewer than the splits' minimum of 2
        # A range no item of a family can meet is an error, not an endless loop.
        st = longform.stream(11, frozenset(), {"copy": 1, "add": 0, "sub": 0, "swap": 0,
                                               "reverse": 0},
                             shots=lambda: (0, 0), prompt_range=(300, 400))
        with self.assertRaisesRegex(ValueError, "family copy: no item fits"):
            next(st)
        r = random.Random(5)
        for _ in range(200):  # level 0.2 items are short
            it = longform.make_item(r, r.choice(longform.FAMILIES), 0.2, (0, 0), (0, 400))
            if it is not None:
                self.assertNotIn("\nA: ", it["prompt"])

    def test_shot_answer_mask(self):
        tok = bpe.build("llada", [x["prompt"] + x["answer"] for x in self.val[:60]], 400)
        sp = common.Specials("llada", tok)
        x = self.test[0]
        ids, plen, shot = longtrain.encode_item(tok, "llada", sp, x, 192)
        self.assertEqual(len(ids), plen + 192)
        text = tok.decode([i for i, s in zip(ids[:plen], shot) if s], skip_special=False)
        shots = re.findall(r"A: (.*?\n#### [^\n]*)", x["prompt"], re.S)
        self.assertEqual(text, "".join(shots))


class SplitsTest(unittest.TestCase):
    """tools/tasks/splits.py: the scripts score each model on the split it was trained for."""

    def test_shipped_models(self):
        models = os.path.join(common.ROOT, "models")
        # The expectation comes from the folder names the models shipped under, which the
        # module does not read.
        expected = {"-tiny": "data", "-long": "data_long", "-cot": "data_cot"}
        seen = 0
        for name in sorted(os.listdir(models)):
            if not os.path.isdir(os.path.join(models, name)):
                continue
            suffix = "-" + name.rsplit("-", 1)[1]
            path = splits.test_split(os.path.join(models, name))
            self.assertEqual(os.path.basename(os.path.dirname(path)), expected[suffix], name)
            self.assertTrue(os.path.isfile(path), path)
            seen += 1
        self.assertGreaterEqual(seen, 6)

    def test_bad_folders_are_named(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(ValueError, "training_state.json: missing"):
                splits.test_split(d)
            state = os.path.join(d, "training_state.json")
            for text, message in (("{", "unreadable"), ("[]", "no 'args'"),
                                  ('{"args": {"tasks": "gsm8k"}}', "unknown args.tasks 'gsm8k'")):
                with open(state, "w", encoding="utf-8") as f:
                    f.write(text)
                with self.assertRaisesRegex(ValueError, message):
                    splits.test_split(d)
            self.assertEqual(splits.main(["splits", d]), 2)


class BlasEnvTest(unittest.TestCase):
    def test_candidates(self):
        avx512 = {"avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd", "avx2", "fma"}
        self.assertEqual(blas_env.candidates(avx512 | {"avx512_bf16"}),
                         ["Cooperlake", "SkylakeX", "Haswell"])
        self.assertEqual(blas_env.candidates(avx512), ["SkylakeX", "Haswell"])
        self.assertEqual(blas_env.candidates({"avx2", "fma", "sse3"}), ["Haswell"])
        self.assertEqual(blas_env.candidates({"sse3"}), [])

    def test_probe_follows_the_environment(self):
        env = dict(os.environ, OPENBLAS_CORETYPE="Prescott")
        name = blas_env.probe(env)
        if name is None:
            self.skipTest("no OpenBLAS here")
        self.assertEqual(name, "Prescott")


class BlockMasksTest(unittest.TestCase):
    """--block-mask-prob: the answer region looks like one step of block decoding."""

    def test_blocks(self):
        import torch
        gen = torch.Generator().manual_seed(3)
        b, n, g, block = 64, 60, 32, 8
        starts = torch.randint(0, n - g, (b,), generator=gen)
        p = torch.rand(b, generator=gen) * 0.8 + 0.1
        before = torch.rand(b, n, generator=gen) < 0.5  # stands for the uniform masks
        masked, weight = longtrain.block_masks(before.clone(), p, starts, g, block, 1.0, gen)
        seen = set()
        for r in range(b):
            s = int(starts[r])
            ans = masked[r, s:s + g]
            # The prompt (and anything else outside the answer) keeps its uniform masks.
            self.assertTrue(torch.equal(masked[r, :s], before[r, :s]))
            self.assertTrue(torch.equal(masked[r, s + g:], before[r, s + g:]))
            # Weight 1 (p < 1 here) marks the later blocks; it starts on a block boundary.
            ones = (weight[r, s:s + g] == 1.0).nonzero()
            hi = int(ones[0]) if len(ones) else g
            self.assertEqual(hi % block, 0)
            self.assertGreaterEqual(hi, block)
            self.assertFalse(ans[:hi - block].any())    # earlier blocks: clean context
            self.assertTrue(ans[hi:].all())             # later blocks: fully masked
            self.assertTrue(torch.all(weight[r, s + hi:s + g] == 1.0))
            self.assertTrue(torch.all(weight[r, s:s + hi] == p[r]))
            seen.add(hi)
        self.assertGreater(len(seen), 2)  # the current block varies
        # prob 0 changes nothing.
        same, w = longtrain.block_masks(before.clone(), p, starts, g, block, 0.0, gen)
        self.assertTrue(torch.equal(same, before))
        self.assertTrue(torch.equal(w, p[:, None].expand(b, n)))


class MaskedAnswerAccuracyTest(unittest.TestCase):
    """The validation's smooth measure: an oracle that predicts every answer token scores 1 in
    every block, one that predicts a wrong token scores 0; EOS padding never counts."""

    def test_oracle_and_wrong(self):
        import torch
        test, _, _ = longform.load_splits()
        items = test[:4]
        g = 192
        for family in ("llada", "dream"):
            tok = bpe.build(family, [bpe.render_chat(family, x["prompt"]) + x["answer"]
                                     for x in test[:60]], 400)
            sp = common.Specials(family, tok)
            shift = 1 if family == "dream" else 0
            enc = [longtrain.encode_item(tok, family, sp, it, g) for it in items]
            vocab = len(tok) + 8

            def model(x, key_mask, wrong=False):
                out = torch.zeros(x.shape[0], x.shape[1], vocab)
                for r in range(x.shape[0]):
                    ids, plen, _ = enc[model.next + r]
                    for j in range(g):
                        target = ids[plen + j]
                        out[r, plen + j - shift, (target + 1) % vocab if wrong else target] = 1
                model.next += x.shape[0]
                return out

            for wrong, want in ((False, 1.0), (True, 0.0)):
                model.next = 0
                acc, blocks = longtrain.masked_answer_accuracy(
                    lambda x, key_mask: model(x, key_mask, wrong), tok, family, items, g, 32, 3)
                self.assertEqual(acc, want, family)
                self.assertTrue(all(b in (None, want) for b in blocks), (family, blocks))
                self.assertEqual(blocks[0], want)  # the first block always has answer tokens


class RewarmTest(unittest.TestCase):
    def test_warm_start_ramps_the_schedule(self):
        import argparse
        from tools.train import training
        a = argparse.Namespace(max_steps=1000, lr=1e-3, warmup=10, rewarm_steps=100)
        for step in (50, 400, 999):  # no warm start: the cosine schedule itself
            self.assertEqual(longtrain.rewarmed_lr(step, None, a),
                             training.lr_at(step, 1000, 1e-3, 10))
        base = training.lr_at(400, 1000, 1e-3, 10)
        self.assertAlmostEqual(longtrain.rewarmed_lr(400, 400, a), base / 100)
        self.assertAlmostEqual(longtrain.rewarmed_lr(449, 400, a),
                               training.lr_at(449, 1000, 1e-3, 10) * 50 / 100)
        self.assertEqual(longtrain.rewarmed_lr(499, 400, a), training.lr_at(499, 1000, 1e-3, 10))
        self.assertEqual(longtrain.rewarmed_lr(700, 400, a), training.lr_at(700, 1000, 1e-3, 10))
        a.rewarm_steps = 0
        self.assertEqual(longtrain.rewarmed_lr(400, 400, a), base)


class StopAtEndTest(unittest.TestCase):
    """Validation and evaluation stop a batch once every answer is final: the cut answers
    equal a full decode's, with fewer forwards."""

    def test_answers_finished(self):
        import torch
        from tools.train import evaluate
        mask, end = 9, (7, 8)
        rows = torch.tensor([[1, 2, 7, 9, 9], [1, 9, 7, 9, 9], [1, 2, 3, 4, 5], [8, 9, 9, 9, 9],
                             [9, 9, 9, 9, 9], [1, 2, 3, 4, 7]])
        self.assertEqual(evaluate.answers_finished(rows, mask, end).tolist(),
                         [True, False, False, True, False, True])

    def test_same_answers_fewer_forwards(self):
        import torch
        from tools.train import evaluate
        vocab, mask, end = 12, 11, (10,)
        g = torch.Generator().manual_seed(3)
        w = torch.randn(vocab, vocab, generator=g)
        pos = torch.randn(64, vocab, generator=g)

        def model(x, key_mask=None):
            model.calls += 1
            emb, n = w[x], x.shape[1]
            logits = emb.roll(1, dims=1) + emb.mean(dim=1, keepdim=True) + pos[:n]
            # The end token grows likelier late; early positions are the most confident.
            logits[..., 10] = logits[..., 10] + torch.linspace(-6.0, 6.0, n)
            return logits * torch.linspace(8.0, 1.0, n)[:, None]

        prompts = [torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6, 7, 1]),
                   torch.tensor([2, 2]), torch.tensor([3, 1, 4, 1, 5, 9])]
        for block in (None, 8):
            model.calls = 0
            full = evaluate.decode_padded(model, "llada", prompts, 32, mask, block, 0)
            full_calls = model.calls
            model.calls = 0
            short = evaluate.decode_padded(model, "llada", prompts, 32, mask, block, 0, end)
            # Over the whole answer the confident trailing end tokens come first, so only
            # blocks finish early here.
            if block:
                self.assertLess(model.calls, full_calls)
            else:
                self.assertEqual(model.calls, full_calls)

            def cut(ids):
                ids = ids.tolist()
                return ids[:ids.index(10)] if 10 in ids else ids

            self.assertEqual([cut(r) for r in short], [cut(r) for r in full])
            self.assertTrue(all(10 in r.tolist() for r in short))  # every row ended


class TransferTest(unittest.TestCase):
    """--transfer-from: a model of the other family starts from a trained one's weights."""

    def test_weights_map_by_token_and_role(self):
        import torch
        from tools.reference import modeling
        from tools.train import training
        test, _, _ = longform.load_splits()
        tmp = tempfile.mkdtemp()
        try:
            for sfam, kv_src, fam, kv in (("llada", 4, "dream", 2), ("dream", 2, "llada", 2)):
                stok = bpe.build(sfam, [bpe.render_chat(sfam, x["prompt"]) + x["answer"]
                                        for x in test[:60]], 400)
                ssp = common.Specials(sfam, stok)
                rows = (len(stok) + 63) // 64 * 64
                scfg = modeling.make_config(common.MODEL_TYPE[sfam], 32, 2, 4, kv_src, 64, rows,
                                            10000, 1e-5, 256, ssp.mask, ssp.eos, ssp.pad,
                                            ssp.bos)
                src = modeling.DiffusionLM(scfg)
                training.init_weights(src, 7)
                d = os.path.join(tmp, sfam)
                training.save_model(src, scfg, stok, sfam, 32, d, {})
                src, _ = modeling.load_checkpoint(d, torch.float32)  # the bf16-rounded weights

                tok = longtrain.transferred_tokenizer(fam, d)
                for x in test[:30]:  # same pieces under the other family's regex
                    self.assertEqual(tok.encode(x["answer"]), stok.encode(x["answer"]))
                sp = common.Specials(fam, tok)
                cfg = modeling.make_config(common.MODEL_TYPE[fam], 32, 2, 4, kv, 64,
                                           (len(tok) + 63) // 64 * 64, 10000, 1e-6, 256,
                                           sp.mask, sp.eos, sp.pad, sp.bos)
                m = modeling.DiffusionLM(cfg)
                training.init_weights(m, 8)
                longtrain.transfer_weights(m, tok, fam, d)
                se, e = src.embed.weight, m.embed.weight
                self.assertTrue(torch.equal(e[:len(stok.vocab)], se[:len(stok.vocab)]))
                for role in ("mask", "eot", "eos"):
                    self.assertTrue(torch.equal(e[getattr(sp, role)], se[getattr(ssp, role)]))
                    self.assertTrue(torch.equal(m.lm_head.weight[getattr(sp, role)],
                                                src.lm_head.weight[getattr(ssp, role)]))
                for i in (0, 1):
                    b, sb = m.blocks[i], src.blocks[i]
                    for n in ("q_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
                        self.assertTrue(torch.equal(getattr(b, n).weight, getattr(sb, n).weight))
                    g = kv_src // kv
                    hd = 8
                    for n in ("k_proj", "v_proj"):
                        want = getattr(sb, n).weight.view(kv, g, hd, 32).mean(dim=1)
                        self.assertTrue(torch.allclose(getattr(b, n).weight.view(kv, hd, 32),
                                                       want))
                        if fam == "dream":  # biases the LLaDA source lacks stay 0
                            self.assertFalse(getattr(b, n).bias.any())
                # Widths must match.
                bad = dict(cfg, hidden_size=64, d_model=64)
                with self.assertRaises(SystemExit):
                    longtrain.transfer_weights(modeling.DiffusionLM(bad), tok, fam, d)
        finally:
            shutil.rmtree(tmp)


class ResumeTest(unittest.TestCase):
    """A run stopped after one step and resumed reaches bit-identical weights and optimizer
    state to an uninterrupted run (data, masking and RNG are functions of the step)."""

    def test_resume_is_exact(self):
        import torch
        tmp = tempfile.mkdtemp()
        try:
            base = [sys.executable, "-m", "tools.train.train", "--tasks", "long",
                    "--family", "dream", "--kv-heads", "1", "--gen-length", "192",
                    "--hidden", "32", "--layers", "1", "--heads", "2", "--intermediate", "64",
                    "--tok-corpus", "100", "--tok-vocab", "400", "--batch", "2",
                    "--curriculum-steps", "4", "--eval-every", "1000", "--max-steps", "5",
                    "--val-items", "2", "--eval-batch", "2", "--block-mask-prob", "0.5",
                    "--warmup", "2", "--ckpt-minutes", "1000"]
            # The trainer runs as a module of the package `tools`: the repo root on its path.
            path = [common.ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]
            env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(path))

            def run(name, *extra):
                subprocess.run(base + ["--out", os.path.join(tmp, name), "--state-dir",
                                       os.path.join(tmp, name + "-state"), *extra],
                               check=True, env=env, capture_output=True)

            run("a")
            run("b", "--minutes", "0.00001")  # stops after its first step
            first = torch.load(os.path.join(tmp, "b-state", "ckpt.pt"))
            self.assertEqual(first["step"], 1)
            run("b", "--resume")
            a = torch.load(os.path.join(tmp, "a-state", "ckpt.pt"))
            b = torch.load(os.path.join(tmp, "b-state", "ckpt.pt"))
            self.assertEqual((a["step"], b["step"]), (5, 5))
            for k in a["model"]:
                self.assertTrue(torch.equal(a["model"][k], b["model"][k]), k)
                self.assertFalse(torch.equal(a["model"][k], first["model"][k]) and
                                 k.endswith("q_proj.weight"), k)
            sa, sb = a["opt"]["state"], b["opt"]["state"]
            for k in sa:
                self.assertTrue(torch.equal(sa[k]["exp_avg"], sb[k]["exp_avg"]))
            latest = os.path.join(tmp, "b-state", "latest")
            self.assertTrue(os.path.exists(os.path.join(latest, "model.safetensors")))
            # A warm start (the committed snapshot of a cut-off run) continues at its step.
            run("c", "--warm-start", latest, "--max-steps", "6")
            c = torch.load(os.path.join(tmp, "c-state", "ckpt.pt"))
            self.assertEqual(c["step"], 6)
            self.assertEqual(c["warm_from"], 5)  # its learning rate ramps from there

            # SIGTERM mid-run: the step finishes, a checkpoint is written, the run exits 0.
            steps_at = base.index("--max-steps") + 1
            d = subprocess.Popen(
                base[:steps_at] + ["100000"] + base[steps_at + 1:]
                + ["--out", os.path.join(tmp, "d"), "--state-dir", os.path.join(tmp, "d-state")],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in d.stdout:
                if " step 25 " in line:  # training is under way
                    break
            d.send_signal(signal.SIGTERM)
            out, _ = d.communicate(timeout=120)
            self.assertEqual(d.returncode, 0, out)
            self.assertIn("stopping at step", out)
            stopped = torch.load(os.path.join(tmp, "d-state", "ckpt.pt"))
            self.assertTrue(25 <= stopped["step"] < 100000)
        finally:
            shutil.rmtree(tmp)


class LineProbeTest(unittest.TestCase):
    """tools/train/line_probe.py: what it masks and scores."""

    def test_masks_from_each_result_on(self):
        from tools.train import line_probe
        tok = bpe.load(os.path.join(common.HERE, "warm_start", "llada-long"))
        answer = ("0917+0485\n7+5+0=12, write 2, carry 1\n1+8+1=10, write 0, carry 1\n"
                  "9+4+1=14, write 4, carry 1\n0+0+1=01, write 1, carry 0\nwrite 0\n#### 01402")
        ids, lines = line_probe.probe_masks(tok, answer)
        self.assertEqual(len(lines), 4)
        text = [tok.decode([t]) for t in ids]
        for (result, masked), want in zip(lines, ["12", "10", "14", "01"]):
            self.assertEqual("".join(text[i] for i in result), want)
            # Everything from the result on is hidden, nothing before it.
            self.assertEqual(masked, list(range(result[0], len(ids))))
            self.assertEqual(text[result[0] - 1], "=")
        sub = "4995-0183\n5-3-0+00=2, write 2, borrow 0\n9-8-0+00=1, write 1, borrow 0\n#### 12"
        _, lines = line_probe.probe_masks(tok, sub)
        self.assertEqual([len(r) for r, _ in lines], [1, 1])


if __name__ == "__main__":
    unittest.main()
