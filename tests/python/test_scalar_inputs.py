"""A method input that is not a tensor (an Int in the program) takes a Python
int, and ExecuTorch holds it to the program's value; a tensor or any other
object there is refused by the bindings, naming the input. torch.export
emits a scalar input as a None value, which neither executorch's runtime
nor et_copy's load check takes, so the program's value is set to an Int
after export, as a hand-built program would have it."""

from __future__ import annotations

import et_copy
import et_copy.runtime as runtime
import pytest
import torch


class AddN(torch.nn.Module):
    def forward(self, x, n: int):
        return x + n


@pytest.fixture(scope="module")
def method():
    from executorch.exir import to_edge
    from executorch.exir._serialize import _program as serialize
    from executorch.exir.schema import Int

    ep = torch.export.export(AddN(), (torch.ones(3), 2), dynamic_shapes={"x": None, "n": torch.export.Dim.DYNAMIC})
    pte = serialize.deserialize_pte_binary(to_edge(ep).to_executorch().buffer)
    plan = pte.program.execution_plan[0]
    assert type(plan.values[plan.inputs[1]].val).__name__ == "Null"
    plan.values[plan.inputs[1]].val = Int(5)
    return runtime.load(bytes(serialize.serialize_pte_binary(pte))).load_method("forward")


def test_an_int_input_takes_the_programs_value_and_executorch_refuses_another(method):
    (out,) = method.execute([torch.ones(3), 5])
    assert torch.equal(out, torch.full((3,), 6.0))
    with pytest.raises(et_copy.EtCopyError, match="setting input 1 failed with InvalidArgument") as info:
        method.execute([torch.ones(3), 6])
    assert "should have the same value as the input_evalue, but got 5 and 6" in str(info.value)


@pytest.mark.parametrize(
    "value, message",
    [
        (lambda: torch.ones(1), "input 1 is not a tensor input, got a tensor"),
        (lambda: et_copy.empty((1,), torch.float32), "input 1 is not a tensor input, got a tensor"),
        (lambda: "5", "input 1 must be an int, float, bool or None, got str"),
    ],
    ids=["cpu_tensor", "device_tensor", "str"],
)
def test_a_tensor_or_another_object_where_an_int_is_planned_is_refused_naming_the_input(method, value, message):
    et_copy.use_simulated_device()
    with pytest.raises(TypeError, match=f"^et_copy.runtime: method 'forward': {message}$"):
        method.execute([torch.ones(3), value()])
