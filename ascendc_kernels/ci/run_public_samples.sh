#!/usr/bin/env bash
# Run public AscendC samples on the executable AscendC stand-in
# (tests/exec_ascendc/kernel_operator.h) and compare their outputs with the samples'
# own golden data: a check of the stand-in against kernels and numbers that are not ours.
#
# NOT RUN IN CI: CI has no copy of the samples.  Run it by hand:
#
#   ascendc_kernels/ci/run_public_samples.sh <checkout of cannmirror/asc-devkit> [<catlass checkout>] [OUTDIR]
#
# The samples are others' code: they are read from the checkout given, never copied into this repository.
# For each case (a sample and its compile-time settings, -DSCENARIO_NUM=.. / -DENABLE_UNITFLAG=.. as its
# CMakeLists.txt sets them):
#   1. its device code, i.e. its .asc file up to its host main (`int32_t main`), without the
#      acl/acl.h and data_utils.h includes, is written to OUTDIR/<case>/kernel.h;
#   2. tests/exec_ascendc/samples/<sample>_driver.cpp (our host driver, which #includes that file and
#      launches the kernel once per block as the sample's main does) is built with g++ and the
#      stand-in's flags (-D__NPU_ARCH__=2201 -DSGEMM_CUBE_SOC_910B, as the executed-kernel tests);
#   3. the sample's scripts/gen_data.py makes the inputs and golden data (in OUTDIR/<case>);
#   4. the driver runs; the stand-in's flag/race checker and the documented rules it checks (alignment,
#      PipeBarrier<PIPE_M> between small Mmads, no GEMV-mode Mmad, no NaN/Inf on the cube, unit flags)
#      report CHECK-ERROR lines (driver exit 1), fatal errors (unmodelled parameter, GEMV) exit 2;
#   5. the sample's own scripts/verify_result.py decides "matched" (exit 0 and "test pass", its tolerance),
#      and the outputs are also compared bit for bit ("exact", with the largest absolute difference).
# A case whose driver does not build is listed with the first compiler error (usually an API
# or type the stand-in does not model, by design: e.g. int8/float Mmad, bias tables, quantisation).
#
# Verdicts (last column group of the summary table) and the exit status:
#   PASS     built, ran with no checker error, verify_result.py matched;
#   KNOWN    a documented finding in the sample (or a refusal by design) on the allow-list KNOWN below, with
#            its reason: every CHECK-ERROR (or the FATAL) line matches the entry's pattern, and the output,
#            where one is expected, still matched.  Does not fail the run;
#   FAIL     anything else for a case expected to run: build failure, checker error not on the allow-list,
#            fatal error, verify mismatch, missing sample.  Fails the run (exit 1);
#   not run  no driver (listed with the reason); not modelled: a case kept to show that it does not build or
#            that the stand-in refuses it (FATAL) when it runs.
#
# Requirements: g++ (CXX), python3 (PYTHON) able to make a venv.  The samples' data generators need numpy,
# and the mmad sample's bfloat16 data needs ml_dtypes: both are installed into the script's own virtual
# environment (SAMPLES_VENV, default OUTDIR/venv, reused when it already has them), never into the
# project's test environment.  Set SAMPLES_VENV=none to use PYTHON as it is (it must import both).
# Environment: ONLY=<extended regex> runs the cases whose name matches (the others are left out).
# Arguments: the asc-devkit checkout (the folder holding examples/01_simd_cpp_api); optionally a
# CATLASS checkout (no CATLASS example has a driver yet: listed as not run); OUTDIR (default: a
# temporary folder) keeps every case's build log, run log, inputs and outputs.
# Exit status: 0 when every case expected to run is PASS or KNOWN, 1 otherwise, 2 on usage or setup errors.
set -u -o pipefail

