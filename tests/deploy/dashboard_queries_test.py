#!/usr/bin/python3
"""Live dashboard test: every PromQL query of deploy/grafana/dllm-serve.json returns data
from a real Prometheus that scraped a real dllm-server under load.

  dashboard_queries_test.py --root REPO --bin-dir BUILD/bin [--keep]

Steps: start dllm-server on free loopback ports (model models/llada-tiny if present, else
tests/data/reference/llada_mha) with a small config; wait until docker/healthcheck (the
image's HEALTHCHECK) reports SERVING; check that /metrics exports every metric of
tests/deploy/metrics.txt with its type; start Prometheus from deploy/prometheus/prometheus.yml
(rewritten to scrape this server every second, temp storage); drive load with
`dllm-client load`; evaluate the dashboard's variable queries and every panel query
($namespace, $pod from the variable values, $__rate_interval = the load window) at the end
of the load, and require a non-empty result with at least one finite value; finally SIGTERM
the server and require a clean exit within its drain timeout.

Exit 77 (ctest SKIP) when dllm-server is not built, no model is available, or dllm-client
is missing (after the metric contract check). Standard library only.
"""
import argparse
import json
import math
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tools.loopback import free_port  # noqa: E402

SKIP = 77
DRAIN_TIMEOUT_S = 5


def http_get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def tail(path: pathlib.Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


class Failure(Exception):
    pass


class Prometheus:
    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}/api/v1"

    def query(self, expr: str, at: float):
        q = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
        body = json.loads(http_get(f"{self.base}/query?{q}", timeout=10))
        if body.get("status") != "success":
            raise Failure(f"query failed: {body.get('error')}: {expr}")
        return body["data"]["result"]

    def label_values(self, label: str, match: str):
        q = urllib.parse.urlencode({"match[]": match})
        body = json.loads(http_get(f"{self.base}/label/{label}/values?{q}"))
        return body["data"]


def finite_values(result):
    out = []
    for series in result:
        values = [series["value"]] if "value" in series else series.get("values", [])
        for _, v in values:
            x = float(v)
            if math.isfinite(x):
                out.append(x)
    return out


