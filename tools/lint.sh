#!/usr/bin/env bash
# The formatter, linter and type checks CI runs (tests/python/repo/test_lint.py):
# ruff for Python, clang-format for C++, mypy over python/et_copy (its
# settings in pyproject.toml) and stubtest of the extensions' stubs (_C.pyi,
# each backend's _<name>.pyi) against the installed extensions (what differs
# on purpose: tools/stubtest_allowlist.txt); run by $PYTHON, default python3,
# which must have the test extra and et-copy). To fix what the formatters report:
#   ruff check --fix . && ruff format . && git ls-files '*.cpp' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check .
ruff format --check .
git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run -Werror
python="${PYTHON:-python3}"
"$python" -c "import mypy" 2>/dev/null || { echo "lint: $python has no mypy: pip install '.[test]', or set PYTHON"; exit 1; }
"$python" -m mypy
# Every extension's stub: _C's, and each backend's own (python/et_copy/backends/<name>/_<name>.pyi).
stubs=(et_copy._C)
for stub in python/et_copy/backends/*/_*.pyi; do
  module="${stub#python/}"
  module="${module%.pyi}"
  stubs+=("${module//\//.}")
done
"$python" -m mypy.stubtest "${stubs[@]}" --allowlist tools/stubtest_allowlist.txt
echo "lint: clean"
