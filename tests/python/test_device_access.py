"""et_copy's load check, _C.check_device_access (et_copy::check_device_access):
programs in which the host would read or write device memory are refused by
name, copy-only programs pass. Today's device programs compute with CPU
kernels on device-planned tensors, which the simulated device allows and a
GPU would fault on; the check refuses them."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
from et_copy import _C, EtCopyError  # noqa: E402
from et_copy.export import (  # noqa: E402
    DeviceBoundary,
    MethodInputs,
    export_device_methods,
    export_device_program,
    lower_to_device,
)
from et_copy.tools import models  # noqa: E402


def refusal(program: bytes, backends: list[str] | None = None) -> str:
    with pytest.raises(EtCopyError) as caught:
        _C.check_device_access(program, backends)
    assert caught.value.error == "InvalidProgram"
    assert str(caught.value).startswith("et_copy.check_device_access failed with InvalidProgram\n  ")
    (message,) = caught.value.log
    assert message in str(caught.value)
    return message


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


def test_copy_only_programs_are_accepted_whoever_serves_the_device():
    round_trip = export_device_program(models.RoundTrip(), models.RoundTrip.example_inputs(), insert_copies=False)
    boundary = export_device_program(Identity(), (torch.randn(3, 4),))
    for program in (round_trip.buffer, boundary.buffer):
        _C.check_device_access(program)
        _C.check_device_access(program, [])
        _C.check_device_access(program, ["SimulatedDeviceBackend"])


def leaky(module: torch.nn.Module, inputs: tuple) -> bytes:
    """The pre-backend shape (et-copy 0.3's export): DeviceBoundary's copies
    and ExecuTorch's CPU kernels between them, on memory planned on cuda:0."""
    return export_device_program(DeviceBoundary(module), inputs, insert_copies=False).buffer


def test_linear_relu_linear_as_exported_before_the_backend_is_refused_naming_addmm_and_the_device():
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    message = refusal(leaky(mlp, (torch.randn(2, 8),)))
    assert message.startswith("method 'forward', instruction 0:"), message
    assert "(aten::addmm.out): argument " in message, message
    assert "is planned on cuda:0, and a CPU kernel cannot read device memory" in message, message


def test_a_cpu_delegate_on_the_device_is_refused_unless_its_backend_is_allowed():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    class AddRelu(torch.nn.Module):
        def forward(self, a, b):
            return torch.relu(a + b)

    program = lower_to_device(AddRelu(), (torch.randn(4, 8), torch.randn(4, 8)), XnnpackPartitioner()).buffer
    message = refusal(program, ["SimulatedDeviceBackend"])
    assert "(delegate:XnnpackBackend): argument 0 " in message, message
    assert "backend 'XnnpackBackend' does not run on that device (allowed there: SimulatedDeviceBackend)" in message
    _C.check_device_access(program, ["SimulatedDeviceBackend", "XnnpackBackend"])


def test_a_method_input_planned_on_the_device_is_refused():
    program = export_device_program(Identity(), (torch.randn(2, 3),), resident_inputs=(0,), alloc_graph_input=True)
    assert refusal(program.buffer) == (
        "method 'forward': input 0 (value 0) is planned on cuda:0, "
        "and Method::set_input would memcpy host bytes into it"
    )


def test_the_allowed_backends_default_to_those_of_whoever_serves_the_device():
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()  # registered device backends run where their runs_on says
    serving = et_copy.allocator_info()["name"]  # "cuda" when et-copy's CUDA allocator got there first
    expected = {
        "simulated": ["SimulatedDeviceBackend", "AotiDeviceBackend"],
        "cuda": ["CudaBackend", "AotiDeviceBackend"],
    }[serving]
    assert sorted(_C.device_backends()) == sorted(expected)
    round_trip = export_device_program(models.RoundTrip(), models.RoundTrip.example_inputs(), insert_copies=False)
    _C.check_device_access(round_trip.buffer, None)


def test_bytes_that_are_no_program_are_refused_not_crashed_on():
    for junk in (b"", b"\x00" * 3, b"ET12" * 64):
        with pytest.raises(EtCopyError) as caught:
            _C.check_device_access(junk)
        assert caught.value.error == "InvalidProgram"
    with pytest.raises(TypeError):
        _C.check_device_access(b"", "SimulatedDeviceBackend")  # a str is not a list of ids


@pytest.mark.slow
def test_the_device_backends_programs_are_accepted():
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    _C.check_device_access(export_device_program(mlp, (torch.randn(2, 8),)).buffer, ["SimulatedDeviceBackend"])
    assert "(delegate:SimulatedDeviceBackend)" in refusal(export_device_program(mlp, (torch.randn(2, 8),)).buffer, [])


def test_a_tiny_qwen3_moe_step_with_its_state_but_no_backend_is_refused_at_export_naming_the_caches():
    # Its caches would be computed on by CPU kernels on device memory, which a GPU cannot run.
    from et_copy.export import ExportArgumentError

    llm = pytest.importorskip("et_copy.llm")
    pytest.importorskip("transformers")
    step = llm.StatefulCausalLM(llm.tiny_model("qwen3_moe"), 32, pick="device").eval()
    with pytest.raises(ExportArgumentError, match="state needs a device backend to compute on it") as e:
        export_device_methods(
            DeviceBoundary(step),
            {"decode": MethodInputs((torch.tensor([[0]]), torch.tensor([0])))},
            insert_copies=False,
            strict=True,
        )
    assert e.value.method == "decode" and "cache" in str(e.value), str(e.value)


def test_et_copy_runtime_refuses_at_load_what_a_gpu_could_not_run():
    import et_copy.runtime

    et_copy.use_simulated_device()
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    program = leaky(mlp, (torch.randn(2, 8),))
    with pytest.raises(EtCopyError) as caught:
        et_copy.runtime.load(program)
    assert caught.value.error == "InvalidProgram"
    text = str(caught.value)
    assert text.startswith("et_copy.runtime.load: checking the program failed with InvalidProgram\n  "), text
    assert "method 'forward', instruction 0:2 (aten::addmm.out): argument 1 (value 5) is planned on cuda:0" in text
    round_trip = export_device_program(models.RoundTrip(), models.RoundTrip.example_inputs(), insert_copies=False)
    x = models.RoundTrip.example_inputs()[0]
    assert torch.equal(et_copy.runtime.load(round_trip.buffer).load_method("forward").execute((x,))[0], x)