def wait_until(predicate, timeout_s: float, what: str, proc=None, log=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise Failure(f"{what}: process exited with {proc.returncode}\n"
                          f"{tail(log) if log else ''}")
        try:
            if predicate():
                return
        except (OSError, ValueError, Failure):
            pass
        time.sleep(0.5)
    raise Failure(f"timed out after {timeout_s:.0f}s waiting for {what}\n"
                  f"{tail(log) if log else ''}")


def metric_contract(root: pathlib.Path):
    contract = {}
    for line in (root / "tests" / "deploy" / "metrics.txt").read_text().splitlines():
        parts = line.split("#")[0].split()
        if len(parts) == 2 and parts[1] != "external":
            contract[parts[0]] = parts[1]
    return contract


def check_exported(text: str, contract) -> list:
    types = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            types[name] = kind
    errors = []
    for name, kind in contract.items():
        # prometheus-cpp declares counters by their base name in older versions.
        got = types.get(name) or (types.get(name[: -len("_total")]) if name.endswith("_total")
                                  else None)
        if got is None:
            errors.append(f"/metrics does not export {name}")
        elif got != kind:
            errors.append(f"/metrics exports {name} as {got}, contract says {kind}")
    return errors


def dashboard_queries(root: pathlib.Path):
    d = json.loads((root / "deploy" / "grafana" / "dllm-serve.json").read_text())
    for p in d["panels"]:
        for t in p.get("targets", []):
            yield p["title"], t["refId"], t["expr"]


def substitute(expr: str, namespace: str, pod: str, window_s: int) -> str:
    return (expr.replace("$namespace", namespace).replace("$pod", pod)
            .replace("$__rate_interval", f"{window_s}s"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=pathlib.Path,
                    default=pathlib.Path(__file__).resolve().parents[2])
    ap.add_argument("--bin-dir", type=pathlib.Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, TSDB)")
    args = ap.parse_args()
    root = args.root.resolve()
    bin_dir = (args.bin_dir or root / "build" / "bin").resolve()
    server_bin, client_bin = bin_dir / "dllm-server", bin_dir / "dllm-client"
    if not os.access(server_bin, os.X_OK):
        print(f"SKIP: {server_bin} is not built yet")
        return SKIP
    model = next((m for m in (root / "models" / "llada-tiny",
                              root / "tests" / "data" / "reference" / "llada_mha")
                  if (m / "config.json").exists()), None)
    if model is None:
        print("SKIP: no model (models/llada-tiny or tests/data/reference/llada_mha)")
        return SKIP
    prometheus_bin = shutil.which("prometheus")
    if prometheus_bin is None:
        print("FAIL: prometheus not installed (Debian package prometheus, see scripts/deps)")
        return 1

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="dllm-dashboard-"))
    procs = []
    try:
        return run(root, server_bin, client_bin, model, prometheus_bin, tmp, procs)
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def run(root, server_bin, client_bin, model, prometheus_bin, tmp, procs) -> int:
    grpc_port, metrics_port, prom_port = free_port(), free_port(), free_port()
    config = tmp / "dllm.yaml"
    config.write_text(f"""\
server:
  address: 127.0.0.1:{grpc_port}
  drain_timeout_seconds: {DRAIN_TIMEOUT_S}
engine:
  backend: cpu
  model: {model}
  max_batch_sequences: 4
  queue_capacity: 64
  cpu_threads: 1
  # A request with a deadline (the load's --timeout 2) is at risk at this ratio (8 steps of
  # ~1 ms x 1000 > 2 s), so it switches to its tau under load, and the panels of switched
  # requests and their shadow samples have data.
  tau_switch_slack_ratio: 1000
decoding:
  max_new_tokens: 128
  schedule: block
  block_length: 8
cache:
  policy: entropy
  shadow_sample_rate: 1
  shadow_max_time_fraction: 1000
limits:
  max_shadow_sample_rate: 1
metrics:
  address: 127.0.0.1
  port: {metrics_port}
""")
    server_log = tmp / "server.log"
    server = subprocess.Popen([str(server_bin), "--config", str(config)],
                              stdout=server_log.open("w"), stderr=subprocess.STDOUT, cwd=root)
    procs.append(server)
    health_env = dict(os.environ, DLLM_HEALTH_ADDRESS=f"127.0.0.1:{grpc_port}")
    healthcheck = [str(root / "docker" / "healthcheck")]

    def serving() -> bool:
        return subprocess.run(healthcheck, env=health_env, capture_output=True,
                              timeout=10).returncode == 0

    wait_until(serving, 180, "dllm-server to report SERVING (docker/healthcheck)", server,
               server_log)
    print(f"ok server SERVING on 127.0.0.1:{grpc_port} (docker/healthcheck), "
          f"metrics on :{metrics_port}")

    errors = check_exported(http_get(f"http://127.0.0.1:{metrics_port}/metrics"),
                            metric_contract(root))
    if errors:
        raise Failure("metric contract:\n  " + "\n  ".join(errors))
    print("ok /metrics exports every metric of tests/deploy/metrics.txt with its type")

    # Prometheus from the shipped standalone config, sped up and pointed at this server.
    prom_dir = root / "deploy" / "prometheus"
    text = (prom_dir / "prometheus.yml").read_text()
    for old, new in (("scrape_interval: 15s", "scrape_interval: 1s"),
                     ("evaluation_interval: 30s", "evaluation_interval: 1s"),
                     ("scrape_timeout: 10s", "scrape_timeout: 1s"),
                     ("127.0.0.1:9400", f"127.0.0.1:{metrics_port}"),
                     ("  - rules/", f"  - {prom_dir}/rules/")):
        if old not in text:
            raise Failure(f"deploy/prometheus/prometheus.yml changed shape: '{old}' not found "
                          "(update this test)")
        text = text.replace(old, new)
    (tmp / "prometheus.yml").write_text(text)
    prom_log = tmp / "prometheus.log"
    prom = subprocess.Popen([prometheus_bin, f"--config.file={tmp / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                            stdout=prom_log.open("w"), stderr=subprocess.STDOUT)
    procs.append(prom)
    api = Prometheus(prom_port)
    scraped = 'count_over_time(up{job="dllm-serve"}[1m]) >= 3'
    wait_until(lambda: finite_values(api.query(scraped, time.time())),
               60, "Prometheus to scrape dllm-server 3 times", prom, prom_log)
    print("ok Prometheus scraping")

    if not os.access(client_bin, os.X_OK):
        print(f"SKIP: {client_bin} is not built yet; server metric contract checked, "
              "dashboard queries not")
        return SKIP
    # Two phases, unary then streaming, so both RPC paths feed the histograms.
    common = ["--address", f"127.0.0.1:{grpc_port}", "--concurrency", "4", "--requests", "12",
              "--prompt", "The quick brown fox", "--timeout", "2"]
    phases = [["load", *common], ["load", *common, "--stream"]]
    if os.environ.get("DLLM_LOAD_ARGS"):
        phases = [os.environ["DLLM_LOAD_ARGS"].split()]
    t0 = time.time()
    for phase in phases:
        cmd = [str(client_bin), *phase]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise Failure(f"load failed ({r.returncode}): {' '.join(cmd)}\n"
                          f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        print(f"ok {' '.join(phase[:1] + phase[3:])}: {last}")
    t1 = time.time()
    print(f"ok load finished in {t1 - t0:.1f}s")
    time.sleep(3)  # two more scrapes

    at = t1 + 1.5
    window_s = int(math.ceil(t1 - t0)) + 6
    namespaces = api.label_values("namespace", "dllm_num_requests_running")
    pods = api.label_values("pod", 'dllm_num_requests_running{namespace=~"default"}')
    if "default" not in namespaces or "127.0.0.1" not in pods:
        raise Failure(f"dashboard variables: namespace values {namespaces}, pod values {pods}; "
                      "want 'default' and '127.0.0.1' from deploy/prometheus/prometheus.yml "
                      "relabelling")
    failures, count = [], 0
    for title, ref, expr in dashboard_queries(root):
        q = substitute(expr, "default", "127.0.0.1", window_s)
        count += 1
        result = api.query(q, at)
        if not result:
            failures.append(f"{title} [{ref}]: empty result: {q}")
        elif not finite_values(result):
            failures.append(f"{title} [{ref}]: only NaN/Inf: {q} -> {json.dumps(result)[:300]}")
        else:
            print(f"ok {title} [{ref}]: {len(result)} series")

    # Drain contract: SIGTERM -> NOT_SERVING -> clean exit within the drain timeout.
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=DRAIN_TIMEOUT_S + 15)
    except subprocess.TimeoutExpired:
        failures.append(f"server did not exit within {DRAIN_TIMEOUT_S + 15}s of SIGTERM")
    else:
        if rc != 0:
            failures.append(f"server exited with {rc} after SIGTERM\n{tail(server_log)}")
    if failures:
        raise Failure(f"{len(failures)} of {count} dashboard queries failed:\n  "
                      + "\n  ".join(failures))
    print(f"ok all {count} dashboard queries returned data; server drained and exited 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
