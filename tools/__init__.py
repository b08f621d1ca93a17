"""dllm-serve's Python tools: training (train), the PyTorch reference (reference), the task
suites (tasks), shared I/O (pylib) and the measurement scripts.

Imports are absolute from the repository root (`from tools.train import common`), which the
caller puts on the path: `python3 -m tools.train.train ...` from the root, or
PYTHONPATH=<root>. Nothing needs installing (pyproject.toml)."""
