"""Dependent jobs, chains and batches (docs/workflows.md)."""
