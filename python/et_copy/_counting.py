"""``et_copy.counting()``: what et_copy's allocator counted during a block,
the one way et_copy's own tools measure copies and device memory."""

from __future__ import annotations

import contextlib
from typing import Iterator, Literal

from . import _C, _registration
from ._device import CUDA

Scope = Literal["process", "block"]
# The counters a "block" scope keeps itself: those of device memory. Copies
# and failed calls are counted process-wide in either scope.
_MEMORY_KEYS = ("allocations", "deallocations", "live_allocations", "bytes_outstanding", "peak_bytes_outstanding")


class _Change:
    """A counter of :class:`Counts`: its change, read through
    :meth:`Counts.as_dict` under the attribute's own name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._key = name

    def __get__(self, counts: Counts, owner: type | None = None) -> int:
        return counts.as_dict()[self._key]


class Counts:
    """The change in :func:`et_copy.allocator_stats` over a
    ``with et_copy.counting() as c:`` block, one attribute per counter.

    Read while the block runs, an attribute is the change so far; once the
    block has exited (normally or by an exception) it is the change over the
    whole block and no longer moves. ``peak_bytes_outstanding`` is how far
    the peak rose; ``bytes_outstanding`` and ``live_allocations`` fall when
    the block frees more than it allocates. The allocator's counters are
    process-wide, so copies made by other threads meanwhile are counted too,
    and so is device memory the garbage collector frees during the block.
    Under ``scope="block"`` the memory counters (allocations, deallocations,
    live_allocations, bytes_outstanding, peak_bytes_outstanding) count only
    the allocations made inside the block and their frees: memory allocated
    before it and freed inside it is not counted, and the peak is that of
    the block's own bytes.
    """

    __slots__ = ("_device", "_start", "_end", "_scope", "_scope_end")

    allocations = _Change()
    deallocations = _Change()
    live_allocations = _Change()
    bytes_outstanding = _Change()
    peak_bytes_outstanding = _Change()
    h2d_copies = _Change()
    h2d_bytes = _Change()
    d2h_copies = _Change()
    d2h_bytes = _Change()
    d2d_copies = _Change()
    d2d_bytes = _Change()
    failed_calls = _Change()

    def __init__(self, device: str, scope: Scope = "process") -> None:
        if scope not in ("process", "block"):
            raise ValueError(f"et_copy.counting: scope must be 'process' or 'block', got {scope!r}")
        self._device = device
        self._start = _registration.allocator_stats(device)
        self._end: dict[str, int] | None = None
        # Opened after the stats were read, so a refused device opens nothing.
        self._scope = _C.open_counting_scope(CUDA) if scope == "block" else None
        self._scope_end: dict[str, int] | None = None

    def _finish(self) -> None:
        self._end = _registration.allocator_stats(self._device)
        if self._scope is not None:
            self._scope_end = _C.close_counting_scope(CUDA, self._scope)

    def as_dict(self) -> dict[str, int]:
        """Every counter's change, keyed as :func:`et_copy.allocator_stats`."""
        now = self._end if self._end is not None else _registration.allocator_stats(self._device)
        changes = {k: now[k] - v for k, v in self._start.items()}
        if self._scope is not None:
            own = self._scope_end
            if own is None:
                own = _C.counting_scope_stats(CUDA, self._scope)
            changes.update({k: own[k] for k in _MEMORY_KEYS})
        return changes

    def __repr__(self) -> str:
        state = "" if self._end is not None else ", so far"
        changed = ", ".join(f"{k}={v}" for k, v in self.as_dict().items() if v)
        return f"Counts({changed or 'nothing'}{state})"


@contextlib.contextmanager
def counting(device: str = "cuda", *, scope: Scope = "process") -> Iterator[Counts]:
    """Counts what et_copy's allocator serving ``device`` does inside the
    block: ``with et_copy.counting() as c: ...`` then ``c.h2d_bytes``,
    ``c.d2h_copies``, ``c.bytes_outstanding`` (see :class:`Counts`). Blocks
    nest, each counting from its own start. An exception inside the block
    propagates, and ``c`` still holds the counts up to it. Raises what
    :func:`et_copy.allocator_stats` raises when et_copy's allocator does not
    serve ``device``. ``scope="block"`` counts device memory the block
    allocated and nothing else (see :class:`Counts`), so garbage that other
    code left behind cannot change the counts; a ValueError names any other
    scope."""
    counts = Counts(device, scope)
    try:
        yield counts
    finally:
        counts._finish()
