#!/usr/bin/env python3
"""The HTTP listener's limits at full scale, against a running dllm-server on loopback (the
ctest versions, tests/e2e/http_test.py, run the same scenarios small). A bench, not a test: it
prints what happened and exits 0.

  keepalive  N back-to-back chat completions on one keep-alive connection: how many were
             answered (every one must be).
  flood      S connections from --flood-from (another loopback address, 127.0.0.2) that trickle
             a request head, then C chat completions and C GET /health from 127.0.0.1 on fresh
             connections: how many were answered.
  bodies     B connections that each send a --body-bytes body (bad JSON: read, then refused)
             at once, in rounds: 503s, and the server's RSS before, at its peak and after.

Usage: bench/http_overload.py --http 127.0.0.1:8000 --pid PID [--scenario all|keepalive|flood|
           bodies] [--requests 10000] [--slow 4100] [--calls 80] [--bodies 1000]
           [--body-bytes 4194304] [--model llada-tiny]
The server needs an open-file limit above --slow (it raises its own to the hard limit), and so
does this script (it raises its soft limit to the hard one).
"""
import argparse
import http.client
import json
import resource
import socket
import threading
import time


def chat_body(model):
    return json.dumps({"model": model, "max_tokens": 4,
                       "messages": [{"role": "user", "content": "add 1 2"}]})


HEADERS = {"Content-Type": "application/json"}


def keepalive(host, port, requests, model):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    answered, failed, reconnects = 0, 0, 0
    start = time.time()
    for _ in range(requests):
        try:
            conn.request("POST", "/v1/chat/completions", body=chat_body(model), headers=HEADERS)
            resp = conn.getresponse()
            resp.read()
            answered += resp.status == 200
            failed += resp.status != 200
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=30)
                reconnects += 1
        except (OSError, http.client.HTTPException):
            failed += 1
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=30)
            reconnects += 1
    return {"requests": requests, "answered": answered, "failed": failed,
            "reconnects (Connection: close after max requests)": reconnects,
            "seconds": round(time.time() - start, 1)}


def one_call(host, port, path, model):
    try:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        if path == "/health":
            conn.request("GET", path)
        else:
            conn.request("POST", path, body=chat_body(model), headers=HEADERS)
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return resp.status == 200
    except (OSError, http.client.HTTPException):
        return False


def flood(host, port, slow, calls, model, flood_from):
    socks, refused = [], 0
    for _ in range(slow):
        s = socket.socket()
        try:
            s.bind((flood_from, 0))
            s.settimeout(5)
            s.connect((host, port))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError:
            refused += 1
            s.close()
    time.sleep(0.5)
    chat = sum(one_call(host, port, "/v1/chat/completions", model) for _ in range(calls))
    health = sum(one_call(host, port, "/health", model) for _ in range(calls))
    for s in socks:
        s.close()
    return {"slow connections": slow, "slow refused at connect": refused,
            "chat answered": "%d/%d" % (chat, calls), "health answered": "%d/%d" % (health, calls)}


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def bodies(host, port, pid, count, body_bytes, model):
    baseline = rss_mb(pid)
    peak = [baseline]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    statuses = {}
    lock = threading.Lock()
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % body_bytes)
    payload = b"{" * body_bytes

    def send():
        status = "transport error"
        try:
            s = socket.create_connection((host, port), timeout=60)
            s.sendall(head)
            try:
                s.sendall(payload)
            except OSError:
                pass  # refused (503) before the body: the server closed
            reply = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
            s.close()
            status = reply[9:12].decode() or "no reply"
        except OSError:
            pass
        with lock:
            statuses[status] = statuses.get(status, 0) + 1

    threads = [threading.Thread(target=send) for _ in range(count)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.time() - start
    time.sleep(2)
    done.set()
    sampler.join()
    return {"connections": count, "body bytes": body_bytes, "statuses": statuses,
            "seconds": round(seconds, 1), "rss_mb baseline": round(baseline, 1),
            "rss_mb peak": round(peak[0], 1), "rss_mb 2 s after": round(rss_mb(pid), 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--scenario", default="all")
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--slow", type=int, default=4100)
    ap.add_argument("--calls", type=int, default=80)
    ap.add_argument("--bodies", type=int, default=1000)
    ap.add_argument("--body-bytes", type=int, default=4 << 20)
    ap.add_argument("--flood-from", default="127.0.0.2")
    ap.add_argument("--model", default="llada-tiny")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = args.http.rsplit(":", 1)
    port = int(port)
    if args.scenario in ("all", "keepalive"):
        print("keepalive", json.dumps(keepalive(host, port, args.requests, args.model)))
    if args.scenario in ("all", "flood"):
        print("flood", json.dumps(flood(host, port, args.slow, args.calls, args.model,
                                        args.flood_from)))
    if args.scenario in ("all", "bodies"):
        print("bodies", json.dumps(bodies(host, port, args.pid, args.bodies, args.body_bytes,
                                          args.model)))


if __name__ == "__main__":
    main()
