#!/usr/bin/env bash
# Second device call: measured tuning (table for tuning/tables/), benchmark with the public-API column,
# schemes timing (scheme="auto" with the range kernel), GPU tests of auto and BF16. Results under $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p "$OUT/tables"
timeout 250 python3 -m tuning.gpu --quick --time-budget 170 --out "$OUT/tables" > "$OUT/tune.txt" 2>&1; tail -14 "$OUT/tune.txt"
timeout 150 python3 -m sgemm_cube.cli bench --sizes 1024 2048 4096 8192 --no-rect --reps-ms 100 --results-dir "$OUT" > "$OUT/bench.txt" 2>&1; grep -E "TFLOP|hybrid|wrote" "$OUT/bench.txt" | cut -c1-260
timeout 90 python3 benchmarks/schemes_gpu.py --sizes 8192 --out "$OUT" 2>&1 | tail -12
timeout 90 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/gpu -k "auto or bf16x9" 2>&1 | tail -3
