"""Python threads copying through one allocator at once. The bindings release
the GIL around each copy, so copies from different threads overlap in the
allocator; every byte must arrive and the counters must be exact.
(tests/cpp/test_threads.cpp runs the same contract at 8 x 10,000 in C++.)"""

from __future__ import annotations

import gc
import threading

import et_copy
import pytest
import torch

THREADS = 8
ROUND_TRIPS = 1000  # per thread; each is an h2d and a d2h copy
DTYPES = (torch.uint8, torch.int16, torch.float32, torch.float64, torch.complex64, torch.bool)
COUNTS = (0, 1, 3, 17, 64, 255, 1000, 4096)


@pytest.fixture(autouse=True)
def two_devices():
    et_copy.use_simulated_device(device_count=2)
    yield
    et_copy.use_simulated_device(device_count=1)


@pytest.fixture(autouse=True)
def quiet_collector():
    """Earlier tests' garbage (device tensors held by cycles) is collected
    first, and not mid-test, so the counter deltas are this test's alone."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _worker(tid: int, barrier: threading.Barrier, tally: dict) -> None:
    g = torch.Generator().manual_seed(tid)
    sources = []
    for i in range(16):
        dtype = DTYPES[i % len(DTYPES)]
        count = COUNTS[(i + tid) % len(COUNTS)]
        raw = torch.randint(0, 256, (count * dtype.itemsize,), dtype=torch.uint8, generator=g)
        sources.append(raw.view(dtype) if dtype != torch.bool else (raw % 2).view(torch.bool))
    device = f"cuda:{tid % 2}"
    copies = nbytes = 0
    barrier.wait()
    for i in range(ROUND_TRIPS):
        src = sources[(i * 7 + tid) % len(sources)]
        on_device = et_copy.h2d_copy(src, device=device)
        back = torch.empty_like(src)
        et_copy.d2h_copy(on_device, out=back)
        on_device.free()
        if not torch.equal(back.view(torch.uint8), src.view(torch.uint8)):
            tally.setdefault("problems", []).append(f"thread {tid} round trip {i} changed bytes")
        if src.nbytes:
            copies += 1
            nbytes += src.nbytes
    tally["copies"] = copies
    tally["bytes"] = nbytes


def test_eight_python_threads_round_trip_concurrently_with_exact_counters():
    before = et_copy.allocator_stats()
    barrier = threading.Barrier(THREADS)
    tallies = [{} for _ in range(THREADS)]
    threads = [threading.Thread(target=_worker, args=(t, barrier, tallies[t])) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = et_copy.allocator_stats()
    problems = [p for t in tallies for p in t.get("problems", [])]
    assert not problems, problems[:5]
    assert all("copies" in t for t in tallies), "a worker thread died"
    copies = sum(t["copies"] for t in tallies)
    nbytes = sum(t["bytes"] for t in tallies)
    assert after["h2d_copies"] - before["h2d_copies"] == copies
    assert after["d2h_copies"] - before["d2h_copies"] == copies
    assert after["h2d_bytes"] - before["h2d_bytes"] == nbytes
    assert after["d2h_bytes"] - before["d2h_bytes"] == nbytes
    assert after["allocations"] - before["allocations"] == THREADS * ROUND_TRIPS
    assert after["deallocations"] - before["deallocations"] == THREADS * ROUND_TRIPS
    assert after["bytes_outstanding"] == before["bytes_outstanding"]
    assert after["failed_calls"] == before["failed_calls"]


def test_rejected_copies_racing_with_accepted_ones_leave_out_and_counters_exact():
    """Rejections race with successes: half the threads send dtype-mismatched
    copies that must fail without touching out while the others succeed."""
    before = et_copy.allocator_stats()
    errors: list[str] = []
    outs = [et_copy.empty((256,), torch.float32, dynamic=True) for _ in range(THREADS)]
    src = torch.arange(256, dtype=torch.float32)
    bad = torch.arange(256, dtype=torch.float64)

    def work(tid: int) -> None:
        out = outs[tid]
        for i in range(300):
            if tid % 2:
                try:
                    et_copy.h2d_copy(bad[: 1 + i % 256], out=out)
                    errors.append("a dtype mismatch was accepted")
                except et_copy.EtCopyError as e:
                    if e.error != "InvalidArgument":
                        errors.append(repr(e))
            else:
                et_copy.h2d_copy(src[: 1 + i % 256], out=out)
                if not torch.equal(out.cpu(), src[: 1 + i % 256]):
                    errors.append("wrong bytes")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for t in outs:
        t.free()
    after = et_copy.allocator_stats()
    assert not errors, errors[:5]
    half = THREADS // 2
    assert after["h2d_copies"] - before["h2d_copies"] == half * 300
    assert after["d2h_copies"] - before["d2h_copies"] == half * 300
    assert after["failed_calls"] == before["failed_calls"]
    assert after["bytes_outstanding"] == before["bytes_outstanding"]
