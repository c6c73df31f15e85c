"""Sampling: warm-up, calibrated batches, interleaved repeats, and the
statistics the report shows (median with p10/p90)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

# One sample times a batch of calls and returns nanoseconds per call.
Sampler = Callable[[int], float]


@dataclass(frozen=True)
class Config:
    repeats: int = 21  # samples per case, after one warm-up batch
    # Target length of one sample (a batch of calls): short enough that on a
    # shared machine many samples fit inside one scheduler time slice.
    sample_s: float = 0.005
    max_iters: int = 1_000_000  # cap on calls in one batch


@dataclass(frozen=True)
class Stats:
    """Nanoseconds per call over the samples of one case."""

    median_ns: float
    p10_ns: float
    p90_ns: float
    min_ns: float
    samples: int
    iters_per_sample: int

    def to_json(self) -> dict:
        return asdict(self)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def stats_of(samples: list[float], iters: int) -> Stats:
    return Stats(
        median_ns=percentile(samples, 50),
        p10_ns=percentile(samples, 10),
        p90_ns=percentile(samples, 90),
        min_ns=min(samples),
        samples=len(samples),
        iters_per_sample=iters,
    )


def python_sampler(fn: Callable[[], object]) -> Sampler:
    """Times ``fn()`` called ``iters`` times in a plain Python loop."""

    def sample(iters: int) -> float:
        clock = time.perf_counter_ns
        start = clock()
        for _ in range(iters):
            fn()
        return (clock() - start) / iters

    return sample


def _calibrate(sampler: Sampler, config: Config) -> int:
    """Calls per batch so that one batch lasts about ``config.sample_s``;
    the calibration runs double as the warm-up."""
    iters = 1
    while True:
        per_call_ns = sampler(iters)
        batch_s = per_call_ns * iters / 1e9
        if batch_s >= config.sample_s / 4 or iters >= config.max_iters:
            break
        iters = min(config.max_iters, iters * 8)
    wanted = int(config.sample_s * 1e9 / max(per_call_ns, 1.0))
    iters = max(1, min(config.max_iters, wanted))
    sampler(iters)  # warm-up at the final batch size
    return iters


def measure(cases: dict[str, Sampler], config: Config) -> dict[str, Stats]:
    """Samples every case ``config.repeats`` times, interleaved (one sample
    of each case per round, in a rotating order) so that a noisy neighbour
    on a shared machine hits every case alike rather than one of them."""
    names = list(cases)
    iters = {name: _calibrate(cases[name], config) for name in names}
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(config.repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(cases[name](iters[name]))
    return {name: stats_of(samples[name], iters[name]) for name in names}
