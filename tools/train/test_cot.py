"""Checks of suite v7 ("cot", tools/tasks/cot.py): free wording, exact final lines.

Run: /usr/bin/python3 -m unittest tools.train.test_cot   (from the repo root)
"""
import collections
import itertools
import random
import re
import unittest
from types import SimpleNamespace

from tools.tasks import cot
from tools.train import bpe, common, longtrain
from tools.train.test_longform import question_of, solve

_FIELD = re.compile(r"\{(\w+)\}")


def template_rx(t):
    """Regex of a str.format template whose fields are digit strings (named groups)."""
    out, pos = [], 0
    for m in _FIELD.finditer(t):
        out.append(re.escape(t[pos:m.start()]))
        out.append(f"(?P<{m.group(1)}>\\d+)")
        pos = m.end()
    out.append(re.escape(t[pos:]))
    return "".join(out)


def match_one(templates, text, prefix=""):
    """[(template index, groupdict)] of the templates that match text exactly."""
    return [(i, m.groupdict()) for i, t in enumerate(templates)
            for m in [re.fullmatch(prefix + template_rx(t), text)] if m]


def parse_trace(family, question, trace):
    """Checks every line of a trace against the family's phrasings and its computation, with
    no code from cot.py but the phrasing tables; returns the slot choices [(slot, index)]."""
    lines = trace.split("\n")
    choices = []
    if family in ("add", "sub"):
        a, op, b = re.fullmatch(r"What is (\d+) ([+-]) (\d+)\?", question).groups()
        width = max(len(a), len(b))
        sa, sb = a.zfill(width), b.zfill(width)
        heads = cot.ADD_HEAD if op == "+" else cot.SUB_HEAD
        (h, g), = match_one(heads, lines[0])
        assert (g["a"], g["b"]) == (sa, sb), lines[0]
        choices.append(("head", h))
        eqs, acts = (cot.ADD_EQ, cot.ADD_ACT) if op == "+" else (cot.SUB_EQ, cot.SUB_ACT)
        c = 0
        for i, ln in enumerate(lines[1:1 + width]):
            found = []
            for (e, et), (j, jt), (k, kt) in itertools.product(
                    enumerate(eqs), enumerate(cot.JOIN), enumerate(acts)):
                m = re.fullmatch(template_rx(et + jt + kt), ln)
                if m:
                    found.append(((e, j, k), m.groupdict()))
            assert len(found) == 1, (ln, found)
            (e, j, k), g = found[0]
            x, y = int(sa[-1 - i]), int(sb[-1 - i])
            assert (int(g["x"]), int(g["y"]), int(g["c"])) == (x, y, c), ln
            if op == "+":
                s = x + y + c
                assert g["s"] == f"{s:02d}" and int(g["d"]) == s % 10, ln
                c = s // 10
            else:
                nb = int(x - y - c < 0)
                d = x - y - c + 10 * nb
                assert g["t"] == f"{10 * nb:02d}" and int(g["s"]) == int(g["d"]) == d, ln
                assert len(g["s"]) == 1, ln
                c = nb
            assert int(g["k"]) == c, ln
            choices += [("eq", e), ("join", j), ("act", k)]
        rest = lines[1 + width:]
        if op == "+":
            (t, g), = match_one(cot.ADD_LAST, rest[0])
            assert int(g["k"]) == c
            choices.append(("last", t))
            rest = rest[1:]
        assert not rest, rest
    elif family == "reverse":
        s = re.fullmatch(r"Reverse the string (\d+)\.", question).group(1)
        chunks = [s[max(0, e - 10):e] for e in range(len(s), 0, -10)]
        assert len(lines) == len(chunks)
        for i, (ln, ch) in enumerate(zip(lines, chunks)):
            found = [(la, ar) for la, ar in itertools.product(range(len(cot.LABEL)),
                                                              range(len(cot.ARROW)))
                     if ln == cot.LABEL[la].format(i=i + 1) + ch + cot.ARROW[ar] + ch[::-1]]
            assert len(found) == 1, (ln, found)
            choices += [("label", found[0][0]), ("arrow", found[0][1])]
    elif family in ("copy", "swap"):
        if family == "copy":
            s = re.fullmatch(r"write the string (\d+)\.", question).group(1)
            chunks = [s[i:i + 10] for i in range(0, len(s), 10)]
        else:
            pairs = re.fullmatch(r"Reverse the string ([\d ]+) in 2s\.", question).group(1)
            sw = [p[::-1] for p in pairs.split(" ")]
            chunks = [" ".join(sw[k:k + 5]) for k in range(0, len(sw), 5)]
        assert len(lines) == len(chunks)
        for i, (ln, ch) in enumerate(zip(lines, chunks)):
            found = [(la, en) for la, en in itertools.product(range(len(cot.COPY_LABEL)),
                                                              range(len(cot.END)))
                     if ln == cot.COPY_LABEL[la].format(i=i + 1) + ch + cot.END[en]]
            assert len(found) == 1, (ln, found)
            choices += [("label", found[0][0]), ("end", found[0][1])]
    else:
        raise AssertionError(f"no trace check for family {family}")
    return choices


class CotSuiteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.test, cls.val, cls.exclude = cot.load_splits()

    def test_committed_splits_are_reproducible(self):
        test = cot.test_split()
        self.assertEqual(test, self.test)
        self.assertEqual(cot.val_split(test), self.val)
        self.assertGreaterEqual(len(self.test), 500)
        self.assertEqual(collections.Counter(x["family"] for x in self.test),
                         {f: 100 for f in cot.FAMILIES})

    def test_splits_are_disjoint_and_training_excludes_them(self):
        tk, vk = {x["key"] for x in self.test}, {x["key"] for x in self.val}
        self.assertEqual(len(tk), len(self.test))
        self.assertFalse(tk & vk)
        st = cot.stream(cot.TRAIN_SEED + 1, self.exclude)
        for _ in range(300):
            self.assertNotIn(next(st)["key"], self.exclude)
        key = self.test[0]["key"]
        st = cot.stream(cot.TRAIN_SEED + 1, frozenset([key]))
        self.assertNotIn(key, {next(st)["key"] for _ in range(300)})

    def test_answers_and_traces_are_right(self):
        for x in self.test + self.val:
            q = question_of(x)
            self.assertEqual(x["final"], solve(q, x["prompt"]), q)
            trace, final = x["answer"].rsplit("\n#### ", 1)
            self.assertEqual(final, x["final"])
            self.assertTrue(cot.check(x["answer"], x["final"]))
            parse_trace(x["family"], q, trace)

    def test_few_shot_examples_are_right(self):
        for x in self.test + self.val:
            shots = x["prompt"][len("Q: "):].split("\n\nQ: ")
            self.assertTrue(2 <= len(shots) - 1 <= 6, x["prompt"])
            for s in shots[:-1]:
                q, a = s.split("\nA: ", 1)
                trace, final = a.rsplit("\n#### ", 1)
                self.assertEqual(final, solve(q, x["prompt"]), q)
                parse_trace(x["family"], q, trace)
                self.assertNotEqual(q, question_of(x))

    def test_every_phrasing_is_used_and_lines_vary(self):
        # Each slot's phrasings are drawn uniformly per line: over the test split every one
        # occurs, none far from its share, and most items mix phrasings across their lines.
        uses = collections.defaultdict(collections.Counter)
        mixed = 0
        for x in self.test:
            trace = x["answer"].rsplit("\n#### ", 1)[0]
            ch = parse_trace(x["family"], question_of(x), trace)
            for slot, i in ch:
                uses[(x["family"], slot)][i] += 1
            per_slot = collections.defaultdict(set)
            for slot, i in ch:
                per_slot[slot].add(i)
            mixed += any(len(v) > 1 for v in per_slot.values())
        for (f, slot), c in uses.items():
            n = {"head": len(cot.ADD_HEAD), "eq": 3, "join": len(cot.JOIN), "act": 3,
                 "last": len(cot.ADD_LAST), "arrow": len(cot.ARROW), "end": len(cot.END),
                 "label": len(cot.LABEL if f == "reverse" else cot.COPY_LABEL)}[slot]
            total = sum(c.values())
            self.assertEqual(set(c), set(range(n)), (f, slot, c))
            if total >= 100:
                for i in range(n):
                    self.assertGreater(c[i], 0.5 * total / n, (f, slot, c))
        self.assertGreater(mixed, 0.9 * len(self.test))

    def test_phrasings_differ_in_length(self):
        # Positions shift with the wording: in every slot but JOIN and ARROW (`, ` / `; ` /
        # ` -> ` and ` -> ` / ` is ` / `: ` have one token count each: a choice of token, not
        # of length) the phrasings do not all have one token count, and in every family the
        # lines at one place of the trace have several lengths.
        tok = bpe.load(common.long_snapshot("llada-long"))
        f = {"x": 1, "y": 2, "c": 0, "s": "03", "t": "00", "d": 3, "k": 0, "a": "12",
             "b": "34", "i": 1}
        for slot in (cot.ADD_EQ, cot.SUB_EQ, cot.ADD_ACT, cot.ADD_HEAD,
                     cot.ADD_LAST, cot.LABEL, cot.COPY_LABEL, cot.END):
            lens = {len(tok.encode("0" + t.format(**f) + "0")) for t in slot}
            self.assertGreater(len(lens), 1, slot)
        for fam in cot.FAMILIES:
            lens = {len(tok.encode(x["answer"].split("\n")[1] + "\n")) for x in self.test
                    if x["family"] == fam}
            self.assertGreaterEqual(len(lens), 2, fam)

    def test_question_does_not_determine_the_wording(self):
        for fam, gen in cot.GENERATORS.items():
            differ = 0
            for seed in range(10):
                q1, t1, f1 = gen(random.Random(seed), 1.0, random.Random(100 + seed))
                q2, t2, f2 = gen(random.Random(seed), 1.0, random.Random(200 + seed))
                self.assertEqual((q1, f1), (q2, f2))
                parse_trace(fam, q1, t1)
                parse_trace(fam, q2, t2)
                differ += t1 != t2
            self.assertGreaterEqual(differ, 9, fam)

    def test_lengths_fit_the_models(self):
        toks = {f: bpe.load(common.long_snapshot(f"{f}-long"))
                for f in ("llada", "dream")}
        for x in self.test + self.val:
            self.assertTrue(cot.PROMPT_MIN <= cot.approx_tokens(x["prompt"]) <= cot.PROMPT_MAX)
            self.assertTrue(cot.ANSWER_MIN <= cot.approx_tokens(x["answer"]) <= cot.ANSWER_MAX)
            for fam, tok in toks.items():
                ids = tok.encode(x["answer"])
                self.assertEqual(tok.decode(ids), x["answer"])
                self.assertLessEqual(len(ids) + 1, 192)  # + end of turn fits G
                self.assertLessEqual(len(common.prompt_ids(tok, fam, x["prompt"])), 440)

    def test_longtrain_draws_cot_items(self):
        args = SimpleNamespace(tasks="cot", curriculum_steps=0, shots=(2, 6), seed=1, batch=2,
                               gen_length=192)
        self.assertIs(longtrain.suite_of(args), cot)
        self.assertIs(longtrain.suite_of(SimpleNamespace()), longtrain.longform)
        tok = bpe.load(common.long_snapshot("llada-long"))
        sp = common.Specials("llada", tok)
        batches = longtrain.superstep_batches(0, args, tok, "llada", sp, self.exclude, None)
        self.assertEqual(len(batches), 4)
        for b in batches:
            for ids, plen, _ in b:
                text = tok.decode(ids[plen:], skip_special=True)
                self.assertIn("\n#### ", text)

    def test_probe_threshold_rule(self):
        # dynamics_probe commits every masked position of the block with p >= threshold, at
        # least the most confident one; a toy model with fixed confidences shows the counts.
        import torch
        from tools.train import dynamics_probe

        class Toy(torch.nn.Module):
            def forward(self, x, key_mask=None):
                b, n = x.shape
                logits = torch.full((b, n, 8), -30.0)
                logits[:, :, 1] = 30.0  # p ~ 1 for token 1 ...
                logits[:, 2::3, 1] = 0.0  # ... except every third position: uniform over 8
                logits[:, 2::3, 2:] = 0.0
                return logits

        sp = SimpleNamespace(pad=0, mask=7, end=(5,))
        out, steps = dynamics_probe.decode(Toy(), "llada", sp, [[3, 3]], 8, 4, 0.9)
        self.assertEqual(len(out[0]), 8)
        self.assertTrue(all(len(s) >= 1 for s in steps[0]))
        self.assertEqual(sum(len(s) for s in steps[0]), 8)
        # Canvas positions 2, 5, 8 (answer 0, 3, 6) are uniform over 7 tokens. Block 0: step 1
        # commits the confident answer 1, 2; then one uncertain position per step, the lowest
        # first on equal confidence (entropy ln 7); block 1 likewise.
        self.assertEqual([sorted(p for p, _ in s) for s in steps[0]],
                         [[1, 2], [0], [3], [4, 5, 7], [6]])
        self.assertAlmostEqual(steps[0][1][0][1], float(torch.log(torch.tensor(7.0))), 4)
        self.assertLess(steps[0][0][0][1], 1e-3)


if __name__ == "__main__":
    unittest.main()
