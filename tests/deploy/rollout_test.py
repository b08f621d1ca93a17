"""A rolling drain and a crash behind balancers, on loopback: three dllm-server replicas,
nginx in front of them (HTTP with proxy_pass, gRPC with grpc_pass), and gRPC clients that
balance by themselves (round_robin, with client-side health checking or with a retry policy
for UNAVAILABLE). Load runs on every path while one replica gets SIGTERM (lame duck, then
drain) or SIGKILL, and each call's final status is counted per path.

The closest we get here to a Kubernetes rollout. What it checks:
* SIGTERM: no path loses a call. During the lame duck the replica reports NOT_SERVING and
  still serves; then its ports refuse connections (nginx retries those elsewhere) and calls
  on connections already open are refused with UNAVAILABLE before any work (retryable).
* SIGKILL: only the calls in flight on the killed replica fail (at most the load's
  concurrency on that path), and they fail with a definite status.

Usage (from the repo root; ctest: deploy:rollout:*):
  PYTHONPATH=.:STUBS python3 -m tests.deploy.rollout_test --bin-dir build/bin [unittest args]
STUBS holds the Python gRPC stubs of proto/ (dllm/v1/dllm_pb2*.py), which ctest generates into
build/tests/deploy/python_stubs (deploy:rollout:python_stubs; the command is in
tests/deploy/CMakeLists.txt). Needs nginx (Debian nginx-light, installed by scripts/deps)
and python3-grpcio.
"""

import collections
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from tests.e2e import e2e_test
from tests.e2e.e2e_test import SOURCE_DIR, Server, free_port

TINY_MODEL = os.path.join(SOURCE_DIR, "models", "llada-tiny")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

NGINX_CONF = """
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
worker_processes 1;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  # Cached upstream connections, as a production nginx keeps them. Their idle timeout is below
  # the server's keep-alive timeout (5 s), so that nginx, not the server, closes an idle one
  # (docs/operations.md).
  upstream dllm_http {{ {http_servers} keepalive 16; keepalive_timeout 4s; }}
  upstream dllm_grpc {{ {grpc_servers} keepalive 16; keepalive_timeout 4s; }}
  server {{
    listen 127.0.0.1:{http_port};
    location / {{
      proxy_pass http://dllm_http;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # A refused connection (a draining replica) is retried on the next replica; nothing
      # was sent, so this is safe for POST too.
      proxy_next_upstream error timeout;
      proxy_read_timeout 120s;
    }}
  }}
  server {{
    listen 127.0.0.1:{grpc_port} http2;
    location / {{
      grpc_pass grpc://dllm_grpc;
      grpc_next_upstream error timeout;
      grpc_read_timeout 120s;
    }}
  }}
}}
"""

# Client-side balancing as a gRPC user would configure it.
ROUND_ROBIN_HEALTH = {"loadBalancingConfig": [{"round_robin": {}}],
                      "healthCheckConfig": {"serviceName": ""}}
ROUND_ROBIN_RETRY = {
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [{"name": [{"service": "dllm.v1.DiffusionLM"}],
                      "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.05s",
                                      "maxBackoff": "0.5s", "backoffMultiplier": 2,
                                      "retryableStatusCodes": ["UNAVAILABLE"]}}]}


class Load:
    """`concurrency` threads calling `call()` until stopped; counts final statuses."""

    def __init__(self, name, call, concurrency):
        self.name = name
        self.counts = collections.Counter()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(call,))
                        for _ in range(concurrency)]
        for t in self.threads:
            t.start()

    def _run(self, call):
        while not self.stop.is_set():
            status = call()
            with self.lock:
                self.counts[status] += 1

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        return dict(self.counts)


def http_call(port):
    body = json.dumps({"model": "llada-tiny", "prompt": "Hello", "max_tokens": 16})
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/completions", body=body,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return "OK" if resp.status == 200 else "HTTP %d" % resp.status
    except (OSError, http.client.HTTPException) as e:
        return "transport error: %s" % type(e).__name__


def grpc_caller(target, service_config=None):
    import grpc
    from dllm.v1 import dllm_pb2, dllm_pb2_grpc
    options = [("grpc.enable_retries", 1)]
    if service_config is not None:
        options.append(("grpc.service_config", json.dumps(service_config)))
    channel = grpc.insecure_channel(target, options=options)
    stub = dllm_pb2_grpc.DiffusionLMStub(channel)
    request = dllm_pb2.GenerateRequest(prompt="Hello", max_new_tokens=16)

    def call():
        try:
            stub.Generate(request, timeout=60)
            return "OK"
        except grpc.RpcError as e:
            return e.code().name

    return call, channel


