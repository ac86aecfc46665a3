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
# folder) receives real_headers_910A.txt and real_headers_910B.txt, the full
# compiler output for each chip.
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
# What it cannot see: anything bisheng checks beyond C++ (address spaces are
# erased, so a __gm__ / __ubuf__ pointer mix-up passes; [aicore]/[host]
# calling rules; intrinsic argument types, which are catch-alls), and code
# paths the headers compile only under __DAV_C220_CUBE__ / __DAV_C220_VEC__
# (bisheng compiles 910B kernels once per core type; this check defines
# neither, so it sees the headers' common path).
#
# Exit status: 1 when any error is in our sources or comes from an
# instantiation that starts in them; errors wholly inside the headers are
# header-setup artefacts of this stand-in and are listed, not failed on
# (expected: asc_dump redefinitions for 910B, from the erased address spaces).
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
for chip in 910A 910B; do
    case $chip in
        910A) arch=1001 ;;
        910B) arch=2201 ;;
    esac
    log="$OUT/real_headers_$chip.txt"
    "$CXX" -std=c++17 -fsyntax-only -fmax-errors=0 -w \
        -D__NPU_ARCH__=$arch -DSGEMM_CUBE_SOC_$chip \
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
    echo "== $chip (__NPU_ARCH__=$arch): g++ exit $rc, $total errors, $ours in or through our sources -> $log"
    grep "error:" "$log" | sed "s|$ASC/||; s|$KERNELS/||" | sort | uniq -c | sort -rn | head -40
    if [[ $ours -gt 0 ]]; then
        status=1
    fi
done
exit $status
