"""Infill variants of a task split: each item's reference answer partly fixed on the canvas.

A variant keeps the item's prompt and scoring (its "final" line) and adds a "canvas" that
dllm-bench decodes from (bench/dllm_bench.cc): {"fixed": TEXT} holds TEXT's tokens fixed,
{"masks_for": TEXT} leaves as many masks as TEXT has tokens, and masks fill the rest of the
answer length. The answer is "line 0\nline 1\n...\n#### final"; its trace lines are the lines
before the final one.

  head    the first trace line fixed, the rest generated. The fixed text starts the answer, so
          this is a prefix the model need not write, not a gap.
  middle  the middle trace line (index len(trace) // 2, never the first) fixed at its place in
          the reference answer, with masks on both sides: the model must fill the lines before
          it in exactly the reference's token count (it may word them differently) and
          continue after it to a final line consistent with it. This is the real gap.

An item whose trace has fewer than two lines has no middle variant and is written with the
head variant's canvas instead; `--stats` counts them.

Usage: python3 -m tools.tasks.infill VARIANT SPLIT.jsonl > OUT.jsonl
"""
import argparse
import json
import sys

VARIANTS = ("head", "middle")


def trace_lines(answer):
    """The answer's lines before its "#### " line."""
    lines = answer.split("\n")
    if not lines or not lines[-1].startswith("#### "):
        raise ValueError(f"answer does not end with a '#### ' line: {answer[-40:]!r}")
    return lines[:-1]


def canvas(variant, answer):
    """The canvas pieces of `variant` for a reference answer; (pieces, is_fallback)."""
    trace = trace_lines(answer)
    if not trace:
        raise ValueError("answer has no trace line")
    if variant == "middle" and len(trace) >= 2:
        m = len(trace) // 2
        return [{"masks_for": "\n".join(trace[:m]) + "\n"}, {"fixed": trace[m] + "\n"}], False
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
    return [{"fixed": trace[0] + "\n"}], variant != "head"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("variant", choices=VARIANTS)
    ap.add_argument("split", help="a task file with prompt, answer and final")
    ap.add_argument("--stats", action="store_true", help="print counts to stderr")
    args = ap.parse_args()
    n = fallback = 0
    with open(args.split) as f:
        for line in f:
            if not line.strip():
                continue
            item = json.loads(line)
            item["canvas"], fell_back = canvas(args.variant, item["answer"])
            fallback += fell_back
            n += 1
            print(json.dumps(item))
    if args.stats:
        print(f"infill {args.variant}: {n} items, {fallback} with the head canvas instead",
              file=sys.stderr)


if __name__ == "__main__":
    main()
