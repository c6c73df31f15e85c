"""DeviceBuffer slices (device_buffer.h): a slice's address is its root's
plus its offset, a slice of a slice counts from the root, its size is its
own; freeing the root frees every slice (address 0, freed), freeing a
slice frees nothing."""

from __future__ import annotations

import et_copy
import pytest
from et_copy import _C


@pytest.fixture(autouse=True)
def _simulated():
    et_copy.use_simulated_device()


def root(nbytes=16):
    return _C.DeviceBuffer(nbytes, 1, 0, 256)


def test_a_slice_and_a_slice_of_it_sit_at_their_offsets_from_the_root_with_their_own_sizes():
    b = root(16)
    s = b.slice(4, 8)
    ss = s.slice(3, 5)
    assert b.ptr != 0 and b.nbytes == 16
    assert s.ptr == b.ptr + 4 and s.nbytes == 8
    assert ss.ptr == b.ptr + 7 and ss.nbytes == 5
    assert b.device_index == s.device_index == ss.device_index == 0
    assert not (b.freed or s.freed or ss.freed)
    first = b.slice(0, 16)  # the whole buffer, from offset 0
    assert first.ptr == b.ptr and first.nbytes == 16


def test_freeing_a_slice_frees_nothing():
    b = root(16)
    s = b.slice(4, 8)
    s.free()
    assert not b.freed and not s.freed and s.ptr == b.ptr + 4 and s.nbytes == 8


def test_freeing_the_root_frees_each_slice_which_then_has_no_address():
    b = root(16)
    s = b.slice(4, 8)
    ss = s.slice(3, 5)
    b.free()
    assert b.freed and s.freed and ss.freed
    assert b.ptr == 0 and s.ptr == 0 and ss.ptr == 0
    assert s.nbytes == 8 and ss.nbytes == 5  # a slice keeps its size
    assert b.nbytes == 0
    b.free()  # idempotent
    assert b.freed and b.ptr == 0
