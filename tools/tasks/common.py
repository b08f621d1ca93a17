"""What the task suites (tasks.py, longform.py, cot.py) share: their split files, and the long
suites' item generation around their own make_item.

Each suite keeps its test and validation splits as DATA_DIR/{test,val}.jsonl, generated from
its own seeds by its test_split() and val_split(test), and names an item by one field (the
tiny suite's "prompt", the long suites' "key": the question), which training excludes. The
suites differ in those parameters only, so they pass them here.
"""
import argparse
import json
import os
import random


def generate_items(seed, n_per_family, families, make_item, exclude=frozenset(), key="key",
                   max_tries=lambda n: 100 * n + 1000):
    """n_per_family items per family with distinct questions (round-robin order), questions
    (item[key]) not in `exclude`. make_item(r, family, exclude=...) returns an item, or None
    for one to skip; a family gets max_tries(n_per_family) draws."""
    r = random.Random(seed)
    seen = set(exclude)
    per = {f: [] for f in families}
    for f in families:
        tries = 0
        while len(per[f]) < n_per_family:
            tries += 1
            if tries > max_tries(n_per_family):
                raise RuntimeError(f"family {f}: cannot find {n_per_family} items")
            it = make_item(r, f, exclude=seen)
            if it is None:
                continue
            seen.add(it[key])
            per[f].append(it)
    return [per[f][i] for i in range(n_per_family) for f in families]


def item_stream(seed, exclude, families, make_item, weights, level, shots, prompt_range):
    """Endless training stream. level() and shots() are called per item, which lets a trainer
    grow sizes and few-shot counts as it goes (curriculum); weights ({family: w}, missing
    families weigh 1) set the family mix. Questions in `exclude` are skipped.
    make_item(r, family, level, shots, prompt_range, exclude) returns an item or None."""
    r = random.Random(seed)
    w = [float((weights or {}).get(f, 1.0)) for f in families]
    unknown = set(weights or {}) - set(families)
    if unknown:
        raise ValueError(f"unknown task families in weights: {sorted(unknown)}")
    if min(w) < 0 or sum(w) <= 0:
        raise ValueError(f"family weights must be >= 0 with a positive sum: {weights}")
    misses = {f: 0 for f in families}
    while True:
        f = r.choices(families, weights=w)[0]
        sh = shots()
        it = make_item(r, f, level(), sh, prompt_range, exclude)
        if it is not None:
            misses[f] = 0
            yield it
            continue
        # A family whose items cannot reach the prompt range with at most sh[1] shots (count
        # with no shots) would otherwise make this loop spin forever.
        misses[f] += 1
        if misses[f] >= 1000:
            raise ValueError(f"family {f}: no item fits prompts of {prompt_range} tokens "
                             f"with {sh[0]}-{sh[1]} shots (1000 draws in a row)")


def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_splits(data_dir, test_split, val_split, key):
    """(test, val, exclude-set of the items' `key` for training), from the committed files
    when both are present, else generated."""
    tp, vp = os.path.join(data_dir, "test.jsonl"), os.path.join(data_dir, "val.jsonl")
    if os.path.exists(tp) and os.path.exists(vp):
        test, val = load_jsonl(tp), load_jsonl(vp)
    else:
        test = test_split()
        val = val_split(test)
    return test, val, frozenset(x[key] for x in test + val)


def main(data_dir, test_split, val_split, key, report):
    """A suite's command line: generates its splits and, with --write, writes them to
    data_dir; then prints their sizes and report(test), the suite's summary of the test
    split."""
    folder = os.path.basename(data_dir)
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true",
                    help=f"write {folder}/test.jsonl and {folder}/val.jsonl")
    args = ap.parse_args()
    test = test_split()
    val = val_split(test)
    assert not {x[key] for x in test} & {x[key] for x in val}
    if args.write:
        os.makedirs(data_dir, exist_ok=True)
        for name, items in (("test", test), ("val", val)):
            with open(os.path.join(data_dir, name + ".jsonl"), "w", encoding="utf-8") as f:
                for x in items:
                    f.write(json.dumps(x, ensure_ascii=False) + "\n")
    print(f"test {len(test)} val {len(val)}")
    report(test)
