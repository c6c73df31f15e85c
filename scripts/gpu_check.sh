#!/usr/bin/env bash
# Builds et-copy from this working tree on a machine with an NVIDIA GPU, the
# CUDA toolkit and a CUDA build of torch, but no executorch and no network;
# then runs the CUDA tests and the copy benchmark. See docs/cuda.md.
#
#   bash scripts/gpu_check.sh              # build, test, benchmark (< 8 min)
#   bash scripts/gpu_check.sh --build-only # build and check the extension only
#
# Wheels come from $ET_COPY_WHEELS (default: .whl/ in the repository):
# executorch (required), and scikit-build-core, pybind11, cmake, ninja,
# pathspec, packaging where the machine lacks them. Logs and figures go to
# $OUT (default /tmp/et_copy_gpu_check).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
WHEELS=${ET_COPY_WHEELS:-$REPO/.whl}
SITE=${ET_COPY_SITE:-/tmp/et_copy_site}
OUT=${OUT:-/tmp/et_copy_gpu_check}
BUILD_ONLY=0
[[ ${1:-} == --build-only ]] && BUILD_ONLY=1
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
START=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - START ))s] $*"; }
# Every step's timeout is capped by what is left of 450 s, so the whole
# script ends inside 8 minutes even when a step hangs.
BUDGET=450
left() { local l=$(( BUDGET - ($(date +%s) - START) )); (( l < $1 )) && echo $(( l > 5 ? l : 5 )) || echo "$1"; }

step "machine"
"$PY" --version
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: no GPU listed"
command -v nvcc >/dev/null && nvcc --version | tail -1 || echo "nvcc: not on PATH (the build will have no CUDA allocator)"
"$PY" -c "import torch; print('torch', torch.__version__, '| CUDA', torch.version.cuda, '| devices', torch.cuda.device_count())"

step "install the carried wheels into $SITE"
wheels=()
for name in executorch scikit_build_core pybind11 cmake ninja pathspec packaging; do
  found=$(ls "$WHEELS"/"$name"-*.whl 2>/dev/null | head -1 || true)
  if [[ -n $found ]]; then
    wheels+=("$found")
  elif [[ $name == executorch ]]; then
    echo "no executorch wheel in $WHEELS: see docs/cuda.md for the pip download line" >&2
    exit 2
  else
    echo "no $name wheel in $WHEELS: using the machine's own"
  fi
done
rm -rf "$SITE"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "${wheels[@]}"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$SITE/bin:$PATH"

step "build et-copy (pip, no build isolation, no dependency resolution)"
# --no-deps: et-copy pins torch==2.13.0 and this machine's torch is another
# version. The bindings compile against the torch of the Python that builds
# them (third_party/torch.cmake), this machine's, and link its libtorch; at
# import torch is loaded first, so its libraries are found by name.
BUILD_DIR=$(mktemp -d /tmp/et_copy_build.XXXXXX)
set +e
timeout "$(left 240)" "$PY" -m pip install -v --no-index --no-deps --no-build-isolation --no-cache-dir --target "$SITE" \
  --config-settings=cmake.define.pybind11_DIR="$("$PY" -m pybind11 --cmakedir)" \
  --config-settings=build-dir="$BUILD_DIR" \
  "$REPO" >"$OUT/build.log" 2>&1
rc=$?
set -e
grep -E "et_copy:|CUDA toolkit|Error|error:" "$OUT/build.log" | head -20 || true
if [[ $rc -ne 0 ]]; then
  tail -40 "$OUT/build.log"
  echo "build failed (exit $rc); full log in $OUT/build.log" >&2
  exit 1
fi

step "check the installed extension"
cd /tmp  # import the installed package, never the source tree
"$PY" - "$SITE" <<'EOF'
import glob, subprocess, sys
import et_copy
from et_copy import cuda as _cuda
assert et_copy.__file__.startswith(sys.argv[1]), f"imported et_copy from {et_copy.__file__}"
if not _cuda.built_with_cuda():
    sys.exit("et_copy was built WITHOUT the CUDA allocator: CMake found no CUDA toolkit "
             "(nvcc on PATH and libcudart_static.a); see build.log")
so = glob.glob(f"{sys.argv[1]}/et_copy/_C*.so")[0]
needed = [l for l in subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout.splitlines() if "NEEDED" in l]
print("extension needs:", ", ".join(l.split("[")[-1].rstrip("]") for l in needed))
assert not any("libcudart" in l for l in needed), "the extension links a shared CUDA runtime"
EOF
"$PY" -m et_copy doctor
if [[ $BUILD_ONLY == 1 ]]; then
  step "built (--build-only)"
  exit 0
fi

step "CUDA tests"
set +e
(cd "$REPO" && timeout "$(left 180)" "$PY" -m pytest tests/python/test_cuda.py -q -rs -p no:cacheprovider) 2>&1 | tee "$OUT/tests.log" | tail -30
tests_rc=${PIPESTATUS[0]}
set -e

step "copy benchmark"
set +e
timeout "$(left 150)" "$PY" "$REPO/benchmarks/cuda_copy_bench.py" --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
bench_rc=${PIPESTATUS[0]}
set -e

step "done: tests exit $tests_rc, benchmark exit $bench_rc; logs in $OUT"
[[ $tests_rc -eq 0 && $bench_rc -eq 0 ]]
