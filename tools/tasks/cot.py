"""Suite v7 ("cot"): the long-form families with free wording, for models that hesitate.

The long suite (tools/tasks/longform.py, v6) fixes every answer's layout by its question, so
a model that knows the computation is certain of every token: the long models commit 18-27
tokens per forward under threshold decoding, at ~0.003-0.03 nats. Real chain of thought is
certain of the arithmetic and uncertain of the wording. This suite keeps v6's five families
and their computations (add, sub, reverse, copy, swap; few-shot prompts of 150-400 tokens;
answers that fit G = 192 with the end of turn) and words every trace line from independent
slots, each drawn at random per line from equivalent phrasings of different token lengths:

  add   `x+y+c=ss` | `x+y+c is ss` | `x + y + c = ss`, then `, ` | `; ` | ` -> `, then
        `write d, carry k` | `carry k, write d` | `write d carry k` (the two actions in either
        order); header `a+b` | `a + b` | `a+b:`; last line `write k` | `carry k` |
        `write the carry k`
  sub   the same slots with `x-y-b+bb=d` and `borrow`; header `a-b` | `a - b` | `a-b:`
  reverse  `k: ` | `k. ` | `` then the chunk, then ` -> ` | ` is ` | `: `, then the reversed
        chunk
  copy  `k: ` | `k. ` | `` | `write ` then the chunk, then `` | `.`
  swap  as copy, with the 5 swapped pairs

so the question does not determine the wording: positions shift with every choice, and a
later line cannot be placed before the earlier ones are decided. The final line
`#### <answer>` is exact and scored as in v6 (longform.check). Sizes are smaller than v6's
where the longer wording would not fit G (add/sub 4-7 digits, strings of 20-40 digits, swap
10-20 pairs). The measurements that set the slots are in docs/longform-history.md
("Suite v7 / cot").

Splits: tools/tasks/data_cot/{test,val}.jsonl (500 / 100 items, seeds distinct from v6);
training streams exclude their questions (item["key"]). A question has many right answers
here; the split's `answer` is one of them (training targets are drawn afresh per item).

Usage:  python3 -m tools.tasks.cot --write   (regenerates tools/tasks/data_cot/*.jsonl)
"""
import os

from tools.tasks import common, longform
from tools.tasks.longform import approx_tokens, extract_final, check, load_jsonl  # noqa: F401

FAMILIES = list(longform.FAMILIES)

TEST_SEED = 21001
VAL_SEED = 22002
TRAIN_SEED = 23003
N_TEST_PER_FAMILY = 100  # 500 test items
N_VAL_PER_FAMILY = 20  # 100 validation items

PROMPT_MIN, PROMPT_MAX = longform.PROMPT_MIN, longform.PROMPT_MAX
ANSWER_MIN = 40
ANSWER_MAX = 188  # approx_tokens of the answer; + end of turn fits G = 192

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data_cot")

# Slots. Each is a list of equivalent phrasings (str.format templates); a line draws one per
# slot. Keys are named so tools/train/test_cot.py can parse every line back.
ADD_EQ = ["{x}+{y}+{c}={s}", "{x}+{y}+{c} is {s}", "{x} + {y} + {c} = {s}"]
SUB_EQ = ["{x}-{y}-{c}+{t}={s}", "{x}-{y}-{c}+{t} is {s}", "{x} - {y} - {c} + {t} = {s}"]
JOIN = [", ", "; ", " -> "]
ADD_ACT = ["write {d}, carry {k}", "carry {k}, write {d}", "write {d} carry {k}"]
SUB_ACT = ["write {d}, borrow {k}", "borrow {k}, write {d}", "write {d} borrow {k}"]
ADD_HEAD = ["{a}+{b}", "{a} + {b}", "{a}+{b}:"]
SUB_HEAD = ["{a}-{b}", "{a} - {b}", "{a}-{b}:"]
ADD_LAST = ["write {k}", "carry {k}", "write the carry {k}"]
LABEL = ["{i}: ", "{i}. ", ""]
COPY_LABEL = LABEL + ["write "]
ARROW = [" -> ", " is ", ": "]
END = ["", "."]

SLOTS = {"add": [ADD_HEAD, ADD_EQ, JOIN, ADD_ACT, ADD_LAST],
         "sub": [SUB_HEAD, SUB_EQ, JOIN, SUB_ACT],
         "reverse": [LABEL, ARROW], "copy": [COPY_LABEL, END], "swap": [COPY_LABEL, END]}


def _size(r, lo, hi, level):
    return r.randint(lo, lo + int(round(level * (hi - lo))))


