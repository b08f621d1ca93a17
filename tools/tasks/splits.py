"""Which test split a model the repo trained is scored on.

A trained model's folder records its training suite in training_state.json (args.tasks: "long"
for suite v6, "cot" for suite v7; the tiny models predate the field and use the tiny suite).
The benchmark and finalize scripts ask this module instead of matching folder names, so a
renamed or new model is scored on the split it learned.

Usage: python3 -m tools.tasks.splits MODEL_DIR   (prints the test split's path; exit 2 with the
       reason when the folder names none: a foreign checkpoint needs DLLM_LONG_TASKS instead)
"""
import json
import os
import sys

from tools.tasks import cot, longform, tasks

# args.tasks -> the folder of its splits ({test,val}.jsonl), as each suite's module defines it.
SPLIT_DIRS = {"tiny": tasks.DATA_DIR, "long": longform.DATA_DIR, "cot": cot.DATA_DIR}


def test_split(model_dir):
    """The path of the test split `model_dir` was trained for; ValueError names the problem."""
    state_path = os.path.join(model_dir, "training_state.json")
    try:
        with open(state_path, encoding="utf-8") as f:
            state = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{state_path}: missing; not a model this repo trained, so its task "
                         "split is unknown") from None
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{state_path}: unreadable: {e}") from None
    args = state.get("args") if isinstance(state, dict) else None
    if not isinstance(args, dict):
        raise ValueError(f"{state_path}: no 'args' object")
    suite = args.get("tasks", "tiny")
    if suite not in SPLIT_DIRS:
        raise ValueError(f"{state_path}: unknown args.tasks {suite!r} "
                         f"(expected one of {sorted(SPLIT_DIRS)})")
    return os.path.join(SPLIT_DIRS[suite], "test.jsonl")


def main(argv):
    if len(argv) != 2:
        print("usage: python3 -m tools.tasks.splits MODEL_DIR", file=sys.stderr)
        return 2
    try:
        path = test_split(argv[1])
    except ValueError as e:
        print(f"tools.tasks.splits: {e}", file=sys.stderr)
        return 2
    # Relative to the repo root when it lies under it, as the scripts print paths.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    print(os.path.relpath(path, root) if path.startswith(root + os.sep) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
