#!/usr/bin/env bash
# Compile the AscendC backend's host glue (pybind11 binding + ACLRT launchers)
# with g++ against the headers of the torch-npu wheel that pairs with the
# installed torch, for both SoC builds.  No CANN toolkit is needed and
# nothing is linked or run: this is a syntax and type check (-fsyntax-only).
#
# torch-npu is installed with --no-deps into a throw-away --target folder and
# never imported: importing it without CANN breaks `import torch` (see
# ascendc_kernels/README.md).  The launch headers that ascendc_library() would
# generate are replaced by ci/stubs/ (same declarations).
#
# Usage: ascendc_kernels/ci/compile_host_glue.sh
# Environment:
#   PYTHON                      interpreter with torch and pybind11 (default: python3)
#   TORCH_NPU_VERSION           wheel version (default: the installed torch's X.Y.Z;
#                               torch-npu X.Y.Z is released for torch X.Y.Z)
#   SGEMM_CUBE_TORCH_NPU_DIR    reuse (or keep) the unpacked wheel in this folder
#                               instead of a temporary one
set -euo pipefail

PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KERNELS=$(dirname "$HERE")

TORCH_VERSION=$("$PYTHON" -c "import torch; print(torch.__version__.split('+')[0])")
TORCH_NPU_VERSION=${TORCH_NPU_VERSION:-$TORCH_VERSION}

if [[ -n "${SGEMM_CUBE_TORCH_NPU_DIR:-}" ]]; then
    WORK=$SGEMM_CUBE_TORCH_NPU_DIR
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
fi
NPU_INC="$WORK/torch_npu/include"
if [[ ! -d "$NPU_INC/torch_npu" ]]; then
    echo "compile_host_glue: fetching torch-npu==$TORCH_NPU_VERSION headers (torch $TORCH_VERSION) into $WORK"
    "$PYTHON" -m pip install --quiet --no-deps --no-compile --target "$WORK" "torch-npu==$TORCH_NPU_VERSION"
fi

# Include paths of torch (cpp_extension's list), pybind11 and the Python headers.
mapfile -t SYS_INC < <("$PYTHON" - <<'EOF'
import sysconfig
import pybind11
from torch.utils.cpp_extension import include_paths
for p in include_paths():
    print(p)
print(pybind11.get_include())
print(sysconfig.get_paths()["include"])
EOF
)
ABI=$("$PYTHON" -c "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))")

FLAGS=(-std=c++17 -fsyntax-only -Wall -Wextra -Wno-unused-parameter "-D_GLIBCXX_USE_CXX11_ABI=$ABI")
INCS=(-I "$KERNELS/include" -I "$KERNELS/host" -I "$HERE/stubs"
      -isystem "$NPU_INC" -isystem "$NPU_INC/third_party/acl/inc")
for p in "${SYS_INC[@]}"; do
    INCS+=(-isystem "$p")
done

# binding.cpp does not depend on the SoC (launch.cpp and the device code do),
# so the heavy torch/pybind11 translation unit is checked once, in the background.
check() {
    echo "compile_host_glue: g++ -fsyntax-only $*"
    g++ "${FLAGS[@]}" "${INCS[@]}" "$@"
}
check -DSGEMM_CUBE_SOC_910B "$KERNELS/host/binding.cpp" &
binding_pid=$!
status=0
for soc in 910A 910B; do
    check "-DSGEMM_CUBE_SOC_$soc" "$KERNELS/host/launch.cpp" || status=1
done
wait "$binding_pid" || status=1
if [[ $status -eq 0 ]]; then
    echo "compile_host_glue: OK (torch $TORCH_VERSION, torch-npu $TORCH_NPU_VERSION)"
fi
exit $status
