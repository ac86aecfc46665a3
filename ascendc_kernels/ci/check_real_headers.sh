#!/usr/bin/env bash
# Type-check the AscendC device sources against the REAL AscendC headers, for
# both chips, with g++ -fsyntax-only.
#
# NOT RUN IN CI: CI has no network and no copy of the headers.  Run it by hand:
#
#   git clone https://github.com/cannmirror/asc-devkit /tmp/asc-devkit   # or a CANN install's <CANN>/asc
#   ascendc_kernels/ci/check_real_headers.sh /tmp/asc-devkit [OUTDIR]
#
# Argument: the AscendC root, i.e. the folder holding include/kernel_operator.h,
# include/basic_api/ and impl/basic_api/ (an asc-devkit checkout, or
# $ASCEND_HOME_PATH/asc of a CANN 8.x install).  OUTDIR (default: a temporary
# folder) receives real_headers_<pass>.txt, the full compiler output of each
# pass: 910A, 910B, 910B_cube, 910B_vec (below).
#
# What it is: the device compile mode of the headers (no ASCENDC_CPU_DEBUG:
# the CPU-debug mode needs CANN's closed stub_def.h / stub_fun.h from
# tools/tikicpulib, and asc-devkit's CPU mode lists only dav-2002, dav-2201 and
# dav-3510, not 910A's dav-c100), with __NPU_ARCH__ = 1001 (910A, dav-c100) or
# 2201 (910B, dav-c220) selecting the chip's declarations exactly as bisheng
# does, and ci/real_headers/bisheng_builtins.h standing in for what bisheng
# has built in (keywords, address spaces, builtin types and intrinsics; read
# its comment).  kernel_tiling/kernel_tiling.h, which kernel_operator.h pulls
# in through the advanced API, is generated the way the CANN build does
# (impl/adv_api/cmake/scripts/gen_kernel_tiling_data_def.py).
#
# Passes: 910A; and 910B three times.  bisheng compiles a 910B kernel once per
# core type (--cce-aicore-arch=dav-c220-cube and dav-c220-vec, see
# cmake/asc/legacy_modules/bisheng_intf.cmake), each compile defining its core
# macros, spelled out as asc-devkit's own g++ builds of the 910B1_AIC / _AIV
# unit tests spell them (tests/api/*/CMakeLists.txt):
#   910B_cube  __DAV_C220__ __DAV_C220_CUBE__ __DAV_CUBE__
#   910B_vec   __DAV_C220__ __DAV_C220_VEC__ __DAV_VEC__
# impl/utils/sys_macros.h turns __DAV_CUBE__ / __DAV_VEC__ (with __NPU_ARCH__
# 2201) into `constexpr int32_t g_coreType = AscendC::AIC` / `AIV`, and
# ASCEND_IS_AIC / ASCEND_IS_AIV into `constexpr(g_coreType == AscendC::AIC)` /
# `(.. AIV)`, so `if ASCEND_IS_AIC { .. }` is an `if constexpr`.  The 910B pass
# defines neither macro: g_coreType = AscendC::MIX, both conditions are false,
# and every such body inside a template (the headers' Fixpipe, ReduceMax,
# Compare, .. and whatever of ours sits in one) is discarded unchecked.  The
# cube and vector passes compile those bodies, plus the headers'
# `#if defined(__DAV_CUBE__)` / `__DAV_VEC__` code; 910B (common path) stays
# as the third view.  Each pass compiles all three entry points, also the
# one whose KERNEL_TASK_TYPE_DEFAULT names the other core type (bisheng need
# not compile that one for this core): an error seen only there is worth a
# look before it is called a bug (none today).
#
# What it cannot see: anything bisheng checks beyond C++ (address spaces are
# erased, so a __gm__ / __ubuf__ pointer mix-up passes; [aicore]/[host]
# calling rules; intrinsic argument types, which are catch-alls).
#
# Exit status: 1 when any error is in our sources or comes from an
# instantiation that starts in them; errors wholly inside the headers are
# header-setup artefacts of this stand-in and are listed, not failed on
# (expected: asc_dump redefinitions in every 910B pass, from the erased
# address spaces).
set -u -o pipefail

