"""The edges of a program's state (et_copy.export, et_copy.runtime's
sessions): which buffers' starts the delegate record stores (a non-zero
value, whichever element is non-zero, under a key by content, and never an
all-zero one: docs/design.md, "The delegate record"), and the planned
buffers a session of another exporter's program loads (the last, named
state, each session's own; the ones before it, shared scratch)."""

from __future__ import annotations

import hashlib
import re
import warnings
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from et_copy import _C  # noqa: E402
from et_copy.backends.record import STATE_KEY  # noqa: E402
from et_copy.export import MethodInputs, export_device_methods  # noqa: E402


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


def test_the_record_stores_every_non_zero_start_by_content_and_no_all_zero_one(starts_program):
    lines = re.findall(rb"(?m)^state\t([\w.]+)\t\d+\t20\t(\S+)$", starts_program)
    keys = {name.decode().rsplit(".", 1)[-1]: key.decode() for name, key in lines}
    module = Starts()
    expected = {
        name: STATE_KEY + hashlib.sha256(getattr(module, name).numpy().tobytes()).hexdigest()[:32]
        for name in ("first", "last", "full")
    }
    assert keys == {"zeros": "-", **expected}
    for key in expected.values():
        assert starts_program.count(key.encode()) >= 2  # in the record, and the bytes' named-data key


def _expected(steps: int) -> list[float]:
    start = [0.0] * 5 + [3.0, 0, 0, 0, 0] + [0, 0, 0, 0, 7.0] + [1.0, 2, 3, 4, 5]
    return [v + steps for v in start]


def test_each_session_owns_its_state_and_starts_from_the_stored_values(starts_program):
    et_copy.use_simulated_device()
    program = et_copy.runtime.load(starts_program)
    one = torch.ones(5)
    a = program.new_session().load_method("forward")
    b = program.new_session().load_method("forward")
    assert a.execute([one])[0].tolist() == _expected(1)
    assert a.execute([one])[0].tolist() == _expected(2)
    assert b.execute([one])[0].tolist() == _expected(1)  # its own state, not a's
    assert a.execute([one])[0].tolist() == _expected(3)


def test_a_session_with_no_method_loaded_holds_nothing_and_resets_as_a_no_op(starts_program):
    et_copy.use_simulated_device()
    program = et_copy.runtime.load(starts_program)
    session = program.new_session()
    assert (session.state_nbytes, session.device_nbytes) == (0, 0)
    session.reset()  # nothing to put back: no error, and no state appears
    assert (session.state_nbytes, session.device_nbytes) == (0, 0)
    method = session.load_method("forward")
    assert session.state_nbytes > 0
    assert method.execute([torch.ones(5)])[0].tolist() == _expected(1)


def test_the_scratch_a_programs_sessions_share_is_counted_once_at_its_device_buffers_planned_bytes(starts_program):
    # A program with et_copy's record keeps its state in its delegates: every planned buffer is scratch, the
    # pool's, allocated with the first load of the method and shared by every session after it.
    et_copy.use_simulated_device()
    program = et_copy.runtime.load(starts_program)
    meta = program.metadata("forward")
    buffers = range(meta.num_memory_planned_buffers())
    device = [meta.memory_planned_buffer_device(i) != "cpu" for i in buffers]
    on_device = sum(meta.memory_planned_buffer_size(i) for i in buffers if device[i])
    assert on_device > 0
    assert program.device_scratch_nbytes == 0
    program.new_session().load_method("forward")
    assert program.device_scratch_nbytes == on_device
    program.new_session().load_method("forward")
    assert program.device_scratch_nbytes == on_device


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


