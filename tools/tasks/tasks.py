#!/usr/bin/env python3
"""Seeded generator of small, machine-checkable tasks for the tiny diffusion models.

Seven task families, each with short natural-ish prompts and an exact answer string:

  add      two-digit plus one-digit addition  "What is 47 + 8?"                  -> "55"
  sub      two-digit minus one-digit (a >= b) "What is 83 - 7?"                  -> "76"
  max      larger of two numbers              "Which is larger, 17 or 71?"       -> "71"
  sort     sort 3-4 digits ascending          "Sort these numbers: 7 2 9 4"      -> "2 4 7 9"
  reverse  reverse a list of 2-3 words        "Reverse the words: cat sun red"   -> "red sun cat"
  count    count the words in a list          "Count the words: dog cat sun"     -> "3"
  word     templated word problem             "Tom has 5 apples. He buys 3 more. ..." -> "8"

Splits come from distinct seeds; validation and test prompts are removed from training and
test prompts from validation, so no prompt appears in two splits. A prompt fully determines
its answer, so excluding prompts excludes items.

Usage:  python3 -m tools.tasks.tasks --write   (regenerates tools/tasks/data/{test,val}.jsonl)
"""
import os
import random

from tools.tasks import common
from tools.tasks.common import load_jsonl  # noqa: F401 (evaluate.py reads splits with it)

FAMILIES = ["add", "sub", "max", "sort", "reverse", "count", "word"]

WORDS = [
    "cat", "dog", "sun", "red", "blue", "tree", "fish", "bird", "moon", "star", "car", "book",
    "milk", "rain", "hat", "cup", "box", "pen", "key", "door", "lamp", "ship", "frog", "rose",
]
NAMES = ["Tom", "Anna", "Ben", "Lucy", "Sam", "Mia", "Max", "Emma"]
PRONOUN = {"Tom": "He", "Ben": "He", "Sam": "He", "Max": "He",
           "Anna": "She", "Lucy": "She", "Mia": "She", "Emma": "She"}
OBJECTS = ["apples", "books", "coins", "pens", "cards", "eggs", "shells", "stamps"]

TEST_SEED = 1001
VAL_SEED = 2002
TRAIN_SEED = 3003

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _add(r):
    a, b = r.randint(0, 99), r.randint(0, 9)
    if r.random() < 0.5:
        a, b = b, a
    t = r.choice(["What is {a} + {b}?", "Add {a} and {b}."])
    return t.format(a=a, b=b), str(a + b)


def _sub(r):
    a = r.randint(0, 99)
    b = r.randint(0, min(a, 9))
    t = r.choice(["What is {a} - {b}?", "Subtract {b} from {a}."])
    return t.format(a=a, b=b), str(a - b)


def _max(r):
    a, b = r.randint(0, 99), r.randint(0, 99)
    while b == a:
        b = r.randint(0, 99)
    t = r.choice(["Which is larger, {a} or {b}?", "What is the maximum of {a} and {b}?"])
    return t.format(a=a, b=b), str(max(a, b))


def _sort(r):
    xs = [r.randint(0, 9) for _ in range(r.randint(3, 4))]
    t = r.choice(["Sort these numbers: {x}", "Sort in ascending order: {x}"])
    return t.format(x=" ".join(map(str, xs))), " ".join(map(str, sorted(xs)))


def _reverse(r):
    ws = [r.choice(WORDS) for _ in range(r.randint(2, 3))]
    t = r.choice(["Reverse the words: {x}", "Say these words backwards: {x}"])
    return t.format(x=" ".join(ws)), " ".join(reversed(ws))


def _count(r):
    ws = [r.choice(WORDS) for _ in range(r.randint(1, 5))]
    t = r.choice(["Count the words: {x}", "How many words are in this list: {x}"])
    return t.format(x=" ".join(ws)), str(len(ws))


def _word(r):
    name, obj = r.choice(NAMES), r.choice(OBJECTS)
    a, b = r.randint(2, 20), r.randint(1, 9)
    if r.random() < 0.5:
        p = (f"{name} has {a} {obj}. {PRONOUN[name]} buys {b} more. "
             f"How many {obj} does {name} have now?")
        return p, str(a + b)
    b = min(b, a)
    p = (f"{name} has {a} {obj}. {PRONOUN[name]} gives away {b}. "
         f"How many {obj} does {name} have now?")
    return p, str(a - b)


GENERATORS = {"add": _add, "sub": _sub, "max": _max, "sort": _sort, "reverse": _reverse,
              "count": _count, "word": _word}


def _item(r, family, exclude=frozenset()):
    """One item of `family`, or None when its prompt is in `exclude`."""
    prompt, answer = GENERATORS[family](r)
    return None if prompt in exclude else {"prompt": prompt, "answer": answer, "family": family}


def generate(seed, n_per_family, exclude=frozenset()):
    """n_per_family distinct items per family (round-robin order), prompts not in `exclude`."""
    return common.generate_items(seed, n_per_family, FAMILIES, _item, exclude, key="prompt",
                                 max_tries=lambda n: 1000 * n + 10000)


def stream(seed, exclude, weights=None):
    """Endless training stream; prompts in `exclude` are skipped. Families are drawn uniformly,
    or in proportion to `weights` ({family: weight}, missing families weigh 1), which lets a
    trainer spend more of its examples on the families that learn slowest (arithmetic)."""
    r = random.Random(seed)
    if weights is None:
        pick = lambda: FAMILIES[r.randrange(len(FAMILIES))]  # noqa: E731 (seeded order kept)
    else:
        unknown = set(weights) - set(FAMILIES)
        if unknown:
            raise ValueError(f"unknown task families in weights: {sorted(unknown)}")
        w = [float(weights.get(f, 1.0)) for f in FAMILIES]
        if min(w) < 0 or sum(w) <= 0:
            raise ValueError(f"family weights must be >= 0 with a positive sum: {weights}")
        pick = lambda: r.choices(FAMILIES, weights=w)[0]  # noqa: E731
    while True:
        f = pick()
        prompt, answer = GENERATORS[f](r)
        if prompt in exclude:
            continue
        yield {"prompt": prompt, "answer": answer, "family": f}


def check(output, answer):
    """Exact match after stripping surrounding whitespace."""
    return output.strip() == answer.strip()


def test_split():
    return generate(TEST_SEED, 150)


def val_split(test):
    return generate(VAL_SEED, 30, exclude=frozenset(x["prompt"] for x in test))


def load_splits():
    """(test, val, exclude-set for training), from the committed files when present."""
    return common.load_splits(DATA_DIR, test_split, val_split, "prompt")


def _report(test):
    for x in test[:7]:
        print(x)


def main():
    common.main(DATA_DIR, test_split, val_split, "prompt", _report)


if __name__ == "__main__":
    main()
