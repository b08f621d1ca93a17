"""Checks of the infill variants (tools/tasks/infill.py) on the cot splits.

Run: /usr/bin/python3 -m unittest tools.tasks.test_infill   (from the repo root)
"""
import json
import os
import unittest

from tools.tasks import cot, infill


def pieces_text(pieces):
    return "".join(p.get("fixed", p.get("masks_for", "")) for p in pieces)


class InfillTest(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(cot.DATA_DIR, "val.jsonl")) as f:
            self.items = [json.loads(line) for line in f if line.strip()]

    def test_pieces_are_the_reference_answer_in_order(self):
        for item in self.items:
            trace = item["answer"].split("\n")[:-1]
            for variant in infill.VARIANTS:
                pieces, fell_back = infill.canvas(variant, item["answer"])
                # The pieces spell a prefix of the reference answer, so that every fixed
                # text keeps its place (the masks stand for the text they replace).
                self.assertTrue(item["answer"].startswith(pieces_text(pieces)), (variant, item))
                self.assertTrue(pieces[-1].get("fixed", "").endswith("\n"))
                fixed = [p["fixed"] for p in pieces if "fixed" in p]
                self.assertEqual(len(fixed), 1)
                if variant == "head" or fell_back:
                    self.assertEqual(pieces, [{"fixed": trace[0] + "\n"}])
                else:
                    # The middle line, never the first: masks before it, masks after it.
                    m = len(trace) // 2
                    self.assertGreaterEqual(m, 1)
                    self.assertEqual(fixed[0], trace[m] + "\n")
                    self.assertIn("masks_for", pieces[0])
                # The final line is never fixed: the checker scores it.
                self.assertNotIn("#### ", pieces_text(pieces))

    def test_bad_answers_are_refused(self):
        with self.assertRaises(ValueError):
            infill.canvas("middle", "no final line")
        with self.assertRaises(ValueError):
            infill.canvas("middle", "#### 42")
        with self.assertRaises(ValueError):
            infill.canvas("tail", "a\nb\n#### 42")
        pieces, fell_back = infill.canvas("middle", "only line\n#### 42")
        self.assertTrue(fell_back)
        self.assertEqual(pieces, [{"fixed": "only line\n"}])


if __name__ == "__main__":
    unittest.main()