def test_the_buffers_before_another_exporters_named_state_are_scratch_and_the_last_is_each_sessions(running_program):
    # running_program with a 16-byte buffer planned ahead of its state's: every buffer but the last is loaded
    # as the method's scratch, and the last, however many come before it, is the session's arena.
    from helpers.hand_made_programs import with_scratch_buffer_first

    et_copy.use_simulated_device()
    program = et_copy.runtime.load(with_scratch_buffer_first(running_program, 16))
    one = torch.ones(3)
    a_session, b_session = program.new_session(), program.new_session()
    a, b = a_session.load_method("forward"), b_session.load_method("forward")
    assert a.execute([one])[0].tolist() == [1.0] * 3
    assert a.execute([one])[0].tolist() == [2.0] * 3
    assert b.execute([one * 5])[0].tolist() == [5.0] * 3  # its own state, from zero
    assert a_session.load_method("again").execute([one])[0].tolist() == [3.0] * 3  # the session's, shared
    a_session.reset()
    assert a.execute([one])[0].tolist() == [1.0] * 3
    assert b.execute([one])[0].tolist() == [6.0] * 3


def test_another_exporters_named_state_in_a_program_with_et_copys_record_is_refused():
    # et_copy.export keeps state in device delegates only: named state beside a
    # record is an older copy-only export (whose starts the runtime no longer
    # reads) or a forged one, and would be shared or started wrong.
    from executorch.exir import ExecutorchBackendConfig, to_edge

    edge = to_edge(torch.export.export(Running(), (torch.ones(3),), strict=True))
    edge._named_data_store.add_named_data(_C.PROGRAM_RECORD_KEY, f"{_C.PROGRAM_RECORD_KEY} 1\n".encode())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Mutation on a buffer in the model is detected")
        buffer = edge.to_executorch(ExecutorchBackendConfig(emit_mutable_buffer_names=True)).buffer
    session = et_copy.runtime.load(buffer).new_session()
    with pytest.raises(et_copy.EtCopyError, match="names 1 state tensors of its own, but a program et_copy") as e:
        session.load_method("forward")
    assert e.value.error == "InvalidProgram"


# ---- another exporter's state planned at sizes no exporter writes ---------
# (helpers/hand_made_programs.py edits the program's planned buffer sizes)


@pytest.fixture(scope="module")
def running_program() -> bytes:
    """Running exported by ExecuTorch alone, as 'forward' and 'again': its named state (3 floats) in the last
    (only) planned buffer of each, 48 bytes with the scratch beside it."""
    from executorch.exir import ExecutorchBackendConfig, to_edge

    exported = {name: torch.export.export(Running(), (torch.ones(3),), strict=True) for name in ("forward", "again")}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Mutation on a buffer in the model is detected")
        return to_edge(exported).to_executorch(ExecutorchBackendConfig(emit_mutable_buffer_names=True)).buffer


@pytest.mark.parametrize(
    ("nbytes", "error", "message"),
    [
        (-1, "InvalidProgram", "the state buffer has no valid size or device"),
        (1 << 62, "MemoryAllocationFailed", f"could not allocate the state ({1 << 62} bytes) on cpu: the host has no "),
    ],
)
def test_a_state_buffer_of_impossible_size_is_refused_naming_it_and_the_session_goes_on(
    running_program, nbytes, error, message
):
    from helpers.hand_made_programs import with_planned_buffer_size

    et_copy.use_simulated_device()
    program = et_copy.runtime.load(with_planned_buffer_size(running_program, nbytes, "forward"))
    session = program.new_session()
    with pytest.raises(et_copy.EtCopyError, match=re.escape(message)) as e:
        session.load_method("forward")
    assert e.value.error == error
    assert (session.state_nbytes, session.device_nbytes) == (0, 0)  # nothing allocated, nothing kept
    again = session.load_method("again")  # the other method, planned as exported: its state from zero
    assert again.execute([torch.ones(3)])[0].tolist() == [1.0] * 3
    assert again.execute([torch.ones(3)])[0].tolist() == [2.0] * 3


