#!/usr/bin/env bash
# Builds et-copy from this working tree on a machine with an NVIDIA GPU, the
# CUDA toolkit and a CUDA build of torch, but no executorch and no network;
# then runs the compiled device backend on CUDA (generic models, tiny LLMs
# against transformers, a decode benchmark: scripts/gpu_aoti_check.py), the
# CUDA tests, the GPU cases of the end-to-end and AOTI tests, a tiny Qwen 3.5
# MoE through upstream's CudaPartitioner, and the copy benchmark.
# See docs/cuda.md.
#
#   bash scripts/gpu_check.sh              # build, test, LLM, benchmark (< 9 min)
#   bash scripts/gpu_check.sh --build-only # build and check the extension only
#   bash scripts/gpu_check.sh --dry-run    # no GPU: the steps it would run, the
#                                          # LLM step and the compiled backend's
#                                          # step on the simulated device, with
#                                          # the et_copy installed here
#
# Wheels come from $ET_COPY_WHEELS (default: .whl/ in the repository):
# executorch (required), and scikit-build-core, pybind11, cmake, ninja,
# pathspec, packaging where the machine lacks them. Logs and figures go to
# $OUT (default /tmp/et_copy_gpu_check). $ET_COPY_LLM_ARGS goes to
# scripts/gpu_llm_check.py (say "--arch llama --max-seq-len 8" for a quicker
# dry run; the tests do that), $ET_COPY_AOTI_ARGS to scripts/gpu_aoti_check.py
# (the dry run defaults to "--archs llama --max-seq-len 8 --new-tokens 2
# --no-generic"). Every step ends in a line
# `PASS: <step>`, `SKIP: <step> (<why>)` or `FAIL: <step> (<why>)`, and the
# last line sums them up; the exit status is 0 only with no FAIL.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
WHEELS=${ET_COPY_WHEELS:-$REPO/.whl}
SITE=${ET_COPY_SITE:-/tmp/et_copy_site}
OUT=${OUT:-/tmp/et_copy_gpu_check}
read -r -a LLM_ARGS <<<"${ET_COPY_LLM_ARGS:-}"
read -r -a AOTI_ARGS <<<"${ET_COPY_AOTI_ARGS:-}"
BUILD_ONLY=0
DRY_RUN=0
for arg in "$@"; do
  case $arg in
    --build-only) BUILD_ONLY=1 ;;
    --dry-run) DRY_RUN=1 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
START=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - START ))s] $*"; }
# Every step's timeout is capped by what is left of 500 s, so the whole
# script ends inside 9 minutes even when a step hangs (run it with a
# timeout_s of 580 on a 15-minute device lease).
BUDGET=540
left() { local l=$(( BUDGET - ($(date +%s) - START) )); (( l < $1 )) && echo $(( l > 5 ? l : 5 )) || echo "$1"; }
RESULTS=()
# result NAME EXIT [WHY]: 0 is PASS, 3 is SKIP, 124 is a timeout, others FAIL.
result() {
  local line
  case $2 in
    0) line="PASS: $1" ;;
    3) line="SKIP: $1 (${3:-not possible here})" ;;
    124) line="FAIL: $1 (timed out)" ;;
    *) line="FAIL: $1 (exit $2${3:+; $3})" ;;
  esac
  echo "$line"
  RESULTS+=("$line")
}
summary() {
  step "summary (logs in $OUT)"
  printf '%s\n' "${RESULTS[@]}"
  local fails
  fails=$(printf '%s\n' "${RESULTS[@]}" | grep -c '^FAIL' || true)
  echo "gpu_check: $(printf '%s\n' "${RESULTS[@]}" | grep -c '^PASS' || true) PASS," \
    "$(printf '%s\n' "${RESULTS[@]}" | grep -c '^SKIP' || true) SKIP, $fails FAIL in $(( $(date +%s) - START )) s"
  [[ $fails -eq 0 ]]
}

