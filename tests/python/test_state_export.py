"""Mutable state on the device (et_copy.export): buffers a program updates
in place live in its device delegate's state arena, shared by every method;
each session of et_copy.runtime has its own; initial values reach it through
counted h2d copies; the weights stay on the device while the program lives,
whatever its sessions do; the copy-only route refuses state. And the export
itself: strict export, keyword inputs."""

from __future__ import annotations

import gc

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from et_copy.export import MethodInputs, export_device_methods, export_device_program  # noqa: E402


class Counter(torch.nn.Module):
    """A running sum that starts from a non-zero value."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.arange(4, dtype=torch.float32) + 1)

    def forward(self, x):
        self.total.add_(x)
        return self.total * 1.0


class Keywords(torch.nn.Module):
    def forward(self, x, *, scale):
        return torch.relu(x) * scale


@pytest.fixture(scope="module")
def counter_program():
    x = torch.ones(4)
    return export_device_methods(
        Counter(), {"add": MethodInputs((x,)), "peek": MethodInputs((torch.zeros(4),))}, strict=True
    ).buffer


def test_state_lives_on_the_device_starts_from_its_export_value_and_is_shared_by_the_methods(counter_program):
    et_copy.use_simulated_device()
    program = et_copy.runtime.load(counter_program)
    session = program.new_session()
    before = et_copy.allocator_stats()
    add = session.load_method("add")
    after = et_copy.allocator_stats()
    # zeros over the arena, then the named initial value: two counted h2d copies
    assert after["h2d_copies"] - before["h2d_copies"] == 2
    assert after["h2d_bytes"] - before["h2d_bytes"] == session.state_nbytes + 16
    assert torch.equal(add.execute([torch.ones(4)])[0], torch.tensor([2.0, 3.0, 4.0, 5.0]))
    peek = session.load_method("peek")  # the same state: loading it writes nothing again
    assert torch.equal(peek.execute([torch.zeros(4)])[0], torch.tensor([2.0, 3.0, 4.0, 5.0]))
    other = program.new_session()
    assert torch.equal(other.load_method("add").execute([torch.ones(4)])[0], torch.tensor([2.0, 3.0, 4.0, 5.0]))
    session.reset()
    assert torch.equal(add.execute([torch.zeros(4)])[0], torch.tensor([1.0, 2.0, 3.0, 4.0]))


class TwoCounters(torch.nn.Module):
    """Two running sums, each method with its own, each starting non-zero."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("a", torch.full((4,), 10.0))
        self.register_buffer("b", torch.arange(4, dtype=torch.float32) + 100)

    def forward(self, x):
        self.a.add_(x)
        return self.a * 1.0

    def other(self, x):
        self.b.add_(x)
        return self.b * 1.0


def test_a_method_loaded_into_an_arena_in_use_starts_its_own_state_and_leaves_the_others():
    """The second method's state is new to the session's arena, which the
    first has already changed: its start is written, and only it."""
    et_copy.use_simulated_device()
    x = torch.ones(4)
    methods = {"forward": MethodInputs((x,)), "other": MethodInputs((x,), entry="other")}
    program = et_copy.runtime.load(export_device_methods(TwoCounters(), methods, strict=True).buffer)
    session = program.new_session()
    forward = session.load_method("forward")
    assert torch.equal(forward.execute([x])[0], torch.full((4,), 11.0))
    other = session.load_method("other")  # b is new to the arena; a stays at 11
    assert torch.equal(other.execute([x])[0], torch.arange(4, dtype=torch.float32) + 101)
    assert torch.equal(forward.execute([x])[0], torch.full((4,), 12.0))
    session.reset()  # both back to their starts
    assert torch.equal(other.execute([torch.zeros(4)])[0], torch.arange(4, dtype=torch.float32) + 100)
    assert torch.equal(forward.execute([torch.zeros(4)])[0], torch.full((4,), 10.0))


def test_program_load_method_is_one_cached_session(counter_program):
    et_copy.use_simulated_device()
    program = et_copy.runtime.load(counter_program)
    assert program.load_method("add") is program.load_method("add")
    program.load_method("add").execute([torch.ones(4)])
    assert torch.equal(program.load_method("peek").execute([torch.zeros(4)])[0], torch.tensor([2.0, 3.0, 4.0, 5.0]))


