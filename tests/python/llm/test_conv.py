"""et_copy.llm._conv: a depthwise conv1d rewritten as shifted multiply-adds
computes what the convolution computes, and nothing else is rewritten."""

from __future__ import annotations

import pytest
import torch
from et_copy.llm._conv import _conv1d, _convolution, depthwise_conv1d_as_shifts


def _convs(exported) -> list[str]:
    return [str(n.target) for n in exported.graph.nodes if n.op == "call_function" and "conv" in str(n.target)]


@pytest.mark.parametrize("batch, channels", [(1, 1), (2, 3)])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_the_shifts_compute_conv1d_for_every_depthwise_kernel_padding_and_bias(batch, channels, k):
    torch.manual_seed(k)
    w = torch.randn(channels, 1, k)
    for padding in sorted({0, 1, k - 1}):
        for bias in (None, torch.randn(channels)):
            for length in (max(1, k - 2 * padding), 7):  # the shortest input with an output, and a longer one
                x = torch.randn(batch, channels, length)
                want = torch.nn.functional.conv1d(x, w, bias, 1, padding, 1, channels)
                got = _conv1d(x, w, bias, stride=(1,), padding=(padding,), dilation=(1,), groups=channels)
                torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
                # Plain ints as aten.conv1d may hold them, and aten.convolution's form.
                torch.testing.assert_close(_conv1d(x, w, bias, 1, padding, 1, channels), want, rtol=1e-6, atol=1e-6)
                got = _convolution(x, w, bias, [1], [padding], [1], False, [0], channels)
                torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    # aten.conv1d's defaults: no bias, stride 1, no padding, dilation 1; groups 1 is depthwise for one channel.
    x = torch.randn(batch, 1, 6)
    w1 = torch.randn(1, 1, k)
    torch.testing.assert_close(_conv1d(x, w1), torch.nn.functional.conv1d(x, w1), rtol=1e-6, atol=1e-6)


def test_every_convolution_that_is_not_a_depthwise_1d_of_stride_and_dilation_1_is_left_alone():
    x, w = torch.randn(2, 4, 9), torch.randn(4, 1, 3)
    assert isinstance(_conv1d(x, w, None, [1], [1], [1], 4), torch.Tensor)  # the one that is rewritten
    kept = [
        (x[0], w, 4, [1], [1], [1]),  # an unbatched input (2-d)
        (x.unsqueeze(-1), w.unsqueeze(-1), 4, [1], [1, 1], [1]),  # 2-d convolution
        (x, w.reshape(4, 1, 3)[:2].repeat(1, 2, 1), 2, [1], [1], [1]),  # two channels per group
        (x, torch.randn(8, 1, 3), 4, [1], [1], [1]),  # a channel multiplier
        (x, w, 1, [1], [1], [1]),  # groups that are not the channels
        (x, w, 4, [2], [1], [1]),  # strided
        (x, w, 4, [1], [1], [2]),  # dilated
        (x, w, 4, [1], [1, 1], [1]),  # two paddings
    ]
    for i, (xi, wi, groups, stride, padding, dilation) in enumerate(kept):
        assert _conv1d(xi, wi, None, stride, padding, dilation, groups) is NotImplemented, i
        assert _convolution(xi, wi, None, stride, padding, dilation, False, [0], groups) is NotImplemented, i
    assert _convolution(x, w, None, [1], [1], [1], True, [0], 4) is NotImplemented  # transposed


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


# costly: CI time (69 s); Qwen 3.5 MoE's default export runs in CI (test_llm.py).
@pytest.mark.costly
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
