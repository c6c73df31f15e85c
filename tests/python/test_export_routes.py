"""The three export routes held to one contract (et_copy.export):
export_device_program, export_device_methods and lower_to_device each write
the program record, and each raises ExportError naming the function: for
bad input an ExportArgumentError (a ValueError too) naming the argument and
the problem, for a failure inside torch the method and the stage."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
import et_copy.tools.models  # noqa: E402
from et_copy import _C  # noqa: E402
from et_copy.backends.simulated import SimulatedDevicePartitioner  # noqa: E402
from et_copy.export import (  # noqa: E402
    ExportArgumentError,
    ExportError,
    MethodInputs,
    export_device_methods,
    export_device_program,
    lower_to_device,
)

ROUTES = {
    "export_device_program": lambda module, args, **kw: export_device_program(module, args, **kw),
    "export_device_methods": lambda module, args, **kw: export_device_methods(
        module, {"forward": MethodInputs(tuple(args))}, **kw
    ),
    "lower_to_device": lambda module, args, **kw: lower_to_device(module, args, **kw),
}


class Counter(torch.nn.Module):
    """A running sum that starts from a non-zero value: state a session owns."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.arange(4, dtype=torch.float32) + 1)

    def forward(self, x):
        self.total.add_(x)
        return self.total * 2.0


class Bumps(torch.nn.Module):
    """Updates its input in place: nothing a device program can write back."""

    def forward(self, x):
        x.add_(1)
        return x * 2


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: strict torch.export refuses it
            return x + 1
        return x - 1


def program_record(program) -> str | None:
    named = program._named_data
    entry = named.pte_data.get(_C.PROGRAM_RECORD_KEY)
    return None if entry is None else bytes(named.buffers[entry.buffer_index]).decode()


RECORD_HEADER = f"{_C.PROGRAM_RECORD_KEY} {_C.PROGRAM_RECORD_VERSION}\n"


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_writes_the_program_record_and_the_state_is_in_the_delegate(route):
    program = ROUTES[route](Counter(), (torch.ones(4),))
    assert program_record(program) == RECORD_HEADER + "state\tdelegates\n"


def test_a_copy_only_program_has_a_record_that_keeps_its_state_out_of_the_delegates():
    class RoundTrip(torch.nn.Module):
        def forward(self, x):
            return torch.ops.et_copy._d2h_copy(torch.ops.et_copy._h2d_copy(x))

    program = export_device_program(RoundTrip(), (torch.randn(3),), insert_copies=False)
    assert program_record(program) == RECORD_HEADER


def test_lower_to_device_programs_record_lets_sessions_share_the_scratch_and_keep_their_own_state():
    et_copy.use_simulated_device()
    program = et_copy.runtime.load(lower_to_device(Counter(), (torch.ones(4),)).buffer)
    first, second = program.new_session(), program.new_session()
    one, two = first.load_method("forward"), second.load_method("forward")
    x = torch.ones(4)
    assert torch.equal(one.execute([x])[0], (torch.arange(4) + 2.0) * 2)
    assert torch.equal(one.execute([x])[0], (torch.arange(4) + 3.0) * 2)
    assert torch.equal(two.execute([x])[0], (torch.arange(4) + 2.0) * 2)  # a state of its own
    # The record says the state is in the delegate: the program's planned memory is
    # scratch the sessions share, and a session holds its state alone.
    assert program.device_scratch_nbytes > 0
    assert first.device_nbytes == first.state_nbytes > 0
    first.reset()
    assert torch.equal(one.execute([x])[0], (torch.arange(4) + 2.0) * 2)


class OwnCopies(torch.nn.Module):
    """Calls et_copy's copies itself, with compute between them."""

    def forward(self, x):
        return torch.ops.et_copy._d2h_copy(torch.ops.et_copy._h2d_copy(x) * 2.0)


