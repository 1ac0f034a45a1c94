"""Benchmarks and fault-injection runs that drive real gochatd processes."""
