"""Figures in README.md and docs/ against the committed rows files they come from.

Each check fails when a number in the prose or a table disagrees with its source:
  - docs/results/tune-<model>.md is what `bench/tune.py report` makes of the committed rows;
  - every docs/results/<name>.md beside a <name>.jsonl is what bench/bench_table.py makes of
    those rows in one of its layouts (the paper comparisons: `--layout paper`, a blank line,
    then the default layout);
  - the tuned comparison's tables in README.md and docs/paper-comparison.md: every number of
    every row equals, at the printed precision, the test row of
    docs/results/tune-<model>-test.jsonl with that method and setting (vanilla: the stored
    baseline); the vanilla accuracies quoted beside them equal the stored baselines;
  - the README's long-answer table against docs/results/bench-long-<model>.jsonl;
  - docs/serving.md's tables are bench/serve_report.py's output for the committed rows.

  /usr/bin/python3 -m tests.docs.test_doc_figures     (from the repository root)
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from bench import serve_report, tune
from tests import unittest_exit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "docs", "results")
BENCH_TABLE = os.path.join(ROOT, "bench", "bench_table.py")
TUNED_MODELS = ("llada-cot", "dream-cot")

# Method labels in the docs' tables -> bench/tune.py's method names.
METHODS = {
    "Elastic-Cache": "elastic",
    "d2Cache": "d2cache",
    "EntropyCache": "entropy",
    "EntropyCache + `recent_min_entropy` 0.3": "entropy-min",
    "EntropyCache variant": "entropy-min",
    "Fast-dLLM dual cache": "dual",
    "dual (Fast-dLLM)": "dual",
    "prefix (Fast-dLLM)": "prefix",
}
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def rows(path):
    return [json.loads(line) for line in read(path).splitlines() if line.strip()]


def printed_as(value, text):
    """True when `value` printed at `text`'s precision is `text` (a number as the docs show
    it: '0.926', '+4.2', '25.8')."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(round(value, decimals) - float(text)) < 0.5 * 10 ** -decimals + 1e-9


def numbers(text):
    return sorted(float(n) for n in NUMBER.findall(text))


def setting_numbers(row):
    """The numbers of a row's decoding and policy ("window:w=16,threshold=0.9",
    "d2cache:rollout_p=0.05,current_k=16"), not of their names."""
    return numbers(" ".join(part.split(":", 1)[-1] for part in
                            (row["tune"]["decoding"], row["tune"]["policy"])))


def tables_in(path, start_marker, header_prefix):
    """The tables after `start_marker` in `path` whose header starts with `header_prefix`:
    [(header cells, [row cells...])], in document order, up to the next "## " heading."""
    text = read(os.path.join(ROOT, path))
    start = text.index(start_marker)
    end = text.find("\n## ", start)
    section = text[start:end if end >= 0 else len(text)]
    tables, current = [], None
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith(header_prefix):
            current = (cells, [])
            tables.append(current)
        elif line.startswith("|---"):
            continue
        elif line.startswith("| ") and current is not None:
            current[1].append(cells)
        else:
            current = None
    return tables


def row_values(r):
    """What a tune row prints as, by column kind."""
    vs = r.get("vs_baseline", {})
    return {
        "accuracy": r["accuracy"],
        "diff": 100 * vs["accuracy_diff"] if vs else None,
        "se": 100 * vs["accuracy_diff_se"] if vs else None,
        "speed-up": r.get("speedup_vs_baseline_cpu", 1.0),
        "rows/token": r["rows_per_token"],
        "GMACs/token": r["macs_per_token"] * 1e-9,
        "full-step ratio": r["full_step_ratio"],
        "decision overhead": 100 * r["decision_overhead_frac"],
    }


def printed_cells(header, cells):
    """{column kind: printed number} of one row of a tune table ("-" cells left out)."""
    out = {}
    for name, cell in zip(header, cells):
        found = NUMBER.findall(cell.replace("**", ""))
        if not found:
            continue
        if name.startswith("accuracy (paired"):
            out["accuracy"], out["diff"], out["se"] = found[:3]
        elif name == "accuracy":
            out["accuracy"] = found[0]
        elif name == "vs vanilla":
            out["diff"], out["se"] = found[:2]
        elif name.startswith("speed-up"):
            out["speed-up"] = found[0]
        elif name in ("rows/token", "GMACs/token", "full-step ratio", "decision overhead"):
            out[name] = found[0]
    return out


