"""et_copy's CUDA allocator.

Without a GPU (CI): the extension carries the CUDA code, imports silently,
links no shared CUDA runtime, and use_cuda() fails with the reason while
leaving the registry usable. With a GPU (marked ``gpu``; run this file on its
own, as scripts/gpu_check.sh does, since one process holds one CUDA
allocator): round trips, device indices, device-to-device, ordering against
torch's stream, zero-copy exports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import et_copy
import pytest
import torch
from et_copy import _C
from et_copy import cuda as _cuda
from et_copy._C import loops as _loops
from et_copy._device import CUDA


def run_fresh(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args, "-c", textwrap.dedent(code)] if code else [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def last_json(proc: subprocess.CompletedProcess):
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


STATUS = _cuda.cuda_status()
HAS_GPU = STATUS["device_count"] is not None
needs_cuda_build = pytest.mark.skipif(not _cuda.built_with_cuda(), reason="et_copy was built without the CUDA toolkit")
no_gpu_here = pytest.mark.skipif(HAS_GPU, reason="a CUDA device is present; this pins the no-device behaviour")


# ---- everywhere --------------------------------------------------------------


def test_extension_holds_the_cuda_allocator_when_the_toolkit_is_on_path():
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc on PATH: CMake builds without the CUDA allocator here")
    if os.environ.get("ET_COPY_WITH_CUDA", "").upper() in ("OFF", "0"):
        pytest.skip("ET_COPY_WITH_CUDA=OFF: built without the CUDA allocator on purpose")
    assert _cuda.built_with_cuda(), "nvcc is on PATH but et_copy._C was built without CUDA"


@needs_cuda_build
def test_extension_links_no_shared_cuda_runtime():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf is not installed")
    dynamic = subprocess.run([readelf, "-d", _C.__file__], capture_output=True, text=True, check=True).stdout
    needed = [line for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert needed, dynamic
    assert not any("libcudart" in line or "libcuda.so" in line for line in needed), needed


def test_import_prints_nothing_and_registers_nothing():
    quiet = run_fresh("import et_copy, et_copy.cuda, et_copy.tools.doctor")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    out = last_json(
        run_fresh("""
        import json, et_copy
        print(json.dumps(et_copy.allocator_info("cuda")))
    """)
    )
    assert out is None


@needs_cuda_build
def test_cuda_status_reports_versions_and_either_devices_or_the_reason():
    assert STATUS["built"] is True
    assert STATUS["runtime_version"] >= 12000
    if HAS_GPU:
        assert STATUS["error"] is None and STATUS["device_count"] == len(STATUS["devices"]) > 0
    else:
        assert STATUS["error"] == "NotFound"
        assert STATUS["cuda_error"] in ("cudaErrorInsufficientDriver", "cudaErrorNoDevice", "cudaErrorStubLibrary")
        assert (
            "no CUDA driver" in STATUS["message"]
            or "no CUDA device" in STATUS["message"]
            or "driver too old" in STATUS["message"]
        )
        assert STATUS["devices"] == []


def test_use_cuda_is_refused_while_the_simulated_device_serves_cuda():
    out = last_json(
        run_fresh("""
        import json, et_copy
        et_copy.use_simulated_device()
        try:
            et_copy.use_cuda()
            result = ["no error"]
        except et_copy.EtCopyError as e:
            result = [e.error, str(e)]
        print(json.dumps(result + [et_copy.allocator_info("cuda")["name"]]))
    """)
    )
    if not _cuda.built_with_cuda():
        assert out[0] == "NotSupported"
        return
    error, message, holder = out
    assert error == "RegistrationAlreadyRegistered"
    assert "simulated" in message and "et_copy.use_cuda" in message
    assert holder == "simulated"


@needs_cuda_build
@no_gpu_here
def test_without_a_gpu_the_benchs_cuda_baselines_fail_naming_cuda_and_an_unknown_kind_is_refused_first():
    x, y = torch.arange(16.0), torch.zeros(16)
    with pytest.raises(RuntimeError, match="NotFound: cannot query the pointer: no CUDA driver"):
        _loops.cuda_pointer_device(x.data_ptr())
    for kind in ("h2d", "d2h", "d2d"):  # each a kind cudaMemcpy is asked for, and fails without a driver
        with pytest.raises(RuntimeError, match="cudaMemcpy failed"):
            _loops.cuda_raw_memcpy(y.data_ptr(), x.data_ptr(), 64, kind)
    with pytest.raises(ValueError, match="kind must be 'h2d', 'd2h' or 'd2d', got 'h2h'"):
        _loops.cuda_raw_memcpy(y.data_ptr(), x.data_ptr(), 64, "h2h")
    assert torch.equal(y, torch.zeros(16))


@needs_cuda_build
@no_gpu_here
def test_use_cuda_without_a_gpu_says_why_and_leaves_the_registry_usable():
    out = last_json(
        run_fresh("""
        import json, torch, et_copy
        errors = []
        for _ in range(2):  # failing twice changes nothing either
            try:
                et_copy.use_cuda()
                errors.append(None)
            except et_copy.EtCopyError as e:
                errors.append([e.error, str(e)])
        after_failure = et_copy.allocator_info("cuda")
        outcome = et_copy.use_simulated_device()
        x = torch.arange(12, dtype=torch.float64).reshape(3, 4)
        back = et_copy.d2h_copy(et_copy.h2d_copy(x))
        print(json.dumps({"errors": errors, "after_failure": after_failure, "outcome": outcome,
                          "round_trip": bool(torch.equal(back, x)),
                          "holder": et_copy.allocator_info("cuda")["name"]}))
    """)
    )
    for error, message in out["errors"]:
        assert error == "NotFound"
        assert message.startswith("et_copy.use_cuda: ")
        assert "no CUDA driver" in message or "no CUDA device" in message or "driver too old" in message
    assert out["after_failure"] is None
    assert out["outcome"] == "registered"
    assert out["round_trip"] is True
    assert out["holder"] == "simulated"


@needs_cuda_build
def test_copy_config_is_a_setting_that_keeps_what_is_left_out_and_refuses_bad_values():
    """No device needed: the configuration lives in the allocator object."""
    before = _cuda.copy_config()
    try:
        assert before["pageable"] == "direct"  # the measured default (docs/cuda.md)
        _cuda.set_copy_config("staged")
        assert _cuda.copy_config() == {**before, "pageable": "staged"}
        _cuda.set_copy_config(chunk_bytes=64 << 10)
        assert _cuda.copy_config() == {**before, "pageable": "staged", "chunk_bytes": 64 << 10}
        for bad, match in (
            ({"pageable": "fast"}, "pageable must be 'staged' or 'direct'"),
            ({"chunk_bytes": (64 << 10) - 1}, "chunk"),
            ({"chunk_bytes": (1 << 30) + 1}, "chunk"),
            ({"staging_threshold": -1}, "must not be negative"),
        ):
            with pytest.raises(et_copy.EtCopyError, match=match) as e:
                _cuda.set_copy_config(**bad)
            assert e.value.error == "InvalidArgument"
        with pytest.raises(TypeError, match="chunk_bytes must be an int"):
            _cuda.set_copy_config(chunk_bytes=1.5e6)
        assert _cuda.copy_config() == {**before, "pageable": "staged", "chunk_bytes": 64 << 10}
    finally:
        _cuda.set_copy_config(**before)
    assert _cuda.copy_config() == before


class _FakeStream:
    """What et_copy reads of a torch.cuda.Stream: its handle and its device."""

    def __init__(self, handle: int, index: int) -> None:
        self.cuda_stream = handle
        self.device = torch.device("cuda", index)


@needs_cuda_build
def test_use_stream_sets_the_threads_stream_per_device_and_puts_back_what_was_there():
    """No device needed: the setting is a thread-local handle per device (et_copy/cuda_stream.h)."""
    import threading

    assert _cuda.current_stream(0) is None and _cuda.current_stream(1) is None
    with _cuda.use_stream(0x1000):
        assert _cuda.current_stream(0) == 0x1000
        assert _cuda.current_stream(1) is None
        seen = []
        worker = threading.Thread(target=lambda: seen.append(_cuda.current_stream(0)))
        worker.start()
        worker.join()
        assert seen == [None], "another thread has its own setting"
        with _cuda.use_stream(_FakeStream(0x2000, 1)):  # a torch stream's own device
            assert (_cuda.current_stream(0), _cuda.current_stream(1)) == (0x1000, 0x2000)
        with _cuda.use_stream(0):  # the legacy default stream, which is not "none"
            assert _cuda.current_stream(0) == 0
        with _cuda.use_stream(None):
            assert _cuda.current_stream(0) is None
        with pytest.raises(RuntimeError, match="inside"), _cuda.use_stream(0x3000):
            raise RuntimeError("inside")
        assert (_cuda.current_stream(0), _cuda.current_stream(1)) == (0x1000, None)
    assert _cuda.current_stream(0) is None
    _cuda.set_stream(0x4000, device=2)
    assert _cuda.current_stream(2) == 0x4000
    _cuda.set_stream(None, device=2)
    assert _cuda.current_stream(2) is None
    for bad, exc, match in (
        ("0x10", TypeError, "stream must be a torch.cuda.Stream, an int handle"),
        (True, TypeError, "stream must be"),
        (-1, ValueError, "not negative"),
    ):
        with pytest.raises(exc, match=match):
            _cuda.set_stream(bad)
    with pytest.raises(ValueError, match="the stream is of cuda:1, not of cuda:0"):
        _cuda.set_stream(_FakeStream(0x10, 1), device=0)
    with pytest.raises(TypeError, match="device must be an int"):
        _cuda.set_stream(0x10, device=1.0)  # type: ignore[arg-type]
    for device in (-1, 128):
        with pytest.raises(et_copy.EtCopyError, match=f"device {device} is not a CUDA device index") as e:
            _cuda.set_stream(0x10, device=device)
        assert e.value.error == "InvalidArgument"
        assert _cuda.current_stream(device) is None


def test_simulated_memory_refuses_zero_copy_cuda_exports():
    et_copy.use_simulated_device()
    t = et_copy.h2d_copy(torch.arange(6, dtype=torch.float32))
    with pytest.raises(et_copy.EtCopyError, match="needs real CUDA memory") as e:
        t.__cuda_array_interface__
    assert e.value.error == "NotSupported"
    with pytest.raises(et_copy.EtCopyError, match="needs real CUDA memory"):
        t.__dlpack__()
    with pytest.raises(et_copy.EtCopyError, match="needs real CUDA memory"):
        t.__dlpack_device__()
    with pytest.raises(et_copy.EtCopyError, match="simulated"):
        torch.from_dlpack(t)


def test_doctor_reports_versions_owners_and_cuda_without_registering():
    proc = run_fresh("", "-m", "et_copy", "doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["executorch"] is not None
    assert report["torch"]["version"] == torch.__version__
    assert set(report["kernels"]) == {et_copy.H2D_COPY_OUT, et_copy.D2H_COPY_OUT}
    assert all(who == "nobody" for who in report["kernels"].values())
    assert report["cuda_allocator"] is None
    assert report["cuda"]["built"] == _cuda.built_with_cuda()
    assert report["cuda"]["message"] == STATUS["message"]

    text = run_fresh("", "-m", "et_copy", "doctor")
    assert text.returncode == 0, text.stderr
    assert f"torch        {torch.__version__}" in text.stdout
    assert "executorch   " in text.stdout
    if HAS_GPU:
        assert "cuda:0" in text.stdout
    else:
        assert STATUS["message"] in text.stdout


def test_doctor_register_flag_registers_kernels_and_reports_the_cuda_outcome():
    proc = run_fresh("", "-m", "et_copy", "doctor", "--json", "--register")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert all(who != "nobody" for who in report["kernels"].values())
    outcome = report["registered_now"]["cuda allocator"]
    if HAS_GPU:
        assert outcome == "registered"
        assert report["cuda_allocator"]["name"] == "cuda"
    else:
        assert outcome.startswith("not registered (")
        assert report["cuda_allocator"] is None


# ---- on a GPU ---------------------------------------------------------------

gpu = pytest.mark.gpu
SIZES = [0, 1, 7, 4099, (1 << 20) + 5, (20 << 20) + 3]  # bytes: empty .. several staging chunks


@pytest.fixture(scope="module")
def cuda():
    """et_copy's CUDA allocator, registered in this process."""
    if not HAS_GPU:
        pytest.skip(f"no CUDA device: {STATUS['message']}")
    info = et_copy.allocator_info("cuda")
    if info is not None and info["name"] != "cuda":
        pytest.skip(
            f"{info['name']} allocator holds CUDA in this process; run this file alone "
            "(python -m pytest tests/python/test_cuda.py -m gpu, as scripts/gpu_check.sh does)"
        )
    assert et_copy.use_cuda() in ("registered", "already et_copy")
    return et_copy


