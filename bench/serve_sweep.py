#!/usr/bin/env python3
"""The serving measurements of docs/serving.md: for each model and max batch, a dllm-server is
started on loopback and bench/serve.py sweeps it, one cache setting at a time.

  - closed loop: concurrency 1, 2, 4, 8, 16 (vanilla: 1 and 8 only: ~10 s per request);
  - open loop: Poisson arrivals at fractions of the setting's saturation throughput (the best
    closed-loop request rate), for the settings in OPEN_LOOP;
  - mixed: half the requests on EntropyCache, half on the dual cache, on one server.
Workload: the model's cot test split (prompts the tuning never saw), answers scored.

Settings are each method's fastest tuned front point within a point of vanilla
(docs/paper-comparison.md), plus vanilla (one token per step) and threshold-only decoding.

  bench/serve_sweep.py [--models models/llada-cot,...] [--batches 8] [--requests 24]
                       [--out docs/results] [--only SETTING,...]
Writes <out>/serving-<model>-b<batch>.jsonl (serve.py's rows, each with "model",
"max_batch" and "phase") and prints serve.py's tables.
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

from bench import serve
from tools.loopback import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = 192  # the tuning protocol's gen_length
WINDOW = {"schedule": "window", "window": 16, "confidence_threshold": 0.9}
SETTINGS = {
    "vanilla": {"decoding": {"schedule": "block", "block_length": 32, "steps": GEN,
                             "confidence_threshold": 0}, "cache": {"policy": "none"}},
    "threshold": {"decoding": {"schedule": "block", "block_length": 32,
                               "confidence_threshold": 0.9}, "cache": {"policy": "none"}},
    "entropy": {"decoding": WINDOW,
                "cache": {"policy": "entropy", "entropy_threshold": 1, "recent_k": 16}},
    # The same decoding at τ 2, where on the cot models the entropy trigger never fires
    # (docs/paper-comparison.md): the cheapest EntropyCache setting of that decoding.
    "entropy-tau2": {"decoding": WINDOW,
                     "cache": {"policy": "entropy", "entropy_threshold": 2, "recent_k": 16}},
    # SLO-aware tau: τ 1, switching to τ 2 when a request's deadline is at risk under load
    # (engine.tau_switch_slack_ratio); without a deadline, the same as "entropy".
    "entropy-slack": {"decoding": WINDOW,
                      "cache": {"policy": "entropy", "entropy_threshold": 1, "recent_k": 16,
                                "entropy_threshold_under_load": 2}},
    "dual": {"decoding": {"schedule": "block", "block_length": 16, "confidence_threshold": 0.9},
             "cache": {"policy": "dual"}},
    "elastic": {"decoding": WINDOW, "cache": {"policy": "elastic", "elastic_gamma": 0.8}},
    "d2cache": {"decoding": {"schedule": "block", "block_length": 32,
                             "confidence_threshold": 0.9},
                "cache": {"policy": "d2cache", "d2_rollout_p": 0.05, "d2_current_k": 16}},
}
CONCURRENCY = [1, 2, 4, 8, 16]
OPEN_LOOP = ["entropy", "dual", "elastic"]
OPEN_FRACTIONS = [0.5, 0.9, 1.2]
# The SLO of goodput: end-to-end latency within 5x the single-request E2EL of EntropyCache's
# setting on llada-cot (~0.8 s alone on this machine), i.e. 4 s.
SLO = "e2el:4000"


def start_server(model, max_batch, workdir):
    ports = {"grpc": free_port(), "http": free_port(), "metrics": free_port()}
    config = {
        "server": {"address": "127.0.0.1:%d" % ports["grpc"], "lame_duck_seconds": 0},
        "engine": {"model": model, "max_batch_sequences": max_batch, "queue_capacity": 256},
        "limits": {"max_prompt_tokens": 2048},
        "http": {"address": "127.0.0.1", "port": ports["http"]},
        "metrics": {"address": "127.0.0.1", "port": ports["metrics"]},
    }
    path = os.path.join(workdir, "serve-%d.yaml" % ports["http"])
    with open(path, "w") as f:
        json.dump(config, f)
    log = open(os.path.join(workdir, "server.log"), "w")
    proc = subprocess.Popen([os.path.join(ROOT, "build", "bin", "dllm-server"), "--config", path],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("dllm-server exited: see %s" % log.name)
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % ports["http"],
                                        timeout=2) as r:
                if r.status == 200:
                    return proc, ports
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    sys.exit("dllm-server did not serve within 120 s")


def run(ports, workload, requests, settings, load, extra=()):
    """serve.main on the given settings and load; its JSON rows."""
    args = ["--http", "127.0.0.1:%d" % ports["http"],
            "--metrics", "127.0.0.1:%d" % ports["metrics"],
            "--workload", workload, "--requests", str(requests), "--warmup", "2",
            "--max-tokens", str(GEN), "--slo", SLO, "--json", *load, *extra]
    for name in settings:
        args += ["--setting", "%s=%s" % (name, json.dumps(SETTINGS[name]))]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = serve.main(args)
    rows = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    if rc != 0:
        print("serve.py exited %d (counts mismatch?)" % rc, file=sys.stderr)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="models/llada-cot")
    ap.add_argument("--batches", default="8")
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    ap.add_argument("--only", default="", help="settings to run (default: all)")
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s] or list(SETTINGS)
    for model in args.models.split(","):
        name = os.path.basename(os.path.normpath(model))
        workload = os.path.join(ROOT, "tools", "tasks", "data_cot", "test.jsonl")
        for batch in [int(b) for b in args.batches.split(",")]:
            out_path = os.path.join(args.out, "serving-%s-b%d.jsonl" % (name, batch))
            workdir = tempfile.mkdtemp(prefix="dllm-serve-sweep-")
            proc, ports = start_server(model, batch, workdir)
            rows = []
            try:
                for setting in only:
                    levels = [1, 8] if setting == "vanilla" else CONCURRENCY
                    n = 8 if setting == "vanilla" else args.requests
                    closed = run(ports, workload, n, [setting],
                                 ["--concurrency", ",".join(map(str, levels))])
                    for r in closed:
                        r.update(phase="closed", model=name, max_batch=batch)
                    rows += closed
                    print(serve.markdown(closed), flush=True)
                    if setting in OPEN_LOOP:
                        # Saturation: the request rate where output throughput peaked.
                        best = max(closed, key=lambda r: r["output_throughput"])
                        saturation = best["request_throughput"]
                        rates = [round(f * saturation, 3) for f in OPEN_FRACTIONS]
                        opened = run(ports, workload, args.requests, [setting],
                                     ["--rate", ",".join(map(str, rates))])
                        for r, f in zip(opened, OPEN_FRACTIONS):
                            r.update(phase="open", model=name, max_batch=batch,
                                     saturation_fraction=f, saturation_rps=saturation)
                        rows += opened
                        print(serve.markdown(opened), flush=True)
                if {"entropy", "dual"} <= set(only):
                    mixed = run(ports, workload, args.requests, ["entropy", "dual"],
                                ["--concurrency", "8"])
                    for r in mixed:
                        r.update(phase="mixed", model=name, max_batch=batch)
                    rows += mixed
                    print(serve.markdown(mixed), flush=True)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            with open(out_path, "w") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
            print("wrote %s" % out_path)


if __name__ == "__main__":
    main()
