"""Device memory lifetime: a DeviceTensor's memory is freed exactly once
(by free(), by collection, or at interpreter exit), and the allocator
outlives the programs that used it. A second free of the same pointer would
show up as a failed deallocate in the allocator's counters (and a crash or an
ASan report under tests/python/repo/test_sanitizers.py, which reruns this file)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import et_copy
import pytest
import torch


@pytest.fixture(autouse=True)
def simulated_device():
    et_copy.use_simulated_device(device_count=1)


@pytest.fixture(autouse=True)
def quiet_collector():
    """Collect earlier tests' garbage first and keep the cycle collector
    from running mid-test, so counter deltas are this test's alone."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in ("allocations", "deallocations", "bytes_outstanding", "failed_calls")}


def test_free_then_collection_frees_exactly_once():
    before = et_copy.allocator_stats()
    t = et_copy.empty((3, 5), torch.float32)
    assert _delta(before, et_copy.allocator_stats()) == {
        "allocations": 1,
        "deallocations": 0,
        "bytes_outstanding": 60,
        "failed_calls": 0,
    }
    t.free()
    t.free()  # idempotent
    assert t.freed
    del t
    gc.collect()
    assert _delta(before, et_copy.allocator_stats()) == {
        "allocations": 1,
        "deallocations": 1,
        "bytes_outstanding": 0,
        "failed_calls": 0,
    }


def test_collection_without_free_frees_exactly_once():
    before = et_copy.allocator_stats()
    t = et_copy.h2d_copy(torch.arange(10, dtype=torch.int64))
    cycle = [t]
    cycle.append(cycle)  # only the cycle collector can free it
    del t, cycle
    gc.collect()
    assert _delta(before, et_copy.allocator_stats()) == {
        "allocations": 1,
        "deallocations": 1,
        "bytes_outstanding": 0,
        "failed_calls": 0,
    }


def test_two_device_tensors_over_one_buffer_free_it_once():
    before = et_copy.allocator_stats()
    t = et_copy.empty((8,), torch.float32)
    alias = et_copy.DeviceTensor(t._buffer, torch.uint8, t.device, (32,), (0,), False)
    alias.free()
    assert t.freed and alias.freed
    t.free()
    del t, alias
    gc.collect()
    assert _delta(before, et_copy.allocator_stats()) == {
        "allocations": 1,
        "deallocations": 1,
        "bytes_outstanding": 0,
        "failed_calls": 0,
    }


def test_a_freed_device_tensor_is_refused_by_name_and_nothing_is_copied():
    t = et_copy.empty((4,), torch.float32)
    t.free()
    before = et_copy.allocator_stats()
    with pytest.raises(ValueError, match=r"_h2d_copy.out: out is a DeviceTensor whose memory was freed"):
        et_copy.h2d_copy(torch.ones(4), out=t)
    with pytest.raises(ValueError, match=r"_d2h_copy.out: self is a DeviceTensor whose memory was freed"):
        et_copy.d2h_copy(t)
    assert et_copy.allocator_stats() == before


EXIT_WITH_LIVE_TENSORS = textwrap.dedent("""
    import sys, threading, torch, et_copy
    et_copy.use_simulated_device(device_count=2)
    kept = [et_copy.h2d_copy(torch.arange(1000.0), device=f"cuda:{i % 2}") for i in range(50)]
    cycle = {"t": et_copy.empty((64,), torch.float64, "cuda:1", dynamic=True)}
    cycle["self"] = cycle
    half = [et_copy.empty((16,), torch.int32) for _ in range(10)]
    for t in half[::2]:
        t.free()
    ready = threading.Event()
    def hold():
        local = et_copy.empty((128,), torch.uint8)
        ready.set()
        threading.Event().wait()
    threading.Thread(target=hold, daemon=True).start()
    ready.wait()
    try:
        raise RuntimeError(et_copy.empty((3,), torch.float32))
    except RuntimeError as e:
        pending = e
    s = et_copy.allocator_stats()
    print(s["live_allocations"], s["failed_calls"])
    sys.exit(0)
""")


def test_process_exit_with_device_tensors_alive_frees_cleanly():
    """Globals, a reference cycle, a daemon thread's local, an exception:
    all still alive at exit. The interpreter must exit 0 with no failed or
    foreign free reported (ExecuTorch logs those) and no crash."""
    proc = subprocess.run(
        [sys.executable, "-c", EXIT_WITH_LIVE_TENSORS],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    live, failed = map(int, proc.stdout.split())
    assert (live, failed) == (50 + 1 + 5 + 1 + 1, 0)
    for bad in ("unknown pointer", "double free", "free():", "Segmentation", "AddressSanitizer", "Aborted"):
        assert bad not in proc.stderr, proc.stderr[-6000:]


ALLOCATOR_OUTLIVES_PROGRAMS = textwrap.dedent("""
    import gc, sys, torch, et_copy
    et_copy.use_simulated_device()
    from executorch.runtime import Runtime
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    base = et_copy.allocator_stats()
    def run_once():
        program = Runtime.get().load_program(sys.argv[1])
        method = program.load_method("forward")
        held = et_copy.allocator_stats()["bytes_outstanding"] - base["bytes_outstanding"]
        out = method.execute([x])[0]
        assert torch.equal(out, x), out
        return held
    held = [run_once() for _ in range(3)]
    gc.collect()
    after = et_copy.allocator_stats()
    print(held[0], held[1], held[2], after["bytes_outstanding"] - base["bytes_outstanding"],
          after["allocations"] - base["allocations"], after["deallocations"] - base["deallocations"],
          after["failed_calls"] - base["failed_calls"])
""")


@pytest.mark.slow
def test_the_allocator_outlives_programs_that_planned_device_memory_in_it(exported_programs):
    """Three load/run/drop cycles of a device-planned program on the wheel's
    runtime: each holds its planned device buffer only while loaded, and
    releases it exactly once when dropped."""
    proc = subprocess.run(
        [sys.executable, "-c", ALLOCATOR_OUTLIVES_PROGRAMS, str(exported_programs / "original.pte")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    held0, held1, held2, outstanding, allocs, deallocs, failed = map(int, proc.stdout.split()[-7:])
    assert held0 == held1 == held2 == 96  # RoundTrip's one CUDA-planned buffer: 2*3*4 floats
    assert outstanding == 0
    assert allocs == deallocs == 3
    assert failed == 0
