"""The edges of a program's state (et_copy.export, et_copy.runtime's
sessions): which buffers' starts the program stores (a non-zero value,
whichever element is non-zero, and never an all-zero one: docs/llm.md), and
the planned buffers a session loads, from the first to the last (the state
arena, each session's own; the ones before it, shared scratch)."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from et_copy.export import MethodInputs, export_device_methods  # noqa: E402

KEY = b"et_copy.initial_state:"  # + the buffer's name: docs/llm.md


class Starts(torch.nn.Module):
    """Four running sums of 5 elements, starting all zero, non-zero in the
    first element only, in the last only, and everywhere."""

    def __init__(self) -> None:
        super().__init__()
        first, last = torch.zeros(5), torch.zeros(5)
        first[0], last[-1] = 3.0, 7.0
        self.register_buffer("zeros", torch.zeros(5))
        self.register_buffer("first", first)
        self.register_buffer("last", last)
        self.register_buffer("full", torch.arange(5, dtype=torch.float32) + 1)

    def forward(self, x):
        for b in (self.zeros, self.first, self.last, self.full):
            b.add_(x)
        return torch.cat([self.zeros, self.first, self.last, self.full]) * 1.0


@pytest.fixture(scope="module")
def starts_program() -> bytes:
    return export_device_methods(Starts(), {"forward": MethodInputs((torch.ones(5),))}, strict=True).buffer


def test_the_program_stores_every_non_zero_start_and_no_all_zero_one():
    # The copy-only route keeps the state in the program's own arena (the
    # backend's route keeps it in its delegates' records).
    from et_copy.export import DeviceBoundary

    program = export_device_methods(
        DeviceBoundary(Starts()), {"forward": MethodInputs((torch.ones(5),))}, insert_copies=False, strict=True
    ).buffer
    stored = {key.rsplit(b".", 1)[-1] for key in re.findall(re.escape(KEY) + rb"[\w.]+", program)}
    assert stored == {b"first", b"last", b"full"}  # named by their path in the exported module


def _expected(steps: int) -> list[float]:
    start = [0.0] * 5 + [3.0, 0, 0, 0, 0] + [0, 0, 0, 0, 7.0] + [1.0, 2, 3, 4, 5]
    return [v + steps for v in start]


def test_each_session_owns_the_last_planned_buffer_and_starts_from_the_stored_values(starts_program):
    et_copy.use_simulated_device()
    program = et_copy.runtime.load(starts_program)
    one = torch.ones(5)
    a = program.new_session().load_method("forward")
    b = program.new_session().load_method("forward")
    assert a.execute([one])[0].tolist() == _expected(1)
    assert a.execute([one])[0].tolist() == _expected(2)
    assert b.execute([one])[0].tolist() == _expected(1)  # its own state, not a's
    assert a.execute([one])[0].tolist() == _expected(3)


class Running(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x):
        self.total.add_(x)
        return self.total * 1.0


def test_another_exporters_host_state_is_each_sessions_arena_shared_by_its_methods_and_reset_zeroes_it():
    # ExecuTorch's own export with its buffers named: no record, all on the
    # host, the state in the last (only) planned buffer, so the session
    # gives it an arena of its own, starts it at zero and can reset it.
    from executorch.exir import ExecutorchBackendConfig, to_edge

    # Two methods planned alike share the session's arena: the second's load
    # must not start the state again.
    exported = {name: torch.export.export(Running(), (torch.ones(3),), strict=True) for name in ("forward", "again")}
    config = ExecutorchBackendConfig(emit_mutable_buffer_names=True)
    with warnings.catch_warnings():  # that it keeps no start: it starts at zero here, as the session's arena does
        warnings.filterwarnings("ignore", message="Mutation on a buffer in the model is detected")
        program = et_copy.runtime.load(to_edge(exported).to_executorch(config).buffer)
    one = torch.ones(3)
    a_session = program.new_session()
    a = a_session.load_method("forward")
    assert a.execute([one])[0].tolist() == [1.0] * 3
    assert a.execute([one])[0].tolist() == [2.0] * 3
    b = program.new_session().load_method("forward")
    assert b.execute([one * 5])[0].tolist() == [5.0] * 3  # its own arena, from zero
    a_session.reset()
    assert a.execute([one])[0].tolist() == [1.0] * 3
    assert b.execute([one])[0].tolist() == [6.0] * 3  # untouched by a's reset
    assert a_session.load_method("again").execute([one])[0].tolist() == [2.0] * 3  # a's state, not a new start
    assert a.execute([one])[0].tolist() == [3.0] * 3
