#!/usr/bin/python3
"""Structural checks of deploy/grafana/dllm-serve.json (standard library only).

  check_dashboard.py <repo root>

Ids unique, panels inside the 24-column grid without overlaps, every query on the
${datasource} variable, every metric selector filtered by the namespace and pod variables,
only defined or built-in variables used, unique refIds, the panels the dashboard promises
present (with the entropy panel a real heatmap).
"""
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1
                    else pathlib.Path(__file__).parents[2]).resolve()
BUILTIN = {"__rate_interval", "__interval", "__range", "__all"}
REQUIRED = [  # (title fragment, panel type)
    ("Requests by status", "timeseries"), ("Error ratio", "timeseries"),
    ("Request latency", "timeseries"), ("Time to first commit", "timeseries"),
    ("Queue depth and running", "timeseries"), ("Batch size", "timeseries"),
    ("Cache refresh ratio", "timeseries"), ("Step latency: full vs partial", "timeseries"),
    ("Decoded-token entropy", "heatmap"), ("Decision overhead", "timeseries"),
    ("Tokens per second", "timeseries"), ("KV cache usage", "timeseries"),
]
SELECTOR = '{namespace=~"$namespace", pod=~"$pod"'


def main() -> int:
    d = json.loads((ROOT / "deploy" / "grafana" / "dllm-serve.json").read_text())
    errors = []
    variables = {v["name"] for v in d["templating"]["list"]}
    for want in ("datasource", "namespace", "pod"):
        if want not in variables:
            errors.append(f"variable {want} missing")
    ids, cells = set(), {}
    for p in d["panels"]:
        title = p.get("title", "?")
        if p["id"] in ids:
            errors.append(f"duplicate panel id {p['id']}")
        ids.add(p["id"])
        g = p["gridPos"]
        if g["x"] < 0 or g["w"] <= 0 or g["x"] + g["w"] > 24 or g["h"] <= 0:
            errors.append(f"panel {title}: gridPos {g} outside the 24-column grid")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    errors.append(f"panel {title} overlaps {cells[(x, y)]}")
                    break
                cells[(x, y)] = title
            else:
                continue
            break
        if p["type"] == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            errors.append(f"panel {title}: datasource must be ${{datasource}}")
        refs = [t.get("refId") for t in p.get("targets", [])]
        if not refs or len(set(refs)) != len(refs):
            errors.append(f"panel {title}: targets missing or refIds not unique: {refs}")
        for t in p.get("targets", []):
            expr = t.get("expr", "")
            if t.get("datasource", {}).get("uid") != "${datasource}":
                errors.append(f"panel {title} {t.get('refId')}: target datasource must be "
                              "${datasource}")
            for var in re.findall(r"\$\{?(\w+)", expr):
                if var not in variables and var not in BUILTIN:
                    errors.append(f"panel {title}: undefined variable ${var}")
            for m in re.finditer(r"\bdllm_\w+", expr):
                if not expr.startswith(SELECTOR, m.end()):
                    errors.append(f"panel {title}: {m.group(0)} not filtered by namespace and "
                                  "pod variables")
    for fragment, kind in REQUIRED:
        found = [p for p in d["panels"] if fragment in p.get("title", "")]
        if not found:
            errors.append(f"required panel '{fragment}' missing")
        elif found[0]["type"] != kind:
            errors.append(f"panel '{fragment}' is a {found[0]['type']}, want {kind}")
        elif kind == "heatmap" and any(t.get("format") != "heatmap" for t in found[0]["targets"]):
            errors.append(f"heatmap '{fragment}' targets need format=heatmap")
    if errors:
        for e in errors:
            print(f"FAIL {e}")
        return 1
    print(f"ok {len(d['panels'])} panels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
