"""What the task suites (tasks.py, longform.py, cot.py) share: their split files.

Each suite keeps its test and validation splits as DATA_DIR/{test,val}.jsonl, generated from
its own seeds by its test_split() and val_split(test), and names an item by one field (the
tiny suite's "prompt", the long suites' "key": the question), which training excludes. The
suites differ in those parameters only, so they pass them here.
"""
import argparse
import json
import os


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
