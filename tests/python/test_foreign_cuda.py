"""et_copy beside another library's CUDA allocator (docs/cuda.md, "Beside
upstream's CUDA backend"): upstream ExecuTorch's CUDA wheels register their
own CUDA DeviceAllocator when the CUDA backend's library loads, before et_copy
registers anything.

The foreign allocator here is tests/cpp/foreign_cuda_allocator.cpp, built
into a shared library against the executorch wheel's headers and
libexecutorch.so and loaded RTLD_GLOBAL in a fresh child before
``import et_copy``: its memory faults on any host access, as a GPU's does, so
nothing passes because device memory happens to be host memory. No GPU
needed: CPU CI runs it."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch.exir")

from et_copy import _C  # noqa: E402
from et_copy.export import export_device_program  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ROUNDTRIP = REPO / "tests" / "cpp" / "programs" / "roundtrip.pte"  # x -> h2d -> d2h, float32[2, 3, 4] on cuda:0


def _executorch_root() -> Path:
    import executorch

    for root in executorch.__path__:
        if (Path(root) / "lib" / "libexecutorch.so").exists():
            return Path(root)
    pytest.fail("the executorch wheel has no lib/libexecutorch.so")


@pytest.fixture(scope="module")
def foreign_library(tmp_path_factory) -> Path:
    """tests/cpp/foreign_cuda_allocator.cpp as a shared library linked to the wheel's libexecutorch.so."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.fail("a C++ compiler (c++ or g++) is needed to build the foreign allocator")
    root = _executorch_root()
    c10 = root / "include" / "executorch" / "runtime" / "core" / "portable_type" / "c10"
    out = tmp_path_factory.mktemp("foreign") / "libforeign_cuda.so"
    cmd = [
        compiler, "-std=c++17", "-shared", "-fPIC", "-O1", "-DC10_USING_CUSTOM_GENERATED_MACROS",
        f"-I{root / 'include'}", f"-I{c10}", str(REPO / "tests" / "cpp" / "foreign_cuda_allocator.cpp"),
        f"-L{root / 'lib'}", "-lexecutorch", f"-Wl,-rpath,{root / 'lib'}", "-o", str(out),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def _delegate_bytes(pte) -> bytes:
    (plan,) = pte.program.execution_plan
    (delegate,) = plan.delegates
    return bytes(pte.program.backend_delegate_data[delegate.processed.index].data)


def aoti_cuda_program(simulated_pte: bytes) -> bytes:
    """``simulated_pte``'s one delegate made an AotiDeviceBackend delegate
    whose record says: compiled for target cuda by this torch, one input and
    one output, and a payload that is not a shared object. Its digest line is
    right, so init gets past the target check to the code-trust check, where
    (untrusted) it stops before loading a byte of the payload."""
    from hand_made_programs import edit_program

    payload = b"not a shared object, and never loaded"
    record = (
        "\n".join(
            [
                "et_copy.delegate 2",
                "device\tcuda\t0",
                f"target\tcuda\t{torch.__version__}",
                "io\t1\t1",
                f"digest\tsha256\t{hashlib.sha256(payload).hexdigest()}",
                f"payload\taoti\t{len(payload)}",
            ]
        )
        + "\n"
    ).encode() + payload

    def edit(pte) -> None:
        (plan,) = pte.program.execution_plan
        (delegate,) = plan.delegates
        delegate.id = "AotiDeviceBackend"
        pte.program.backend_delegate_data[delegate.processed.index].data = record

    return edit_program(simulated_pte, edit)


CHILD = textwrap.dedent(
    """
    import ctypes, json, sys

    lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # another library, loaded first
    lib.foreign_cuda_count.restype = ctypes.c_longlong
    lib.foreign_cuda_is_device_memory.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    assert lib.foreign_cuda_register() == 1

    import torch
    import et_copy, et_copy.runtime
    from et_copy import _C

    roundtrip, simulated, aoti = sys.argv[2:5]
    seen = {}

    def count(name):
        return lib.foreign_cuda_count(name.encode())

    def attempt(key, fn):
        try:
            seen[key] = ["ok", fn()]
        except Exception as e:
            seen[key] = [type(e).__name__, getattr(e, "error", None), str(e)]

    attempt("use_cuda", lambda: [et_copy.use_cuda(), et_copy.use_cuda()])
    seen["info"] = et_copy.allocator_info()
    seen["describe"] = _C.describe_allocator(1)
    attempt("use_simulated_device", et_copy.use_simulated_device)
    attempt("stats", et_copy.allocator_stats)

    # The copies, through the foreign allocator.
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) - 7.5
    before = {k: count(k) for k in ("allocations", "h2d_bytes", "d2h_bytes")}
    d = et_copy.h2d_copy(x)
    seen["device_memory_is_the_foreign_allocators"] = lib.foreign_cuda_is_device_memory(d.data_ptr(), 96)
    back = et_copy.d2h_copy(d)
    seen["round_trip"] = bool(torch.equal(back, x))
    seen["copies"] = {k: count(k) - v for k, v in before.items()}
    attempt("dlpack", lambda: d.__dlpack__() and "exported")

    # A copy-only program planned on cuda, on et_copy.runtime.
    before = {k: count(k) for k in ("allocations", "h2d_copies", "d2h_copies")}
    method = et_copy.runtime.load(roundtrip).load_method("forward")
    (out,) = method.execute([x])
    seen["program_ran"] = bool(torch.equal(out, x))
    seen["program_copies"] = {k: count(k) - v for k, v in before.items()}

    # The device backends.
    seen["device_backends"] = _C.device_backends()
    seen["simulated_backend"] = et_copy.register_simulated_device_backend()
    seen["aoti_backend"] = et_copy.use_aoti_backend()
    seen["device_backends_after"] = _C.device_backends()
    attempt("simulated_program", lambda: et_copy.runtime.load(simulated).load_method("forward") and "loaded")
    attempt("aoti_program", lambda: et_copy.runtime.load(aoti).load_method("forward") and "loaded")
    print(json.dumps(seen))
    """
)


@pytest.fixture(scope="module")
def seen(foreign_library, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("programs")
    simulated = export_device_program(torch.nn.ReLU(), (torch.randn(2, 4),), backend="simulated").buffer
    (folder / "simulated.pte").write_bytes(simulated)
    (folder / "aoti.pte").write_bytes(aoti_cuda_program(simulated))
    args = [str(foreign_library), str(ROUNDTRIP), str(folder / "simulated.pte"), str(folder / "aoti.pte")]
    proc = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"the child died ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_use_cuda_answers_already_other_and_the_foreign_allocator_keeps_serving(seen):
    if not getattr(_C, "WITH_CUDA", False):
        assert seen["use_cuda"][:2] == ["EtCopyError", "NotSupported"]
    else:
        assert seen["use_cuda"] == ["ok", ["already other", "already other"]]
    assert seen["info"] == {
        "owner": "other",
        "name": "foreign",
        "device_count": None,
        "device_count_error": None,
        "host_readable": None,
    }
    assert seen["describe"] == "an allocator from another library"


def test_what_needs_et_copys_own_allocator_is_refused_by_name(seen):
    assert seen["use_simulated_device"] == [
        "EtCopyError",
        "RegistrationAlreadyRegistered",
        "et_copy.use_simulated_device: CUDA is already served by an allocator from another library; "
        "ExecuTorch cannot replace a registered allocator",
    ]
    kind, error, message = seen["stats"]
    assert (kind, error) == ("EtCopyError", "NotSupported")
    assert message.startswith("et_copy.allocator_stats: CUDA is served by another library's allocator"), message


def test_copies_go_through_the_foreign_allocator_and_its_memory_is_not_exported_unverified(seen):
    assert seen["device_memory_is_the_foreign_allocators"] == 1
    assert seen["round_trip"] is True
    assert seen["copies"] == {"allocations": 1, "h2d_bytes": 96, "d2h_bytes": 96}
    kind, error, message = seen["dlpack"]
    assert (kind, error) == ("EtCopyError", "NotSupported")
    assert "DeviceTensor.__dlpack__: needs real CUDA memory of cuda:0" in message, message
    assert "another library's allocator" in message, message


def test_a_copy_only_program_planned_on_cuda_runs_on_the_foreign_allocator(seen):
    assert seen["program_ran"] is True
    copies = seen["program_copies"]
    assert copies["allocations"] >= 1, "the planned cuda buffer comes from the foreign allocator"
    assert (copies["h2d_copies"], copies["d2h_copies"]) == (1, 1)


def test_the_gpu_backends_may_run_on_it_and_the_simulated_backend_is_refused_saying_why(seen):
    assert seen["device_backends"] == ["CudaBackend"]
    assert (seen["simulated_backend"], seen["aoti_backend"]) == ("registered", "registered")
    assert seen["device_backends_after"] == ["AotiDeviceBackend", "CudaBackend"]
    kind, _, message = seen["simulated_program"]
    assert kind == "EtCopyError"
    assert (
        "backend 'SimulatedDeviceBackend' runs on et-copy's simulated device only (its processor reads device "
        "memory through the host, and a GPU's memory is not host memory), and cuda is served by another "
        "library's allocator" in message
    ), message


def test_a_compiled_delegate_for_target_cuda_gets_past_the_target_check_on_it(seen):
    """Its init accepts the foreign GPU and stops at the next step: the
    payload is code this machine did not compile (no GPU is needed for that)."""
    kind, error, message = seen["aoti_program"]
    assert (kind, error) == ("EtCopyError", "AccessFailed"), seen["aoti_program"]
    assert "not compiled here, and loading runs it" in message, message
    assert "compiled for target cuda, which needs" not in message
