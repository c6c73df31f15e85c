"""A seeded sweep of mutated compiled programs (issue 47): a real
``backend="aoti"`` export of an MLP with state, mutated in three places,
each mutant loaded and run once in a forked child (llm/test_llm_untrusted.py's
``in_child``, helpers/forked.py), which reports how it ended, signals included:

- ``record``: 1 to 4 bit flips in the delegate record's text lines (after
  its version line, up to and including its payload line). Refused, or run
  (a flip the checks cannot tell from an intended value, e.g. in a name).
- ``payload``: 1 to 8 bit flips in the compiled code, mostly in its first
  4 KiB (the ELF headers a loader reads first). All refused by the digest
  check (InvalidProgram) before the code is loaded: no mutated payload runs.
- ``weight``: 1 to 4 bit flips in one weight's or the initial state's bytes
  in the named data, loaded with ``verify_data=True``. All refused
  (InvalidProgram) by the content key check.

No mutant may end in a signal or in an exception other than EtCopyError. The
CI sweep has 60 mutants; the costly one 400 (ET_COPY_AOTI_FUZZ_MUTANTS and
ET_COPY_AOTI_FUZZ_SEED set them; docs/reliability.md gives the figures)."""

from __future__ import annotations

import functools
import os
import random

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from compiled_programs import PAYLOAD_LINE  # noqa: E402
from et_copy import _C  # noqa: E402
from et_copy.export import export_device_program  # noqa: E402
from forked import in_child  # noqa: E402

KINDS = ("record", "payload", "weight")


class CountingMlp(torch.nn.Module):
    """An MLP that adds its output to a state tensor, which starts non-zero
    (so its initial value is named data, checked under verify_data)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(47)
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)
        self.register_buffer("total", torch.linspace(0.25, 1.0, 4))

    def forward(self, x):
        self.total.add_(self.b(torch.relu(self.a(x))).sum(0))
        return self.total * 1.0


@pytest.fixture(scope="module")
def program() -> bytes:
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()
    return bytes(export_device_program(CountingMlp(), (torch.randn(2, 8),), backend="aoti").buffer)


def run_forward(data: bytes, **load) -> str:
    """'ran' after two forwards (the state carried between them), in the child."""
    method = et_copy.runtime.load(data, **load).load_method("forward")
    for _ in range(2):
        method.execute([torch.randn(2, 8)])
    return "ran"


def regions(program: bytes) -> dict[str, list[tuple[int, int]]]:
    """[start, end) spans of each kind's bytes in ``program``."""
    line = PAYLOAD_LINE.search(program)
    assert line is not None and PAYLOAD_LINE.search(program, line.end()) is None, "one aoti payload"
    magic = f"{_C.DELEGATE_RECORD_MAGIC} {_C.DELEGATE_RECORD_VERSION}\n".encode()
    record = program.rfind(magic, 0, line.start())
    assert record >= 0
    payload = (line.end(), line.end() + int(line.group(1)))
    model = CountingMlp()
    weights = []
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        raw = t.detach().contiguous().numpy().tobytes()
        at = program.find(raw)
        assert at > 0 and program.find(raw, at + 1) < 0, f"{name}'s bytes, once in the file"
        weights.append((at, at + len(raw)))
    return {"record": [(record + len(magic), line.end())], "payload": [payload], "weight": weights}


def mutants(program: bytes, count: int, seed: int):
    """(kind, bytes): ``count`` mutants, the kinds in turn."""
    rng = random.Random(seed)
    spans = regions(program)
    made = 0
    while made < count:
        kind = KINDS[made % len(KINDS)]
        data = bytearray(program)
        start, end = rng.choice(spans[kind])
        if kind == "payload" and rng.random() < 0.7:
            end = min(end, start + 4096)
        for _ in range(rng.randint(1, 8 if kind == "payload" else 4)):
            data[rng.randrange(start, end)] ^= 1 << rng.randrange(8)
        if data == program:
            continue  # flips that cancelled out
        made += 1
        yield kind, bytes(data)


def sweep(program: bytes, count: int, seed: int) -> dict[str, int]:
    """Outcome counts by kind ("payload refused InvalidProgram", "record ran",
    ...); fails on any signal or exception other than EtCopyError."""
    tally: dict[str, int] = {}
    bad = []
    for kind, data in mutants(program, count, seed):
        load = {"verify_data": True} if kind == "weight" else {}
        how, result = in_child(functools.partial(run_forward, **load), data)
        if how == "returned":
            key = f"{kind} ran"
        elif how == "raised" and result[0] == "EtCopyError":
            key = f"{kind} refused {result[2]}"
        else:
            key = f"{kind} {how} {result}"
            bad.append(key)
        tally[key] = tally.get(key, 0) + 1
    assert not bad, f"{tally}: {bad[:5]}"
    return tally


def check(tally: dict[str, int], count: int) -> None:
    assert sum(tally.values()) == count, tally
    # Every payload and weight mutant is refused, by the digest and content key checks.
    for kind in ("payload", "weight"):
        assert {k for k in tally if k.startswith(kind)} == {f"{kind} refused InvalidProgram"}, tally
    assert all(k in ("record ran",) or k.startswith("record refused ") for k in tally if k.startswith("record")), tally


def test_the_sweeps_programs_run_unmutated_and_verified(program):
    assert in_child(functools.partial(run_forward, verify_data=True), program) == ("returned", "ran")


def test_mutated_records_payloads_and_weights_of_a_compiled_program_are_refused_or_run_with_no_signal(program):
    count = 60
    tally = sweep(program, count, 20261205)
    check(tally, count)
    assert sum(n for k, n in tally.items() if k.startswith("record refused")) > 0, tally


@pytest.mark.costly
def test_a_larger_sweep_of_mutated_compiled_programs_finds_nothing(program):
    count = int(os.environ.get("ET_COPY_AOTI_FUZZ_MUTANTS", "400"))
    seed = int(os.environ.get("ET_COPY_AOTI_FUZZ_SEED", "47"))
    tally = sweep(program, count, seed)
    print(f"compiled-program sweep, {count} mutants, seed {seed}: {dict(sorted(tally.items()))}")
    check(tally, count)