class Feedback(torch.nn.Module):
    """An LLM's decode loop in miniature: ``set`` overwrites the state without
    reading it, ``step`` (no input) reads it and writes it back."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("last", torch.zeros(1, dtype=torch.long), persistent=False)

    def forward(self, x):
        self.last.copy_(x * 2)
        return x + 1

    def step(self):
        value = self.last * 10
        self.last.add_(1)
        return value


def test_a_method_that_only_writes_state_and_one_with_no_input_share_it():
    # The write-only method's state must reach the delegate's arena, not a host
    # buffer of its own; the no-input method must export at all (its lifted
    # constants are reordered for executorch 1.5.1's to_edge).
    methods = {"forward": MethodInputs((torch.tensor([0]),)), "step": MethodInputs((), entry="step")}
    program = export_device_methods(Feedback(), methods)
    et_copy.use_simulated_device()
    session = et_copy.runtime.load(program.buffer).new_session()
    set_, step = session.load_method("forward"), session.load_method("step")
    assert step.metadata.num_inputs() == 0
    assert int(set_.execute([torch.tensor([3])])[0][0]) == 4
    before = et_copy.allocator_stats()
    assert [int(step.execute([])[0][0]) for _ in range(3)] == [60, 70, 80]
    assert et_copy.allocator_stats()["h2d_bytes"] == before["h2d_bytes"]  # nothing went in
    assert int(set_.execute([torch.tensor([1])])[0][0]) == 2 and int(step.execute([])[0][0]) == 20


def test_an_entry_that_is_not_a_method_is_refused_by_name():
    with pytest.raises(ValueError, match="MethodInputs.entry 'nope' is not a method of Feedback"):
        export_device_methods(Feedback(), {"f": MethodInputs((), entry="nope")})


def test_strict_export_of_any_module_and_keyword_inputs():
    x = torch.randn(3, 4)
    for strict in (True, False):
        relu = export_device_program(torch.nn.ReLU(), (x,), strict=strict)
        et_copy.use_simulated_device()
        assert torch.equal(et_copy.runtime.load(relu.buffer).load_method().execute([x])[0], torch.relu(x))
        kw = export_device_program(Keywords(), (x,), kwargs={"scale": torch.tensor(2.0)}, strict=strict)
        out = et_copy.runtime.load(kw.buffer).load_method().execute([x, torch.tensor(2.0)])[0]
        assert torch.equal(out, torch.relu(x) * 2)


def test_a_session_of_a_program_without_a_state_arena_cannot_be_reset():
    from et_copy.tools.models import RoundTrip

    et_copy.use_simulated_device()
    program = et_copy.runtime.load(
        export_device_program(RoundTrip(), RoundTrip.example_inputs(), insert_copies=False).buffer
    )
    session = program.new_session()
    session.reset()  # nothing loaded: nothing to reset
    session.load_method("forward")
    with pytest.raises(et_copy.EtCopyError, match="cannot be reset") as info:
        session.reset()
    assert info.value.error == "NotSupported"


class Tally(torch.nn.Module):
    """A count that starts at zero (the program stores no value for it)
    beside one that starts elsewhere (stored)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(2, dtype=torch.int64))
        self.register_buffer("base", torch.full((2,), 7, dtype=torch.int64))

    def forward(self, x):
        self.count.add_(x)
        self.base.add_(0)
        return self.count + self.base


def test_state_with_no_stored_start_starts_at_zero_in_every_session_and_after_reset():
    # Fresh device memory holds a fill pattern, never zeros: the zero start is written.
    et_copy.use_simulated_device()
    program = et_copy.runtime.load(
        export_device_methods(
            Tally(), {"forward": MethodInputs((torch.ones(2, dtype=torch.int64),))}, strict=True
        ).buffer
    )
    one = torch.ones(2, dtype=torch.int64)
    session = program.new_session()
    step = session.load_method("forward")
    assert step.execute([one])[0].tolist() == [8, 8]
    assert step.execute([one])[0].tolist() == [9, 9]
    assert program.new_session().load_method("forward").execute([one])[0].tolist() == [8, 8]
    session.reset()
    assert step.execute([one])[0].tolist() == [8, 8]