@pytest.fixture
def torch_cuda():
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA")


def _bytes_as(b: torch.Tensor, dtype: torch.dtype, pin: bool) -> torch.Tensor:
    # Pinned and viewed as bytes first: torch can neither pin nor empty_like
    # a quantized tensor, but views pinned bytes as one.
    return (b.pin_memory() if pin else b).view(dtype)


def random_tensor(dtype: torch.dtype, nbytes: int, *, pin: bool = False) -> torch.Tensor:
    n = nbytes // dtype.itemsize
    if dtype.is_complex:
        x = torch.randn(n, dtype=dtype)
    elif dtype.is_floating_point:
        x = torch.randn(n, dtype=torch.float64).to(dtype)
    elif dtype == torch.bool:
        x = torch.randint(0, 2, (n,), dtype=torch.uint8).bool()
    else:
        x = torch.randint(0, 256, (n * dtype.itemsize,), dtype=torch.uint8)  # any bytes: integers, quantized
    return _bytes_as(x.view(torch.uint8), dtype, pin)


def empty_host(like: torch.Tensor, *, pin: bool = False) -> torch.Tensor:
    """Host memory shaped and typed as ``like`` (1-D), filled with 0xAB."""
    return _bytes_as(torch.full((like.numel() * like.dtype.itemsize,), 0xAB, dtype=torch.uint8), like.dtype, pin)


