"""Checks of tools/entropy_drift/token_drift.py on a small random model: the K/V it measures are
the ones attention uses, the window decode commits only inside its window, and the records'
arithmetic (age, staleness at age 1 equal to the step drift) holds."""
import json
import os
import unittest
from types import SimpleNamespace

import torch

from tools.entropy_drift import token_drift as T
from tools.reference import modeling as M
from tools.train import common

VOCAB, MASK, END = 64, 63, 62


def small_model(family="llada", seed=3):
    cfg = M.make_config(family, 32, 2, 4, 2, 48, VOCAB, 10000.0, 1e-5, 128, MASK, END, 0, 1)
    return M.DiffusionLM(cfg).init_random(torch.Generator().manual_seed(seed)).eval()


class FeaturesTest(unittest.TestCase):
    def test_features_are_the_keys_and_values_attention_uses(self):
        model = small_model()
        x = torch.randint(0, VOCAB - 2, (20,), generator=torch.Generator().manual_seed(1))
        seen = []
        hooks = [m.register_forward_hook(lambda _m, _i, out: seen.append(out[0].clone()))
                 for blk in model.blocks for m in (blk.k_proj, blk.v_proj)]
        with torch.no_grad():
            reference = model(x[None])[0]
        for h in hooks:
            h.remove()
        logits, f = T.features(model, x)
        self.assertTrue(torch.equal(logits, reference.float()))
        # Hook order is layer by layer, K then V: the layout features() promises.
        self.assertTrue(torch.equal(f, torch.cat(seen, dim=-1)))


class DecodeTest(unittest.TestCase):
    def test_records(self):
        torch.manual_seed(0)
        model = small_model()
        sp = SimpleNamespace(mask=MASK, end=[END])
        prompt = list(range(2, 12))
        ids, records, prompt_drift = T.decode_one(model, "llada", sp, prompt, 24, window=4,
                                                  threshold=0.9)
        self.assertEqual(len(ids), 24)
        self.assertTrue(records)
        self.assertTrue(prompt_drift)
        for age, entropy, step_drift, stale, _padding in records:
            self.assertGreaterEqual(age, 1)
            self.assertGreaterEqual(entropy, 0.0)
            self.assertGreaterEqual(step_drift, 0.0)
            if age == 1:  # one step after the first recompute: both measure the same move
                self.assertAlmostEqual(step_drift, stale, places=6)
        # Later commits move earlier tokens' K/V (attention is bidirectional).
        self.assertTrue(any(r[3] > 0 for r in records))

    def test_window_commits_leftmost_masks_only(self):
        # threshold 2 (never met): one token per step, always the most confident of the W
        # leftmost masks, so the answer fills without ever skipping past W masks.
        model = small_model(seed=5)
        sp = SimpleNamespace(mask=MASK, end=[])
        calls = []
        real = T.features

        def spy(m, x):
            calls.append(x.clone())
            return real(m, x)

        T.features = spy
        try:
            T.decode_one(model, "llada", sp, [2, 3, 4], 12, window=2, threshold=2.0)
        finally:
            T.features = real
        for before, after in zip(calls, calls[1:]):
            changed = (before != after).nonzero()[:, 0].tolist()
            self.assertEqual(len(changed), 1)
            masked = (before[3:] == MASK).nonzero()[:, 0].tolist()
            self.assertIn(changed[0] - 3, masked[:2])


class LoadTest(unittest.TestCase):
    def test_cot_split_path(self):
        self.assertTrue(common.cot_split_path("val").endswith("tools/tasks/data_cot/val.jsonl"))
        self.assertEqual(common.cot_split_path("/tmp/x.jsonl"), "/tmp/x.jsonl")

    def test_load_model_dir_reads_the_folder(self):
        for name, family in (("llada-tiny", "llada"), ("dream-tiny", "dream")):
            folder = os.path.join(common.ROOT, "models", name)
            with open(os.path.join(folder, "generation_config.json")) as f:
                want_gen = json.load(f)["gen_length"]
            model, fam, tok, gen_length = common.load_model_dir(folder, torch.float32)
            self.assertEqual((fam, gen_length), (family, want_gen))
            self.assertEqual(model.family, M.LLADA if family == "llada" else M.DREAM)
            self.assertEqual(tok.decode(tok.encode("12 + 30")), "12 + 30")


class StatsTest(unittest.TestCase):
    def test_spearman(self):
        self.assertAlmostEqual(T.spearman([1, 2, 3, 4], [10, 20, 30, 40]), 1.0)
        self.assertAlmostEqual(T.spearman([1, 2, 3, 4], [4, 3, 2, 1]), -1.0)
        # Ties take their mean rank: x ranks 0.5 0.5 2 3; y ranks 0 1 2 3.
        self.assertAlmostEqual(T.spearman([1, 1, 2, 3], [1, 2, 3, 4]), 0.9486832980505138)

    def test_tables_keep_the_end_padding_apart(self):
        records = [(1, 0.0, 0.1, 0.1, False), (1, 0.5, 0.3, 0.3, False), (1, 0.0, 9.0, 9.0, True)]
        text = T.tables(records, [0.001])
        self.assertIn("| 1 | 2 | 0.3000 | 0.3000 |", text)  # median of two: the upper one
        self.assertIn("End padding (1 records): median staleness 9.0000", text)

    def test_buckets(self):
        self.assertEqual(T.entropy_bucket(0.0), 0)
        self.assertEqual(T.entropy_bucket(0.01), 1)
        self.assertEqual(T.entropy_bucket(5.0), len(T.ENTROPY_EDGES))
        self.assertEqual(T.age_label(3, 4), "3-4")
        self.assertEqual(T.age_label(17, 10 ** 9), ">=17")


if __name__ == "__main__":
    unittest.main()
