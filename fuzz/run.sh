#!/usr/bin/env bash
# Builds a libFuzzer target with clang and runs it for a bounded time:
#
#   fuzz/run.sh [SECONDS] [kernels|programs]      (default 60 kernels)
#
# kernels: fuzz/fuzz_copy_kernels.cpp, the kernel entry points, from the
# seed corpus in fuzz/corpus. programs: fuzz/fuzz_program_load.cpp, whole
# programs loaded and run, from real exports that fuzz/make_program_seeds.py
# writes with the installed et_copy (made once per build folder; one is
# compiled by AOTInductor, a compile-cache hit after the first).
#
# Environment: PYTHON (default python3 on PATH; the one with et_copy and
# executorch), CXX_FUZZ (default clang++), ET_COPY_FUZZ_BUILD_DIR (default
# build/fuzz), CMAKE (default cmake >= 3.28 on PATH, e.g. from the venv).
# New inputs go to a temporary folder, so fuzz/corpus stays as committed; a
# crashing input is written to the build folder as crash-<sha1>. Exit status:
# 0 no finding, 2 missing tools, anything else a finding (or a build error).
set -euo pipefail

seconds="${1:-60}"
target="${2:-kernels}"
case "$target" in
  kernels | programs) ;;
  *)
    echo "fuzz/run.sh: unknown target '$target' (kernels or programs)" >&2
    exit 2
    ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ET_COPY_FUZZ_BUILD_DIR:-$root/build/fuzz}"
cxx="${CXX_FUZZ:-clang++}"
cmake="${CMAKE:-cmake}"

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz/run.sh: $cxx not found; libFuzzer needs clang (Debian/Ubuntu: apt-get install clang libclang-rt-dev)" >&2
  exit 2
fi
python="${PYTHON:-$(command -v python3 || command -v python)}"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)

"$cmake" -S "$root/fuzz" -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" \
  -DPython_EXECUTABLE="$python" >/dev/null
"$cmake" --build "$build" -j2 --target "$([ "$target" = kernels ] && echo fuzz_copy_kernels || echo fuzz_program_load)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ "$target" = kernels ]; then
  echo "fuzz/run.sh: fuzzing et_copy's kernels for ${seconds}s (seeds: fuzz/corpus)"
  "$build/fuzz_copy_kernels" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build/" "$work" "$root/fuzz/corpus"
else
  seeds="$build/program_seeds"
  if [ ! -f "$seeds/done" ]; then
    "$python" "$root/fuzz/make_program_seeds.py" "$seeds"
    touch "$seeds/done"
  fi
  # Inputs as long as the largest seed; a program's load and run can take a while under ASan.
  max_len="$(for f in "$seeds"/*.pte; do wc -c <"$f"; done | sort -n | tail -1)"
  echo "fuzz/run.sh: fuzzing whole programs for ${seconds}s (seeds: $seeds)"
  # A planned buffer's size is read from the bytes; the runtime turns a failed
  # calloc into MemoryAllocationFailed, which ASan's allocator must let it see.
  # A calloc larger than libFuzzer's malloc limit (the RSS limit unless set)
  # is not a failure of ours: a 16 GiB planned buffer is calloc'd untouched.
  # The RSS limit still catches memory really used.
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" "$build/fuzz_program_load" -max_total_time="$seconds" -print_final_stats=1 -max_len="$max_len" -timeout=120 \
    -rss_limit_mb=8192 -malloc_limit_mb=1048576 -artifact_prefix="$build/" "$work" "$seeds"
fi
