"""et_copy's own kernels through the Python API on the simulated device:
round trips of every dtype and shape, dynamic resize, and exact counters."""

from __future__ import annotations

import et_copy
import pytest
import torch


@pytest.fixture(autouse=True)
def simulated_device():
    et_copy.use_simulated_device(device_count=1)


def random_tensor(shape, dtype, *, seed=0):
    """Random bytes of ``dtype`` (any bit pattern, so every byte is checked)."""
    g = torch.Generator().manual_seed(seed)
    numel = torch.Size(shape).numel()
    raw = torch.randint(0, 256, (numel * dtype.itemsize,), dtype=torch.uint8, generator=g)
    if dtype == torch.bool:
        raw = raw % 2  # torch bools must be 0 or 1
    return raw.view(dtype).reshape(shape)


def raw_bytes(t: torch.Tensor) -> bytes:
    return (
        t.contiguous().view(torch.uint8).numpy().tobytes()
        if t.dim()
        else t.reshape(1).view(torch.uint8).numpy().tobytes()
    )


SHAPES = [(), (0,), (3, 0, 2), (1,), (7,), (3, 5), (2, 3, 5, 7), (1, 1, 1, 1, 1, 3)]


@pytest.mark.parametrize("dtype", et_copy.SUPPORTED_DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip_returns_the_same_bytes(dtype, shape):
    host = random_tensor(shape, dtype)
    device = et_copy.h2d_copy(host)
    assert device.shape == host.shape and device.dtype == dtype and str(device.device) == "cuda:0"
    back = et_copy.d2h_copy(device)
    assert back.shape == host.shape and back.dtype == dtype
    assert raw_bytes(back) == raw_bytes(host)


def test_round_trip_of_64_mib_keeps_every_byte():
    host = random_tensor((64 * 1024 * 1024,), torch.uint8, seed=7)
    device = et_copy.h2d_copy(host)
    back = et_copy.d2h_copy(device)
    assert torch.equal(back, host)
    device.free()


def test_channels_last_tensor_keeps_its_dim_order_through_the_device():
    host = random_tensor((2, 3, 4, 5), torch.int32).contiguous(memory_format=torch.channels_last)
    device = et_copy.h2d_copy(host)
    assert device.dim_order == (0, 2, 3, 1)
    back = et_copy.d2h_copy(device)
    assert back.stride() == host.stride()
    assert torch.equal(back, host)


def test_copy_into_explicit_out_writes_it_and_returns_it():
    host = random_tensor((4, 4), torch.int32)
    out = et_copy.empty((4, 4), torch.int32)
    assert et_copy.h2d_copy(host, out=out) is out
    host_out = torch.zeros(4, 4, dtype=torch.int32)
    assert et_copy.d2h_copy(out, out=host_out) is host_out
    assert torch.equal(host_out, host)


def test_dynamic_device_out_shrinks_to_self_and_grows_back_within_capacity():
    out = et_copy.empty((8, 4), torch.int32, dynamic=True)
    small = random_tensor((3, 4), torch.int32, seed=1)
    et_copy.h2d_copy(small, out=out)
    assert out.shape == (3, 4) and out.capacity == (8, 4) and out.nbytes == small.nbytes
    assert torch.equal(et_copy.d2h_copy(out), small)
    full = random_tensor((8, 4), torch.int32, seed=2)
    et_copy.h2d_copy(full, out=out)
    assert out.shape == (8, 4)
    assert torch.equal(et_copy.d2h_copy(out), full)


def test_dynamic_host_out_shrinks_to_self_in_place():
    device = et_copy.h2d_copy(random_tensor((2, 3), torch.int16, seed=3))
    out = torch.full((5, 3), -1, dtype=torch.int16)
    ptr = out.data_ptr()
    et_copy.d2h_copy(device, out=out, dynamic_out=True)
    assert out.shape == (2, 3) and out.data_ptr() == ptr
    assert torch.equal(out, et_copy.d2h_copy(device))


def test_counters_count_exactly_one_allocation_and_one_copy_each_way():
    host = random_tensor((5, 3), torch.float64)
    s0 = et_copy.allocator_stats()
    device = et_copy.h2d_copy(host)
    s1 = et_copy.allocator_stats()
    assert s1["allocations"] - s0["allocations"] == 1
    assert s1["bytes_outstanding"] - s0["bytes_outstanding"] == host.nbytes
    assert (s1["h2d_copies"] - s0["h2d_copies"], s1["h2d_bytes"] - s0["h2d_bytes"]) == (1, host.nbytes)
    et_copy.d2h_copy(device)
    s2 = et_copy.allocator_stats()
    assert (s2["d2h_copies"] - s1["d2h_copies"], s2["d2h_bytes"] - s1["d2h_bytes"]) == (1, host.nbytes)
    device.free()
    s3 = et_copy.allocator_stats()
    assert s3["deallocations"] - s2["deallocations"] == 1
    assert s3["bytes_outstanding"] == s0["bytes_outstanding"]


def test_empty_tensor_moves_no_bytes_and_makes_no_copy_call():
    s0 = et_copy.allocator_stats()
    device = et_copy.h2d_copy(torch.empty(0, 3))
    et_copy.d2h_copy(device)
    s1 = et_copy.allocator_stats()
    assert s1["h2d_copies"] == s0["h2d_copies"] and s1["d2h_copies"] == s0["d2h_copies"]


def test_free_is_idempotent_and_returns_the_bytes_once():
    device = et_copy.empty((100,), torch.uint8)
    s0 = et_copy.allocator_stats()
    device.free()
    device.free()
    s1 = et_copy.allocator_stats()
    assert s1["deallocations"] - s0["deallocations"] == 1
    assert s0["bytes_outstanding"] - s1["bytes_outstanding"] == 100
    assert device.freed


def test_collected_device_tensor_returns_its_memory():
    s0 = et_copy.allocator_stats()
    device = et_copy.empty((1000,), torch.float32)
    del device
    s1 = et_copy.allocator_stats()
    assert s1["bytes_outstanding"] == s0["bytes_outstanding"]
    assert s1["allocations"] - s0["allocations"] == 1 == s1["deallocations"] - s0["deallocations"]


def test_simulated_device_count_is_configurable_and_indices_within_it_work():
    try:
        et_copy.use_simulated_device(device_count=3)
        assert et_copy.allocator_info()["device_count"] == 3
        device = et_copy.h2d_copy(torch.arange(6), device="cuda:2")
        assert device.device.index == 2
        assert torch.equal(et_copy.d2h_copy(device), torch.arange(6))
    finally:
        et_copy.use_simulated_device(device_count=1)


def test_use_simulated_device_registers_the_device_backend_once():
    et_copy.use_simulated_device()
    assert et_copy.register_simulated_device_backend() == "already et_copy"
    assert et_copy.use_simulated_device() == "already et_copy"


def test_use_simulated_device_is_idempotent():
    assert et_copy.use_simulated_device() == "already et_copy"
    assert et_copy.allocator_info() == {
        "owner": "et_copy",
        "name": "simulated",
        "device_count": 1,
        "device_count_error": None,
        "host_readable": False,  # as a GPU's memory: only copies, the backend and the inspection hook reach it
    }
