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
import time
from pathlib import Path

import et_copy
import fuzz_strategies as fs
import pytest
import torch
from et_copy import _C
from et_copy._device import CUDA
from hypothesis import given
from hypothesis import strategies as st


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
    child = Path(fs.__file__).with_name("fuzz_registry_child.py")
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


@pytest.fixture(scope="module")
def fuzz_build(tmp_path_factory) -> Path:
    """One build folder for both targets: they share the instrumented runtime."""
    return tmp_path_factory.mktemp("fuzz") / "build"


@pytest.mark.slow
@pytest.mark.skipif(not _libfuzzer_available(), reason="needs clang++ with libFuzzer (apt-get install clang)")
@pytest.mark.parametrize("target", ["kernels", "programs"])
def test_libfuzzer_target_finds_nothing_in_a_bounded_run(fuzz_build, target):
    """fuzz/run.sh: a C++ fuzz target for 20 seconds under ASan and UBSan:
    the kernel entry points from the seed corpus, or whole programs (real
    exports, an LLM's delegate records and nested programs and a compiled
    program's record and payload among them) loaded and run."""
    script = Path(__file__).resolve().parents[2] / "fuzz" / "run.sh"
    env = dict(os.environ, ET_COPY_FUZZ_BUILD_DIR=str(fuzz_build), PYTHON=sys.executable)
    try:
        import cmake

        env["CMAKE"] = str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
        import ninja

        env["PATH"] = f"{ninja.BIN_DIR}{os.pathsep}{env['PATH']}"
    except ImportError:
        pass
    # The program target logs names read from mutated bytes: not always UTF-8.
    proc = subprocess.run(
        ["bash", str(script), "20", target], capture_output=True, text=True, errors="replace", env=env, timeout=900
    )
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


# ---------------------------------------------------------------- the boundary
# A DeviceTensor can be built by hand, from any fields. The bindings check
# them once, when it is made (python/bindings/device_tensor.cpp), and they
# are read-only after, so this is where malformed metadata enters from
# Python. Whatever the fields, making it raises TypeError, ValueError or
# EtCopyError naming the constructor, or a copy through it raises one and
# leaves the host tensor as it was, or copies exactly the bytes the fields
# describe, inside its memory (the simulated allocator refuses any range
# outside an allocation).

_INTS = st.integers(min_value=-3, max_value=40) | st.sampled_from([2**31 - 1, 2**31, 2**63, -(2**63), 2**70])
_SEQ = st.lists(_INTS, max_size=18).map(tuple) | st.lists(_INTS, max_size=4) | st.none() | st.just("ab")
_FIELDS = {
    "shape": _SEQ,
    "dim_order": _SEQ | st.permutations([0, 1]).map(tuple),
    "dynamic": st.sampled_from([True, False, 1, 0, None, "yes"]),
    "device": st.tuples(st.integers(-2, 130), st.integers(-200, 200))
    | st.sampled_from([(1,), (1, 0, 0), "cuda", None]),
    "dtype": st.sampled_from([torch.float32, torch.int32, torch.uint8, torch.quint4x2, torch.float64, "float32"]),
}


class _DuckBuffer:
    """Looks like a DeviceBuffer to Python; the bindings take only real ones."""

    def __init__(self, ptr, freed):
        self.ptr, self.freed, self.nbytes = ptr, freed, 24

    def free(self):
        pass


def _count(outcome: str) -> None:
    fs.OUTCOMES[outcome] = fs.OUTCOMES.get(outcome, 0) + 1


@fs.fuzz_settings()
@given(
    fields=st.dictionaries(st.sampled_from(sorted(_FIELDS)), st.just(None), min_size=1),
    data=st.data(),
    h2d=st.booleans(),
    buffer=st.sampled_from(["real", "freed", "slice-inside", "duck-inside", "duck-past", "duck-odd"]),
)
def test_device_tensors_built_by_hand_are_refused_or_copy_within_their_memory(fields, data, h2d, buffer):
    started = time.perf_counter()
    dev = et_copy.empty((2, 3), torch.float32, "cuda:0", dynamic=True)
    memory = dev._buffer
    try:
        args = dict(buffer=memory, dtype=torch.float32, device=dev.device, shape=(2, 3), dim_order=(0, 1), dynamic=True)
        args.update({name: data.draw(_FIELDS[name], label=name) for name in fields})
        room = 24
        if buffer == "freed":
            args["buffer"] = _C.DeviceBuffer(24, CUDA, 0, 256)
            args["buffer"].free()
        elif buffer == "slice-inside":
            args["buffer"], room = memory.slice(4, 20), 20
        elif buffer != "real":
            ptr = {"duck-inside": dev.data_ptr() + 4, "duck-past": dev.data_ptr() + 64}
            args["buffer"] = _DuckBuffer(ptr.get(buffer, "not a pointer"), False)
        try:
            made = et_copy.DeviceTensor(**args)
        except (TypeError, ValueError, et_copy.EtCopyError) as e:
            assert str(e).startswith("et_copy.DeviceTensor: "), str(e)
            _count(f"hand-built: refused when made ({type(e).__name__})")
            return
        assert buffer in ("real", "slice-inside"), f"a DeviceTensor over a {buffer} buffer was made"
        host = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        before = host.clone()
        stats0 = et_copy.allocator_stats()
        try:
            if h2d:
                et_copy.h2d_copy(host, out=made)
            else:
                et_copy.d2h_copy(made, out=host)
        except (TypeError, ValueError, et_copy.EtCopyError) as e:
            assert torch.equal(host, before), "a rejected call changed the host tensor"
            _count(f"hand-built: refused by the copy ({type(e).__name__})")
            return
        stats1 = et_copy.allocator_stats()
        moved = stats1["h2d_bytes" if h2d else "d2h_bytes"] - stats0["h2d_bytes" if h2d else "d2h_bytes"]
        assert moved <= room, f"{moved} bytes moved through {room} bytes of memory"
        _count("hand-built: copied")
    finally:
        memory.free()
        fs.count_case("hand-built DeviceTensor", started)
