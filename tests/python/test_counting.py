"""et_copy.counting(): the change in the allocator's counters over a block,
the one helper every tool measures copies and device memory with."""

from __future__ import annotations

import gc

import et_copy
import pytest
import torch


@pytest.fixture(autouse=True)
def simulated_device():
    et_copy.use_simulated_device()


def test_a_round_trip_counts_its_bytes_and_copies():
    x = torch.arange(12, dtype=torch.float64).reshape(3, 4)  # 96 bytes
    # scope="block": device memory an earlier test left to the garbage
    # collector cannot be counted here, whenever the collector runs.
    with et_copy.counting(scope="block") as c:
        d = et_copy.h2d_copy(x)
        back = et_copy.d2h_copy(d)
    assert torch.equal(back, x)
    assert (c.h2d_copies, c.h2d_bytes, c.d2h_copies, c.d2h_bytes) == (1, 96, 1, 96)
    assert (c.allocations, c.deallocations, c.d2d_copies, c.failed_calls) == (1, 0, 0, 0)
    assert (c.bytes_outstanding, c.live_allocations) == (96, 1)
    d.free()
    assert (c.bytes_outstanding, c.deallocations) == (96, 0), "fixed once the block has exited"


def test_counts_have_one_attribute_per_allocator_stats_key():
    with et_copy.counting() as c:
        pass
    keys = set(et_copy.allocator_stats())
    assert set(c.as_dict()) == keys
    assert {k: getattr(c, k) for k in keys} == dict.fromkeys(keys, 0)
    assert repr(c) == "Counts(nothing)"


def test_attributes_read_inside_the_block_are_the_change_so_far():
    x = torch.ones(5, dtype=torch.int32)  # 20 bytes
    with et_copy.counting() as c:
        d = et_copy.h2d_copy(x)
        assert c.h2d_bytes == 20 and c.d2h_bytes == 0
        assert "so far" in repr(c)
        et_copy.d2h_copy(d)
        assert c.d2h_bytes == 20
    d.free()


def test_blocks_nest_and_each_counts_from_its_own_start():
    x = torch.zeros(8, dtype=torch.uint8)
    with et_copy.counting() as outer:
        d = et_copy.h2d_copy(x)
        with et_copy.counting() as inner:
            et_copy.d2h_copy(d)
            et_copy.d2h_copy(d)
        et_copy.d2h_copy(d)
    d.free()
    assert (inner.h2d_copies, inner.d2h_copies, inner.d2h_bytes) == (0, 2, 16)
    assert (outer.h2d_copies, outer.d2h_copies, outer.d2h_bytes) == (1, 3, 24)


def test_an_exception_inside_propagates_and_the_counts_up_to_it_stay():
    x = torch.ones(4, dtype=torch.float32)
    wrong = et_copy.empty((4,), torch.float64)
    with pytest.raises(et_copy.EtCopyError, match="dtype mismatch"):
        with et_copy.counting() as c:
            d = et_copy.h2d_copy(x)
            et_copy.h2d_copy(x, out=wrong)  # refused before any byte moves
    assert (c.h2d_copies, c.h2d_bytes, c.live_allocations) == (1, 16, 1)
    d.free()
    wrong.free()
    assert c.live_allocations == 1, "fixed when the exception left the block"


def test_counting_refuses_a_device_allocator_stats_refuses():
    with pytest.raises(ValueError, match="device must be 'cuda'"):
        with et_copy.counting("cpu"):
            pass


class _Cycle:
    def __init__(self, tensor) -> None:
        self.tensor, self.me = tensor, self  # only the garbage collector frees it


def test_a_device_tensor_left_in_a_reference_cycle():
    # Leaves its tensor to the garbage collector; the next test checks that it is not counted there.
    _Cycle(et_copy.h2d_copy(torch.ones(3)))


def test_garbage_an_earlier_test_left_is_not_counted_in_a_later_block():
    # conftest collects a test's garbage device memory at its end, so a collection
    # inside this block (as the collector may run at any allocation) frees none.
    with et_copy.counting() as c:
        gc.collect()
    assert (c.deallocations, c.live_allocations) == (0, 0)


def test_a_block_scope_counts_only_the_memory_it_allocated():
    older = et_copy.h2d_copy(torch.ones(4))  # 16 bytes, allocated before both blocks
    x = torch.zeros(3, dtype=torch.uint8)
    with et_copy.counting() as process, et_copy.counting(scope="block") as block:
        older.free()  # as the garbage collector might, inside someone's block
        mine = et_copy.h2d_copy(x)
        freed = et_copy.h2d_copy(x)
        freed.free()
        assert (block.allocations, block.deallocations, block.live_allocations) == (2, 1, 1), "so far"
    assert (process.allocations, process.deallocations, process.live_allocations) == (2, 2, 0)
    assert process.bytes_outstanding == 3 - 16
    assert (block.allocations, block.deallocations, block.live_allocations) == (2, 1, 1)
    assert (block.bytes_outstanding, block.peak_bytes_outstanding) == (3, 6)
    assert (block.h2d_copies, block.h2d_bytes) == (2, 6), "copies are counted in either scope"
    mine.free()
    assert block.live_allocations == 1, "fixed once the block has exited"


def test_block_scopes_nest_and_an_inner_one_sees_only_its_own():
    x = torch.zeros(5, dtype=torch.uint8)
    with et_copy.counting(scope="block") as outer:
        a = et_copy.h2d_copy(x)
        with et_copy.counting(scope="block") as inner:
            a.free()  # the outer block's allocation: not the inner's business
            b = et_copy.h2d_copy(x)
        b.free()
    assert (inner.allocations, inner.deallocations, inner.bytes_outstanding) == (1, 0, 5)
    assert (outer.allocations, outer.deallocations, outer.bytes_outstanding) == (2, 2, 0)
    assert outer.peak_bytes_outstanding == 5


def test_a_scope_that_is_not_process_or_block_is_refused():
    with pytest.raises(ValueError, match="et_copy.counting: scope must be 'process' or 'block', got 'thread'"):
        with et_copy.counting(scope="thread"):  # type: ignore[arg-type]
            pass
