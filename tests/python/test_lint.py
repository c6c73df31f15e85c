"""The formatter and linter are clean (scripts/lint.sh: ruff check, ruff
format --check, clang-format --dry-run over every tracked C++ file), so the
next person reads the code in one style."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ruff_and_clang_format_report_nothing():
    # Both come from the test extra; a missing one is a failure, not a skip.
    assert shutil.which("ruff") and shutil.which("clang-format"), "pip install '.[test]' installs ruff and clang-format"
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "lint.sh")], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    assert proc.stdout.strip().endswith("lint: clean")
