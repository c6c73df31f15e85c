"""tools/mutation/mutation.py cannot rot: every mutant in its list still applies to
the code it names, every core file has tests for its generated mutants, and
a smoke run (3 listed and a fixed-seed sample of 3 generated Python-level
mutants against the installed extension, no C++ build) kills each one,
prints its table and its last line, and leaves the checkout as it was. The
full and sampled runs are by hand (docs/reliability.md, "Mutation testing")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "tools" / "mutation" / "mutation.py"


def test_every_mutant_applies_to_exactly_one_line_of_its_file():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 stale" in proc.stdout
    assert "generated: " in proc.stdout and "untested:" not in proc.stdout


def test_a_smoke_run_kills_its_mutants_and_leaves_the_checkout_alone():
    sources = {p: p.read_bytes() for p in (REPO / "python" / "et_copy").glob("*.py")}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("mutation: 6/6 killed (100%; 95% CI "), proc.stdout[-4000:]
    # The generator and the runner end to end: generated ids, each killed by a test.
    assert "generated: 3/3 killed (100%" in proc.stdout, proc.stdout[-4000:]
    generated = [ln for ln in lines if re.match(r"\s*python/et_copy/_device\.py:\d+:[a-z0-9+-]+:\d+ +killed ", ln)]
    assert len(generated) == 3, proc.stdout[-4000:]
    assert any(line.startswith("mutant") and "result" in line for line in lines), proc.stdout
    # The tests passed unmutated, so each kill is a failing assertion, not a broken setup.
    assert any("the unmutated tree passes every mutant's tests" in line for line in lines), proc.stdout
    assert sum(" killed " in line and "test_device_tensor_fields.py" in line for line in lines) >= 3, proc.stdout
    assert {p: p.read_bytes() for p in sources} == sources, "the smoke run edited the checkout"
