#!/usr/bin/env python3
"""dllm-bench-serve: a serving benchmark of a running dllm-server, with vLLM's definitions.

Drives the server over HTTP SSE (/v1/chat/completions, "stream": true) or gRPC
(GenerateStream) and reports, per setting and overall:
  TTFT   time to the first streamed committed text;
  TPOT   (E2EL - TTFT) / (output tokens - 1), for requests with more than one output token;
  ITL    the gaps between successive streamed chunks of committed text;
  E2EL   the request's end-to-end latency;
  front end  E2EL less the server's own submission-to-final time (its "timings"): what the
         gRPC or HTTP layer and the loopback transport add;
each as mean, median, p90 and p99 (vLLM's `bench serve` definitions); request and output-token
throughput; goodput, the requests per second that meet every SLO given (--slo); and correct
goodput, the same counting only requests whose answer is right (an approximate cache can buy
speed with wrong answers: this is the figure that shows it).

Load:
  --rate R       open loop: arrivals of a Poisson process (--burstiness 1) or a gamma one
                 (burstiness < 1 burstier, > 1 more regular), gaps rescaled so that the N
                 requests arrive over N / R seconds (as vLLM does); --rate inf sends all at once
  --concurrency C   closed loop: C clients, each sends its next request when the last ends
Several --rate or --concurrency values make a sweep, one row per value.

Workload: a JSONL of {"prompt", "answer"[, "final"]} (tools/tasks/data*/test.jsonl), cycled
to --requests; each prompt is one user message. An answer is right when its last "#### "
line equals "final", else when the trimmed text equals the trimmed answer (dllm-bench's rule).
Settings: --setting 'LABEL={"decoding": {...}, "cache": {...}}' (the HTTP API's objects;
repeatable: requests take the settings in turn, a mixed workload on one server). The first
--warmup requests of each row are sent first and left out of every figure.

Integrity: every request must end with a definite status (OK, or a counted error: an HTTP
status, a gRPC code, a timeout); the server's dllm_requests_total counters (read from
--metrics before and after each row) must have grown by exactly the generator's own counts,
or the row is marked "counts_match": false and the exit status is 1.

Output: one JSON row per sweep point on stdout (--json) or a markdown table; the generator's
own CPU time as a share of the row's wall time (a generator near 100% of a core is the
bottleneck, not the server); with --metrics, the server's CPU milliseconds and query rows
per output token over the row (process_cpu_seconds_total, dllm_rows_per_step_sum), the costs
a shared machine does not distort.

  bench/serve.py --http 127.0.0.1:8000 --metrics 127.0.0.1:9400 \\
      --workload tools/tasks/data_cot/test.jsonl --requests 64 --concurrency 1,4,8 \\
      --setting 'entropy={"decoding": {"schedule": "window", "window": 16,
                 "confidence_threshold": 0.9}, "cache": {"policy": "entropy"}}' \\
      --max-tokens 192 --slo e2el:5000
"""
import argparse
import atexit
import http.client
import json
import math
import os
import random
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

PERCENTILES = (50, 90, 99)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------------ pure functions (tested)

def percentile(values, q):
    """The q-th percentile (0-100) with linear interpolation between closest ranks, as numpy's
    default (and vLLM) computes it; None for no values."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary_ms(values_s):
    """{mean, median, p90, p99} in milliseconds of values in seconds (None when empty)."""
    if not values_s:
        return {"mean": None, "median": None, "p90": None, "p99": None}
    ms = [1e3 * v for v in values_s]
    return {"mean": statistics.fmean(ms), "median": percentile(ms, 50),
            "p90": percentile(ms, 90), "p99": percentile(ms, 99)}


def arrival_times(n, rate, burstiness, rng):
    """Send times (seconds from the start) of n requests: gamma-distributed gaps of shape
    `burstiness` (1 = Poisson), rescaled so that the last gap ends at n / rate; all 0 at an
    infinite rate."""
    if math.isinf(rate):
        return [0.0] * n
    gaps = [rng.gammavariate(burstiness, 1.0 / (rate * burstiness)) for _ in range(n)]
    scale = (n / rate) / sum(gaps)
    out, t = [], 0.0
    for g in gaps:
        out.append(t)
        t += g * scale
    return out


def final_line(text):
    out = None
    for line in text.split("\n"):
        if line.startswith("#### "):
            out = line[5:].strip()
    return out


def correct(task, text):
    """dllm-bench's rule: the last '#### ' line against `final`, else the whole trimmed text."""
    if task.get("final"):
        return final_line(text) == task["final"]
    return text.strip() == task["answer"].strip()


