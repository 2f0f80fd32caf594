"""Benchmarks that print figures (never timed tests). Run each as `python -m tilec.benchmarks.NAME`."""
