"""et_copy.runtime: programs run with et-copy's kernels scoped to the method,
every other operator from ExecuTorch's registry (the wheel's kernel library
and XNNPACK, loaded as executorch.runtime loads them), device-planned
buffers from the registered allocator, and device-resident inputs and
outputs. Programs are exported in a child process (importing executorch.exir
changes torch.library state); they run here on the simulated device."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import et_copy
import pytest
import torch
from et_copy import EtCopyError, runtime
from runtime_programs import device_programs, program_data  # noqa: F401 (fixtures)


def stages(data):
    a = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()).eval()
    a.load_state_dict(data["stage_a"])
    b = torch.nn.Linear(16, 4).eval()
    b.load_state_dict(data["stage_b"])
    return a, b


def delta(before: dict) -> dict:
    after = et_copy.allocator_stats()
    return {k: after[k] - before[k] for k in ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes", "allocations")}


def test_program_loads_from_a_path_or_bytes_and_lists_its_methods(programs):
    for source in (programs / "affine.pte", str(programs / "affine.pte"), (programs / "affine.pte").read_bytes()):
        assert runtime.load(source).method_names == {"forward"}


def test_metadata_gives_each_input_output_and_planned_buffer_with_its_device(programs):
    meta = runtime.load(programs / "stage_a.pte").load_method("forward").metadata
    assert (meta.num_inputs(), meta.num_outputs()) == (1, 1)
    inp, out = meta.input_tensor_meta(0), meta.output_tensor_meta(0)
    assert (inp.torch_dtype(), inp.sizes(), inp.device(), inp.is_memory_planned()) == (
        torch.float32,
        (2, 8),
        "cuda:0",
        False,
    )
    assert (out.torch_dtype(), out.sizes(), out.device(), out.is_memory_planned()) == (
        torch.float32,
        (2, 16),
        "cuda:0",
        False,
    )
    assert "device=cuda:0" in repr(inp) and repr(meta).startswith("MethodMetadata(name=forward,")
    meta = runtime.load(programs / "affine.pte").load_method("forward").metadata
    assert [meta.input_tensor_meta(i).device() for i in range(meta.num_inputs())] == ["cpu", "cpu"]
    outs = [meta.output_tensor_meta(i) for i in range(meta.num_outputs())]
    assert [(m.torch_dtype(), m.sizes(), m.device()) for m in outs] == [
        (torch.float32, (3, 4), "cpu"),
        (torch.float32, (), "cpu"),
    ]
    buffers = [
        (meta.memory_planned_buffer_device(i), meta.memory_planned_buffer_size(i))
        for i in range(meta.num_memory_planned_buffers())
    ]
    assert {device for device, _ in buffers} == {"cpu", "cuda:0"}
    assert all(nbytes > 0 for device, nbytes in buffers if device == "cuda:0")


def described(meta: runtime.MethodMetadata) -> dict:
    """What every accessor of `meta` returns, to compare two MethodMetadata."""

    def tensor(t: runtime.TensorMetadata) -> tuple:
        return (t.name(), t.sizes(), t.dtype(), t.torch_dtype(), t.dim_order(), t.nbytes(), t.is_memory_planned(),
                t.device(), repr(t))  # fmt: skip

    def entries(n, tag, get) -> list:
        return [("tag", tag(i)) if tag(i) is not None else tensor(get(i)) for i in range(n)]

    return {
        "name": meta.name(),
        "inputs": entries(meta.num_inputs(), meta.input_tag, meta.input_tensor_meta),
        "outputs": entries(meta.num_outputs(), meta.output_tag, meta.output_tensor_meta),
        "attributes": [tensor(meta.attribute_tensor_meta(i)) for i in range(meta.num_attributes())],
        "buffers": [
            (meta.memory_planned_buffer_size(i), meta.memory_planned_buffer_device(i))
            for i in range(meta.num_memory_planned_buffers())
        ],
        "repr": repr(meta),
    }


@pytest.mark.parametrize("name", ["affine", "constant", "greater", "slot", "linear", "stage_a", "stage_b"])
def test_a_programs_metadata_gives_what_its_loaded_method_gives_device_included(programs, name):
    program = runtime.load(programs / f"{name}.pte")
    for method_name in sorted(program.method_names):
        unloaded = described(program.metadata(method_name))  # read before anything is loaded
        assert unloaded == described(program.load_method(method_name).metadata)


def test_a_programs_metadata_places_device_inputs_and_outputs_on_the_device(programs):
    meta = runtime.load(programs / "stage_b.pte").metadata("forward")
    assert (meta.input_tensor_meta(0).device(), meta.output_tensor_meta(0).device()) == ("cuda:0", "cpu")
    assert "device=cuda:0" in repr(meta.input_tensor_meta(0))
    meta = runtime.load(programs / "constant.pte").metadata("rows")
    assert (meta.num_inputs(), meta.num_outputs(), meta.output_tag(0)) == (0, 1, 4)  # Tag::Int
    with pytest.raises(ValueError, match="output 0 is not a tensor"):
        meta.output_tensor_meta(0)


def test_a_host_programs_metadata_names_the_host_for_every_tensor():
    # The issue's own case: a copy program from the repository, read without loading.
    meta = runtime.load(Path(__file__).parents[1] / "cpp/programs/roundtrip.pte").metadata("forward")
    assert (meta.input_tensor_meta(0).device(), meta.output_tensor_meta(0).device()) == ("cpu", "cpu")
    assert "device=cpu" in repr(meta.input_tensor_meta(0))
    assert meta.num_attributes() == 0
    with pytest.raises(IndexError, match="attribute 0 out of range"):
        meta.attribute_tensor_meta(0)


def test_arithmetic_between_the_copies_equals_eager_with_one_copy_per_input_and_output(programs, data):
    x, y = data["affine"]
    method = runtime.load(programs / "affine.pte").load_method()
    before = et_copy.allocator_stats()
    got = method.execute([x, y])
    assert delta(before) == {"h2d_copies": 2, "h2d_bytes": 96, "d2h_copies": 2, "d2h_bytes": 52, "allocations": 0}
    torch.testing.assert_close(got[0], x * 2.0 + y)
    torch.testing.assert_close(got[1], (x - y).sum())
    # Again, on other inputs: the method is reusable and its outputs are the caller's.
    got2 = method.execute([y, x])
    torch.testing.assert_close(got2[0], y * 2.0 + x)
    torch.testing.assert_close(got[0], x * 2.0 + y)


def test_an_index_put_with_a_none_index_loads_and_equals_eager(programs, data):
    # Its index list holds -1 for None; et_copy's program check once called that out of range.
    cache, v, pos = data["slot"]
    (got,) = runtime.load(programs / "slot.pte").load_method().execute([cache, v, pos])
    want = cache.clone()
    want[:, pos] = v
    torch.testing.assert_close(got, want)


def test_delegated_program_equals_eager(programs, data):
    a, _ = stages(data)
    method = runtime.load(programs / "linear.pte").load_method()
    before = et_copy.allocator_stats()
    (got,) = method.execute([data["stage"]])
    torch.testing.assert_close(got, a(data["stage"]).detach())
    assert delta(before) == {"h2d_copies": 1, "h2d_bytes": 64, "d2h_copies": 1, "d2h_bytes": 128, "allocations": 0}


def test_device_resident_methods_chain_with_no_host_round_trip(programs, data):
    a, b = stages(data)
    first = runtime.load(programs / "stage_a.pte").load_method()
    second = runtime.load(programs / "stage_b.pte").load_method()
    x = et_copy.h2d_copy(data["stage"])
    before = et_copy.allocator_stats()
    (hidden,) = first.execute([x])
    assert isinstance(hidden, et_copy.DeviceTensor)
    assert (hidden.shape, str(hidden.device)) == (torch.Size([2, 16]), "cuda:0")
    (logits,) = second.execute([hidden])
    moved = delta(before)
    # Only the final logits left the device; the hidden state never did.
    assert moved == {"h2d_copies": 0, "h2d_bytes": 0, "d2h_copies": 1, "d2h_bytes": 32, "allocations": 1}
    torch.testing.assert_close(logits, b(a(data["stage"])).detach())
    torch.testing.assert_close(hidden.cpu(), a(data["stage"]).detach())


def test_device_output_can_be_bound_to_a_device_tensor_of_the_callers(programs, data):
    first = runtime.load(programs / "stage_a.pte").load_method()
    mine = et_copy.empty((2, 16), torch.float32)
    x = et_copy.h2d_copy(data["stage"])
    before = et_copy.allocator_stats()
    (hidden,) = first.execute([x], outputs=[mine])
    assert hidden is mine and delta(before)["allocations"] == 0
    a, _ = stages(data)
    torch.testing.assert_close(mine.cpu(), a(data["stage"]).detach())


def test_device_outputs_are_freed_with_their_tensors(programs, data):
    first = runtime.load(programs / "stage_a.pte").load_method()
    x = et_copy.h2d_copy(data["stage"])
    outstanding = et_copy.allocator_stats()["bytes_outstanding"]
    (hidden,) = first.execute([x])
    assert et_copy.allocator_stats()["bytes_outstanding"] >= outstanding + 128
    del hidden
    assert et_copy.allocator_stats()["bytes_outstanding"] == outstanding


def test_a_host_tensor_where_a_device_input_is_planned_is_rejected_without_a_copy(programs, data):
    first = runtime.load(programs / "stage_a.pte").load_method()
    before = et_copy.allocator_stats()
    with pytest.raises(ValueError, match=r"input 0 .*is planned on cuda:0, got a tensor on cpu.*DeviceTensor"):
        first.execute([data["stage"]])
    moved = delta(before)
    assert [moved[k] for k in ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes")] == [0, 0, 0, 0]
    # The output it had allocated for the call went back with the error.
    assert et_copy.allocator_stats()["bytes_outstanding"] == before["bytes_outstanding"]


def test_a_device_tensor_where_a_host_input_is_planned_is_rejected(programs, data):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    with pytest.raises(ValueError, match=r"input 0 .*is planned on cpu, got a tensor on cuda:0"):
        method.execute([et_copy.h2d_copy(x), y])


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (lambda x, y: [x], ValueError, "takes 2 inputs, got 1"),
        (lambda x, y: [x.double(), y], TypeError, "input 0 .*must have dtype torch.float32, got torch.float64"),
        (lambda x, y: [x, "y"], TypeError, "input 1 .*must be a torch.Tensor or an et_copy.DeviceTensor, got str"),
        (lambda x, y: {"x": x, "y": y}, TypeError, "method 'forward': inputs must be a list or tuple, got dict"),
        # The shape is ExecuTorch's to check, in its own words, as under executorch.runtime.
        (lambda x, y: [x.reshape(4, 3), y], EtCopyError, r"setting input 0 failed with NotSupported\n.*shape \(3, 4\)"),
    ],
)
def test_inputs_the_method_cannot_take_are_rejected_naming_the_input(programs, data, bad, error, match):
    method = runtime.load(programs / "affine.pte").load_method()
    with pytest.raises(error, match=match):
        method.execute(bad(*data["affine"]))


def test_inputs_may_be_a_tuple_and_outputs_must_be_a_sequence(programs, data):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    torch.testing.assert_close(method.execute((x, y))[0], x * 2.0 + y)
    with pytest.raises(TypeError, match="method 'forward': outputs= must be a list or tuple, got Tensor"):
        method.execute([x, y], outputs=torch.empty(3, 4))


def test_a_kernel_failure_raises_with_the_instruction_operator_and_the_kernels_own_words(exported_programs):
    et_copy.use_simulated_device()
    method = runtime.load(exported_programs / "output_dtype_half.pte").load_method()
    with pytest.raises(et_copy.EtCopyError) as info:
        method.execute([torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)])
    e = info.value
    assert (e.error, e.instruction, e.operator) == ("InvalidArgument", "0:1", "et_copy::_d2h_copy.out")
    assert "et_copy::_d2h_copy.out: dtype mismatch: self has Float, out has Half" in str(e)
    assert any("KernelCall failed at instruction 0:1" in line for line in e.log)
    assert "debug_buffer_size" not in str(e), "the debug buffer's hint is for its own shortfall alone"


def test_unknown_method_names_the_methods_there_are(programs):
    with pytest.raises(et_copy.EtCopyError, match=r"no method of that name \(it has: \['forward'\]\)"):
        runtime.load(programs / "affine.pte").load_method("backward")


ORDERS = {
    "executorch.runtime first": "import executorch.runtime\nimport et_copy.runtime as rt",
    "et_copy.runtime first": "import et_copy.runtime as rt\nimport executorch.runtime",
}


@pytest.mark.parametrize("order", ORDERS)
def test_either_import_order_runs_programs_with_et_copys_kernels_serving_the_copies(programs, exported_programs, order):
    code = ORDERS[order] + textwrap.dedent(f"""
        import json, torch, et_copy
        from executorch.runtime import Runtime
        et_copy.use_simulated_device()
        x, y = torch.load({str(programs / "data.pt")!r})["affine"]
        got = rt.load({str(programs / "affine.pte")!r}).load_method().execute([x, y])
        wheel = Runtime.get().load_program({str(programs / "affine.pte")!r}).load_method("forward").execute([x, y])
        try:
            rt.load({str(exported_programs / "output_dtype_half.pte")!r}).load_method().execute(
                [torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)])
            half = "accepted"
        except et_copy.EtCopyError as e:
            half = str(e)
        print(json.dumps({{"equal": torch.equal(got[0], x * 2.0 + y), "same_as_wheel": torch.equal(got[0], wheel[0]),
                          "owner": et_copy.kernel_owner(et_copy.D2H_COPY_OUT), "half": half}}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    assert said["equal"] and said["same_as_wheel"]
    # The global registry holds the wheel's kernel, yet et-copy's rejected the retyped output.
    assert said["owner"] == "already other"
    assert "dtype mismatch: self has Float, out has Half" in said["half"]


def test_a_kernel_failure_keeps_its_log_after_executorch_runtime_loads_its_own_log_hook(programs, exported_programs):
    # executorch's pybindings register their log hook over whatever is there when they load; et-copy's
    # capture, installed by an earlier load, must put itself back rather than lose the kernel's words.
    code = textwrap.dedent(f"""
        import json, torch, et_copy, et_copy.runtime as rt
        et_copy.use_simulated_device()
        rt.load({str(programs / "affine.pte")!r}).load_method()
        from executorch.runtime import Runtime
        Runtime.get()
        try:
            rt.load({str(exported_programs / "output_dtype_half.pte")!r}).load_method().execute(
                [torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)])
            print(json.dumps("accepted"))
        except et_copy.EtCopyError as e:
            print(json.dumps(list(e.log)))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    log = json.loads(proc.stdout.strip().splitlines()[-1])
    assert any("dtype mismatch: self has Float, out has Half" in line for line in log), log
    assert any("KernelCall failed at instruction 0:1" in line for line in log), log


def test_a_device_planned_method_without_an_allocator_says_what_to_register(programs):
    code = f"""
import et_copy.runtime as rt
try:
    rt.load({str(programs / "affine.pte")!r}).load_method()
except Exception as e:
    print(type(e).__name__, e.error, e)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "EtCopyError NotFound" in proc.stdout, proc.stdout + proc.stderr
    assert "on cuda:0" in proc.stdout and "et_copy.use_simulated_device()" in proc.stdout


def test_loading_a_method_logs_no_kernel_not_found_line_per_operator(programs):
    # method_kernels() lists every registered operator, so aten::mul/add
    # resolve in the method's list without a failed lookup first.
    code = f"""
import et_copy, et_copy.runtime as rt
et_copy.use_simulated_device()
rt.load({str(programs / "affine.pte")!r}).load_method()
print("loaded")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip() == "loaded", proc.stderr[-3000:]
    assert "not found" not in proc.stderr, proc.stderr[-3000:]