def parse_slo(text):
    """'ttft:500,tpot:50,e2el:5000' -> {'ttft': 0.5, 'tpot': 0.05, 'e2el': 5.0} (seconds)."""
    out = {}
    for part in filter(None, (text or "").split(",")):
        key, _, value = part.partition(":")
        if key not in ("ttft", "tpot", "e2el") or not value:
            raise ValueError("--slo: '%s' is not ttft|tpot|e2el:MILLISECONDS" % part)
        out[key] = float(value) / 1e3
    return out


def meets(result, slo):
    """True when an OK request meets every SLO (a TPOT SLO holds for 1-token answers)."""
    if result["status"] != "OK":
        return False
    for key, limit in slo.items():
        value = result.get(key)
        if value is None and key == "tpot":
            continue
        if value is None or value > limit:
            return False
    return True


def row_metrics(results, wall_s, slo):
    """The row's figures over `results` (warm-up excluded) that took `wall_s`."""
    ok = [r for r in results if r["status"] == "OK"]
    out_tokens = sum(r["output_tokens"] for r in ok)
    by_status = {}
    for r in results:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    good = [r for r in ok if meets(r, slo)]
    good_right = [r for r in good if r["correct"]]
    wall = max(wall_s, 1e-9)
    return {
        "requests": len(results),
        "by_status": by_status,
        "accuracy": (sum(r["correct"] for r in ok) / len(ok)) if ok else None,
        "wall_s": wall_s,
        "request_throughput": len(ok) / wall,
        "output_throughput": out_tokens / wall,
        "goodput": len(good) / wall,
        "correct_goodput": len(good_right) / wall,
        "slo_attainment": len(good) / len(results) if results else None,
        "ttft_ms": summary_ms([r["ttft"] for r in ok if r["ttft"] is not None]),
        "tpot_ms": summary_ms([r["tpot"] for r in ok if r["tpot"] is not None]),
        "itl_ms": summary_ms([g for r in ok for g in r["itl"]]),
        "e2el_ms": summary_ms([r["e2el"] for r in ok]),
        "frontend_ms": summary_ms([r["frontend"] for r in ok if r["frontend"] is not None]),
    }


def parse_metrics(text, protocol):
    """From a Prometheus text page: ({status: n} of dllm_requests_total for `protocol`,
    {counter: value} of the server's cost counters, SERVER_COSTS)."""
    counts, costs = {}, {}
    pattern = re.compile(r'^(\w+)(?:\{([^}]*)\})? ([0-9.e+-]+)$')
    for line in text.splitlines():
        m = pattern.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")), \
            float(m.group(3))
        if name == "dllm_requests_total" and labels.get("protocol") == protocol:
            status = labels.get("status", "")
            counts[status] = counts.get(status, 0) + int(value)
        elif name in SERVER_COSTS:
            costs[name] = costs.get(name, 0.0) + value
    return counts, costs


# The server's own costs of a row, from /metrics: CPU seconds of the whole process and query
# rows computed. Per output token they are what a shared machine does not distort (wall time
# is). Also read: the requests that switched their tau under load.
SERVER_COSTS = ("process_cpu_seconds_total", "dllm_rows_per_step_sum",
                "dllm_requests_tau_switched_total")


# An HTTP error's "code" -> the gRPC code name the server counts it under
# (server/http/http_status_mapping.cc); the HTTP status when the body has no known code.
ERROR_CODE_NAMES = {"invalid_value": "INVALID_ARGUMENT",
                    "failed_precondition": "FAILED_PRECONDITION",
                    "invalid_api_key": "UNAUTHENTICATED", "permission_denied": "PERMISSION_DENIED",
                    "not_found": "NOT_FOUND", "queue_full": "RESOURCE_EXHAUSTED",
                    "cancelled": "CANCELLED", "not_implemented": "UNIMPLEMENTED",
                    "unavailable": "UNAVAILABLE", "deadline_exceeded": "DEADLINE_EXCEEDED",
                    "internal": "INTERNAL"}
