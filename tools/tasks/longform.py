#!/usr/bin/env python3
"""Seeded long-form task suite: few-shot prompts, step-by-step answers, a scored final line.

This is the regime EntropyCache is built for (GSM8K-style few-shot chain of thought): prompts
of 150-400 tokens (2-6 solved examples of the same family, then the question) and answers of
64-200 tokens (a step-by-step trace, then a final line `#### <answer>` that is scored exactly).
Token counts are those of the long models' own tokenizers (tools/train/train.py --longform;
digits are single tokens in both families' pre-tokenizer regexes, which every family here
relies on: a digit string is read and written one token per digit).

Five families (one item = question + trace + final answer):

  add      column addition of two 4-8 digit numbers, one line per column with the carry
  sub      column subtraction (a > b) of 4-8 digit numbers, one line per column with the borrow
  reverse  reverse a 30, 40 or 50 digit string in chunks of 10 taken from its end
  copy     copy a 30, 40 or 50 digit string in chunks of 10 taken from its start
  swap     swap each pair of neighbouring digits of a 30, 40 or 50 digit string written in
           pairs, in chunks of 5 pairs taken from its start

Every trace line is meant to be found from local content, not by counting far: a masked
diffusion model decodes in confidence order and has only relative positions (RoPE), and the
first version of this suite taught us what it cannot learn cheaply (docs/longform-history.md,
"Suite v2"). So: the reversal's chunks run from the string's end and the final line
concatenates the trace's right-hand sides in order; and sorting (a set retrieval over the whole
list) gave way to multiplication (itself dropped in v5).

Every answer's layout is fixed by its question (suite v3): where each token of the answer
falls depends only on the question's shape (how many digits, words or keys), never on a
computed value. Column sums are always two digits (`=07`), subtraction always
states the borrow it adds (`+00` or `+10`), the final carry line is always written, and
numeric final answers are zero-padded to their widest value. A model that
commits tokens in confidence order writes a line's frame (`, write`, `, carry`, the newline)
before its digits; in v2 a frame one token off (a sum of 10 where 9 was right) forced the
digits to fit it, and most add/mul errors were such frames (docs/longform-history.md,
"Suite v3").

Suite v4 changed what lookup and count copied; suite v5 drops them and multiplication for
copy and swap (docs/longform-history.md, "Suite v5"). Lookup and count need content retrieval
(find the table entry whose key equals the asked key; compare each word with the target), and
neither long model learned it in ~10^4 items of each: with everything but the answer
visible, lookup values were at the digit prior and the attention on the right table entry
equalled that on any other, and count's word-vs-target comparison was right 52-88% of the
time. Multiplication's column digit ((d * m + carry) mod 10, a function of three digits) was
right on 82-89% of the lines with the line's operands written, so a 5-9 line item was right
about half the time. Every v5 family is found by position relative to the question or the
previous trace line, and its per-line work is a copy, a fixed permutation or a sum of three
small digits.

Sizes have a `level` in [0, 1]: level 1 is the full range above (test and validation splits);
the training stream can cap it (curriculum: short to long) and can use fewer few-shot
examples than the splits' 2-6 (shorter, cheaper sequences early in training).

Splits come from distinct seeds; validation and test questions are removed from training and
test questions from validation (a question determines its answer, the few-shot examples do
not change it).

Usage:  python3 -m tools.tasks.longform --write   (regenerates tools/tasks/data_long/*.jsonl)
"""
import os
import re

from tools.tasks import common
from tools.tasks.common import load_jsonl  # noqa: F401 (the long tools read splits with it)

FAMILIES = ["add", "sub", "reverse", "copy", "swap"]

TEST_SEED = 11001
VAL_SEED = 12002
TRAIN_SEED = 13003
N_TEST_PER_FAMILY = 100  # 500 test items
N_VAL_PER_FAMILY = 20  # 100 validation items

PROMPT_MIN, PROMPT_MAX = 150, 400  # prompt tokens (approx_tokens; checked with the tokenizers)
ANSWER_MIN = 64  # answer tokens (approx_tokens)
ANSWER_MAX = 190  # answer tokens, so that answer + end-of-turn fits G = 192

COLORS = ["red", "blue", "green", "black", "white", "pink"]

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data_long")

_TOKEN_RX = re.compile(r" ?[A-Za-z]+|\d| ?[^\sA-Za-z\d]+\n*|\s*\n|\s+")