class Steps(torch.nn.Module):
    """A count the method bumps beside what it computes: state for the copy-only route."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(3, dtype=torch.int64))

    def forward(self, x):
        self.count.add_(1)
        return x * 2.0


def test_the_copy_only_route_refuses_state_naming_the_buffer_and_exports_without_it():
    # State on the device is computed on by a device backend; on the copy-only
    # route the host's kernels would, which a GPU cannot run.
    from et_copy.export import DeviceBoundary, ExportArgumentError

    with pytest.raises(ExportArgumentError, match=r"buffer\(s\) 'module.count': state needs a device backend") as e:
        export_device_methods(
            DeviceBoundary(Steps()), {"forward": MethodInputs((torch.ones(2),))}, insert_copies=False, strict=True
        )
    assert (e.value.argument, e.value.method, e.value.stage) == ("insert_copies", "forward", "to_edge")
    assert "use backend='simulated' or 'aoti'" in str(e.value)
    # Without state the route exports, and the program runs.
    from et_copy.tools.models import RoundTrip

    program = export_device_methods(RoundTrip(), {"forward": MethodInputs((torch.ones(2),))}, insert_copies=False)
    et_copy.use_simulated_device()
    x = torch.tensor([-1.0, 2.0])
    assert torch.equal(et_copy.runtime.load(program.buffer).load_method().execute([x])[0], x)
    # With a backend the same module keeps its state, on the device.
    backed = et_copy.runtime.load(export_device_methods(Steps(), {"forward": MethodInputs((torch.ones(2),))}).buffer)
    assert backed.new_session().load_method().execute([x])[0].tolist() == [-2.0, 4.0]


def test_device_planning_pass_refuses_state_by_name():
    from et_copy.export import DevicePlanningPass
    from executorch.exir import ExecutorchBackendConfig, to_edge

    edge = to_edge(torch.export.export(Steps(), (torch.ones(2),), strict=True))
    with pytest.raises(ValueError, match=r"DevicePlanningPass: .*mutates buffer\(s\) 'count'"):
        edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=DevicePlanningPass("cuda:0")))


class LinearTally(torch.nn.Module):
    """Weights and state: a linear layer, and a running sum of its outputs
    that starts at one (a stored initial value, 16 bytes)."""

    WEIGHT_BYTES = (4 * 4 + 4) * 4

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("total", torch.ones(4))

    def forward(self, x):
        self.total.add_(self.lin(x).sum(0))
        return self.total * 1.0


@pytest.fixture(scope="module")
def tally_program():
    return export_device_methods(LinearTally(), {"forward": MethodInputs((torch.ones(2, 4),))}, strict=True).buffer


def _outstanding() -> int:
    gc.collect()  # what dropped Python objects still hold goes now
    return et_copy.allocator_stats()["bytes_outstanding"]


def test_a_session_dropped_and_a_new_one_made_upload_the_state_and_no_weight_until_the_program_goes(tally_program):
    et_copy.use_simulated_device()
    x = torch.randn(2, 4)
    before = _outstanding()
    program = et_copy.runtime.load(tally_program)
    with et_copy.counting() as first_load:
        first = program.new_session()
        first.load_method("forward")
    expected = first.load_method("forward").execute([x])[0]
    state = first.state_nbytes
    assert state > 0
    # The first session brings the weights up, then its state: zeros, then the initial value.
    assert first_load.h2d_bytes == LinearTally.WEIGHT_BYTES + state + 16
    del first
    # The session went with its state and scratch; the program keeps its weights.
    assert _outstanding() - before == LinearTally.WEIGHT_BYTES + program.device_scratch_nbytes
    with et_copy.counting() as second_load:
        second = program.new_session()
        forward = second.load_method("forward")
    assert second_load.h2d_bytes == second.state_nbytes + 16 == state + 16  # no weight crossed again
    assert torch.equal(forward.execute([x])[0], expected)  # the same weights, a fresh state
    del forward, second
    assert _outstanding() - before == LinearTally.WEIGHT_BYTES + program.device_scratch_nbytes
    del program
    assert _outstanding() == before  # the weights went with the program


def test_two_programs_with_the_same_weights_share_them_and_each_keeps_them_while_it_lives(tally_program):
    et_copy.use_simulated_device()
    before = _outstanding()
    first = et_copy.runtime.load(tally_program)
    first.new_session().load_method("forward")
    with et_copy.counting() as second_load:
        second = et_copy.runtime.load(tally_program)
        session = second.new_session()
        session.load_method("forward")
    assert second_load.h2d_bytes == session.state_nbytes + 16  # the first program's weights serve it
    del session, first
    with et_copy.counting() as third_load:
        again = second.new_session()
        again.load_method("forward")
    assert third_load.h2d_bytes == again.state_nbytes + 16  # the second program kept them
    del again, second
    assert _outstanding() == before