HTTP_CODE_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND",
                   429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL",
                   503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def error_status(http_status, body):
    """The status name of an HTTP error reply (its JSON body's code, else its status)."""
    try:
        code = json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        code = None
    fallback = HTTP_CODE_NAMES.get(http_status, "HTTP_%d" % http_status)
    return ERROR_CODE_NAMES.get(code) or fallback


# ------------------------------------------------------------------ transports

class HttpTransport:
    """POST /v1/chat/completions with "stream": true; one keep-alive connection per thread."""

    protocol = "http"

    def __init__(self, address, token, model, timeout_s, deadline_ms=None):
        self.host, _, port = address.rpartition(":")
        self.port = int(port)
        self.token, self.timeout_s, self.deadline_ms = token, timeout_s, deadline_ms
        self.local = threading.local()
        self.model = model or self.served_model()

    def served_model(self):
        """The id of the model the server serves (GET /v1/models)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        headers = {"Authorization": "Bearer " + self.token} if self.token else {}
        conn.request("GET", "/v1/models", headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        if resp.status != 200:
            raise RuntimeError("GET /v1/models: HTTP %d %s" % (resp.status, body[:200]))
        return json.loads(body)["data"][0]["id"]

    def connection(self, fresh=False):
        if fresh or getattr(self.local, "conn", None) is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            conn.connect()
            # As a streaming client must: no Nagle delay on its small writes.
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.local.conn = conn
        return self.local.conn

    def send(self, prompt, setting, max_tokens, on_text):
        """Streams one request; calls on_text(chunk) per committed-text chunk; returns
        (status name, output tokens, text, the server's own seconds from submission to final
        event or None)."""
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                "stream": True, "stream_options": {"include_usage": True}}
        if max_tokens:
            body["max_tokens"] = max_tokens
        body.update(setting)
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if self.deadline_ms:
            headers["X-Request-Timeout-Ms"] = str(self.deadline_ms)
        data = json.dumps(body)
        for attempt in (0, 1):
            conn = self.connection(fresh=attempt > 0)
            try:
                conn.request("POST", "/v1/chat/completions", data, headers)
                resp = conn.getresponse()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A keep-alive connection the server closed while idle: once more, fresh.
                conn.close()
                if attempt:
                    raise
        if resp.status != 200:
            return error_status(resp.status, resp.read()), 0, "", None
        text, tokens, status, server_s = [], 0, "OK", None
        for raw in resp:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            payload = line[6:]
            if payload == "[DONE]":
                break
            event = json.loads(payload)
            if "error" in event:
                status = ERROR_CODE_NAMES.get(event["error"].get("code"), "INTERNAL")
                continue
            for choice in event.get("choices", []):
                chunk = (choice.get("delta") or {}).get("content") or ""
                if chunk:
                    text.append(chunk)
                    on_text(chunk)
            if event.get("usage"):
                tokens = event["usage"].get("completion_tokens", 0)
            if event.get("timings"):
                server_s = event["timings"].get("total_seconds")
        resp.read()
        return status, tokens, "".join(text), server_s


class GrpcTransport:
    """GenerateStream over one channel; stubs generated from proto/ at start-up with the
    system protoc and grpc_python_plugin (Debian's grpc_tools protoc is too old for proto3
    `optional`)."""

    protocol = "grpc"
    ENUM_PREFIX = {"schedule": "SCHEDULE_", "remasking": "REMASKING_", "policy": "CACHE_POLICY_"}

    def __init__(self, address, token, model, timeout_s, deadline_ms=None):
        import grpc
        out = tempfile.mkdtemp(prefix="dllm-serve-stubs-")
        atexit.register(shutil.rmtree, out, ignore_errors=True)
        subprocess.run(["protoc", "-I", os.path.join(ROOT, "proto"), "--python_out", out,
                        "--grpc_out", out, "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                        "dllm/v1/dllm.proto"], check=True)
        sys.path.insert(0, out)
        from dllm.v1 import dllm_pb2, dllm_pb2_grpc
        from google.protobuf import json_format
        self.grpc, self.pb, self.json_format = grpc, dllm_pb2, json_format
        self.stub = dllm_pb2_grpc.DiffusionLMStub(grpc.insecure_channel(address))
        self.metadata = [("authorization", "Bearer " + token)] if token else []
        # The call's deadline: --deadline-ms when given (the server's SLO-aware admission and
        # tau see it), else the client's patience.
        self.timeout_s = deadline_ms / 1e3 if deadline_ms else timeout_s

    def options(self, message, values):
        values = {k: (self.ENUM_PREFIX[k] + str(v).upper() if k in self.ENUM_PREFIX else v)
                  for k, v in values.items()}
        return self.json_format.ParseDict(values, message)

    def send(self, prompt, setting, max_tokens, on_text):
        pb = self.pb
        request = pb.GenerateRequest(
            chat=pb.ChatMessages(messages=[pb.ChatMessage(role="user", content=prompt)]),
            decoding=self.options(pb.DecodingOptions(), setting.get("decoding", {})),
            cache=self.options(pb.CacheOptions(), setting.get("cache", {})))
        if max_tokens:
            request.max_new_tokens = max_tokens
        text, tokens, server_s = [], 0, None
        try:
            for message in self.stub.GenerateStream(request, metadata=self.metadata,
                                                    timeout=self.timeout_s):
                if message.HasField("committed") and message.committed.text:
                    text.append(message.committed.text)
                    on_text(message.committed.text)
                elif message.HasField("final"):
                    tokens = message.final.usage.generated_tokens
                    server_s = message.final.timings.total_seconds
        except self.grpc.RpcError as e:
            return e.code().name, 0, "".join(text), None
        return "OK", tokens, "".join(text), server_s


# ------------------------------------------------------------------ one request, one row

def run_one(transport, task, label, setting, max_tokens):
    """One request; its timings (seconds), status, tokens and correctness."""
    start = time.perf_counter()
    chunks = []

    def on_text(_chunk):
        chunks.append(time.perf_counter())

    try:
        status, tokens, text, server_s = transport.send(task["prompt"], setting, max_tokens,
                                                        on_text)
    except Exception as e:  # a failed connection is a definite, counted outcome
        status, tokens, text, server_s = "CLIENT_" + type(e).__name__, 0, "", None
    return record(task, label, status, tokens, text, start, chunks, time.perf_counter(),
                  server_s)


def record(task, label, status, tokens, text, start, chunks, end, server_s):
    """One request's record from its send time, the times its text chunks arrived and its
    end (seconds on one clock); server_s, the engine's own time, or None."""
    ttft = chunks[0] - start if chunks else None
    e2el = end - start
    tpot = (e2el - ttft) / (tokens - 1) if ttft is not None and tokens > 1 else None
    return {"setting": label, "status": status, "output_tokens": tokens,
            "ttft": ttft, "tpot": tpot, "e2el": e2el,
            # What the front end and the transport add: E2EL less the engine's own time.
            "frontend": e2el - server_s if server_s is not None else None,
            "itl": [b - a for a, b in zip(chunks, chunks[1:])],
            "correct": status == "OK" and correct(task, text)}