class RolloutTest(unittest.TestCase):

    def setUp(self):
        if not os.path.exists(NGINX):
            self.skipTest("nginx not installed (scripts/deps installs nginx-light)")
        try:
            from dllm.v1 import dllm_pb2_grpc  # noqa: F401  (generated: see the module doc)
        except ImportError as e:
            self.fail("no Python gRPC stubs of proto/ on PYTHONPATH (see the module doc): %s" % e)
        self.tmp = tempfile.mkdtemp(prefix="dllm-rollout-")
        self.replicas = []
        for _ in range(3):
            http_port = free_port()
            s = Server(self.tmp, TINY_MODEL, wait=False, overrides={
                "server": {"lame_duck_seconds": 2, "drain_timeout_seconds": 30,
                           "max_connection_age_seconds": 2},
                "http": {"address": "127.0.0.1", "port": http_port},
                "engine": {"queue_capacity": 256}})
            s.http_port = http_port
            self.replicas.append(s)
        for s in self.replicas:
            s.wait_serving()
        self.nginx_http, self.nginx_grpc = free_port(), free_port()
        conf = os.path.join(self.tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(
                dir=self.tmp, http_port=self.nginx_http, grpc_port=self.nginx_grpc,
                http_servers=" ".join("server 127.0.0.1:%d;" % s.http_port
                                      for s in self.replicas),
                grpc_servers=" ".join("server %s;" % s.address for s in self.replicas)))
        self.nginx = subprocess.Popen([NGINX, "-c", conf, "-p", self.tmp],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 10
        while time.time() < deadline and http_call(self.nginx_http) != "OK":
            time.sleep(0.1)
        self.assertEqual(http_call(self.nginx_http), "OK")
        self.channels = []

    def tearDown(self):
        for c in getattr(self, "channels", []):
            c.close()
        if getattr(self, "nginx", None) is not None:
            self.nginx.terminate()
            self.nginx.wait(timeout=10)
        for s in getattr(self, "replicas", []):
            s.kill()
        shutil.rmtree(getattr(self, "tmp", ""), ignore_errors=True)

    def loads(self):
        direct = "ipv4:" + ",".join(s.address for s in self.replicas)
        paths = [("nginx http", lambda: http_call(self.nginx_http), 4),
                 ("nginx grpc", None, 4),
                 ("round_robin + health checks", None, 2),
                 ("round_robin + retry UNAVAILABLE", None, 2)]
        targets = {"nginx grpc": ("127.0.0.1:%d" % self.nginx_grpc, None),
                   "round_robin + health checks": (direct, ROUND_ROBIN_HEALTH),
                   "round_robin + retry UNAVAILABLE": (direct, ROUND_ROBIN_RETRY)}
        out = []
        for name, call, concurrency in paths:
            if call is None:
                call, channel = grpc_caller(*targets[name])
                self.channels.append(channel)
            out.append(Load(name, call, concurrency))
        return out

    def run_with(self, act):
        loads = self.loads()
        time.sleep(2)
        act()
        time.sleep(6)
        results = {load.name: load.finish() for load in loads}
        print("\n%-34s %s" % ("path", "final statuses"), file=sys.stderr)
        for name, counts in results.items():
            print("%-34s %s" % (name, counts), file=sys.stderr)
        return results

    def test_sigterm_of_one_replica_loses_no_call(self):
        victim = self.replicas[0]
        # A long generation (~2 s here) keeps the victim draining while the balancers go on
        # sending: nginx's cached upstream connections must stop carrying new calls there
        # (a GOAWAY, Connection: close) rather than have them refused.
        import grpc
        from dllm.v1 import dllm_pb2, dllm_pb2_grpc
        long_channel = grpc.insecure_channel(victim.address)
        self.channels.append(long_channel)
        long_request = dllm_pb2.GenerateRequest(
            prompt="Hello", max_new_tokens=448,
            decoding=dllm_pb2.DecodingOptions(schedule=dllm_pb2.SCHEDULE_BLOCK, steps=448,
                                              block_length=448))
        long_call = dllm_pb2_grpc.DiffusionLMStub(long_channel).Generate.future(
            long_request, timeout=60)

        def sigterm_during_a_long_call():
            time.sleep(0.3)
            victim.proc.send_signal(signal.SIGTERM)

        results = self.run_with(sigterm_during_a_long_call)
        long_call.result()  # raises unless OK: the drain let it finish
        self.assertEqual(victim.proc.wait(timeout=60), 0, victim.log()[-2000:])
        events = [r["event"] for r in victim.records()]
        self.assertLess(events.index("lame_duck"), events.index("draining"))
        for name, counts in results.items():
            self.assertGreater(counts.get("OK", 0), 0, name)
            self.assertEqual(set(counts), {"OK"}, "%s: %s" % (name, counts))

    def test_sigkill_of_one_replica_fails_only_calls_in_flight(self):
        victim = self.replicas[1]
        results = self.run_with(victim.proc.kill)
        for name, counts in results.items():
            failed = sum(n for status, n in counts.items() if status != "OK")
            self.assertGreater(counts.get("OK", 0), 0, name)
            # Health checks and retries route around the dead replica; nginx can fail only
            # the calls it had in flight there (at most its concurrency, 4).
            self.assertLessEqual(failed, 4, "%s: %s" % (name, counts))


if __name__ == "__main__":
    e2e_test.main()  # --bin-dir, then unittest