ASC=${1:?usage: run_public_samples.sh <asc-devkit checkout> [<catlass checkout>] [outdir]}
CATLASS=${2:-}
OUT=${3:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
KERNELS=$(cd "$HERE/.." && pwd)
EXEC="$KERNELS/tests/exec_ascendc"
CXX=${CXX:-g++}
PYTHON=${PYTHON:-python3}
ONLY=${ONLY:-}
EX="$ASC/examples/01_simd_cpp_api"

if [[ ! -d "$EX" ]]; then
    echo "error: $ASC has no examples/01_simd_cpp_api (want an asc-devkit checkout)" >&2
    exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# The samples' Python requirements, in an environment of their own (never the project's test environment).
REQUIREMENTS=(numpy ml_dtypes)
VENV=${SAMPLES_VENV:-$OUT/venv}
if [[ $VENV != none ]]; then
    if ! "$VENV/bin/python" -c "import numpy, ml_dtypes" 2>/dev/null; then
        echo "setting up $VENV (${REQUIREMENTS[*]})" >&2
        { "$PYTHON" -m venv "$VENV" && "$VENV/bin/python" -m pip install -q "${REQUIREMENTS[@]}"; } >"$OUT/venv.log" 2>&1 || {
            echo "error: could not install ${REQUIREMENTS[*]} into $VENV (see $OUT/venv.log)" >&2
            exit 2
        }
    fi
    PY="$VENV/bin/python"
else
    PY="$PYTHON"
fi
if ! "$PY" -c "import numpy, ml_dtypes" 2>/dev/null; then
    echo "error: $PY cannot import numpy and ml_dtypes (the samples' data generators need them;" \
        "ml_dtypes for the mmad sample's bfloat16)" >&2
    exit 2
fi
commit=$(git -C "$ASC" rev-parse --short=12 HEAD 2>/dev/null || echo "${ASC_COMMIT:-unknown}")

M3=03_basic_api/03_matrix_compute
D0=03_basic_api/00_data_movement
# case name | sample folder (under examples/01_simd_cpp_api) | .asc | driver ("-": none) |
# compile-time settings (-D, space separated; SCENARIO_NUM=n also passes -scenarioNum=n to the sample's
# scripts where they read it) | output dtype (numpy) | expect: run (must PASS or be KNOWN) or
# model (kept to show it does not build or is refused: not modelled) | note
CASES=(
"matmul_basic_api|00_introduction/02_matrix/matmul_basic_api|matmul_basic_api.asc|matmul_basic_api||float16|run|Nd2Nz, LoadData2D (B transposed), Mmad, Fixpipe F322F16, 2 blocks"
"load_data_l12l0 #6|$M3/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|SCENARIO_NUM=6|float32|run|half; A [m,k] Load2D, B [n,k] Load2D; m,n,k = 40,50,70"
"load_data_l12l0 #7|$M3/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|SCENARIO_NUM=7|float32|run|half; A [m,k]: L1->L0A via Load3D v2, B [n,k] Load2D"
"load_data_l12l0 #8|$M3/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|SCENARIO_NUM=8|float32|run|half; A [k,m], B [k,n]: Load2D ifTranspose"
"load_data_l12l0 #9|$M3/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|SCENARIO_NUM=9|float32|run|half; A [k,m], B [k,n]: LoadDataWithTranspose"
"load_data_l12l0 #10|$M3/load_data_l12l0|load_data_l12l0.asc|load_data_l12l0|SCENARIO_NUM=10|float32|run|half; A [k,m], B [k,n]: transposes via Load3D v2 (L0A enTranspose, L0B)"
"load_data_l12l0 #1-5, #11-14|$M3/load_data_l12l0|load_data_l12l0.asc|-||int32|-|int8 and float: Mmad modelled for 16-bit floats only"
"fixpipe_l0c2gm #1|$M3/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|SCENARIO_NUM=1|float32|run|CFG_NZ float; K in 2 Mmad rounds (accumulate)"
"fixpipe_l0c2gm #2|$M3/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|SCENARIO_NUM=2|float32|run|CFG_ROW_MAJOR (NZ2ND) float"
"fixpipe_l0c2gm #3|$M3/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|-||float32|-|dav-3510 only"
"fixpipe_l0c2gm #4|$M3/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|SCENARIO_NUM=4|int8|model|QF322B8_PRE scalar quant (not modelled)"
"fixpipe_l0c2gm #5|$M3/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|SCENARIO_NUM=5|int8|model|VQF322B8_PRE vector quant (not modelled)"
"fixpipe_l0c2gm #6|$M3/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|SCENARIO_NUM=6|float32|run|CFG_ROW_MAJOR float, reluEn"
"fixpipe_l0c2gm #7|$M3/fixpipe_l0c2gm|fixpipe_l0c2gm.asc|fixpipe_l0c2gm|SCENARIO_NUM=7|float32|model|isChannelSplit (not modelled)"
"data_copy_gm2l1 #1|$D0/data_copy_gm2l1|data_copy_gm2l1.asc|data_copy_gm2l1|SCENARIO_NUM=1|float32|run|GM->L1 plain DataCopy of NZ data (blockLen), half"
"data_copy_gm2l1 #2|$D0/data_copy_gm2l1|data_copy_gm2l1.asc|data_copy_gm2l1|SCENARIO_NUM=2|float32|run|GM->L1 Nd2Nz, half"
"data_copy_gm2l1 #3|$D0/data_copy_gm2l1|data_copy_gm2l1.asc|-||float32|-|Dn2Nz: dav-3510 only (the sample asserts on 2201)"
"data_copy_gm2l1 #4|$D0/data_copy_gm2l1|data_copy_gm2l1.asc|data_copy_gm2l1|SCENARIO_NUM=4|float32|model|bias: L1->BT (C2) copy and Mmad with bias (not modelled)"
"data_copy_gm2l1 #5|$D0/data_copy_gm2l1|data_copy_gm2l1.asc|data_copy_gm2l1|SCENARIO_NUM=5|int8|model|VQF322B8_PRE vector quant (not modelled)"
"mmad #2|$M3/mmad|mmad.asc|mmad|SCENARIO_NUM=2|float32|run|bfloat16 (the 16-bit scenario): Nd2Nz, LoadData 2D, two Mmads (accumulate), Fixpipe NZ2ND"
"mmad #1, #3, #4|$M3/mmad|mmad.asc|-||float32|-|int8 with a bias table, float with a bias tensor, int4: Mmad modelled for 16-bit floats only"
"mmad_load3dv2 #1|$M3/mmad_load3dv2|mmad_load3dv2.asc|mmad_load3dv2|SCENARIO_NUM=1|float32|run|half; A [m,k] -> L0A and B [k,n] -> L0B (transposed) by Load3D v2; m,n,k = 30,70,40"
"mmad_load3dv2 #2|$M3/mmad_load3dv2|mmad_load3dv2.asc|mmad_load3dv2|SCENARIO_NUM=2|float32|run|half; A given [k,m]: Load3D v2 enTranspose into L0A; B as #1"
"mmad_load3dv2 #3-5|$M3/mmad_load3dv2|mmad_load3dv2.asc|-||float32|-|float (kDirectionAlign) and int8: Mmad modelled for 16-bit floats only"
"mmad_unitflag (on)|$M3/mmad_unitflag|mmad_unitflag.asc|mmad_unitflag|ENABLE_UNITFLAG=1|float32|run|half, K in 8 Mmads: unitFlag 2..2,3; Fixpipe unitFlag 3; SetFixPipeConfig reset; 128x256x512"
"mmad_unitflag (off)|$M3/mmad_unitflag|mmad_unitflag.asc|mmad_unitflag|ENABLE_UNITFLAG=0|float32|run|the same without unit flags"
"mmad_gemv|$M3/mmad_gemv|mmad_gemv.asc|mmad_gemv|DISABLE_GEMV=0|float32|run|half, M = 1: Mmad in GEMV mode (the only dav-2201 setting)"
"batch_matmul|$M3/batch_matmul|batch_matmul.asc|-||float32|-|missing: Fixpipe L0C -> L1 (FixpipeParamsV220 into a LocalTensor), Fixpipe ndNum > 1, AscendC::printf, DumpTensor"
"fixpipe_l0c2l1 #1-4|$M3/fixpipe_l0c2l1|fixpipe_l0c2l1.asc|-||float32|-|missing: Fixpipe L0C -> L1 (FixpipeParamsV220 into a LocalTensor)"
"data_copy_l0c2gm|$D0/data_copy_l0c2gm|data_copy_l0c2gm.asc|-||float32|-|missing: DataCopy L0C -> GM (DataCopyCO12DstParams), SetFixpipeNz2ndFlag, SetFixpipePreQuantFlag, AscendC::printf"
"matmul_leakyrelu_basic_api|00_introduction/03_fusion_operation/matmul_leakyrelu_basic_api|matmul_leakyrelu_basic_api.asc|-||float32|-|missing: AIC/AIV mix (CrossCoreSetFlag/WaitFlag), LeakyRelu, DataCopyPad"
"mmad_with_sparse|$M3/mmad_with_sparse|mmad_with_sparse.asc|-||int32|-|missing: MmadWithSparse, LoadDataWithSparse (int8)"
"3510-only matrix samples|$M3|-|-||float32|-|dav-3510 only (not 910B): load_data_2dv2_l12l0, load_data_2dmx_l12l0, load_data_with_stride, mmad_mx, fixpipe_l0c2ub, data_copy_ub2l1"
)

# The allow-list: documented findings in a sample, or refusals by design.  case name | CHECK-ERROR or FATAL |
# extended regex every such line must match | reason (printed in the table).  A case on it that shows no
# such line, or another one, is a FAIL: the entry is then out of date.
KNOWN=(
"mmad #2|CHECK-ERROR|without PipeBarrier<PIPE_M> in between|race (RAW|WAW) on L0C: M access not ordered after M access|sample bug: two Mmads of 30x40 ((m/16)(n/16) = 2 < 10) into one L0C without PipeBarrier<PIPE_M> (Mmad.md)"
"mmad_gemv|FATAL|GEMV mode|by design: the stand-in refuses Mmad in GEMV mode (m = 1); the kernels never issue it"
)
known_entry() {  # case name -> "kind<TAB>regex<TAB>reason" or nothing
    local k
    for k in "${KNOWN[@]}"; do
        if [[ ${k%%|*} == "$1" ]]; then
            local rest=${k#*|}
            local kind=${rest%%|*}
            rest=${rest#*|}
            printf '%s\t%s\t%s\n' "$kind" "${rest%|*}" "${rest##*|}"
            return
        fi
    done
}

compare_exact() {  # case dir, numpy dtype -> "exact maxerr"
    "$PY" - "$1" "$2" <<'EOF2'
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
EOF2
}

status=0
rows=()
for spec in "${CASES[@]}"; do
    IFS='|' read -r name dir asc driver settings dtype expect note <<<"$spec"
    if [[ -n $ONLY && ! $name =~ $ONLY ]]; then
        continue
    fi
    src="$EX/$dir/$asc"
    if [[ $driver == - ]]; then
        rows+=("$name|$commit|-|-|-|-|-|not run|$note")
        continue
    fi
    case_dir="$OUT/$(echo "$name" | tr ' #()' '_s__')"
    rm -rf "$case_dir"
    mkdir -p "$case_dir/input" "$case_dir/output"
    built=no ran=no matched=no exact=- maxerr=- why="" verdict=""
    if [[ ! -f "$src" ]]; then
        rows+=("$name|$commit|no|no|no|-|-|FAIL|sample missing at this commit")
        status=1
        continue
    fi
    sed -e '/^int32_t main/,$d' -e '/#include "acl\/acl.h"/d' -e '/#include "data_utils.h"/d' "$src" >"$case_dir/kernel.h"
    defs=(-D__NPU_ARCH__=2201 -DSGEMM_CUBE_SOC_910B "-DSAMPLE_KERNEL_SRC=\"$case_dir/kernel.h\"")
    genargs=()
    verargs=()
    for d in $settings; do
        defs+=("-D$d")
        if [[ $d == SCENARIO_NUM=* ]]; then
            # the scripts take -scenarioNum where they read it (argparse); some verify scripts do not
            grep -q scenarioNum "$EX/$dir/scripts/gen_data.py" && genargs=("-scenarioNum=${d#*=}")
            grep -q scenarioNum "$EX/$dir/scripts/verify_result.py" && verargs=("-scenarioNum=${d#*=}")
        fi
    done
    known=$(known_entry "$name")
    if "$CXX" -std=c++17 -O1 "${defs[@]}" -I "$EXEC" -I "$EXEC/samples" -I "$KERNELS/include" \
        "$EXEC/samples/${driver}_driver.cpp" -o "$case_dir/driver" >"$case_dir/build.log" 2>&1; then
        built=yes
        (cd "$case_dir" && "$PY" "$EX/$dir/scripts/gen_data.py" "${genargs[@]}") >"$case_dir/gen.log" 2>&1 ||
            why+="gen_data.py failed ($(tail -n1 "$case_dir/gen.log" | cut -c1-80)); "
        (cd "$case_dir" && ./driver) >"$case_dir/run.log" 2>&1
        rc=$?
        nerr=$(grep -c '^CHECK-ERROR' "$case_dir/run.log")
        if [[ $rc == 0 || $rc == 1 ]]; then
            ran=yes
            [[ $nerr != 0 ]] && why+="checker: $nerr error kind(s): $(grep -m1 '^CHECK-ERROR' "$case_dir/run.log" | cut -c13-120); "
        else
            why+="exit $rc: $(grep -m1 -o 'FATAL: .*' "$case_dir/run.log" | cut -c8-120); "
        fi
        if [[ $ran == yes ]]; then
            if (cd "$case_dir" && "$PY" "$EX/$dir/scripts/verify_result.py" "${verargs[@]}" \
                output/output.bin output/golden.bin) >"$case_dir/verify.log" 2>&1 &&
                grep -q 'test pass' "$case_dir/verify.log"; then
                matched=yes
            else
                why+="verify_result.py: mismatch; "
            fi
            read -r exact maxerr <<<"$(compare_exact "$case_dir" "$dtype")"
        fi
        # the verdict
        if [[ -n $known ]]; then
            IFS=$'\t' read -r kkind kre kwhy <<<"$known"
            if [[ $kkind == FATAL ]]; then
                lines=$(grep 'FATAL: ' "$case_dir/run.log")
                [[ $ran == no ]] && ok=1 || ok=0
            else
                lines=$(grep '^CHECK-ERROR' "$case_dir/run.log")
                [[ $ran == yes && $matched == yes ]] && ok=1 || ok=0
            fi
            if [[ $ok == 1 && -n $lines ]] && ! grep -Eqv "$kre" <<<"$lines"; then
                verdict="KNOWN"
                why="$kwhy; $why"
            else
                verdict="FAIL"
                why="allow-list entry does not fit ($kwhy); $why"
            fi
        elif [[ $ran == yes && $nerr == 0 && $matched == yes ]]; then
            verdict="PASS"
        else
            verdict="FAIL"
        fi
    else
        why="$(grep -m1 -o 'error: .*' "$case_dir/build.log" | cut -c1-100)"
        verdict="FAIL"
    fi
    if [[ $expect == model ]]; then
        if [[ $built == no ]] || grep -q 'FATAL: ' "$case_dir/run.log"; then
            verdict="not modelled"  # it does not build, or the stand-in refuses it when it runs
            why="expected: $why"
        else
            verdict="FAIL"
            why="listed as not modelled but it runs: update the case list; $why"
        fi
    fi
    [[ $verdict == FAIL ]] && status=1
    rows+=("$name|$commit|$built|$ran|$matched|$exact|$maxerr|$verdict|$note${why:+; $why}")
done
if [[ -n $CATLASS ]]; then
    ccommit=$(git -C "$CATLASS" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
    rows+=("catlass examples/00_basic_matmul|$ccommit|-|-|-|-|-|not run|no driver yet")
fi

printf '%-28s | %-12s | %-5s | %-4s | %-7s | %-16s | %-8s | %-12s | %s\n' case commit built ran matched exact "max err" verdict notes
printf -- '-%.0s' {1..150}
echo
for r in "${rows[@]}"; do
    IFS='|' read -r a b c d e f g v h <<<"$r"
    printf '%-28s | %-12s | %-5s | %-4s | %-7s | %-16s | %-8s | %-12s | %s\n' "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$v" "$h"
done
echo "logs, inputs and outputs: $OUT"
echo "exit status: $status"
exit $status