ASC=${1:?usage: check_real_headers.sh <asc-devkit checkout or CANN asc dir> [outdir]}
OUT=${2:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
KERNELS=$(cd "$HERE/.." && pwd)
CXX=${CXX:-g++}
PYTHON=${PYTHON:-python3}

if [[ ! -f "$ASC/include/kernel_operator.h" || ! -d "$ASC/impl/basic_api" ]]; then
    echo "error: $ASC has no include/kernel_operator.h and impl/basic_api/ (want an asc-devkit checkout)" >&2
    exit 2
fi
mkdir -p "$OUT/gen/kernel_tiling"

GEN="$ASC/impl/adv_api/cmake/scripts/gen_kernel_tiling_data_def.py"
if [[ -f "$ASC/include/tiling/kernel_tiling/kernel_tiling.h" ]]; then
    cp "$ASC/include/tiling/kernel_tiling/kernel_tiling.h" "$OUT/gen/kernel_tiling/"
elif [[ -f "$GEN" ]]; then
    "$PYTHON" "$GEN" "$ASC/include/adv_api" "$OUT/gen/kernel_tiling/kernel_tiling.h" >/dev/null || exit 2
else
    echo "error: cannot find or generate kernel_tiling/kernel_tiling.h" >&2
    exit 2
fi

# The include path of asc-devkit's legacy bisheng flow
# (cmake/asc/legacy_modules/bisheng_intf.cmake, device_intf_pub), rooted at $ASC.
INC=(-I "$OUT/gen")
for d in impl/adv_api impl/basic_api impl/c_api impl/basic_api/reg_compute impl/simt_api impl/utils . include \
         include/adv_api include/basic_api include/aicpu_api include/c_api include/basic_api/reg_compute \
         include/simt_api include/utils; do
    INC+=(-I "$ASC/$d")
done

status=0
for pass in 910A 910B 910B_cube 910B_vec; do
    chip=${pass%%_*}
    case $pass in
        910A) arch=1001 core=() ;;
        910B) arch=2201 core=() ;;
        910B_cube) arch=2201 core=(-D__DAV_C220__ -D__DAV_C220_CUBE__ -D__DAV_CUBE__) ;;
        910B_vec) arch=2201 core=(-D__DAV_C220__ -D__DAV_C220_VEC__ -D__DAV_VEC__) ;;
    esac
    log="$OUT/real_headers_$pass.txt"
    "$CXX" -std=c++17 -fsyntax-only -fmax-errors=0 -w \
        -D__NPU_ARCH__=$arch "${core[@]}" -DSGEMM_CUBE_SOC_$chip \
        -include "$HERE/real_headers/bisheng_builtins.h" \
        "${INC[@]}" -I "$KERNELS/include" "$KERNELS/kernel/sgemm_cube_kernels.cpp" >"$log" 2>&1
    rc=$?
    # An error is ours when its own location, or the instantiation context
    # printed since the previous error, is in our tree.
    ours=$(awk -v k="$KERNELS/" '
        /required from/ && index($0, k) { ctx = 1 }
        /error:/ { if (index($0, k) || ctx) n++; ctx = 0 }
        END { print n + 0 }' "$log")
    total=$(grep -c "error:" "$log")
    echo "== $pass (__NPU_ARCH__=$arch${core[*]:+ ${core[*]}}): g++ exit $rc, $total errors, $ours in or through our sources -> $log"
    grep "error:" "$log" | sed "s|$ASC/||; s|$KERNELS/||" | sort | uniq -c | sort -rn | head -40
    if [[ $ours -gt 0 ]]; then
        status=1
    fi
done
exit $status
