"""Property-based fuzzing of et_copy's two copy kernels (see
fuzz_strategies.py for the generators, guarded buffers and the oracle).

Budget: ET_COPY_FUZZ_PROFILE=ci (default, 500 cases per test) or long
(10,000 per test); the session summary prints how many cases ran.

The registry path runs in a child process: in a process where the executorch
wheel's kernel library is loaded (by `import executorch.runtime`, or by
et_copy.register_kernels()), the registry holds the wheel's kernels, which
write out of bounds on a dtype mismatch. The child never loads that library
and registers et_copy's kernels through the private binding, so
run_registered there exercises et_copy's boxed kernels as ExecuTorch's
registry dispatches them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import et_copy
import fuzz_strategies as fs
import pytest
import torch
from hypothesis import given


@pytest.fixture(autouse=True)
def simulated_device():
    et_copy.use_simulated_device(device_count=2)
    with fs.collector_paused():
        yield
    et_copy.use_simulated_device(device_count=1)


@fs.fuzz_settings()
@given(case=fs.public_cases())
def test_public_copies_are_exact_or_rejected_with_out_and_guards_untouched(case):
    fs.run_public_case(case, "direct")


def test_registry_dispatch_of_et_copy_kernels_holds_the_same_properties():
    child = Path(__file__).with_name("fuzz_registry_child.py")
    env = dict(os.environ)
    env.setdefault(fs.PROFILE_ENV, fs.profile_name())
    proc = subprocess.run([sys.executable, str(child)], capture_output=True, text=True, env=env, timeout=1800)
    report = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0, (
        f"registry fuzz child failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    )
    counts = json.loads(report)
    assert counts["owner"] == "already et_copy"
    for kind, n in counts["cases"].items():
        fs.CASES[kind] = fs.CASES.get(kind, 0) + n
        fs.SECONDS[kind] = fs.SECONDS.get(kind, 0.0) + counts["seconds"][kind]
    assert min(counts["cases"].values()) >= fs.PROFILES[fs.profile_name()]


def _libfuzzer_available() -> bool:
    """clang++ that can link -fsanitize=fuzzer (libFuzzer ships in clang's
    compiler-rt; CI images without clang skip the C++ fuzz target)."""
    clang = shutil.which("clang++")
    if clang is None:
        return False
    probe = subprocess.run(
        [clang, "-fsanitize=fuzzer", "-x", "c++", "-", "-o", os.devnull],
        input='extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }',
        capture_output=True,
        text=True,
    )
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _libfuzzer_available(), reason="needs clang++ with libFuzzer (apt-get install clang)")
def test_libfuzzer_target_finds_nothing_in_a_bounded_run(tmp_path):
    """fuzz/run.sh: the C++ fuzz target over the kernel entry points, from
    the seed corpus, for 20 seconds under ASan and UBSan."""
    script = Path(__file__).resolve().parents[2] / "fuzz" / "run.sh"
    env = dict(os.environ, ET_COPY_FUZZ_BUILD_DIR=str(tmp_path / "build"))
    try:
        import cmake

        env["CMAKE"] = str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
        import ninja

        env["PATH"] = f"{ninja.BIN_DIR}{os.pathsep}{env['PATH']}"
    except ImportError:
        pass
    proc = subprocess.run(["bash", str(script), "20"], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-8000:]}"
    assert "stat::number_of_executed_units" in proc.stderr


@pytest.mark.parametrize("shape", [(2**31,), (2**64,), (2**40, 2**40), (2**31 - 1,) * 3])
def test_empty_refuses_shapes_the_kernels_could_never_describe(shape):
    """Found by fuzzing the public API by hand: such shapes used to allocate
    (and then fail every copy with a binding error naming no op) or die in
    pybind11's argument conversion with an unrelated TypeError."""
    before = et_copy.allocator_stats()
    with pytest.raises(
        ValueError, match=r"et_copy.empty: shape .* (does not fit ExecuTorch's tensor metadata|beyond a 64-bit size)"
    ):
        et_copy.empty(shape, torch.uint8)
    assert et_copy.allocator_stats() == before