def approx_tokens(text):
    """A tokenizer-free estimate of the BPE token count: one token per digit, word, run of
    punctuation, newline and space run (what the long tokenizers' regexes produce when every
    word of the suite is one merged token). Used to size prompts; the real counts are
    measured with the tokenizers (tools/train/longform_stats.py)."""
    return len(_TOKEN_RX.findall(text))


def _size(r, lo, hi, level):
    """Integer in [lo, lo + level * (hi - lo)]."""
    return r.randint(lo, lo + int(round(level * (hi - lo))))


def _digits(r, n):
    return r.randint(10 ** (n - 1), 10 ** n - 1)


# Each generator returns (question, trace, final). The item's answer is trace + "#### final".


def _add(r, level):
    n = _size(r, 4, 8, level)
    m = r.randint(4, n)
    a, b = _digits(r, n), _digits(r, m)
    if r.random() < 0.5:
        a, b = b, a
    width = max(len(str(a)), len(str(b)))
    sa, sb = str(a).zfill(width), str(b).zfill(width)
    lines = [f"{sa}+{sb}"]
    carry = 0
    for i in range(width):
        x, y = int(sa[-1 - i]), int(sb[-1 - i])
        s = x + y + carry
        lines.append(f"{x}+{y}+{carry}={s:02d}, write {s % 10}, carry {s // 10}")
        carry = s // 10
    lines.append(f"write {carry}")
    return f"What is {a} + {b}?", "\n".join(lines), f"{a + b:0{width + 1}d}"


def _sub(r, level):
    n = _size(r, 4, 8, level)
    m = r.randint(4, n)
    a, b = _digits(r, n), _digits(r, m)
    if a < b:
        a, b = b, a
    if a == b:
        a += 1
    width = len(str(a))
    sa, sb = str(a), str(b).zfill(width)
    lines = [f"{sa}-{sb}"]
    borrow = 0
    for i in range(width):
        x, y = int(sa[-1 - i]), int(sb[-1 - i])
        nb = int(x - y - borrow < 0)  # borrow from the next column: add 10 here
        d = x - y - borrow + 10 * nb
        lines.append(f"{x}-{y}-{borrow}+{10 * nb:02d}={d}, write {d}, borrow {nb}")
        borrow = nb
    return f"What is {a} - {b}?", "\n".join(lines), f"{a - b:0{width}d}"


def _digit_string(r, level):
    """The string of reverse, copy and swap: 30, 40 or 50 random digits. Whole chunks of 10
    only: a remainder chunk's length is the string's length mod 10, which nothing local
    shows, and v3 models wrote it at the wrong length."""
    return "".join(str(r.randint(0, 9)) for _ in range(10 * _size(r, 3, 5, level)))


def _reverse(r, level):
    s = _digit_string(r, level)
    n = len(s)
    # Chunks of 10 from the end: line i copies the 10 digits before line i-1's, so every
    # line is found relative to the string's end or the previous chunk, and the final line
    # is the right-hand sides in trace order.
    chunks = [s[max(0, e - 10):e] for e in range(n, 0, -10)]
    lines = [f"{i + 1}: {c} -> {c[::-1]}" for i, c in enumerate(chunks)]
    return f"Reverse the string {s}.", "\n".join(lines), s[::-1]


def _copy(r, level):
    # The mirror of reverse: chunks of 10 from the string's start, each found right after the
    # previous line's chunk, and the final line is the lines' chunks in order.
    s = _digit_string(r, level)
    lines = [f"{i // 10 + 1}: {s[i:i + 10]}" for i in range(0, len(s), 10)]
    # " write" is one token of the long tokenizers (the add/sub traces use it); "Copy"
    # would be four, and approx_tokens, which sizes the prompts, counts one per word.
    return f"write the string {s}.", "\n".join(lines), s


def _swap(r, level):
    # Swap each pair of neighbouring digits. The string is written in pairs (`74 17 48`), in
    # the question, the trace and the final line: a digit's place in its pair is then local
    # content (after a space or after a digit), and every output digit is one fixed offset
    # from its source. Written unspaced (suite v5), a digit had to know the parity of its
    # place in the chunk, which relative positions do not give, and neither long model
    # learned it in ~1,500 drill steps (docs/longform-history.md, "Suite v6"). Lines hold
    # chunks of 5 pairs from the start, each line the swapped pairs only (as copy's lines are the
    # chunks only), and the final line is the lines' pairs in order.
    s = _digit_string(r, level)
    pairs = [s[i:i + 2] for i in range(0, len(s), 2)]
    swapped = [p[::-1] for p in pairs]
    lines = [f"{k // 5 + 1}: {' '.join(swapped[k:k + 5])}" for k in range(0, len(pairs), 5)]
    # Words the long tokenizers hold as single tokens (approx_tokens counts one per word):
    # "in 2s" is ` in`, ` `, `2`, `s`.
    return (f"Reverse the string {' '.join(pairs)} in 2s.", "\n".join(lines),
            " ".join(swapped))