def scrape(metrics_address, protocol):
    """parse_metrics of the server's /metrics; None without --metrics."""
    if not metrics_address:
        return None
    with urllib.request.urlopen("http://%s/metrics" % metrics_address, timeout=10) as r:
        return parse_metrics(r.read().decode(), protocol)


def send_closed_loop(transport, measured, clients, max_tokens):
    """`measured` by `clients` clients, each sending its next request when its last ends."""
    results = [None] * len(measured)
    lock = threading.Lock()
    next_index = [0]

    def client():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(measured):
                return
            task, (label, setting) = measured[i]
            results[i] = run_one(transport, task, label, setting, max_tokens)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def send_open_loop(transport, measured, times, max_in_flight, max_tokens):
    """`measured`, request i sent at times[i] seconds from now, whatever is in flight."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max_in_flight) as pool:
        futures = []
        for i, (task, (label, setting)) in enumerate(measured):
            delay = t0 + times[i] - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(run_one, transport, task, label, setting, max_tokens))
        return [f.result() for f in futures]


def check_counts(args, transport, before, sent):
    """(what the server counted since `before`, whether it equals the statuses of `sent`);
    the counters settle once the last reply is out, so they are read until they match or
    5 s have passed."""
    counted = {}
    for r in sent:
        counted[r["status"]] = counted.get(r["status"], 0) + 1
    deadline = time.time() + 5
    while True:
        after, _ = scrape(args.metrics, transport.protocol)
        grown = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
        grown = {k: v for k, v in grown.items() if v}
        if grown == counted or time.time() > deadline:
            return grown, grown == counted
        time.sleep(0.2)


def server_costs(start, end, results):
    """The server's CPU milliseconds and rows per output token of the OK requests, between
    two scrapes' cost counters."""
    grew = {name: end.get(name, 0.0) - start.get(name, 0.0) for name in SERVER_COSTS}
    # Requests that ran part of their decoding at their tau under load (SLO-aware tau).
    switched = int(grew["dllm_requests_tau_switched_total"])
    tokens = sum(r["output_tokens"] for r in results if r["status"] == "OK")
    if not tokens:
        return {"server_cpu_ms_per_token": None, "rows_per_token": None, "tau_switched": switched}
    return {"server_cpu_ms_per_token": 1e3 * grew["process_cpu_seconds_total"] / tokens,
            "rows_per_token": grew["dllm_rows_per_step_sum"] / tokens, "tau_switched": switched}


