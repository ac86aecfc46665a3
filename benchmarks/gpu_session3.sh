#!/usr/bin/env bash
# Final device call: every GPU test, the benchmark with the tuned table in place, the demo.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/gpu > "$OUT/pytest_gpu.txt" 2>&1
grep -E "passed|failed|^FAILED" "$OUT/pytest_gpu.txt" | tail -8
timeout 200 python3 -m sgemm_cube.cli bench --sizes 1024 2048 4096 8192 16384 --no-rect --reps-ms 100 --results-dir "$OUT" > "$OUT/bench.txt" 2>&1
grep -E "TFLOP|hybrid|wrote" "$OUT/bench.txt" | cut -c1-250
timeout 40 python3 -m sgemm_cube.cli demo --size 8192 2>&1 | tail -8