@gpu
def test_use_cuda_is_idempotent_and_reports_the_devices(cuda):
    assert et_copy.use_cuda() == "already et_copy"
    info = et_copy.allocator_info("cuda")
    assert (info["owner"], info["name"], info["device_count"]) == ("et_copy", "cuda", STATUS["device_count"])
    with pytest.raises(et_copy.EtCopyError, match="already served by et_copy's cuda allocator"):
        et_copy.use_simulated_device()


@gpu
@pytest.mark.parametrize("pinned", [False, True], ids=["pageable", "pinned"])
@pytest.mark.parametrize("nbytes", SIZES)
@pytest.mark.parametrize("dtype", et_copy.SUPPORTED_DTYPES, ids=str)
def test_round_trip_every_dtype_and_size(cuda, dtype, nbytes, pinned):
    x = random_tensor(dtype, nbytes, pin=pinned)
    d = et_copy.h2d_copy(x)
    out = empty_host(x, pin=pinned)
    back = et_copy.d2h_copy(d, out=out)
    assert back is out
    assert back.dtype == dtype and back.shape == x.shape
    assert torch.equal(back.view(torch.uint8), x.view(torch.uint8))  # bit for bit


@gpu
@pytest.mark.parametrize("mode", ["direct", "staged"])
def test_pageable_paths_agree_across_many_small_chunks(cuda, mode):
    before = _cuda.copy_config()
    try:
        _cuda.set_copy_config(mode, staging_threshold=0, chunk_bytes=64 << 10)
        for nbytes in (1, (64 << 10) - 1, 64 << 10, (64 << 10) + 1, (5 << 20) + 17):
            x = random_tensor(torch.uint8, nbytes)
            assert torch.equal(et_copy.d2h_copy(et_copy.h2d_copy(x)), x)
    finally:
        _cuda.set_copy_config(**before)