@pytest.mark.parametrize("route", ROUTES)
def test_every_delegating_route_refuses_a_module_that_calls_the_copies_itself(route):
    """Lowered to a backend, the module's own h2d would sit inside the
    delegate with a host output, and every execution would fail; refused at
    export instead, pointing at insert_copies=False."""
    et_copy.aot.ensure_registered()
    with pytest.raises(ExportArgumentError) as info:
        ROUTES[route](OwnCopies(), (torch.ones(3),))
    e = info.value
    assert (e.op, e.argument, e.method, e.stage) == (f"et_copy.export.{route}", "module", "forward", "export")
    assert str(e).startswith(
        f"et_copy.export.{route}: method 'forward' calls et_copy._d2h_copy.default, et_copy._h2d_copy.default itself"
    ), str(e)
    assert "leave the copies out of the module, or, for a module that only copies, export it with " in str(e)
    assert "export_device_program(..., insert_copies=False)" in str(e)


def test_a_module_that_only_copies_takes_the_refusals_way_out_and_runs():
    """The refusal's way out for a copy-only module: insert_copies=False."""
    et_copy.use_simulated_device()
    module = et_copy.tools.models.RoundTrip()
    program = export_device_program(module, module.example_inputs(), insert_copies=False)
    x = module.example_inputs()[0]
    assert torch.equal(et_copy.runtime.load(program.buffer).load_method("forward").execute([x])[0], x)


@pytest.mark.parametrize(
    "kwargs,argument,problem",
    [
        ({"device": "cpu"}, "device", "device must be 'cuda' or 'cuda:N', got 'cpu'"),
        ({"device": "cuda:x"}, "device", "device has a bad device index in 'cuda:x'"),
        ({"backend": "xla"}, "backend", "backend must be one of ['aoti', 'simulated'], got 'xla'"),
        (
            {"backend": "aoti", "partitioner": SimulatedDevicePartitioner()},
            "partitioner",
            "pass backend='aoti' or a partitioner, not both",
        ),
        (
            {"partitioner": SimulatedDevicePartitioner("cuda:1")},
            "partitioner",
            "the partitioner (SimulatedDevicePartitioner) targets cuda:1, but device is 'cuda:0'",
        ),
    ],
)
@pytest.mark.parametrize("route", ROUTES)
def test_bad_arguments_are_named_with_the_function_and_the_argument(route, kwargs, argument, problem):
    if route == "lower_to_device" and "partitioner" in kwargs:
        kwargs = {**kwargs}
        partitioner = kwargs.pop("partitioner")
        call = lambda: lower_to_device(torch.nn.Linear(4, 2), (torch.randn(1, 4),), partitioner, **kwargs)  # noqa: E731
    else:
        call = lambda: ROUTES[route](torch.nn.Linear(4, 2), (torch.randn(1, 4),), **kwargs)  # noqa: E731
    with pytest.raises(ExportArgumentError) as info:
        call()
    e = info.value
    assert isinstance(e, ExportError) and isinstance(e, ValueError)
    assert (e.op, e.argument, e.stage) == (f"et_copy.export.{route}", argument, "arguments")
    assert str(e).startswith(f"et_copy.export.{route}: ") and problem in str(e)


@pytest.mark.parametrize("route", ROUTES)
def test_a_method_updating_its_input_in_place_is_refused_naming_the_input(route):
    with pytest.raises(ExportArgumentError) as info:
        ROUTES[route](Bumps(), (torch.ones(3),))
    e = info.value
    assert (e.op, e.argument, e.method) == (f"et_copy.export.{route}", "module", "forward")
    assert "method 'forward' updates its input(s) ['x'] in place" in str(e)


@pytest.mark.parametrize("route", ROUTES)
def test_a_failure_inside_torch_export_names_the_function_the_method_and_the_stage(route):
    with pytest.raises(ExportError) as info:
        ROUTES[route](DataDependent(), (torch.randn(4),), strict=True)
    e = info.value
    assert not isinstance(e, ValueError)  # not the caller's argument: torch could not trace the module
    assert (e.op, e.method, e.stage) == (f"et_copy.export.{route}", "forward", "export")
    assert str(e).startswith(f"et_copy.export.{route}: method 'forward': export failed: ")
    assert e.__cause__ is not None


def test_lower_to_device_refuses_a_skip_flag_without_its_planning_setting_by_argument():
    with pytest.raises(ExportArgumentError) as info:
        lower_to_device(
            torch.nn.Linear(4, 2), (torch.randn(1, 4),), skip_h2d_for_method_inputs=True, alloc_graph_input=True
        )
    assert info.value.argument == "skip_h2d_for_method_inputs"
    assert "skip_h2d_for_method_inputs=True needs alloc_graph_input=False" in str(info.value)


