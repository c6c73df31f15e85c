"""Untrusted programs: a .pte whose et_copy op arguments were tampered with
fails to run with a clear error under et-copy's kernels, instead of
corrupting memory.

The programs are a real export (et_copy.tools.models.RoundTrip through
et_copy.export) edited through executorch's flatbuffer (de)serializer
(tamper_programs.py). They run in examples/executor, a C++ executor whose
registry holds et-copy's kernels only (the wheel's Python runtime would
bring the wheel's kernels), built here with AddressSanitizer and
UndefinedBehaviorSanitizer so that a silent out-of-bounds write would
still fail the test. Some malformations are caught by ExecuTorch's own
loader before any kernel runs (a tensor larger than its planned buffer);
the rest reach et-copy's kernels, which must reject them by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from build_tools import CMAKE, NINJA

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

SANITIZE_FLAGS = "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

# tampered file -> what the run must report (stderr)
EXPECTED = {
    "device_dtype_int": "et_copy::_h2d_copy.out: dtype mismatch: self has Float, out has Int",
    "output_dtype_half": "et_copy::_d2h_copy.out: dtype mismatch: self has Float, out has Half",
    "output_sizes_smaller": "et_copy::_d2h_copy.out: out has static shape [2, 3, 2] but self has shape [2, 3, 4]",
    "device_tensor_marked_cpu": "et_copy::_h2d_copy.out: out must be a device tensor, got a CPU tensor",
    "device_index_beyond": (
        "et_copy::_h2d_copy.out: out is on CUDA device 5, but the simulated allocator has 1 device(s)"
    ),
    "device_dim_order_swapped": "et_copy::_h2d_copy.out: dim order mismatch between self and out",
    # Refused at load by the device-access check, before the kernel could refuse it.
    "h2d_writes_host_output": "(et_copy::_h2d_copy.out): argument 1 (out) (value 2) is planned on cpu, "
    "but a host-to-device copy's out must be device memory",
    "d2h_reads_host_input": "et_copy::_d2h_copy.out: self must be a device tensor, got a CPU tensor",
    # Refused at load by the argument-kind check: the schema's two arguments and a result slot.
    "h2d_missing_argument": "operator et_copy::_h2d_copy.out: the call has 2 arguments; the schema takes 2 and a "
    "result slot",
    # Rejected by ExecuTorch's loader: the tensor does not fit its planned buffer.
    "device_dtype_double": "size_bytes (192) >= allocator size (96)",
    "device_sizes_beyond_buffer": "size_bytes (192) >= allocator size (96)",
    "device_buffer_shrunk": "size_bytes (96) >= allocator size (48)",
    # Rejected by et-copy's simulated allocator when the loader asks for it.
    "buffer_device_index_beyond": "simulated device: no device 5",
}


def _run(cmd, timeout, env=None):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


@pytest.fixture(scope="module")
def executor(tmp_path_factory) -> Path:
    """examples/executor over an installed, sanitized et_copy runtime."""
    cmake, ninja = CMAKE, NINJA
    root = tmp_path_factory.mktemp("untrusted")
    common = ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}", f"-DPython_EXECUTABLE={sys.executable}"]
    _run(
        [
            cmake,
            "-S",
            REPO,
            "-B",
            root / "runtime",
            *common,
            "-DET_COPY_SANITIZE=ON",
            "-DET_COPY_BUILD_TESTS=OFF",
            "-DET_COPY_BUILD_PYTHON=OFF",
            "-DET_COPY_WITH_CUDA=OFF",
            "-DCMAKE_CXX_FLAGS=-O1",
        ],
        300,
    )
    _run([cmake, "--build", root / "runtime", "-j2"], 900)
    _run([cmake, "--install", root / "runtime", "--prefix", root / "prefix"], 120)
    _run(
        [
            cmake,
            "-S",
            REPO / "examples" / "executor",
            "-B",
            root / "executor",
            *common,
            f"-Det_copy_DIR={root / 'prefix' / 'lib' / 'cmake' / 'et_copy'}",
            f"-DCMAKE_CXX_FLAGS={SANITIZE_FLAGS} -O1",
            "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined",
        ],
        300,
    )
    _run([cmake, "--build", root / "executor", "-j2"], 600)
    return root / "executor" / "et_copy_executor"


def _execute(executor: Path, program: Path) -> subprocess.CompletedProcess:
    env = dict(
        os.environ, ASAN_OPTIONS="detect_leaks=1:halt_on_error=1", UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
    )
    return subprocess.run(
        [str(executor), str(program), "--seed", "1"], capture_output=True, text=True, timeout=120, env=env
    )


def _no_sanitizer_finding(proc: subprocess.CompletedProcess) -> None:
    for finding in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        assert finding not in proc.stderr, proc.stderr[-6000:]


def test_the_untampered_program_runs_clean_under_sanitizers(executor, exported_programs):
    proc = subprocess.run(
        [str(executor), str(exported_programs / "original.pte"), "--seed", "1", "--require-copies"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1"),
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    _no_sanitizer_finding(proc)


def test_every_tamper_in_the_generator_has_an_expectation(exported_programs):
    written = {p.stem for p in exported_programs.glob("*.pte")} - {"original"}
    assert written == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_tampered_program_fails_with_a_clear_error_and_no_memory_error(executor, exported_programs, name):
    proc = _execute(executor, exported_programs / f"{name}.pte")
    _no_sanitizer_finding(proc)
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert EXPECTED[name] in proc.stderr, proc.stderr[-6000:]