def run_row(args, transport, tasks, settings, mode, value):
    """One sweep point: warm-up, then --requests requests at `value` (a rate or a
    concurrency); the row's figures, overall and per setting."""
    plan = [(tasks[i % len(tasks)], settings[i % len(settings)])
            for i in range(args.warmup + args.requests)]
    warm, measured = plan[:args.warmup], plan[args.warmup:]
    before = scrape(args.metrics, transport.protocol)
    with ThreadPoolExecutor(max_workers=max(1, min(len(warm), 8))) as pool:
        warm_results = list(pool.map(
            lambda p: run_one(transport, p[0], p[1][0], p[1][1], args.max_tokens), warm))
    start = scrape(args.metrics, transport.protocol)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if mode == "rate":
        times = arrival_times(len(measured), value, args.burstiness, random.Random(args.seed))
        results = send_open_loop(transport, measured, times, args.max_in_flight, args.max_tokens)
    else:
        results = send_closed_loop(transport, measured, int(value), args.max_tokens)
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    generator_cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    slo = parse_slo(args.slo)
    row = {"mode": mode, mode: value, "protocol": transport.protocol,
           "settings": [label for label, _ in settings], "slo_s": slo,
           **row_metrics(results, wall, slo),
           "generator_cpu_share": generator_cpu / max(wall, 1e-9)}
    if args.deadline_ms:
        row["deadline_ms"] = args.deadline_ms
    if len(settings) > 1:
        row["per_setting"] = {label: row_metrics([r for r in results if r["setting"] == label],
                                                 wall, slo) for label, _ in settings}
    if before is not None:
        row.update(server_costs(start[1], scrape(args.metrics, transport.protocol)[1], results))
        # Every request the generator sent, warm-up included, against what the server counted.
        row["server_counts"], row["counts_match"] = check_counts(
            args, transport, before[0], warm_results + results)
    return row


# ------------------------------------------------------------------ output

def fmt(v, digits=1):
    return "-" if v is None else ("%.*f" % (digits, v))


