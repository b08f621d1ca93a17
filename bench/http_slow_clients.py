#!/usr/bin/env python3
"""HTTP latency of a running dllm-server with and without hostile clients, side by side in
one run: N connections that trickle a request head one byte per second, and N idle ones.
The probe calls are small chat completions (and /health) on fresh connections. A bench, not
a test: it prints p50/p99 per phase and the ratio loaded/idle.

Usage: bench/http_slow_clients.py --http 127.0.0.1:8000 [--slow 1000] [--idle 0]
           [--calls 200] [--model llada-tiny] [--token T]
The server needs an open-file limit above slow + idle (it raises its own to the hard limit).
"""
import argparse
import http.client
import json
import resource
import socket
import threading
import time


def probe(host, port, calls, model, token):
    body = json.dumps({"model": model, "max_tokens": 4,
                       "messages": [{"role": "user", "content": "hi"}]})
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    lat, errors = [], 0
    for _ in range(calls):
        start = time.perf_counter()
        try:
            conn = http.client.HTTPConnection(host, port, timeout=30)
            conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            conn.close()
            if resp.status != 200:
                errors += 1
                continue
        except OSError:
            errors += 1
            continue
        lat.append(time.perf_counter() - start)
    lat.sort()

    def q(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else float("nan")

    return {"ok": len(lat), "errors": errors, "p50_ms": q(0.5), "p99_ms": q(0.99)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True)
    ap.add_argument("--slow", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--model", default="llada-tiny")
    ap.add_argument("--token", default="")
    args = ap.parse_args()
    host, port = args.http.rsplit(":", 1)
    port = int(port)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    idle_phase = probe(host, port, args.calls, args.model, args.token)
    socks, stop = [], threading.Event()
    for _ in range(args.slow):
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        socks.append(s)
    idle = [socket.create_connection((host, port), timeout=10) for _ in range(args.idle)]

    def trickle():
        while not stop.wait(1.0):
            for s in socks:
                try:
                    s.send(b"a")
                except OSError:
                    pass

    t = threading.Thread(target=trickle)
    t.start()
    loaded = probe(host, port, args.calls, args.model, args.token)
    stop.set()
    t.join()
    for s in socks + idle:
        s.close()
    print("phase            ok  errors   p50_ms   p99_ms")
    for name, r in (("idle server", idle_phase),
                    ("%d slow + %d idle" % (args.slow, args.idle), loaded)):
        print("%-16s %3d  %6d  %7.2f  %7.2f" % (name, r["ok"], r["errors"], r["p50_ms"],
                                                r["p99_ms"]))
    print("p99 ratio loaded/idle: %.2f" % (loaded["p99_ms"] / idle_phase["p99_ms"]))


if __name__ == "__main__":
    main()
