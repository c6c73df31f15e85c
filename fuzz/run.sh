#!/usr/bin/env bash
# Builds the libFuzzer target (fuzz/fuzz_copy_kernels.cpp) with clang and
# runs it for a bounded time, starting from the seed corpus in fuzz/corpus.
#
#   fuzz/run.sh [SECONDS]       (default 60)
#
# Environment: CXX_FUZZ (default clang++), ET_COPY_FUZZ_BUILD_DIR (default
# build/fuzz), CMAKE (default cmake >= 3.28 on PATH, e.g. from the venv).
# New inputs go to a temporary folder, so fuzz/corpus stays as committed; a
# crashing input is written to the build folder as crash-<sha1>. Exit status:
# 0 no finding, 2 missing tools, anything else a finding (or a build error).
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ET_COPY_FUZZ_BUILD_DIR:-$root/build/fuzz}"
cxx="${CXX_FUZZ:-clang++}"
cmake="${CMAKE:-cmake}"

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz/run.sh: $cxx not found; libFuzzer needs clang (Debian/Ubuntu: apt-get install clang libclang-rt-dev)" >&2
  exit 2
fi
python="$(command -v python3 || command -v python)"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)

"$cmake" -S "$root/fuzz" -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" \
  -DPython_EXECUTABLE="$python" >/dev/null
"$cmake" --build "$build" -j2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "fuzz/run.sh: fuzzing et_copy's kernels for ${seconds}s (seeds: fuzz/corpus)"
"$build/fuzz_copy_kernels" -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$build/" "$work" "$root/fuzz/corpus"
