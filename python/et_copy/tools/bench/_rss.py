"""The peak resident memory of a block, for the bench's export and prefill
rows. Linux keeps the process's peak RSS (``VmHWM``) and lets a process
reset it (``/proc/self/clear_refs``, "5"), so the peak is exact, not
sampled: a copy that lives for a millisecond counts."""

from __future__ import annotations

import re
from typing import Callable, TypeVar

T = TypeVar("T")


def _status(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            found = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M)
    except OSError:
        return None
    return None if found is None else int(found.group(1)) * 1024


def peak_growth(fn: Callable[[], T]) -> tuple[T, int | None]:
    """``fn()``'s result, and how far the process's RSS rose above where it
    stood before the call, at its peak during it (bytes); None where the
    system cannot reset the peak (not Linux)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return fn(), None
    before = _status("VmRSS")
    result = fn()
    peak = _status("VmHWM")
    return result, None if before is None or peak is None else max(peak - before, 0)
