"""et_copy.llm._conv: a depthwise conv1d rewritten as shifted multiply-adds
computes what the convolution computes, and nothing else is rewritten."""

from __future__ import annotations

import pytest
import torch
from et_copy.llm._conv import depthwise_conv1d_as_shifts


def _convs(exported) -> list[str]:
    return [str(n.target) for n in exported.graph.nodes if n.op == "call_function" and "conv" in str(n.target)]


class CausalDepthwise(torch.nn.Module):
    """The linear-attention layers' conv: depthwise, padded by K - 1, cut to the input's length."""

    def __init__(self, channels: int, k: int, bias: bool) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(channels, channels, k, groups=channels, padding=k - 1, bias=bias)

    def forward(self, x):
        return torch.nn.functional.silu(self.conv(x)[:, :, : x.shape[-1]])


@pytest.mark.parametrize("k, bias", [(1, True), (2, False), (4, True)])
def test_a_causal_depthwise_conv_becomes_shifts_and_computes_the_same(k, bias):
    torch.manual_seed(k)
    model = CausalDepthwise(8, k, bias).eval()
    x = torch.randn(1, 8, 9)
    t = torch.export.Dim("t", min=4, max=32)
    rewritten = depthwise_conv1d_as_shifts(torch.export.export(model, (x,), dynamic_shapes=({2: t},)))
    assert _convs(rewritten) == []
    for length in (4, 9, 32):  # the length stays dynamic
        y = torch.randn(1, 8, length)
        torch.testing.assert_close(rewritten.module()(y), model(y), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "conv",
    [
        torch.nn.Conv1d(8, 4, 3),  # not grouped
        torch.nn.Conv1d(8, 8, 3, groups=4),  # grouped, not depthwise
        torch.nn.Conv1d(8, 8, 3, groups=8, stride=2),  # strided
        torch.nn.Conv1d(8, 8, 3, groups=8, dilation=2),  # dilated
        torch.nn.Conv1d(8, 16, 3, groups=8),  # a channel multiplier
    ],
)
def test_every_other_convolution_is_kept(conv):
    x = torch.randn(1, 8, 12)
    rewritten = depthwise_conv1d_as_shifts(torch.export.export(conv.eval(), (x,)))
    assert len(_convs(rewritten)) == 1
    torch.testing.assert_close(rewritten.module()(x), conv(x))


@pytest.mark.slow
def test_qwen3_5_moe_exported_with_shifts_has_no_convolution_and_gives_transformers_tokens():
    pytest.importorskip("transformers")
    import et_copy
    from et_copy import llm

    model = llm.tiny_model("qwen3_5_moe")
    program = llm.export_llm(model, max_seq_len=16, pick="device", depthwise_conv_as_shifts=True)
    for name in program.methods:
        for module in program.exported_program(name).graph_module.modules():
            lowered = getattr(module, "original_module", None)  # a delegate's partition
            if lowered is not None:
                assert not [n for n in lowered.graph.nodes if "convolution" in str(n.target)], name
    et_copy.use_simulated_device()
    session = llm.DeviceLLM(program.buffer).new_session()
    prompt = [5, 17, 3, 9]
    assert session.generate(prompt, 6).tokens == llm.eager_generate(model, prompt, 6)


def test_decompositions_without_a_backend_are_refused_naming_the_argument():
    from et_copy.export import MethodInputs, export_device_methods
    from et_copy.llm._conv import DEPTHWISE_CONV1D_AS_SHIFTS

    conv = torch.nn.Conv1d(4, 4, 2, groups=4)
    with pytest.raises(ValueError, match="decompositions go with insert_copies=True"):
        export_device_methods(
            conv,
            {"forward": MethodInputs((torch.randn(1, 4, 6),))},
            insert_copies=False,
            decompositions=DEPTHWISE_CONV1D_AS_SHIFTS,
        )
