"""The formatter, linter and type checker are clean (tools/lint.sh: ruff
check, ruff format --check, clang-format --dry-run over every tracked C++
file, mypy over python/et_copy), so the next person reads the code in one
style and its types hold."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_ruff_clang_format_and_mypy_report_nothing():
    # All come from the test extra; a missing one is a failure, not a skip.
    assert shutil.which("ruff") and shutil.which("clang-format"), "pip install '.[test]' installs ruff and clang-format"
    assert importlib.util.find_spec("mypy"), "pip install '.[test]' installs mypy"
    proc = subprocess.run(
        ["bash", str(REPO / "tools" / "lint.sh")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHON": sys.executable},  # mypy of the interpreter the tests run under
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    assert proc.stdout.strip().endswith("lint: clean")
