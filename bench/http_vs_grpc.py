#!/usr/bin/env python3
"""Side-by-side latency of the gRPC and the HTTP (OpenAI-compatible) paths of one running
dllm-server: the same chat prompt and settings, `dllm-client load` for gRPC and a small
keep-alive HTTP load generator (Python standard library) for HTTP. A bench, not a test.

Usage: bench/http_vs_grpc.py --grpc 127.0.0.1:50051 --http 127.0.0.1:8000 \
           [--client build/bin/dllm-client] [--requests 200] [--concurrency 1] [--stream]
"""
import argparse
import http.client
import json
import statistics
import subprocess
import threading
import time


def http_load(host, port, body, requests, concurrency, stream, token):
    latencies, tokens, errors = [], [0], {}
    lock = threading.Lock()
    remaining = [requests]

    def worker():
        conn = http.client.HTTPConnection(host, port, timeout=300)
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        while True:
            with lock:
                if remaining[0] == 0:
                    return
                remaining[0] -= 1
            start = time.perf_counter()
            conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            elapsed = time.perf_counter() - start
            with lock:
                if resp.status != 200:
                    errors[resp.status] = errors.get(resp.status, 0) + 1
                    continue
                latencies.append(elapsed)
                if stream:
                    events = [ln[6:] for ln in data.decode().split("\n")
                              if ln.startswith("data: ")]
                    tokens[0] += json.loads(events[-2])["usage"]["completion_tokens"]
                else:
                    tokens[0] += json.loads(data)["usage"]["completion_tokens"]

    wall = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall
    latencies.sort()

    def q(p):
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    return {"ok": len(latencies), "errors": errors, "p50_ms": q(0.5) * 1e3,
            "p90_ms": q(0.9) * 1e3, "mean_ms": statistics.mean(latencies) * 1e3,
            "tokens_per_second": tokens[0] / wall}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--http", required=True)
    ap.add_argument("--client", default="build/bin/dllm-client")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--prompt", default="add 12 30")
    ap.add_argument("--model", default="llada-tiny")
    ap.add_argument("--token", default="")
    ap.add_argument("--stream", action="store_true")
    args = ap.parse_args()

    cmd = [args.client, "load", "--address", args.grpc, "--json", "--concurrency",
           str(args.concurrency), "--requests", str(args.requests), "--max-new-tokens",
           str(args.max_new_tokens), "--seed", "1", "--chat", args.prompt]
    if args.stream:
        cmd.append("--stream")
    if args.token:
        cmd += ["--token", args.token]
    g = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    grpc = {"ok": g["ok"], "errors": {k: v for k, v in g["by_status"].items() if k != "OK"},
            "p50_ms": g["latency_seconds"]["p50"] * 1e3,
            "p90_ms": g["latency_seconds"]["p90"] * 1e3,
            "tokens_per_second": g["tokens_per_second"]}
    host, port = args.http.rsplit(":", 1)
    body = json.dumps({"model": args.model, "messages": [{"role": "user", "content": args.prompt}],
                       "max_tokens": args.max_new_tokens, "seed": 1, "stream": args.stream})
    h = http_load(host, int(port), body, args.requests, args.concurrency, args.stream, args.token)
    print(json.dumps({"grpc": grpc, "http": h,
                      "p50_overhead_ms": h["p50_ms"] - grpc["p50_ms"]}, indent=2))


if __name__ == "__main__":
    main()
