"""et_copy.backends.simulated ahead of time: what the partitioner and preprocess put in
a program (one delegate with a target_device spec, copies around it from
executorch's PropagateDevicePass, weights stored once, one state layout for
every method), read from the program itself. Running such programs is
test_end_to_end.py's job (and test_state_export.py's, for state)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch.exir")

from et_copy.backends.record import WEIGHT_KEY  # noqa: E402
from et_copy.backends.simulated import BACKEND_ID, SimulatedDevicePartitioner  # noqa: E402
from et_copy.backends.state import StateSlot, state_arena_layout  # noqa: E402
from et_copy.export import ExportError, MethodInputs, export_device_methods, export_device_program  # noqa: E402
from plan_calls import plan_calls as calls  # noqa: E402

COPIES = {"et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"}


class Accumulator(torch.nn.Module):
    """A linear layer and a running sum kept in a buffer updated in place."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("acc", torch.ones(4))
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x):
        self.acc.add_(x.sum(0))
        self.steps.add_(1)
        return torch.relu(self.lin(x)) * 0.5 + self.acc, x.mean()


def records(program) -> dict[str, list[tuple[list[str], bytes]]]:
    """Per method, each delegate's record: its header lines and nested program."""
    emitted = program.executorch_program
    out = {}
    for plan in emitted.execution_plan:
        out[plan.name] = []
        for d in plan.delegates:
            blob = bytes(emitted.backend_delegate_data[d.processed.index].data)
            head, _, rest = blob.partition(b"\npayload\tprogram\t")
            size, _, nested = rest.partition(b"\n")
            assert len(nested) == int(size)
            out[plan.name].append((head.decode().split("\n"), nested))
    return out


@pytest.fixture(scope="module")
def two_methods():
    x = torch.randn(3, 4)
    return export_device_methods(
        Accumulator().eval(), {"three": MethodInputs((x,)), "two": MethodInputs((x[:2],))}, strict=True
    )


def test_the_whole_graph_is_one_delegate_between_the_copies(two_methods):
    for plan in two_methods.executorch_program.execution_plan:
        assert calls(plan) == [
            "et_copy::_h2d_copy.out",
            f"delegate:{BACKEND_ID}",
            "et_copy::_d2h_copy.out",
            "et_copy::_d2h_copy.out",
        ]
        (delegate,) = plan.delegates
        assert {s.key: bytes(s.value) for s in delegate.compile_specs} == {"target_device": b"cuda:0"}


def test_the_record_names_the_device_weights_state_and_arena(two_methods):
    header, nested = records(two_methods)["three"][0]
    assert header[0] == "et_copy.delegate 2"
    assert header[1] == "device\tcuda\t0"
    weights = {line.split("\t")[1]: line.split("\t")[2:] for line in header if line.startswith("weight\t")}
    assert set(weights) == {"lin.weight", "lin.bias"}
    assert weights["lin.weight"][1] == "64" and weights["lin.bias"][1] == "16"
    state = [line.split("\t") for line in header if line.startswith("state\t")]
    # name order, 16-byte aligned; acc starts at ones (stored), steps at zeros (not stored)
    assert [s[1:4] for s in state] == [["acc", "0", "16"], ["steps", "16", "4"]]
    assert state[0][4].startswith("et_copy.state:") and state[1][4] == "-"
    assert header[-1].split("\t")[0] == "arena" and header[-1].split("\t")[2] == "32"
    assert nested[4:8] == b"ET12"  # a whole ExecuTorch program


def test_weights_are_stored_once_for_every_method_and_hold_no_bytes_in_the_nested_program(two_methods):
    recs = records(two_methods)
    keys = [
        {line.split("\t")[2] for line in header if line.startswith("weight\t")}
        for header, _ in recs["three"] + recs["two"]
    ]
    assert keys[0] == keys[1]  # prefill and decode name the same bytes
    stored = [k for k in two_methods._named_data.pte_data if k.startswith(WEIGHT_KEY)]
    assert sorted(stored) == sorted(keys[0])
    weight = Accumulator().lin.weight.detach().numpy().tobytes()
    for _, nested in recs["three"] + recs["two"]:
        assert weight not in nested


def test_every_method_has_the_same_state_layout(two_methods):
    recs = records(two_methods)
    layouts = [[line for line in header if line.startswith(("state", "arena"))] for ((header, _),) in recs.values()]
    assert len(layouts) == 2 and layouts[0] == layouts[1]


def test_state_arena_layout_aligns_in_name_order():
    slots, size = state_arena_layout({"b": 3, "a": 16, "c": 1}, alignment=16)
    assert slots == {"a": StateSlot(0, 16), "b": StateSlot(16, 3), "c": StateSlot(32, 1)}
    assert size == 48
    assert state_arena_layout({}) == ({}, 0)


