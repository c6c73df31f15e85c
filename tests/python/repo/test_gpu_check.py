"""scripts/gpu_check.sh, the one script to run when a GPU machine is lent,
cannot rot while no GPU is at hand: it parses, refuses what it does not
know, its LLM step says SKIP with the reason where there is no GPU, and its
--dry-run exports a tiny LLM through the simulated device's partitioner and
generates transformers' tokens from it (docs/cuda.md, "The GPU check")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from et_copy import cuda as _cuda

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "gpu_check.sh"
LLM_CHECK = REPO / "scripts" / "gpu_llm_check.py"


def run(cmd: list[str], tmp_path: Path, timeout: int, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out"), **env},
    )


def test_the_script_parses_and_refuses_an_unknown_argument(tmp_path):
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    proc = run(["bash", str(SCRIPT), "--no-such-flag"], tmp_path, 30)
    assert proc.returncode == 2 and "unknown argument --no-such-flag" in proc.stderr
    usage = run(["bash", str(SCRIPT), "--help"], tmp_path, 30)
    assert usage.returncode == 0 and "--dry-run" in usage.stdout and "set -e" not in usage.stdout


@pytest.mark.skipif(bool(_cuda.cuda_status().get("device_count")), reason="a GPU is present: the step would run")
def test_the_llm_step_skips_naming_what_is_missing_without_a_gpu(tmp_path):
    proc = run([sys.executable, str(LLM_CHECK), "--out", str(tmp_path)], tmp_path, 120)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("SKIP: CudaPartitioner: "), proc.stdout
    assert not any(line.startswith(("PASS", "FAIL")) for line in lines), proc.stdout


# A minute of export: in the costly tier (.ci/run-slow), beside the docs' slow blocks.
@pytest.mark.costly
def test_the_dry_run_exports_through_the_simulated_partitioner_and_generates_transformers_tokens(tmp_path):
    # llama at max_seq_len 8: the quickest tiny LLM (about 25 s here, 60 s on a loaded machine).
    proc = run(
        ["bash", str(SCRIPT), "--dry-run"],
        tmp_path,
        400,
        ET_COPY_LLM_ARGS="--arch llama --max-seq-len 8 --new-tokens 2",
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    assert "PASS: export_llm through SimulatedDevicePartitioner" in out
    assert "PASS: generate on et_copy.runtime equals transformers" in out
    assert out.strip().splitlines()[-1].startswith("gpu_check: 1 PASS, 0 SKIP, 0 FAIL in ")
    assert (tmp_path / "out" / "llm.pte").stat().st_size > 0