if [[ $DRY_RUN == 1 ]]; then
  # What a GPU machine would run, then the one step that can run anywhere:
  # the LLM export and generation, on the simulated device.
  step "dry run: no build; et_copy from $($PY -c 'import et_copy, os; print(os.path.dirname(et_copy.__file__))')"
  echo "would: install $WHEELS/*.whl into $SITE; pip install --no-build-isolation this tree with CUDA"
  echo "would: pytest tests/python/test_cuda.py -m gpu; pytest tests/python/test_end_to_end.py -m gpu"
  echo "would: $PY scripts/gpu_aoti_check.py --bench (AotiDeviceBackend compiled for CUDA, use_cuda)"
  echo "would: pytest tests/backends/aoti/test_aoti_runtime.py -m gpu"
  echo "would: $PY scripts/gpu_llm_check.py (CudaPartitioner, use_cuda), again with --quantize int4; python -m et_copy.tools.bench.cuda_copy"
  step "LLM on the simulated device (the GPU step's --dry-run)"
  set +e
  timeout "$(left 240)" "$PY" "$REPO/scripts/gpu_llm_check.py" --dry-run --out "$OUT" "${LLM_ARGS[@]}" 2>"$OUT/llm.err"
  rc=$?
  set -e
  [[ $rc -ne 0 ]] && tail -20 "$OUT/llm.err"
  result "LLM export and generate, simulated device" "$rc"
  step "compiled backend on the simulated device (the GPU step's --dry-run)"
  (( ${#AOTI_ARGS[@]} )) || AOTI_ARGS=(--archs llama --max-seq-len 8 --new-tokens 2 --no-generic)
  set +e
  timeout "$(left 400)" "$PY" "$REPO/scripts/gpu_aoti_check.py" --dry-run --out "$OUT" "${AOTI_ARGS[@]}" 2>"$OUT/aoti.err"
  rc=$?
  set -e
  [[ $rc -ne 0 ]] && tail -20 "$OUT/aoti.err"
  result "compiled backend, simulated device" "$rc"
  summary
  exit
fi

step "machine"
"$PY" --version
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: no GPU listed"
command -v nvcc >/dev/null && nvcc --version | tail -1 || echo "nvcc: not on PATH (the build will have no CUDA allocator)"
"$PY" -c "import torch; print('torch', torch.__version__, '| CUDA', torch.version.cuda, '| devices', torch.cuda.device_count())"

step "install the carried wheels into $SITE"
# Every carried wheel goes in: executorch is required; build tools the
# machine lacks, and executorch's imports its image lacks (ruamel.yaml for
# executorch.exir, torchao for executorch.backends.cuda), ride along.
shopt -s nullglob
wheels=("$WHEELS"/*.whl)
shopt -u nullglob
if ! printf '%s\n' "${wheels[@]}" | grep -q '/executorch-[^/]*\.whl$'; then
  result "carried wheels" 2 "no executorch wheel in $WHEELS: see docs/cuda.md for the pip download line"
  summary || true
  exit 2
fi
printf '  %s\n' "${wheels[@]##*/}"
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
  result "build et-copy with CUDA" "$rc" "full log in $OUT/build.log"
  summary || true
  exit 1
fi
result "build et-copy with CUDA" 0

step "check the installed extension"
cd /tmp  # import the installed package, never the source tree
set +e
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
rc=$?
(( rc == 0 )) && { "$PY" -m et_copy doctor; rc=$?; }
set -e
result "extension holds the CUDA allocator, links no shared cudart, doctor runs" "$rc"
if [[ $BUILD_ONLY == 1 || $rc -ne 0 ]]; then
  summary
  exit
fi

# The north star first: device programs computing in AOTInductor code on the GPU.
step "compiled device backend on CUDA (scripts/gpu_aoti_check.py --bench)"
set +e
(cd /tmp && timeout "$(left 400)" "$PY" "$REPO/scripts/gpu_aoti_check.py" --out "$OUT" --bench "${AOTI_ARGS[@]}") \
  2>"$OUT/aoti.err" | tee "$OUT/aoti.txt"
rc=${PIPESTATUS[0]}
set -e
(( rc != 0 )) && tail -30 "$OUT/aoti.err"
result "compiled backend on CUDA (figures in $OUT/aoti_figures.json)" "$rc" "$(grep '^FAIL' "$OUT/aoti.txt" | head -2 | cut -c7-200 | tr '\n' ' ')"

step "GPU cases of the compiled backend's tests (tests/backends/aoti/test_aoti_runtime.py -m gpu)"
set +e
(cd "$REPO" && timeout "$(left 60)" "$PY" -m pytest tests/backends/aoti/test_aoti_runtime.py -m gpu -q -rs -p no:cacheprovider) 2>&1 | tee "$OUT/aoti_tests.log" | tail -15
rc=${PIPESTATUS[0]}
set -e
grep -qE '[0-9]+ passed' "$OUT/aoti_tests.log" || (( rc != 0 )) || rc=1
result "tests/backends/aoti/test_aoti_runtime.py -m gpu" "$rc" "$(grep -E '^FAILED' "$OUT/aoti_tests.log" | head -3 | tr '\n' ' ')"

# Each file runs in its own process: one process holds one CUDA allocator.
step "CUDA tests (tests/python/test_cuda.py -m gpu)"
set +e
(cd "$REPO" && timeout "$(left 150)" "$PY" -m pytest tests/python/test_cuda.py -m gpu -q -rs -p no:cacheprovider) 2>&1 | tee "$OUT/tests.log" | tail -30
rc=${PIPESTATUS[0]}
set -e
grep -qE '[0-9]+ passed' "$OUT/tests.log" || (( rc != 0 )) || rc=1
result "tests/python/test_cuda.py -m gpu" "$rc" "$(grep -E '^FAILED' "$OUT/tests.log" | head -3 | tr '\n' ' ')"

step "GPU cases of the end-to-end tests (tests/python/test_end_to_end.py -m gpu)"
set +e
(cd "$REPO" && timeout "$(left 120)" "$PY" -m pytest tests/python/test_end_to_end.py -m gpu -q -rs -p no:cacheprovider) 2>&1 | tee "$OUT/end_to_end.log" | tail -20
rc=${PIPESTATUS[0]}
set -e
# Nothing passed means no GPU was seen: a FAIL on a machine lent for its GPU.
grep -qE '[0-9]+ passed' "$OUT/end_to_end.log" || (( rc != 0 )) || rc=1
result "tests/python/test_end_to_end.py -m gpu" "$rc" "$(grep -E '^(FAILED|SKIPPED)' "$OUT/end_to_end.log" | head -3 | tr '\n' ' ')"

# llm_through_cuda NAME TAG [ARGS...]: scripts/gpu_llm_check.py with ARGS, its
# lines in $OUT/TAG.txt. A step the wheel or machine cannot take (no
# executorch.backends.cuda, no CudaBackend runtime in the CPU wheel, a
# transformers without the model) is a SKIP.
llm_through_cuda() {
  local name=$1 tag=$2 rc
  shift 2
  set +e
  (cd /tmp && timeout "$(left 180)" "$PY" "$REPO/scripts/gpu_llm_check.py" "$@" "${LLM_ARGS[@]}") \
    2>"$OUT/$tag.err" | tee "$OUT/$tag.txt"
  rc=${PIPESTATUS[0]}
  set -e
  (( rc != 0 )) && tail -20 "$OUT/$tag.err"
  if (( rc == 0 )) && grep -q '^SKIP' "$OUT/$tag.txt"; then
    result "$name" 3 "$(grep '^SKIP' "$OUT/$tag.txt" | head -1 | cut -c7-200)"
  else
    result "$name" "$rc" "$(grep '^FAIL' "$OUT/$tag.txt" | head -1 | cut -c7-200)"
  fi
}

step "tiny Qwen 3.5 MoE through CudaPartitioner on et_copy.runtime (scripts/gpu_llm_check.py)"
llm_through_cuda "LLM through CudaPartitioner" llm --out "$OUT"

step "the same MoE in int4, experts included, through CudaPartitioner (scripts/gpu_llm_check.py --quantize int4)"
llm_through_cuda "int4 LLM through CudaPartitioner" llm_int4 --out "$OUT/int4" --quantize int4

step "copy benchmark"
set +e
timeout "$(left 120)" "$PY" -m et_copy.tools.bench.cuda_copy --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
rc=${PIPESTATUS[0]}
set -e
result "copy benchmark (figures in $OUT/bench.json)" "$rc"

summary
