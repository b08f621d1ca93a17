"""Bench scripts; a package so that tests import them from the repository root
(`from bench import bench_table`) and bench.make_llada8b_shaped imports tools.pylib."""