def test_methods_that_plan_the_state_at_different_sizes_are_refused_and_the_first_keeps_its_state(running_program):
    from helpers.hand_made_programs import with_planned_buffer_size

    et_copy.use_simulated_device()
    session = et_copy.runtime.load(with_planned_buffer_size(running_program, 24, "again")).new_session()
    forward = session.load_method("forward")
    assert forward.execute([torch.ones(3)])[0].tolist() == [1.0] * 3
    with pytest.raises(et_copy.EtCopyError, match="method 'again' plans its state as 24 bytes on cpu, another") as e:
        session.load_method("again")
    assert e.value.error == "InvalidProgram"
    assert "another method as 48 bytes on cpu: methods of one program must agree" in str(e.value)
    assert forward.execute([torch.ones(3)])[0].tolist() == [2.0] * 3


# roundtrip.pte (x -> _h2d_copy -> _d2h_copy): buffer 0 on the host, buffer 1 on cuda:0, each 96 bytes, no state:
# every planned buffer is the session's own.
ROUNDTRIP = Path(__file__).resolve().parents[1] / "cpp" / "programs" / "roundtrip.pte"


@pytest.mark.parametrize(
    ("buffer", "nbytes", "error", "message"),
    [
        (0, -1, "InvalidProgram", "planned buffer 0 has no valid size or device"),
        (0, 1 << 62, "MemoryAllocationFailed", f"planned buffer 0 ({1 << 62} bytes) on cpu: the host has no memory"),
        (1, 1 << 62, "MemoryAllocationFailed", f"planned buffer 1 ({1 << 62} bytes) on cuda:0: no DeviceAllocator is"),
    ],
)
def test_a_planned_buffer_of_impossible_size_is_refused_naming_it_and_its_device(buffer, nbytes, error, message):
    from helpers.hand_made_programs import with_planned_buffer_size

    et_copy.use_simulated_device()
    original = ROUNDTRIP.read_bytes()
    session = et_copy.runtime.load(with_planned_buffer_size(original, nbytes, buffer=buffer)).new_session()
    with pytest.raises(et_copy.EtCopyError, match=re.escape(message)) as e:
        session.load_method("forward")
    assert e.value.error == error
    assert session.device_nbytes == 0  # what it allocated before the refusal went with it
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    assert torch.equal(et_copy.runtime.load(original).new_session().load_method("forward").execute([x])[0], x)


def test_a_method_that_fails_to_load_keeps_none_of_its_planned_memory():
    # roundtrip.pte with its output past the end of its planned buffer: load_method fails after the session
    # has allocated the method's planned buffers, which go with the failure, however often it is retried.
    from helpers.hand_made_programs import with_output_offset

    et_copy.use_simulated_device()
    session = et_copy.runtime.load(with_output_offset(ROUNDTRIP.read_bytes(), 4096)).new_session()
    for _ in range(2):
        with pytest.raises(et_copy.EtCopyError, match="loading method 'forward' failed with ") as e:
            session.load_method("forward")
        assert e.value.error == "MemoryAllocationFailed"  # what HierarchicalAllocator says of an offset past the end
        assert session.device_nbytes == 0
    loaded = et_copy.runtime.load(ROUNDTRIP.read_bytes()).new_session()
    loaded.load_method("forward")
    assert loaded.device_nbytes == 96  # the one device buffer a loaded roundtrip holds


def test_a_named_state_tensor_methodmeta_cannot_describe_is_refused_naming_it(running_program):
    # Its sizes overflow a size_t: ExecuTorch's verification refuses it, Minimal verification loads it, and
    # MethodMeta then cannot describe it, so where it lies cannot be checked.
    from helpers.hand_made_programs import with_state_sizes

    et_copy.use_simulated_device()
    huge = with_state_sizes(running_program, "total", [1 << 30] * 3)
    session = et_copy.runtime.load(huge, verification=et_copy.runtime.Verification.Minimal).new_session()
    with pytest.raises(et_copy.EtCopyError, match="method 'forward': cannot read its state tensor 0") as e:
        session.load_method("forward")
    assert e.value.error == "InvalidProgram"
