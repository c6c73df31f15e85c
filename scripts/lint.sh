#!/usr/bin/env bash
# The formatter and linter checks CI runs (tests/python/test_lint.py):
# ruff for Python, clang-format for C++. To fix what they report:
#   ruff check --fix . && ruff format . && git ls-files '*.cpp' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check .
ruff format --check .
git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run -Werror
echo "lint: clean"
