"""Resident memory of a block of code, for the memory bounds of the
gigabyte-model test (docs/benchmarks.md, "A gigabyte model").

Linux keeps the process's peak RSS (``VmHWM``) and lets the process reset
it (``/proc/self/clear_refs``, "5"), so the peak is exact, not sampled: a
copy that lives for a millisecond counts.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class Rss:
    """The process's resident memory now, in bytes: in all, anonymous (the
    heap, the simulated device's memory, a copy) and file pages (a mapped .ptd)."""

    total: int
    anon: int
    file: int


def _status() -> dict[str, int]:
    with open("/proc/self/status") as f:
        fields = re.findall(r"^(VmHWM|VmRSS|RssAnon|RssFile):\s+(\d+) kB", f.read(), re.M)
    return {k: int(v) * 1024 for k, v in fields}


def rss() -> Rss:
    s = _status()
    return Rss(s["VmRSS"], s["RssAnon"], s["RssFile"])


@dataclass
class PeakRss:
    """What :func:`peak_rss` measured, in bytes: the RSS just before the
    block (and its anonymous part), the peak during it, and the RSS after."""

    before: int = 0
    before_anon: int = 0
    peak: int = 0
    after: int = 0

    @property
    def growth(self) -> int:
        """The block's peak over the RSS just before it."""
        return self.peak - self.before


def can_measure() -> bool:
    """Whether this system lets a process reset its peak RSS (Linux 4.0 on)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return "VmHWM" in _status()
    except OSError:
        return False


@contextlib.contextmanager
def peak_rss() -> Iterator[PeakRss]:
    """``with peak_rss() as m: ...``, then ``m.growth`` is the block's peak
    RSS over the RSS before it. Raises OSError where :func:`can_measure` is
    False."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak starts again from the current RSS
    now = rss()
    m = PeakRss(before=now.total, before_anon=now.anon)
    yield m
    s = _status()
    m.peak, m.after = s["VmHWM"], s["VmRSS"]