@gpu
def test_registered_host_memory_round_trips(cuda):
    x = random_tensor(torch.float32, 16 << 20)
    out = torch.empty_like(x)
    _cuda.register_host_memory(x)
    _cuda.register_host_memory(out)
    try:
        assert torch.equal(et_copy.d2h_copy(et_copy.h2d_copy(x), out=out), x)
        with pytest.raises(et_copy.EtCopyError, match="already pinned"):
            _cuda.register_host_memory(x)
    finally:
        _cuda.unregister_host_memory(x)
        _cuda.unregister_host_memory(out)


@gpu
def test_device_indices_are_checked_and_minus_one_is_the_current_device(cuda):
    count = STATUS["device_count"]
    with pytest.raises(et_copy.EtCopyError) as e:
        et_copy.empty((4,), torch.float32, f"cuda:{count}")
    assert e.value.error == "InvalidArgument"
    buf = _C.DeviceBuffer(1024, CUDA, -1, 256)
    try:
        assert _loops.cuda_pointer_device(buf.ptr) == 0  # nothing made another device current
        assert buf.ptr % 256 == 0
    finally:
        buf.free()
    if count >= 2:
        d = et_copy.h2d_copy(torch.arange(10), device=f"cuda:{count - 1}")
        assert _loops.cuda_pointer_device(d.data_ptr()) == count - 1
        assert torch.equal(d.cpu(), torch.arange(10))
        # the allocator switched devices and put the caller's back: -1 is still device 0
        current = _C.DeviceBuffer(8, CUDA, -1, 256)
        assert _loops.cuda_pointer_device(current.ptr) == 0
        current.free()


