"""The simulated device's memory modes: host-unreadable memory faults on a
host access as a GPU's does, the copies and the inspection hook reach it
through the host alias, and use_simulated_device(host_readable=) switches
the mode of later allocations."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import et_copy
import pytest
import torch
from et_copy import _C
from et_copy._device import CUDA
from et_copy._dtypes import SUPPORTED_DTYPES


@pytest.fixture
def unreadable():
    """Host-unreadable allocations for the test, the mode before restored."""
    et_copy.use_simulated_device()
    before = et_copy.allocator_info()["host_readable"]
    et_copy.use_simulated_device(host_readable=False)
    yield
    et_copy.use_simulated_device(host_readable=before)


def _child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("access", ["ctypes.string_at(t.data_ptr(), 1)", "ctypes.memset(t.data_ptr(), 0, 1)"])
def test_a_host_access_of_unreadable_device_memory_dies_by_sigsegv(access):
    proc = _child(
        f"""
        import ctypes, torch, et_copy
        et_copy.use_simulated_device(host_readable=False)
        t = et_copy.h2d_copy(torch.arange(4, dtype=torch.float32))
        print("allocated", flush=True)
        {access}
        print("survived", flush=True)
        """
    )
    assert proc.returncode == -signal.SIGSEGV, proc.stdout + proc.stderr
    assert "allocated" in proc.stdout and "survived" not in proc.stdout


def test_host_readable_device_memory_is_host_memory():
    proc = _child(
        """
        import ctypes, torch, et_copy
        et_copy.use_simulated_device(host_readable=True)
        t = et_copy.h2d_copy(torch.arange(4, dtype=torch.float32))
        assert ctypes.string_at(t.data_ptr(), 16) == torch.arange(4, dtype=torch.float32).numpy().tobytes()
        assert et_copy._C.simulated_device_host_alias(t.data_ptr(), 16, 0) == t.data_ptr()
        """
    )
    assert proc.returncode == 0, proc.stderr


def test_the_default_mode_is_the_one_constant_and_allocator_info_reports_the_mode():
    proc = _child(
        """
        import et_copy
        from et_copy import _C
        et_copy.use_simulated_device()
        assert et_copy.allocator_info()["host_readable"] is _C.SIMULATED_DEVICE_DEFAULT_HOST_READABLE
        et_copy.use_simulated_device(host_readable=True)
        assert et_copy.allocator_info()["host_readable"] is True
        et_copy.use_simulated_device()  # None keeps the mode
        assert et_copy.allocator_info()["host_readable"] is True
        print(_C.SIMULATED_DEVICE_DEFAULT_HOST_READABLE)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"  # unreadable, as a GPU's: device programs compute in the backend


def test_each_allocation_keeps_the_mode_it_was_made_in(unreadable):
    hidden = et_copy.empty((8,), torch.uint8)
    et_copy.use_simulated_device(host_readable=True)
    try:
        shown = et_copy.empty((8,), torch.uint8)
        assert _C.simulated_device_host_alias(shown.data_ptr(), 8, 0) == shown.data_ptr()
        assert _C.simulated_device_host_alias(hidden.data_ptr(), 8, 0) != hidden.data_ptr()
        src = torch.arange(8, dtype=torch.uint8)
        et_copy.h2d_copy(src, out=shown)
        et_copy.h2d_copy(et_copy.d2h_copy(shown), out=hidden)
        assert torch.equal(hidden.cpu(), src)
    finally:
        et_copy.use_simulated_device(host_readable=False)


def test_use_simulated_device_refuses_a_mode_that_is_not_a_bool():
    with pytest.raises(TypeError, match=r"et_copy.use_simulated_device: host_readable must be a bool or None, got int"):
        et_copy.use_simulated_device(host_readable=1)


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_every_dtype_round_trips_through_unreadable_device_memory(unreadable, dtype):
    gen = torch.Generator().manual_seed(7)
    shape = (3, 5)
    n = 15 * dtype.itemsize
    raw = torch.randint(0, 2 if dtype == torch.bool else 256, (n,), generator=gen, dtype=torch.uint8)
    host = raw.view(dtype).view(shape)
    dev = et_copy.h2d_copy(host)
    assert _C.simulated_device_host_alias(dev.data_ptr(), n, 0) != dev.data_ptr()
    assert torch.equal(et_copy.d2h_copy(dev).view(torch.uint8).reshape(-1), raw)
    assert torch.equal(dev.cpu().view(torch.uint8).reshape(-1), raw)
    # Device to device, as the copies' own d2d would move them.
    other = et_copy.empty(shape, dtype)
    et_copy.h2d_copy(host, out=other)
    assert bytes(_C.simulated_device_read(other.data_ptr(), n, 0)) == bytes(
        _C.simulated_device_read(dev.data_ptr(), n, 0)
    )


