"""The dtype a refusal names is str(dtype), read as UTF-8: a non-ASCII name
shows as itself, and a name that str() cannot give or UTF-8 cannot hold
(a lone surrogate) shows as '?', with no Python error left pending (which
would turn the TypeError into a SystemError)."""

from __future__ import annotations

import et_copy
import pytest
import torch
from et_copy import _C
from et_copy._dtypes import SUPPORTED_DTYPES, scalar_type_code

NAMES = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES)


class Named:
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no name")


CASES = [
    (Named("plain_dtype"), "plain_dtype"),
    (Named("dtypé_ü"), "dtypé_ü"),
    (Named("bad\udc80name"), "?"),
    (Unprintable(), "?"),
]


def expected(op: str, arg: str, shown: str) -> str:
    return f"{op}: {arg} has dtype {shown}, which et_copy does not move (supported: {NAMES})"


@pytest.mark.parametrize("dtype, shown", CASES)
def test_the_bindings_text_names_the_dtype_as_str_gives_it_or_a_question_mark(dtype, shown):
    assert _C.unsupported_dtype_message(dtype, "op_x", "arg_y") == expected("op_x", "arg_y", shown)


@pytest.mark.parametrize("dtype, shown", CASES)
def test_the_python_helper_raises_that_text_as_a_type_error(dtype, shown):
    with pytest.raises(TypeError) as info:
        scalar_type_code(dtype, op="op_x", arg="arg_y")
    assert str(info.value) == expected("op_x", "arg_y", shown)


@pytest.mark.parametrize("dtype, shown", CASES)
def test_empty_refuses_such_a_dtype_naming_it_the_same_way(dtype, shown):
    et_copy.use_simulated_device()
    with pytest.raises(TypeError) as info:
        et_copy.empty((2,), dtype)
    assert str(info.value) == expected("et_copy.empty", "the tensor", shown)
    # Nothing pending afterwards: the next call works.
    dev = et_copy.empty((2,), torch.float32)
    dev.free()