def markdown(rows):
    head = ["mode", "value", "setting(s)", "ok/requests", "accuracy", "req/s", "out tok/s",
            "goodput", "correct goodput", "TTFT p50/p99 ms", "TPOT p50 ms", "ITL p50 ms",
            "E2EL p50/p90/p99 ms", "front end p50 ms", "server CPU ms/token", "rows/token",
            "gen CPU", "counts"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ok = r["by_status"].get("OK", 0)
        failed = ", ".join("%s %d" % kv for kv in sorted(r["by_status"].items()) if kv[0] != "OK")
        out.append("| " + " | ".join([
            r["mode"], str(r[r["mode"]]), "+".join(r["settings"]),
            "%d/%d%s" % (ok, r["requests"], " (%s)" % failed if failed else ""),
            fmt(r["accuracy"], 3), fmt(r["request_throughput"], 2),
            fmt(r["output_throughput"], 1), fmt(r["goodput"], 2), fmt(r["correct_goodput"], 2),
            "%s/%s" % (fmt(r["ttft_ms"]["median"], 0), fmt(r["ttft_ms"]["p99"], 0)),
            fmt(r["tpot_ms"]["median"], 1), fmt(r["itl_ms"]["median"], 1),
            "%s/%s/%s" % (fmt(r["e2el_ms"]["median"], 0), fmt(r["e2el_ms"]["p90"], 0),
                          fmt(r["e2el_ms"]["p99"], 0)),
            fmt(r["frontend_ms"]["median"], 2), fmt(r.get("server_cpu_ms_per_token"), 2),
            fmt(r.get("rows_per_token"), 1), "%.0f%%" % (100 * r["generator_cpu_share"]),
            {True: "match", False: "MISMATCH", None: "-"}[r.get("counts_match")]]) + " |")
    return "\n".join(out)


def parse_settings(values):
    out = []
    for v in values or ['default={}']:
        label, sep, body = v.partition("=")
        if not sep:
            raise ValueError("--setting: expected LABEL=JSON, got '%s'" % v)
        setting = json.loads(body)
        unknown = set(setting) - {"decoding", "cache"}
        if unknown:
            raise ValueError("--setting %s: unknown keys %s (decoding, cache)" % (label, unknown))
        out.append((label, setting))
    return out


def parse_values(text, cast):
    return [cast(v) for v in text.split(",") if v]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--http", help="HOST:PORT of the HTTP API")
    where.add_argument("--grpc", help="HOST:PORT of the gRPC API")
    ap.add_argument("--metrics", help="HOST:PORT of /metrics: checks the server's counts")
    ap.add_argument("--token", default=os.environ.get("DLLM_TOKEN"))
    ap.add_argument("--model", default="", help="the HTTP request's model (default: served)")
    ap.add_argument("--workload", required=True, help="JSONL of {prompt, answer[, final]}")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=0, help="0: the server's default")
    ap.add_argument("--setting", action="append", help="LABEL=JSON (repeatable: mixed)")
    load = ap.add_mutually_exclusive_group(required=True)
    load.add_argument("--rate", help="open loop: requests/s, comma-separated sweep (inf ok)")
    load.add_argument("--concurrency", help="closed loop: clients, comma-separated sweep")
    ap.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (1: Poisson)")
    ap.add_argument("--max-in-flight", type=int, default=256, help="open loop: thread cap")
    ap.add_argument("--slo", default="", help="ttft:MS,tpot:MS,e2el:MS (goodput)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600, help="per request, seconds")
    ap.add_argument("--deadline-ms", type=int, default=0,
                    help="each request's deadline for the server (HTTP X-Request-Timeout-Ms, "
                    "gRPC timeout): late ones are refused at arrival or expire; 0: none")
    ap.add_argument("--json", action="store_true", help="JSON rows instead of a table")
    args = ap.parse_args(argv)
    try:
        settings = parse_settings(args.setting)
        parse_slo(args.slo)
        sweep = (("rate", parse_values(args.rate, float)) if args.rate else
                 ("concurrency", parse_values(args.concurrency, int)))
    except ValueError as e:
        ap.error(str(e))
    with open(args.workload, encoding="utf-8") as f:
        tasks = [json.loads(line) for line in f if line.strip()]
    if not tasks:
        ap.error("no tasks in %s" % args.workload)
    if args.http:
        transport = HttpTransport(args.http, args.token, args.model, args.timeout,
                                  args.deadline_ms)
    else:
        transport = GrpcTransport(args.grpc, args.token, args.model, args.timeout,
                                  args.deadline_ms)
    rows, mismatched = [], False
    for value in sweep[1]:
        row = run_row(args, transport, tasks, settings, sweep[0], value)
        rows.append(row)
        mismatched |= row.get("counts_match") is False
        if args.json:
            print(json.dumps(row), flush=True)
    if not args.json:
        print(markdown(rows))
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