def test_methods_that_disagree_on_a_state_shape_are_refused():
    class Grows(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("s", torch.zeros(4))

        def forward(self, x):
            self.s.add_(x.sum())
            return x + self.s

    a, b = Grows(), Grows()
    b.s = torch.zeros(5)

    class Both(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = a

        def forward(self, x):
            return self.m(x)

    both = Both()
    ep_a = torch.export.export(both, (torch.randn(4),), strict=True)
    both.m = b
    ep_b = torch.export.export(both, (torch.randn(5),), strict=True)
    from executorch.exir import to_edge

    edge = to_edge({"a": ep_a, "b": ep_b})
    with pytest.raises(ValueError, match="methods disagree on state 'm.s'"):
        edge.to_backend(SimulatedDevicePartitioner())


def test_the_partitioner_takes_the_device_index():
    program = export_device_program(torch.nn.Linear(2, 2), (torch.randn(1, 2),), device="cuda:1")
    (delegate,) = program.executorch_program.execution_plan[0].delegates
    assert [bytes(s.value) for s in delegate.compile_specs] == [b"cuda:1"]
    header, _ = records(program)["forward"][0]
    assert header[1] == "device\tcuda\t1"


def test_a_module_with_nothing_to_compute_exports_the_copies_alone():
    program = export_device_program(torch.nn.Identity(), (torch.randn(3),))
    plan = program.executorch_program.execution_plan[0]
    assert set(calls(plan)) <= COPIES and calls(plan)
    assert not plan.delegates


def test_a_resident_input_and_output_skip_their_copies_and_stay_on_the_device():
    from executorch.exir.schema import DeviceType

    class Step(torch.nn.Module):
        def forward(self, x, cache):
            return x.sum(), cache + x

    program = export_device_program(
        Step(), (torch.randn(4), torch.randn(4)), resident_inputs=(1,), resident_outputs=(1,)
    )
    plan = program.executorch_program.execution_plan[0]
    # x is copied in and its sum copied out; the cache goes in and out as device tensors
    assert calls(plan) == ["et_copy::_h2d_copy.out", f"delegate:{BACKEND_ID}", "et_copy::_d2h_copy.out"]
    placeholders = [n for n in program.exported_program().graph.nodes if n.op == "placeholder"]
    cache = placeholders[-1].meta["spec"]
    assert (cache.device, cache.device_index, cache.mem_id) == (DeviceType.CUDA, 0, None)


def test_a_resident_output_that_no_backend_computes_is_refused():
    class PassThrough(torch.nn.Module):
        def forward(self, x):
            return x + 1, x  # output 1 is the method input itself: a host tensor

    with pytest.raises(ValueError, match="resident output 1 is not a device backend's output"):
        export_device_program(PassThrough(), (torch.randn(2),), resident_outputs=(1,))


def test_a_failure_inside_torch_export_is_named_with_its_method_and_stage():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: torch.export refuses it
                return x + 1
            return x - 1

    with pytest.raises(ExportError) as e:
        export_device_program(DataDependent(), (torch.randn(4),), strict=True)
    assert e.value.method == "forward" and e.value.stage in {"export", "to_edge", "lowering", "to_executorch"}
    assert str(e.value).startswith("et_copy.export.export_device_program: method 'forward': ")
    assert e.value.__cause__ is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_named_data_reads_a_weight_from_its_tensors_memory_without_a_copy(dtype):
    import hashlib
    import io

    from et_copy.backends.record import WEIGHT_KEY, TensorBytes, store_tensor
    from executorch.exir._serialize._named_data_store import NamedDataStore

    weight = torch.arange(24).reshape(4, 6).to(dtype)
    store = NamedDataStore()
    key, nbytes = store_tensor(store, WEIGHT_KEY, weight)
    expected = weight.view(-1).view(torch.uint8).numpy().tobytes()
    assert (key, nbytes) == (WEIGHT_KEY + hashlib.sha256(expected).hexdigest()[:32], len(expected))
    (entry,) = store.get_named_data_store_output().buffers
    written = io.BytesIO()
    entry.write_to_file(written)
    assert written.getvalue() == bytes(entry) == expected and entry.prefix(5) == expected[:5]
    weight[0, 0] = 7  # the entry is the tensor's memory, not a copy of it
    size = weight.element_size()
    assert bytes(entry)[:size] != expected[:size] and bytes(entry)[size:] == expected[size:]
    # A transposed weight is stored in its contiguous order, copied once for that.
    assert bytes(TensorBytes(weight.t())) == weight.t().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
    assert TensorBytes(torch.zeros(3, dtype=dtype)).is_zero() and not TensorBytes(weight).is_zero()
    assert len(TensorBytes(torch.empty(0, dtype=dtype))) == 0