def _column_lines(w, sa, sb, op):
    """The column lines of add (op '+') or sub ('-'); returns (lines, final carry)."""
    eq, act = (ADD_EQ, ADD_ACT) if op == "+" else (SUB_EQ, SUB_ACT)
    lines, c = [], 0
    for i in range(len(sa)):
        x, y = int(sa[-1 - i]), int(sb[-1 - i])
        if op == "+":
            s = x + y + c
            f = {"x": x, "y": y, "c": c, "s": f"{s:02d}", "d": s % 10, "k": s // 10}
            c = s // 10
        else:
            k = int(x - y - c < 0)
            d = x - y - c + 10 * k
            f = {"x": x, "y": y, "c": c, "t": f"{10 * k:02d}", "s": d, "d": d, "k": k}
            c = k
        lines.append(w.choice(eq).format(**f) + w.choice(JOIN) + w.choice(act).format(**f))
    return lines, c


def _add(r, level, w=None):
    w = w or r
    n = _size(r, 4, 7, level)
    m = r.randint(4, n)
    a, b = longform._digits(r, n), longform._digits(r, m)
    if r.random() < 0.5:
        a, b = b, a
    width = max(len(str(a)), len(str(b)))
    sa, sb = str(a).zfill(width), str(b).zfill(width)
    head = w.choice(ADD_HEAD).format(a=sa, b=sb)
    lines, carry = _column_lines(w, sa, sb, "+")
    last = w.choice(ADD_LAST).format(k=carry)
    return f"What is {a} + {b}?", "\n".join([head] + lines + [last]), f"{a + b:0{width + 1}d}"


def _sub(r, level, w=None):
    w = w or r
    n = _size(r, 4, 7, level)
    m = r.randint(4, n)
    a, b = longform._digits(r, n), longform._digits(r, m)
    if a < b:
        a, b = b, a
    if a == b:
        a += 1
    width = len(str(a))
    sa, sb = str(a), str(b).zfill(width)
    head = w.choice(SUB_HEAD).format(a=sa, b=sb)
    lines, _ = _column_lines(w, sa, sb, "-")
    return f"What is {a} - {b}?", "\n".join([head] + lines), f"{a - b:0{width}d}"


def _string(r, level):
    return "".join(str(r.randint(0, 9)) for _ in range(10 * _size(r, 2, 4, level)))


def _reverse(r, level, w=None):
    w = w or r
    s = _string(r, level)
    chunks = [s[max(0, e - 10):e] for e in range(len(s), 0, -10)]
    lines = [w.choice(LABEL).format(i=i + 1) + c + w.choice(ARROW) + c[::-1]
             for i, c in enumerate(chunks)]
    return f"Reverse the string {s}.", "\n".join(lines), s[::-1]


def _copy(r, level, w=None):
    w = w or r
    s = _string(r, level)
    lines = [w.choice(COPY_LABEL).format(i=i // 10 + 1) + s[i:i + 10] + w.choice(END)
             for i in range(0, len(s), 10)]
    return f"write the string {s}.", "\n".join(lines), s


def _swap(r, level, w=None):
    w = w or r
    s = "".join(str(r.randint(0, 9)) for _ in range(10 * _size(r, 1, 2, level)))
    pairs = [s[i:i + 2] for i in range(0, len(s), 2)]
    swapped = [p[::-1] for p in pairs]
    lines = [w.choice(COPY_LABEL).format(i=k // 5 + 1) + " ".join(swapped[k:k + 5])
             + w.choice(END) for k in range(0, len(pairs), 5)]
    return (f"Reverse the string {' '.join(pairs)} in 2s.", "\n".join(lines),
            " ".join(swapped))


# Each generator(r, level, w=None) returns (question, trace, final): r draws the question, w
# (default r) the wording, so the same question can be worded afresh (tools/train/test_cot.py).
GENERATORS = {"add": _add, "sub": _sub, "reverse": _reverse, "copy": _copy, "swap": _swap}

answer_text = longform.answer_text


def make_item(r, family, level=1.0, shots=(2, 6), prompt_range=(PROMPT_MIN, PROMPT_MAX),
              exclude=frozenset()):
    """As longform.make_item, with this suite's generators and answer bounds."""
    return longform.make_item(r, family, level, shots, prompt_range, exclude,
                              generators=GENERATORS, answer_range=(ANSWER_MIN, ANSWER_MAX))


def generate(seed, n_per_family, exclude=frozenset()):
    """n_per_family items per family with distinct questions (round-robin order), questions
    (item["key"]) not in `exclude`."""
    return common.generate_items(seed, n_per_family, FAMILIES, make_item, exclude)


def stream(seed, exclude, weights=None, level=lambda: 1.0, shots=lambda: (2, 6),
           prompt_range=(PROMPT_MIN, PROMPT_MAX)):
    """Endless training stream (common.item_stream over this suite's families)."""
    return common.item_stream(seed, exclude, FAMILIES, make_item, weights, level, shots,
                              prompt_range)


def test_split():
    return generate(TEST_SEED, N_TEST_PER_FAMILY)


def val_split(test):
    return generate(VAL_SEED, N_VAL_PER_FAMILY, exclude=frozenset(x["key"] for x in test))


def load_splits():
    return common.load_splits(DATA_DIR, test_split, val_split, "key")


def _report(test):
    longform.print_lengths(test, FAMILIES)
    for f in FAMILIES:
        x = next(x for x in test if x["family"] == f)
        print("----", f, "\n" + x["answer"])


def main():
    common.main(DATA_DIR, test_split, val_split, "key", _report)


if __name__ == "__main__":
    main()
