"""Untrusted programs through et_copy.runtime: every tampered program
(tamper_programs.py), every truncation and a seeded set of byte flips of a
real device-planned program is either run (a flip may land in padding) or
rejected with EtCopyError; none crashes, none raises anything else. The
sanitizer suite (test_sanitizers.py) reruns this file against the ASan/UBSan
build, where an out-of-bounds access anywhere fails the process."""

from __future__ import annotations

import random
import struct

import et_copy
import pytest
import torch
from et_copy import runtime
from helpers.program_bytes import ProgramView

X = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)  # RoundTrip's input


def attempt(data: bytes) -> str:
    """'ran', or the EtCopyError's error name."""
    try:
        method = runtime.load(data).load_method("forward")
        (out,) = method.execute([X])
    except et_copy.EtCopyError as e:
        assert str(e), "an error with no words"
        return e.error
    assert isinstance(out, torch.Tensor)
    return "ran"


@pytest.fixture(scope="module")
def original(exported_programs) -> bytes:
    et_copy.use_simulated_device()
    return (exported_programs / "original.pte").read_bytes()


def test_every_tampered_program_is_rejected_with_a_clear_error(exported_programs, original):
    outcomes = {p.stem: attempt(p.read_bytes()) for p in sorted(exported_programs.glob("*.pte"))}
    assert outcomes.pop("original") == "ran"
    assert len(outcomes) >= 13
    assert all(o != "ran" for o in outcomes.values()), outcomes


def test_every_truncation_is_rejected(original):
    step = max(1, len(original) // 97)
    cuts = sorted({0, 1, 7, 8, 16, 31, *range(0, len(original), step), len(original) - 1})
    outcomes = {n: attempt(original[:n]) for n in cuts}
    assert all(o != "ran" for o in outcomes.values()), {n: o for n, o in outcomes.items() if o == "ran"}
    assert set(outcomes.values()) <= {
        "InvalidProgram",
        "InvalidArgument",
        "NotSupported",
        "NotFound",
        "MemoryAllocationFailed",
        "InvalidType",
        "OperatorMissing",
    }, outcomes


def test_byte_flips_run_or_are_rejected_and_never_crash(original):
    rng = random.Random(20261202)
    outcomes = []
    for _ in range(300):
        data = bytearray(original)
        for _ in range(rng.choice((1, 1, 2, 4))):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        outcomes.append(attempt(bytes(data)))
    assert "ran" in outcomes and len(set(outcomes)) > 1, set(outcomes)
    stats = et_copy.allocator_stats()
    assert stats["live_allocations"] >= 0  # the allocator is still sound after it all


@pytest.mark.parametrize("nbytes", [2**45, 2**62, 2**63 - 1])
def test_a_planned_buffer_no_machine_could_hold_is_refused_and_does_not_throw(original, nbytes):
    # The sizes are read from the program's bytes: the host's buffer is
    # allocated without throwing (std::bad_alloc once escaped here), the
    # device's by its allocator, which refuses what it cannot give.
    view = ProgramView(original)
    sizes = view.planned_buffer_sizes_at(view.plan("forward"))
    assert len(sizes) >= 2, "buffer 0 is reserved; RoundTrip plans at least one more"
    for at in sizes[1:]:
        data = bytearray(original)
        struct.pack_into("<q", data, at, nbytes)
        assert attempt(bytes(data)) in {"MemoryAllocationFailed", "InvalidProgram", "NotSupported"}
