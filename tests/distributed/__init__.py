"""Distributed tests: each starts ``torchrun --nproc-per-node 2`` over gloo on the CPU (``worker.py``, the example)."""