@pytest.mark.parametrize("flag", ["skip_h2d_for_method_inputs", "skip_d2h_for_method_outputs"])
@pytest.mark.parametrize("value", [{"forward": True}, {"forward": False}, 1, "yes"], ids=repr)
def test_lower_to_device_refuses_a_skip_flag_that_is_not_a_bool_before_exporting(flag, value):
    # executorch applies a truthy flag to every method: a per-method dict would mean something else.
    module = torch.nn.Linear(4, 2)
    with pytest.raises(ExportArgumentError) as info:
        lower_to_device(
            module, (torch.randn(1, 4),), alloc_graph_input=False, alloc_graph_output=False, **{flag: value}
        )
    assert info.value.argument == flag
    assert f"{flag} must be a bool, got {type(value).__name__}" in str(info.value)
    assert "a per-method dict would turn it on for all of them" in str(info.value)


class TwoEntries(torch.nn.Module):
    def forward(self, x):
        return x * 2.0

    def other(self, x):
        return x + 1.0


@pytest.mark.parametrize(
    "kwargs,argument,problem",
    [
        (
            {"resident_outputs": (0,), "alloc_graph_output": True},
            "alloc_graph_output",
            "resident_outputs need alloc_graph_output=False, so that the caller's device tensors receive them",
        ),
        (
            {"resident_inputs": (0,), "insert_copies": False},
            "insert_copies",
            "resident_inputs/outputs go with insert_copies=True",
        ),
        (
            {"resident_outputs": (0,), "alloc_graph_output": False, "insert_copies": False},
            "insert_copies",
            "resident_inputs/outputs go with insert_copies=True",
        ),
        (
            {"backend": "aoti", "insert_copies": False},
            "insert_copies",
            "a backend or decompositions go with insert_copies=True (the backend's copies)",
        ),
        (
            {"partitioner": SimulatedDevicePartitioner(), "insert_copies": False},
            "insert_copies",
            "a backend or decompositions go with insert_copies=True (the backend's copies)",
        ),
    ],
)
@pytest.mark.parametrize("route", ["export_device_program", "export_device_methods"])
def test_options_that_do_not_go_together_are_refused_before_exporting_naming_the_argument(
    route, kwargs, argument, problem
):
    with pytest.raises(ExportArgumentError) as info:
        ROUTES[route](TwoEntries(), (torch.randn(4),), **kwargs)
    e = info.value
    assert (e.op, e.argument, e.stage) == (f"et_copy.export.{route}", argument, "arguments")
    assert str(e) == f"et_copy.export.{route}: {problem}"


def test_export_device_methods_refuses_no_methods_and_an_entry_the_module_lacks_naming_the_method():
    op = "et_copy.export.export_device_methods"
    with pytest.raises(ExportArgumentError) as info:
        export_device_methods(TwoEntries(), {})
    assert (info.value.op, info.value.argument) == (op, "methods")
    assert str(info.value) == f"{op}: no methods to export"
    x = torch.randn(4)
    for entry in ("nope", "training"):  # absent, and an attribute that is no method
        methods = {"forward": MethodInputs((x,)), "second": MethodInputs((x,), entry=entry)}
        with pytest.raises(ExportArgumentError) as info:
            export_device_methods(TwoEntries(), methods)
        assert (info.value.op, info.value.argument, info.value.method) == (op, "methods", "second")
        assert f"method 'second': MethodInputs.entry {entry!r} is not a method of TwoEntries" in str(info.value)
    with pytest.raises(ExportArgumentError) as info:  # decompositions need the backend's copies too
        export_device_methods(
            TwoEntries(),
            {"forward": MethodInputs((x,))},
            decompositions={torch.ops.aten.mul.Tensor: lambda *a: NotImplemented},
            insert_copies=False,
        )
    assert info.value.argument == "insert_copies"
    assert str(info.value) == f"{op}: a backend or decompositions go with insert_copies=True (the backend's copies)"
