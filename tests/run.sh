#!/usr/bin/env bash
# Installs everything the tests need and runs them all: the Python suites,
# and (driven from pytest) the C++ tests, the CMake consumer and the
# sanitizer build. Run from the repository root: bash tests/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the C++ tests build against (Debian names).
need=()
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
# clang with libFuzzer and the sanitizer runtimes, for the C++ fuzz target.
command -v clang++ >/dev/null && [ -n "$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null | grep /)" ] \
  || need+=(clang libclang-rt-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -q
  $sudo apt-get install -y -q "${need[@]}"
fi

python -m pip install -q ".[test]"
# The package lives in python/et_copy, so the installed copy is what's tested.
# Here everything is installed, so only a missing GPU may skip a test.
# Two workers (pytest-xdist), a test file each: most of the suite is
# one-threaded Python (export, tracing), so two cores run it in about half
# the time. ET_COPY_TEST_WORKERS=0 runs it in this one process.
# pytest-benchmark, where installed, warns in an xdist worker and in every
# pytest a test starts from one (they inherit PYTEST_XDIST_WORKER), and
# warnings are errors here: off for them all.
export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:+$PYTEST_ADDOPTS }-p no:benchmark"
ET_COPY_REQUIRE_ALL=1 python -m pytest -n "${ET_COPY_TEST_WORKERS:-2}" --dist loadfile "$@"