GENERATORS = {"add": _add, "sub": _sub, "reverse": _reverse, "copy": _copy, "swap": _swap}


def answer_text(trace, final):
    return f"{trace}\n#### {final}"


def _shot_text(q, trace, final):
    return f"Q: {q}\nA: {answer_text(trace, final)}"


def make_item(r, family, level=1.0, shots=(2, 6), prompt_range=(PROMPT_MIN, PROMPT_MAX),
              exclude=frozenset(), generators=None, answer_range=(ANSWER_MIN, ANSWER_MAX)):
    """One item, or None when the drawn question is excluded. shots = (min, max) number of
    solved examples; prompt_range bounds approx_tokens(prompt) (None: unbounded).
    generators (default: this suite's) and answer_range (approx_tokens of the answer) let the
    cot suite draw its items the same way."""
    gen = (generators or GENERATORS)[family]
    q, trace, final = gen(r, level)
    if not answer_range[0] <= approx_tokens(answer_text(trace, final)) <= answer_range[1]:
        return None
    key = q
    if key in exclude:
        return None
    lo, hi = prompt_range if prompt_range else (0, 10 ** 9)
    want = r.randint(shots[0], shots[1])
    tail = f"Q: {q}"
    cost = approx_tokens(tail) + 2
    examples, tries = [], 0
    while len(examples) < shots[1] and tries < 40:
        if len(examples) >= want and cost >= lo:
            break
        tries += 1
        sq, st, sf = gen(r, level)
        if sq == q:
            continue
        text = _shot_text(sq, st, sf)
        c = approx_tokens(text) + 2
        if cost + c > hi:
            continue
        examples.append(text)
        cost += c
    if len(examples) < shots[0] or cost < lo:
        return None
    prompt = "\n\n".join(examples + [tail])
    return {"prompt": prompt, "answer": answer_text(trace, final), "final": final,
            "family": family, "key": key}


def generate(seed, n_per_family, exclude=frozenset()):
    """n_per_family items per family with distinct questions (round-robin order), questions
    (item["key"]) not in `exclude`."""
    return common.generate_items(seed, n_per_family, FAMILIES, make_item, exclude)


def stream(seed, exclude, weights=None, level=lambda: 1.0, shots=lambda: (2, 6),
           prompt_range=(PROMPT_MIN, PROMPT_MAX)):
    """Endless training stream (common.item_stream over this suite's families)."""
    return common.item_stream(seed, exclude, FAMILIES, make_item, weights, level, shots,
                              prompt_range)


_FINAL_RX = re.compile(r"^#### (.*)$", re.M)


def extract_final(output):
    """The text after the last `#### ` line start, stripped; None when there is none."""
    m = _FINAL_RX.findall(output)
    return m[-1].strip() if m else None


def check(output, final):
    """Exact match of the final-answer line."""
    return extract_final(output) == final


def test_split():
    return generate(TEST_SEED, N_TEST_PER_FAMILY)


def val_split(test):
    return generate(VAL_SEED, N_VAL_PER_FAMILY, exclude=frozenset(x["key"] for x in test))


def load_splits():
    """(test, val, exclude-set of questions for training), from the committed files when
    present."""
    return common.load_splits(DATA_DIR, test_split, val_split, "key")


def print_lengths(test, families=FAMILIES):
    """Per family: the range and mean of approx_tokens of the prompts and the answers."""
    for f in families:
        xs = [x for x in test if x["family"] == f]
        pl = [approx_tokens(x["prompt"]) for x in xs]
        al = [approx_tokens(x["answer"]) for x in xs]
        print(f"{f:8s} prompt~{min(pl)}..{max(pl)} mean {sum(pl) / len(pl):.0f}  "
              f"answer~{min(al)}..{max(al)} mean {sum(al) / len(al):.0f}")


def _report(test):
    print_lengths(test)
    print(test[0]["prompt"] + "\n----\n" + test[0]["answer"])


def main():
    common.main(DATA_DIR, test_split, val_split, "key", _report)


if __name__ == "__main__":
    main()
