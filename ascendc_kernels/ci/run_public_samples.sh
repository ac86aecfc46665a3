#!/usr/bin/env bash
# Run public AscendC samples on the executable AscendC stand-in
# (tests/exec_ascendc/kernel_operator.h) and compare their outputs with the samples'
# own golden data: a check of the stand-in against kernels and numbers that are not ours.
#
# NOT RUN IN CI: CI has no copy of the samples.  Run it by hand:
#
#   ascendc_kernels/ci/run_public_samples.sh <git checkout of cannmirror/asc-devkit> [<catlass checkout>] [OUTDIR]
#
# For each sample (and scenario, -DSCENARIO_NUM as its CMakeLists.txt sets it):
#   1. its device code, i.e. its .asc file up to its host main (`int32_t main`), without the
#      acl/acl.h and data_utils.h includes, is written to OUTDIR/<case>/kernel.h;
#   2. tests/exec_ascendc/samples/<sample>_driver.cpp (our host driver, which #includes that file and
#      launches the kernel once per block as the sample's main does) is built with g++ and the
#      stand-in's flags (-D__NPU_ARCH__=2201 -DSGEMM_CUBE_SOC_910B, as the executed-kernel tests);
#   3. the sample's scripts/gen_data.py makes the inputs and golden data (numpy, in OUTDIR/<case>);
#   4. the driver runs (the stand-in's flag/race checker reports; exit 1 on checker errors,
#      2 on fatal errors such as an unmodelled parameter);
#   5. the sample's own scripts/verify_result.py decides "matched" (its tolerance), and the
#      outputs are also compared bit for bit ("exact", with the largest absolute difference).
# A case whose driver does not build is listed with the first compiler error (usually an API
# or type the stand-in does not model, by design: e.g. int8/float Mmad, bias tables, quantisation).
#
# Arguments: the asc-devkit checkout (the folder holding examples/01_simd_cpp_api); optionally a
# CATLASS checkout (no CATLASS example has a driver yet: listed as not run); OUTDIR (default: a
# temporary folder) keeps every case's build log, run log, inputs and outputs.
# Environment: CXX (g++), PYTHON (python3, with numpy; ml_dtypes for the mmad sample's bfloat16).
# Exit status: 0 when every case that is expected to run ran and matched, 1 otherwise, 2 on usage.
set -u -o pipefail