@gpu
def test_alignment_above_256_is_not_supported_and_zero_bytes_is_freeable(cuda):
    with pytest.raises(et_copy.EtCopyError) as e:
        _C.DeviceBuffer(64, CUDA, 0, 512)
    assert e.value.error == "NotSupported"
    with pytest.raises(et_copy.EtCopyError) as e:
        _C.DeviceBuffer(64, CUDA, 0, 3)
    assert e.value.error == "InvalidArgument"
    live = et_copy.allocator_stats()["live_allocations"]
    empty = _C.DeviceBuffer(0, CUDA, 0, 256)
    assert empty.ptr != 0
    empty.free()
    assert et_copy.allocator_stats()["live_allocations"] == live


@gpu
def test_device_to_device_copies_and_rejects_host_pointers(cuda):
    x = random_tensor(torch.int32, (3 << 20) + 4)
    a = et_copy.h2d_copy(x)
    b = et_copy.empty(x.shape, x.dtype)
    before = et_copy.allocator_stats()["d2d_copies"]
    _loops.device_to_device(b.data_ptr(), a.data_ptr(), a.nbytes, 0)
    assert et_copy.allocator_stats()["d2d_copies"] == before + 1
    assert torch.equal(b.cpu(), x)
    with pytest.raises(RuntimeError, match="InvalidArgument: .*not device memory"):
        _loops.device_to_device(b.data_ptr(), x.data_ptr(), 64, 0)
    assert torch.equal(b.cpu(), x)


@gpu
def test_the_benchs_raw_cuda_memcpy_moves_each_kind_and_refuses_others_and_host_memory_is_on_no_device(cuda):
    # The baseline python -m et_copy bench times: each kind copies, through no allocator.
    x = random_tensor(torch.int32, 4096)
    back = torch.zeros_like(x)
    a = et_copy.empty(x.shape, x.dtype)
    b = et_copy.empty(x.shape, x.dtype)
    before = et_copy.allocator_stats()
    _loops.cuda_raw_memcpy(a.data_ptr(), x.data_ptr(), 4096, "h2d")
    _loops.cuda_raw_memcpy(b.data_ptr(), a.data_ptr(), 4096, "d2d")
    _loops.cuda_raw_memcpy(back.data_ptr(), b.data_ptr(), 4096, "d2h")
    assert torch.equal(back, x)
    after = et_copy.allocator_stats()
    assert [after[k] - before[k] for k in ("h2d_copies", "d2h_copies", "d2d_copies")] == [0, 0, 0]
    with pytest.raises(ValueError, match="kind must be 'h2d', 'd2h' or 'd2d', got 'h2h'"):
        _loops.cuda_raw_memcpy(back.data_ptr(), x.data_ptr(), 4096, "h2h")
    assert _loops.cuda_pointer_device(x.data_ptr()) == -1
    assert _loops.cuda_pointer_device(a.data_ptr()) == 0


@gpu
def test_host_and_device_sides_are_checked_by_pointer(cuda):
    d = et_copy.h2d_copy(torch.arange(8.0))
    host = torch.arange(8.0)
    with pytest.raises(RuntimeError, match="InvalidArgument"):
        # a host address presented as device memory
        _loops.device_to_device(host.data_ptr(), d.data_ptr(), 32, 0)


@gpu
def test_torch_cuda_tensors_serve_as_the_device_side(cuda, torch_cuda):
    x = random_tensor(torch.bfloat16, 1 << 20)
    out = torch.empty(x.shape, dtype=x.dtype, device="cuda")
    assert et_copy.h2d_copy(x, out=out) is out
    assert torch.equal(out.cpu(), x)
    assert torch.equal(et_copy.d2h_copy(out * 1), x)
    with pytest.raises(et_copy.EtCopyError, match="dtype mismatch"):
        et_copy.h2d_copy(x.float(), out=out)


