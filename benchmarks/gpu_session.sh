#!/usr/bin/env bash
# One device call: GPU tests, schemes timing (+ BF16 configs), example and demo on CUDA. Results under $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,memory.used --format=csv | tee "$OUT/gpu.txt"
timeout 270 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/gpu > "$OUT/pytest_gpu.txt" 2>&1
grep -E "passed|failed|^FAILED|^E " "$OUT/pytest_gpu.txt" | head -30
timeout 200 python3 benchmarks/schemes_gpu.py --bf16-configs --out "$OUT" 2>&1 | tail -32
timeout 60 python3 examples/train_mlp.py --device cuda --out "$OUT/train_mlp_loss.png" 2>&1 | tail -4
timeout 45 python3 -m sgemm_cube.cli demo 2>&1 | tee "$OUT/demo.txt" | tail -8
