"""The words for a dtype et_copy does not move: one text, written by the
bindings, whether the Python helper (et_copy._dtypes.scalar_type_code) or
the copies' tensor reader refuses it. Tests may match it, so it is pinned."""

from __future__ import annotations

import warnings

import et_copy
import pytest
import torch
from et_copy import _C
from et_copy._dtypes import SCALAR_TYPE_CODES, SUPPORTED_DTYPES, scalar_type_code

NAMES = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES)


def expected(op: str, arg: str, shown: str) -> str:
    return f"{op}: {arg} has dtype {shown}, which et_copy does not move (supported: {NAMES})"


def quint4x2(n: int) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch deprecates creating quantized tensors
        return torch.quantize_per_tensor(torch.zeros(n), 0.1, 0, torch.quint4x2)


def test_the_supported_list_is_the_bindings_table_in_code_order():
    assert list(SCALAR_TYPE_CODES.values()) == sorted(SCALAR_TYPE_CODES.values())
    assert NAMES.startswith("uint8, int8, int16, int32, int64, float16, float32, float64,")
    assert "quint4x2" not in NAMES and "quint2x4" not in NAMES


@pytest.mark.parametrize("dtype, shown", [(torch.quint4x2, "torch.quint4x2"), ("float32", "float32")])
def test_the_python_helper_raises_the_bindings_text(dtype, shown):
    with pytest.raises(TypeError) as info:
        scalar_type_code(dtype, op="some_op", arg="the arg")
    assert str(info.value) == expected("some_op", "the arg", shown)
    assert str(info.value) == _C.unsupported_dtype_message(dtype, "some_op", "the arg")


def test_the_copies_refuse_a_tensor_of_such_a_dtype_in_the_same_words():
    et_copy.use_simulated_device()
    dev = et_copy.empty((4,), torch.uint8)
    try:
        with pytest.raises(TypeError) as info:
            et_copy._C.h2d_copy(quint4x2(4), dev, False)
        assert str(info.value) == expected(et_copy.H2D_COPY_OUT, "self", "torch.quint4x2")
        with pytest.raises(TypeError) as info:
            et_copy.d2h_copy(dev, out=quint4x2(4))
        assert str(info.value) == expected(et_copy.D2H_COPY_OUT, "out", "torch.quint4x2")
    finally:
        dev.free()


def test_making_a_device_tensor_of_such_a_dtype_is_refused_in_the_same_words():
    et_copy.use_simulated_device()
    with pytest.raises(TypeError) as info:
        et_copy.empty((4,), torch.quint4x2)
    assert str(info.value) == expected("et_copy.empty", "the tensor", "torch.quint4x2")
    dev = et_copy.empty((4,), torch.uint8)
    try:
        with pytest.raises(TypeError) as info:
            et_copy.DeviceTensor(dev._buffer, torch.quint4x2, dev.device, (4,), (0,), False)
        assert str(info.value) == expected("et_copy.DeviceTensor", "the tensor", "torch.quint4x2")
    finally:
        dev.free()