class DocFiguresTest(unittest.TestCase):
    def test_tune_reports_are_made_from_their_rows(self):
        for model in TUNED_MODELS:
            with self.subTest(model=model):
                report = "\n".join(tune.report(RESULTS, model)) + "\n"
                path = tune.paths(RESULTS, model, "test")["report"]
                self.assertEqual(read(path), report, f"{path}: rerun bench/tune.py report {model}")

    def test_results_tables_are_made_from_their_rows(self):
        checked = 0
        for md in sorted(glob.glob(os.path.join(RESULTS, "*.md"))):
            source = md[:-3] + ".jsonl"
            if os.path.basename(md).startswith("tune-") or not os.path.exists(source):
                continue
            with self.subTest(table=os.path.basename(md)):
                made = {}
                for layout in ("default", "paper", "shadow"):
                    out = subprocess.run([sys.executable, BENCH_TABLE, "--layout", layout, source],
                                         capture_output=True, text=True, check=True)
                    made[layout] = out.stdout
                # The paper comparisons show the paper's layout, then every column.
                made["paper, then default"] = made["paper"] + "\n" + made["default"]
                self.assertIn(read(md), made.values(),
                              f"{md} is not bench/bench_table.py's table of {source} in any "
                              f"layout ({', '.join(made)})")
                checked += 1
        self.assertGreater(checked, 10)

    def check_tune_tables(self, path, start_marker, header_prefix):
        tables = tables_in(path, start_marker, header_prefix)
        self.assertEqual(len(tables), len(TUNED_MODELS), (path, "one table per tuned model"))
        for model, (header, table) in zip(TUNED_MODELS, tables):
            test_rows = rows(tune.paths(RESULTS, model, "test")["rows"])
            vanilla = rows(tune.paths(RESULTS, model, "test")["vanilla"])[0]["row"]
            self.assertGreaterEqual(len(table), 5, (path, model))
            for cells in table:
                with self.subTest(path=path, model=model, row=cells[0] + ", " + cells[1]):
                    if cells[0] == "vanilla":
                        r = vanilla
                    else:
                        label = re.sub(r"\s*\((ours|no test point within 1 point)\)$", "",
                                       cells[0])
                        self.assertIn(label, METHODS, "a method the test does not know")
                        method = METHODS[label]
                        setting = cells[1]
                        if "recent_min_entropy" in label and "recent_min_entropy" not in setting:
                            setting += " " + label
                        candidates = [r for r in test_rows if r["tune"]["method"] == method and
                                      setting_numbers(r) == numbers(setting)]
                        self.assertEqual(len(candidates), 1,
                                         (cells, "no single test row has this method and setting"))
                        r = candidates[0]
                    values = row_values(r)
                    printed = printed_cells(header, cells)
                    self.assertIn("accuracy", printed)
                    for kind, text in printed.items():
                        self.assertIsNotNone(values[kind], (kind, cells))
                        self.assertTrue(printed_as(values[kind], text),
                                        f"{kind}: the table says {text}, the row {values[kind]}")

    def test_readme_tune_tables_match_the_test_rows(self):
        self.check_tune_tables("README.md", "**Which cache on a model that hesitates**",
                               "| method | setting |")

    def test_paper_comparison_tune_tables_match_the_test_rows(self):
        self.check_tune_tables(os.path.join("docs", "paper-comparison.md"),
                               "**llada-cot, 500 test items**",
                               "| method | setting (val front point) |")

    def test_readme_long_answer_table_matches_its_rows(self):
        """The README's long-answer table: each cell equals, at its printed precision, a
        row of docs/results/bench-long-<model>.jsonl with the setting the label names."""
        (header, table), = tables_in("README.md", "**Long answers, the easy regime**",
                                     "| setting | llada-long accuracy |")
        models = ("llada-long", "dream-long")
        source = {m: rows(os.path.join(RESULTS, "bench-long-%s.jsonl" % m)) for m in models}
        policies = (("no cache", "none"), ("dual cache", "dual"), ("EntropyCache", "entropy"),
                    ("interval", "interval"))
        self.assertEqual(len(table), 5)
        for cells in table:
            label = cells[0]
            with self.subTest(row=label):
                for i, model in enumerate(models):
                    accuracy, tok_s, speedup = (c.replace(",", "").replace("*", "")
                                                for c in cells[1 + 3 * i:4 + 3 * i])
                    if label.startswith("vanilla"):
                        candidates = [r for r in source[model] if r.get("baseline") == "vanilla"]
                    else:
                        policy = next(p for word, p in policies if word in label)
                        want = numbers(label)
                        candidates = [r for r in source[model] if "accuracy" in r and
                                      r["policy"] == policy and r.get("baseline") is None and
                                      r["decoding"]["schedule"] == "block" and
                                      numbers(json.dumps(
                                          [r["decoding"]["block_length"],
                                           r["decoding"].get("threshold", 0)] +
                                          [round(v, 6) for v in r["params"].values()])) == want]
                    self.assertTrue(any(
                        printed_as(r["accuracy"], accuracy) and
                        printed_as(r["tokens_per_s"], tok_s) and
                        printed_as(r["speedup_vs_baseline"], speedup) for r in candidates),
                        (model, cells, [(r["accuracy"], r["tokens_per_s"],
                                         r["speedup_vs_baseline"]) for r in candidates]))

    def test_serving_tables_are_made_from_their_rows(self):
        """Every serve_report block in docs/ holds bench/serve_report.py's tables of its rows
        file (bench/serve_report.py --update DOC rewrites them)."""
        blocks = 0
        for doc in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
            text = read(doc)
            blocks += len(serve_report.BLOCK.findall(text))
            self.assertEqual(text, serve_report.filled(text, ROOT),
                             f"{doc}: run bench/serve_report.py --update {doc}")
        self.assertGreater(blocks, 0)

    def test_serving_plots_are_drawn_from_their_rows(self):
        """bench/serve_report.py --plot draws each committed serving rows file: three panels
        (throughput and E2EL against concurrency, E2EL against the offered rate) when the file
        has open-loop rows."""
        if shutil.which("gnuplot") is None:
            self.skipTest("gnuplot is not installed (scripts/deps installs it)")
        rows = sorted(glob.glob(os.path.join(ROOT, "docs", "results", "serving-*.jsonl")))
        self.assertTrue(rows)
        with tempfile.TemporaryDirectory() as tmp:
            for path in rows:
                png = os.path.join(tmp, "plot.png")
                serve_report.plot(png, path)
                with open(png, "rb") as f:
                    head = f.read(24)
                self.assertEqual(head[:8], b"\x89PNG\r\n\x1a\n", path)
                width = int.from_bytes(head[16:20], "big")
                self.assertEqual(width, 1800, f"{path}: three panels, 600 pixels each")

    def test_infill_table_matches_its_rows(self):
        (header, lines), = tables_in("models/README.md", "## Infilling", "| model | vanilla")
        self.assertEqual(len(lines), len(TUNED_MODELS))
        for cells in lines:
            model = cells[0]
            with self.subTest(model=model):
                by = {r.get("infill", "vanilla"): r["accuracy"]
                      for r in rows(os.path.join(RESULTS, f"infill-{model}-test.jsonl"))}
                self.assertEqual(next(r for r in rows(os.path.join(
                    RESULTS, f"infill-{model}-test.jsonl")))["tasks"], 500)
                want = [by["vanilla"], by["plain"], by["head"], by["middle"],
                        by["middle"] / by["vanilla"]]
                for text, value in zip(cells[1:], want):
                    self.assertTrue(printed_as(value, text), (model, text, value))

    def test_threshold_cost_table_matches_the_tune_rows(self):
        (header, lines), = tables_in("docs/serving-simulation.md",
                                     "### Faster settings under load", "| model | cache |")
        self.assertEqual(len(lines), 10)
        for model, cache, threshold, accuracy, steps, ratio in lines:
            with self.subTest(model=model, cache=cache, threshold=threshold):
                policy = "dual" if cache == "dual" else "entropy:tau=1,k=32"
                val = rows(tune.paths(RESULTS, model, "val")["rows"])

                def row(t):
                    (r,) = [r for r in val if r["tune"]["policy"] == policy and
                            r["tune"]["decoding"] == f"block:block_length=32,threshold={t}"]
                    return r
                r, base = row(threshold), row("0.9")
                self.assertTrue(printed_as(r["accuracy"], accuracy), (accuracy, r["accuracy"]))
                self.assertTrue(printed_as(r["steps_per_token"], steps), steps)
                self.assertTrue(printed_as(r["steps_per_token"] / base["steps_per_token"], ratio),
                                ratio)

    def test_window_cache_table_matches_its_rows(self):
        (header, lines), = tables_in("docs/paper-comparison.md", "**At τ 2 the entropy trigger",
                                     "| model | policy |")
        self.assertEqual(len(lines), 10)
        for model, policy, tau, k, accuracy, diff, rows_per_token, full in lines:
            with self.subTest(model=model, policy=policy, tau=tau, k=k):
                want = {"k": int(k), "tau": "inf" if tau == "inf" else float(tau),
                        "max_end": 0} if policy == "entropy" else {"gamma": 0.8}
                (r,) = [r for r in rows(os.path.join(RESULTS, f"window-cache-{model}-val.jsonl"))
                        if r["decoding"].get("window") == 16 and r.get("params") == want]
                self.assertTrue(printed_as(r["accuracy"], accuracy), accuracy)
                self.assertTrue(printed_as(100 * r["vs_baseline"]["accuracy_diff"], diff), diff)
                self.assertTrue(printed_as(r["rows_per_token"], rows_per_token), rows_per_token)
                self.assertTrue(printed_as(r["full_step_ratio"], full), full)

    def test_readme_vanilla_accuracies_are_the_stored_baselines(self):
        readme = read(os.path.join(ROOT, "README.md"))
        quoted = re.search(r"paired against vanilla \(llada-cot ([\d.]+), dream-cot ([\d.]+)\)",
                           readme)
        self.assertIsNotNone(quoted, "the README no longer quotes the vanilla baselines")
        for model, text in zip(TUNED_MODELS, quoted.groups()):
            stored = rows(tune.paths(RESULTS, model, "test")["vanilla"])[0]["row"]
            self.assertTrue(printed_as(stored["accuracy"], text), (model, text, stored["accuracy"]))
            percent = f"{100 * stored['accuracy']:.1f}% of the 500"
            self.assertIn(f"{model} {percent}" if model == "dream-cot" else percent, readme, model)


if __name__ == "__main__":
    unittest_exit.main()
