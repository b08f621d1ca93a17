"""bench/serve.py over gRPC streaming against a real dllm-server (the tiny model): every
request OK, the server's counters matching the generator's, and the server's costs read.

  DLLM_BIN_DIR=build/bin /usr/bin/python3 -m tests.dllm_bench.test_serve_grpc
"""
import contextlib
import io
import json
import os
import shutil
import tempfile
import unittest

from bench import serve
from tests import unittest_exit
from tests.e2e import e2e_test


class ServeGrpcTest(unittest.TestCase):
    def test_grpc_stream_rows(self):
        e2e_test.BIN_DIR = os.environ["DLLM_BIN_DIR"]
        workdir = tempfile.mkdtemp(prefix="dllm-serve-grpc-")
        server = e2e_test.Server(workdir, os.path.join(e2e_test.SOURCE_DIR, "models",
                                                       "llada-tiny"))
        try:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = serve.main(["--grpc", server.address,
                                 "--metrics", "127.0.0.1:%d" % server.metrics_port,
                                 "--workload", os.path.join(e2e_test.SOURCE_DIR, "tools", "tasks",
                                                            "data", "test.jsonl"),
                                 "--requests", "20", "--concurrency", "1,4", "--max-tokens", "16",
                                 "--json"])
            rows = [json.loads(line) for line in out.getvalue().splitlines()]
        finally:
            server.kill()
            shutil.rmtree(workdir, ignore_errors=True)
        self.assertEqual(rc, 0, rows)
        self.assertEqual(len(rows), 2)
        for row in rows:
            self.assertEqual(row["protocol"], "grpc")
            self.assertEqual(row["by_status"], {"OK": 20}, row)
            self.assertTrue(row["counts_match"], row)
            self.assertGreater(row["accuracy"], 0.8)  # the tiny model's own suite
            self.assertGreater(row["rows_per_token"], 0)
            self.assertIsNotNone(row["ttft_ms"]["median"])
            self.assertIsNotNone(row["frontend_ms"]["median"])


if __name__ == "__main__":
    unittest_exit.main()
