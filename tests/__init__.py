"""The Python tests and generators under tests/ import each other from the repository root
(`from tests.e2e import e2e_test`): run them with `python3 -m tests.<dir>.<name>` from the
root or with PYTHONPATH=<root>, as tests/**/CMakeLists.txt does. A regular package, so a
`tests` package that some installed distribution ships cannot shadow this one."""