ASC=${1:?usage: run_public_samples.sh <asc-devkit checkout> [<catlass checkout>] [outdir]}
CATLASS=${2:-}
OUT=${3:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
KERNELS=$(cd "$HERE/.." && pwd)
EXEC="$KERNELS/tests/exec_ascendc"
CXX=${CXX:-g++}
PYTHON=${PYTHON:-python3}
EX="$ASC/examples/01_simd_cpp_api"

if [[ ! -d "$EX" ]]; then
    echo "error: $ASC has no examples/01_simd_cpp_api (want an asc-devkit checkout)" >&2
    exit 2
fi
if ! "$PYTHON" -c "import numpy" 2>/dev/null; then
    echo "error: $PYTHON cannot import numpy (the samples' data generators need it)" >&2
    exit 2
fi
commit=$(git -C "$ASC" rev-parse --short=12 HEAD 2>/dev/null || echo "${ASC_COMMIT:-unknown}")
mkdir -p "$OUT"

# case name | sample folder (under examples/01_simd_cpp_api) | .asc | driver | scenario ("" = none) |
# output dtype (numpy) | expected to run (1) or listed as not modelled (0) | note
CASES=(
"matmul_basic_api|00_introduction/02_matrix/matmul_basic_api|matmul_basic_api.asc|matmul_basic_api||float16|1|Nd2Nz, LoadData2D (B transposed), Mmad, Fixpipe F322F16, 2 blocks"
"load_data_l12l0 #6|03_basic_api/03_matrix_compute/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|6|float32|1|half; A [m,k] Load2D, B [n,k] Load2D; m,n,k = 40,50,70"
"load_data_l12l0 #7|03_basic_api/03_matrix_compute/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|7|float32|1|half; A [m,k]: L1->L0A via Load3D v2, B [n,k] Load2D"
"load_data_l12l0 #8|03_basic_api/03_matrix_compute/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|8|float32|1|half; A [k,m], B [k,n]: Load2D ifTranspose"
"load_data_l12l0 #9|03_basic_api/03_matrix_compute/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|9|float32|1|half; A [k,m], B [k,n]: LoadDataWithTranspose"
"load_data_l12l0 #10|03_basic_api/03_matrix_compute/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|10|float32|1|half; A [k,m], B [k,n]: transposes via Load3D v2 (L0A enTranspose, L0B)"
"fixpipe_l0c2gm #1|03_basic_api/03_matrix_compute/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|1|float32|1|CFG_NZ float; K in 2 Mmad rounds (accumulate)"
"fixpipe_l0c2gm #2|03_basic_api/03_matrix_compute/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|2|float32|1|CFG_ROW_MAJOR (NZ2ND) float"
"fixpipe_l0c2gm #4|03_basic_api/03_matrix_compute/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|4|int8|0|QF322B8_PRE scalar quant (not modelled)"
"fixpipe_l0c2gm #5|03_basic_api/03_matrix_compute/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|5|int8|0|VQF322B8_PRE vector quant (not modelled)"
"fixpipe_l0c2gm #6|03_basic_api/03_matrix_compute/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|6|float32|1|CFG_ROW_MAJOR float, reluEn"
"data_copy_gm2l1 #1|03_basic_api/00_data_movement/data_copy_gm2l1|data_copy_gm2l1.asc|data_copy_gm2l1|1|float32|1|GM->L1 plain DataCopy of NZ data (blockLen), half"
"data_copy_gm2l1 #2|03_basic_api/00_data_movement/data_copy_gm2l1|data_copy_gm2l1.asc|data_copy_gm2l1|2|float32|1|GM->L1 Nd2Nz, half"
"data_copy_gm2l1 #3|03_basic_api/00_data_movement/data_copy_gm2l1|data_copy_gm2l1.asc|-||float32|0|Dn2Nz: dav-3510 only (the sample asserts on 2201)"
"data_copy_gm2l1 #4|03_basic_api/00_data_movement/data_copy_gm2l1|data_copy_gm2l1.asc|data_copy_gm2l1|4|float32|0|bias: L1->BT (C2) copy and Mmad with bias (not modelled)"
"data_copy_gm2l1 #5|03_basic_api/00_data_movement/data_copy_gm2l1|data_copy_gm2l1.asc|data_copy_gm2l1|5|int8|0|VQF322B8_PRE vector quant (not modelled)"
"mmad #2|03_basic_api/03_matrix_compute/mmad|mmad.asc|mmad|2|float32|1|bfloat16 (the 16-bit scenario): Nd2Nz, LoadData 2D, two Mmads (accumulate), Fixpipe NZ2ND"
"mmad #1, #3, #4|03_basic_api/03_matrix_compute/mmad|mmad.asc|-||float32|0|int8 with a bias table, float with a bias tensor, int4: Mmad modelled for 16-bit floats only"
"fixpipe_l0c2gm #7|03_basic_api/03_matrix_compute/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|7|float32|0|isChannelSplit (not modelled)"
)

status=0
rows=()
for spec in "${CASES[@]}"; do
    IFS='|' read -r name dir asc driver scen dtype expect note <<<"$spec"
    case_dir="$OUT/$(echo "$name" | tr ' #' '_s')"
    rm -rf "$case_dir"
    mkdir -p "$case_dir/input" "$case_dir/output"
    src="$EX/$dir/$asc"
    built=no ran=no matched=no exact=- maxerr=- why=""
    if [[ ! -f "$src" ]]; then
        rows+=("$name|$commit|no|no|no|-|-|sample missing at this commit")
        [[ $expect == 1 ]] && status=1
        continue
    fi
    if [[ $driver == - ]]; then
        rows+=("$name|$commit|-|no|-|-|-|not run: $note")
        continue
    fi
    sed -e '/^int32_t main/,$d' -e '/#include "acl\/acl.h"/d' -e '/#include "data_utils.h"/d' "$src" >"$case_dir/kernel.h"
    defs=(-D__NPU_ARCH__=2201 -DSGEMM_CUBE_SOC_910B "-DSAMPLE_KERNEL_SRC=\"$case_dir/kernel.h\"")
    genargs=()
    verargs=()
    if [[ -n $scen ]]; then
        defs+=("-DSCENARIO_NUM=$scen")
        # the scripts take -scenarioNum where they read it (argparse); some verify scripts do not
        grep -q scenarioNum "$EX/$dir/scripts/gen_data.py" && genargs=("-scenarioNum=$scen")
        grep -q scenarioNum "$EX/$dir/scripts/verify_result.py" && verargs=("-scenarioNum=$scen")
    fi
    if "$CXX" -std=c++17 -O1 "${defs[@]}" -I "$EXEC" -I "$EXEC/samples" -I "$KERNELS/include" \
        "$EXEC/samples/${driver}_driver.cpp" -o "$case_dir/driver" >"$case_dir/build.log" 2>&1; then
        built=yes
        (cd "$case_dir" && "$PYTHON" "$EX/$dir/scripts/gen_data.py" "${genargs[@]}") >"$case_dir/gen.log" 2>&1 ||
            why="gen_data.py failed; "
        (cd "$case_dir" && ./driver) >"$case_dir/run.log" 2>&1
        rc=$?
        if [[ $rc == 0 ]]; then
            ran=yes
        elif [[ $rc == 1 ]]; then
            ran=yes
            why+="checker: $(grep -c CHECK-ERROR "$case_dir/run.log") error kind(s); "
        else
            why+="exit $rc: $(grep -m1 -o 'FATAL: .*' "$case_dir/run.log" | cut -c1-90); "
        fi
        if [[ $ran == yes ]]; then
            if (cd "$case_dir" && "$PYTHON" "$EX/$dir/scripts/verify_result.py" "${verargs[@]}" \
                output/output.bin output/golden.bin) >"$case_dir/verify.log" 2>&1; then
                matched=yes
            fi
            read -r exact maxerr <<<"$("$PYTHON" - "$case_dir" "$dtype" <<'EOF'
import sys
import numpy as np
d, t = sys.argv[1], np.dtype(sys.argv[2])
o = np.fromfile(d + "/output/output.bin", dtype=t)
g = np.fromfile(d + "/output/golden.bin", dtype=t)
if o.size != g.size:
    print("size", "-")
else:
    same = int(np.sum(o.view(np.uint8).reshape(o.size, -1) != g.view(np.uint8).reshape(g.size, -1), axis=1).astype(bool).sum())
    err = np.abs(o.astype(np.float64) - g.astype(np.float64))
    print("yes" if same == 0 else "no(%d/%d)" % (same, o.size), "%.3g" % np.nanmax(err))
EOF
)"
        fi
    else
        why="$(grep -m1 -o 'error: .*' "$case_dir/build.log" | cut -c1-100)"
    fi
    [[ $expect == 0 && $built == no ]] && why="expected (not modelled): $why"
    if [[ $expect == 1 && ($ran != yes || $matched != yes) ]]; then
        status=1
    fi
    rows+=("$name|$commit|$built|$ran|$matched|$exact|$maxerr|$note${why:+; $why}")
done
if [[ -n $CATLASS ]]; then
    ccommit=$(git -C "$CATLASS" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
    rows+=("catlass examples/00_basic_matmul|$ccommit|no|no|no|-|-|no driver yet (not run)")
fi

printf '%-22s | %-12s | %-6s | %-4s | %-8s | %-14s | %-9s | %s\n' sample commit built ran matched exact "max err" notes
printf -- '-%.0s' {1..130}
echo
for r in "${rows[@]}"; do
    IFS='|' read -r a b c d e f g h <<<"$r"
    printf '%-22s | %-12s | %-6s | %-4s | %-8s | %-14s | %-9s | %s\n' "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h"
done
echo "logs, inputs and outputs: $OUT"
exit $status