@gpu
def test_device_to_host_waits_for_work_queued_on_torchs_default_stream(cuda, torch_cuda):
    y = torch.zeros(64 << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # keep the default stream busy (~0.1 s)
    y.fill_(7)  # queued behind the sleep; no synchronize before the copy
    back = et_copy.d2h_copy(y)
    assert bool((back == 7).all())


@gpu
def test_host_to_device_result_is_visible_to_torch_at_once(cuda, torch_cuda):
    x = random_tensor(torch.float32, 32 << 20)
    expected = x.clone()
    out = torch.empty(x.shape, dtype=x.dtype, device="cuda")
    et_copy.h2d_copy(x, out=out)
    x.zero_()  # the copy was done with the host memory when it returned
    assert torch.equal(out.cpu(), expected)


@gpu
def test_on_the_callers_stream_h2d_is_queued_and_d2h_waits_for_that_stream_only(cuda, torch_cuda):
    s, other = torch.cuda.Stream(), torch.cuda.Stream()
    x = random_tensor(torch.float32, 16 << 20)  # pageable: staged by et_copy
    expected = x.clone()
    out = torch.empty(x.shape, dtype=x.dtype, device="cuda")
    torch.cuda.synchronize()
    with _cuda.use_stream(s):
        with torch.cuda.stream(s):
            torch.cuda._sleep(200_000_000)  # keep s busy (~0.1 s): the copies queue behind it
        with torch.cuda.stream(other):
            torch.cuda._sleep(4_000_000_000)  # another stream, busy for far longer
        et_copy.h2d_copy(x, out=out)
        x.zero_()  # the source may be reused on return
        assert not s.query(), "h2d returned before the stream reached it"
        with torch.cuda.stream(s):
            doubled = out * 2  # torch's work on the same stream, in order
        back = et_copy.d2h_copy(doubled)
        assert s.query(), "d2h synchronised the caller's stream"
        assert not other.query(), "and no other stream"
    assert torch.equal(back, expected * 2)
    torch.cuda.synchronize()


@gpu
def test_dlpack_and_cuda_array_interface_share_the_memory(cuda, torch_cuda):
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    d = et_copy.h2d_copy(x)
    assert d.__dlpack_device__() == (2, 0)
    t = torch.from_dlpack(d)
    assert t.device.type == "cuda" and t.data_ptr() == d.data_ptr()
    assert torch.equal(t.cpu(), x)
    t.add_(1)
    assert torch.equal(d.cpu(), x + 1)
    cai = torch.as_tensor(d, device="cuda")
    assert cai.data_ptr() == d.data_ptr() and cai.shape == x.shape
    assert d.__cuda_array_interface__["typestr"] == "<f4"
    bf = et_copy.h2d_copy(x.bfloat16())
    assert torch.equal(torch.from_dlpack(bf).cpu(), x.bfloat16())
    with pytest.raises(TypeError, match="bfloat16"):
        bf.__cuda_array_interface__
    # channels-last dim order travels as strides
    cl = x.reshape(1, 2, 3, 4).contiguous(memory_format=torch.channels_last)
    dcl = et_copy.h2d_copy(cl)
    assert torch.equal(torch.from_dlpack(dcl).cpu(), cl)


@gpu
def test_a_256_mib_pinned_round_trip_through_the_gpu_is_byte_exact(cuda):
    # Throughput is the benchmark's business (python -m et_copy bench, CUDA rows); this pins the bytes.
    x = random_tensor(torch.uint8, 256 << 20, pin=True)
    d = et_copy.h2d_copy(x)
    out = torch.empty_like(x).pin_memory()
    et_copy.h2d_copy(x, out=d)
    et_copy.d2h_copy(d, out=out)
    assert torch.equal(out, x)


@gpu
def test_a_dynamic_cuda_out_keeps_its_own_dense_strides_after_a_resize(cuda):
    # self's size-1 dim has a stride no dense tensor has (a copy accepts it):
    # out takes self's shape, never its strides.
    x = torch.arange(3, dtype=torch.float32).as_strided((1, 3), (7, 1))
    out = torch.empty((2, 3), dtype=torch.float32, device="cuda")
    et_copy.h2d_copy(x, out=out, dynamic_out=True)
    assert (tuple(out.shape), out.stride()) == ((1, 3), (3, 1))
    assert torch.equal(out.cpu(), x.contiguous())
