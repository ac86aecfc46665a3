"""Distributed tests: each starts ``torchrun --nproc-per-node 2`` over gloo on the CPU (``worker.py``, the example)."""
import os
import subprocess
import sys


def torchrun(script, *args, nproc=2, timeout=600):
    """Run ``script`` under ``torchrun --nproc-per-node nproc`` (CPU, gloo); the completed process."""
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", str(script),
           *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
