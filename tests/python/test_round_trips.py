"""Round trips between device partitions: a value one partition leaves on the
device and another reads is not copied to the host and back (executorch's
PropagateDevicePass elides ``_h2d_copy(_d2h_copy(x))`` on one device, and
BoundaryPlanningPass keeps it so), on every export route that takes a
partitioner and in every method; a host reader keeps its d2h; a value that
moves between device indices keeps both copies. Read from the program and
checked by running it against eager, with the bytes each copy moved."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.runtime as rt  # noqa: E402
from et_copy.backends.partitioner import DevicePartitioner  # noqa: E402
from et_copy.backends.simulated import BACKEND_ID  # noqa: E402
from et_copy.export import MethodInputs, export_device_methods, export_device_program, lower_to_device  # noqa: E402
from executorch.exir.backend.compile_spec_schema import CompileSpec  # noqa: E402
from executorch.exir.backend.partitioner import DelegationSpec, PartitionResult  # noqa: E402
from executorch.exir.backend.utils import tag_constant_data  # noqa: E402
from plan_calls import plan_calls as instructions  # noqa: E402
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner  # noqa: E402
from torch.fx.passes.operator_support import OperatorSupportBase  # noqa: E402

H2D, D2H = "et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"
F32 = 4  # bytes per element


class _AllButSin(OperatorSupportBase):
    """Every computing call but sin, which stays on the host and so splits the graph."""

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        name = str(node.target)
        return node.op == "call_function" and "sin" not in name and "getitem" not in name and "et_copy" not in name


class SplitAtSin(DevicePartitioner):
    """The simulated backend's partitioner, one delegate per side of each
    host ``sin``, the k-th (in graph order) on ``devices[k]``."""

    backend_id = BACKEND_ID

    def __init__(self, *devices: str) -> None:
        super().__init__(devices[0])
        self.devices = devices

    def partition(self, exported_program) -> PartitionResult:
        gm = exported_program.graph_module
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        parts = CapabilityBasedPartitioner(gm, _AllButSin(), allows_single_node_partition=True).propose_partitions()
        parts.sort(key=lambda p: min(order[n] for n in p.nodes))
        assert len(parts) == len(self.devices), f"{len(parts)} partitions for devices {self.devices}"
        tags = {}
        for k, (part, device) in enumerate(zip(parts, self.devices)):
            for node in part.nodes:
                node.meta["delegation_tag"] = f"split_{k}"
            tags[f"split_{k}"] = DelegationSpec(BACKEND_ID, [CompileSpec("target_device", device.encode())])
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)


class DeviceOnly(torch.nn.Module):
    """``y`` goes from the first partition to the second with no host reader:
    the host reads only ``w``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = torch.relu(self.lin(x))
        w = y + 1
        return y * torch.sin(w)


class HostReads(torch.nn.Module):
    """The host reads ``y`` (sin) and so does the second partition."""

    def forward(self, x):
        y = x * 3
        return y * torch.sin(y)


ROUTES: dict[str, Callable[..., Any]] = {
    "lower_to_device": lambda m, args, p: lower_to_device(m, args, p, device=p.devices[0]),
    "export_device_program": lambda m, args, p: export_device_program(m, args, partitioner=p, device=p.devices[0]),
    "export_device_methods": lambda m, args, p: export_device_methods(
        m, {"forward": MethodInputs(args)}, partitioner=p, device=p.devices[0]
    ),
}


def copies(plan) -> tuple[int, int]:
    names = instructions(plan)
    return names.count(H2D), names.count(D2H)


@pytest.fixture
def two_devices():
    et_copy.use_simulated_device(device_count=2)
    yield
    et_copy.use_simulated_device(device_count=1)


def run(program, method: str, x: torch.Tensor):
    """The method's output and the bytes moved each way by one execute."""
    loaded = rt.load(program.buffer).load_method(method)
    loaded.execute([x])  # warm: weights upload at load, nothing else is one-off
    with et_copy.counting() as c:
        (out,) = loaded.execute([x])
    return out, c.h2d_bytes, c.d2h_bytes