def test_the_hook_reads_and_writes_device_bytes_without_counting(unreadable):
    dev = et_copy.h2d_copy(torch.arange(16, dtype=torch.uint8))
    before = et_copy.allocator_stats()
    assert bytes(_C.simulated_device_read(dev.data_ptr() + 4, 4, 0)) == bytes([4, 5, 6, 7])
    _C.simulated_device_write(dev.data_ptr() + 8, b"\xff\xfe", 0)
    assert et_copy.allocator_stats() == before
    assert dev.cpu().tolist() == [*range(8), 255, 254, *range(10, 16)]
    assert _C.simulated_device_read(0, 0, 0) == bytearray()


@pytest.mark.parametrize(
    "where, nbytes, index",
    [(12, 5, 0), (-1, 2, 0), (0, 8, 1), (0, 8, -2), (16, 1, 0)],
    ids=["straddles_the_end", "starts_before", "missing_device", "bad_index", "past_the_end"],
)
def test_the_hook_refuses_bytes_outside_one_live_allocation(unreadable, where, nbytes, index):
    dev = et_copy.empty((16,), torch.uint8)
    for call in (
        lambda: _C.simulated_device_read(dev.data_ptr() + where, nbytes, index),
        lambda: _C.simulated_device_write(dev.data_ptr() + where, bytes(nbytes), index),
        lambda: _C.simulated_device_host_alias(dev.data_ptr() + where, nbytes, index),
    ):
        with pytest.raises(et_copy.EtCopyError, match=r"do not lie inside one live allocation") as info:
            call()
        assert info.value.error == "InvalidArgument"


def test_the_hook_refuses_freed_memory_and_host_memory(unreadable):
    dev = et_copy.empty((16,), torch.uint8)
    ptr = dev.data_ptr()
    dev.free()
    with pytest.raises(et_copy.EtCopyError, match=r"et_copy._C.simulated_device_read: 4 bytes at 0x"):
        _C.simulated_device_read(ptr, 4, 0)
    host = torch.zeros(4, dtype=torch.uint8)
    with pytest.raises(et_copy.EtCopyError, match="do not lie inside"):
        _C.simulated_device_write(host.data_ptr(), b"\0", 0)


def test_the_bench_memcpy_baseline_reaches_unreadable_memory_through_the_alias(unreadable):
    from et_copy._C import loops as _loops
    from et_copy.tools.bench import _throughput

    dev = et_copy.empty((64,), torch.uint8)
    src = torch.full((64,), 0x5A, dtype=torch.uint8)
    _loops.bench_memcpy(_throughput.host_address(dev), src.data_ptr(), 64, 1, 1)
    assert torch.equal(dev.cpu(), src)
    with pytest.raises(ValueError, match="memcpy needs the caller's buffers"):
        _loops.bench_kernel("memcpy", 64, 1, 1)


@pytest.mark.parametrize("index", [-1, 0])
def test_a_device_buffer_takes_the_current_device_minus_one_and_device_zero(index):
    et_copy.use_simulated_device()
    buffer = _C.DeviceBuffer(16, CUDA, index, 256)  # -1: the allocator's current device
    assert (buffer.device_index, buffer.nbytes) == (index, 16)
    buffer.free()


@pytest.mark.parametrize("index", [-2, 128])
def test_a_device_buffer_refuses_an_index_beyond_executorchs_range(index):
    et_copy.use_simulated_device()
    with pytest.raises(et_copy.EtCopyError, match=f"device index {index} is out of range"):
        _C.DeviceBuffer(16, CUDA, index, 256)


def test_index_127_is_in_range_and_left_to_the_allocator():
    et_copy.use_simulated_device()  # one device: 127 is in ExecuTorch's range but not present
    with pytest.raises(et_copy.EtCopyError, match="could not allocate 16 bytes on device 127"):
        _C.DeviceBuffer(16, CUDA, 127, 256)


@pytest.mark.parametrize("count", [1, 2])
def test_an_empty_range_is_read_on_each_device_there_is_and_refused_past_the_last(count):
    et_copy.use_simulated_device(count)
    try:
        for index in (-1, count - 1):
            assert _C.simulated_device_read(0, 0, index) == bytearray()
            _C.simulated_device_write(0, b"", index)
            assert _C.simulated_device_host_alias(0, 0, index) == 0
        for index in (count, -2):  # past the last device, and below -1 (device 0)
            for op, call in {
                "simulated_device_read": lambda: _C.simulated_device_read(0, 0, index),
                "simulated_device_write": lambda: _C.simulated_device_write(0, b"", index),
                "simulated_device_host_alias": lambda: _C.simulated_device_host_alias(0, 0, index),
            }.items():
                where = f"0 bytes at 0 do not lie inside one live allocation of simulated device {index}"
                with pytest.raises(et_copy.EtCopyError, match=f"^et_copy._C.{op}: {where}$") as info:
                    call()
                assert info.value.error == "InvalidArgument"
    finally:
        et_copy.use_simulated_device(1)