@pytest.mark.parametrize("route", ROUTES)
def test_a_value_passed_between_partitions_on_one_device_is_not_copied(route):
    module, x = DeviceOnly(), torch.randn(2, 4)
    program = ROUTES[route](module, (x,), SplitAtSin("cuda:0", "cuda:0"))
    plan = program.executorch_program.execution_plan[0]
    assert instructions(plan).count(f"delegate:{BACKEND_ID}") == 2
    # x in, sin's input out and its result in, the output out: y never leaves the device.
    assert copies(plan) == (2, 2), instructions(plan)

    et_copy.use_simulated_device()
    out, h2d_bytes, d2h_bytes = run(program, "forward", x)
    torch.testing.assert_close(out, module(x))
    assert (h2d_bytes, d2h_bytes) == (2 * x.numel() * F32, 2 * x.numel() * F32)


def test_a_value_the_host_reads_keeps_its_d2h_and_the_device_reader_reads_the_device_value():
    module, x = HostReads(), torch.randn(8)
    program = lower_to_device(module, (x,), SplitAtSin("cuda:0", "cuda:0"))
    plan = program.executorch_program.execution_plan[0]
    # h2d x, d2h y (for sin), h2d sin(y), d2h out: y is not uploaded again.
    assert copies(plan) == (2, 2), instructions(plan)
    names = instructions(plan)
    assert (
        names.index(D2H) < names.index("aten::sin.out") < names.index(H2D, 1) < names.index(f"delegate:{BACKEND_ID}", 2)
    )

    et_copy.use_simulated_device()
    out, h2d_bytes, d2h_bytes = run(program, "forward", x)
    torch.testing.assert_close(out, module(x))
    assert (h2d_bytes, d2h_bytes) == (2 * x.numel() * F32, 2 * x.numel() * F32)


def test_every_method_loses_its_round_trips():
    module = DeviceOnly()
    small, large = torch.randn(1, 4), torch.randn(6, 4)
    program = export_device_methods(
        module,
        {"small": MethodInputs((small,)), "large": MethodInputs((large,))},
        partitioner=SplitAtSin("cuda:0", "cuda:0"),
    )
    plans = {p.name: p for p in program.executorch_program.execution_plan}
    assert {name: copies(plan) for name, plan in plans.items()} == {"small": (2, 2), "large": (2, 2)}

    et_copy.use_simulated_device()
    for name, x in (("small", small), ("large", large)):
        out, h2d_bytes, d2h_bytes = run(program, name, x)
        torch.testing.assert_close(out, module(x))
        assert h2d_bytes == d2h_bytes == 2 * x.numel() * F32


def test_a_value_moving_between_device_indices_keeps_both_copies(two_devices):
    module, x = DeviceOnly(), torch.randn(2, 4)
    program = lower_to_device(module, (x,), SplitAtSin("cuda:0", "cuda:1"))
    plan = program.executorch_program.execution_plan[0]
    # y goes cuda:0 -> host -> cuda:1, besides the copies of the same-device case.
    assert copies(plan) == (3, 3), instructions(plan)

    out, h2d_bytes, d2h_bytes = run(program, "forward", x)
    torch.testing.assert_close(out, module(x))
    assert (h2d_bytes, d2h_bytes) == (3 * x.numel() * F32, 3 * x.numel() * F32)


def test_a_program_on_a_second_device_index_is_refused_where_there_is_one_device():
    x = torch.randn(2, 4)
    program = lower_to_device(DeviceOnly(), (x,), SplitAtSin("cuda:0", "cuda:1"))
    et_copy.use_simulated_device(device_count=1)
    with pytest.raises(et_copy.EtCopyError, match="no device 1"):
        rt.load(program.buffer).load_method("forward")
