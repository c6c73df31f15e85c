"""et_copy.EtCopyError: the bindings define it and raise it themselves; its
fields are keyword-only, default to an internal error with no runtime
detail, and survive pickling (multiprocessing hands exceptions across)."""

from __future__ import annotations

import pickle

import et_copy
import pytest
from et_copy import _C, _errors


def test_the_package_exports_the_bindings_own_exception_type():
    assert et_copy.EtCopyError is _C.EtCopyError is _errors.EtCopyError
    assert issubclass(et_copy.EtCopyError, RuntimeError)
    assert f"{et_copy.EtCopyError.__module__}.{et_copy.EtCopyError.__qualname__}" == "et_copy.EtCopyError"


def test_fields_default_to_an_internal_error_without_runtime_detail():
    e = et_copy.EtCopyError("something broke")
    assert str(e) == "something broke" and e.args == ("something broke",)
    assert (e.error, e.instruction, e.operator, e.log) == ("Internal", None, None, ())


def test_fields_are_keyword_only_and_the_log_becomes_a_tuple():
    e = et_copy.EtCopyError("m", error="NotFound", instruction="0:3", operator="aten::mul.out", log=["a", "b"])
    assert (e.error, e.instruction, e.operator, e.log) == ("NotFound", "0:3", "aten::mul.out", ("a", "b"))
    with pytest.raises(TypeError):
        et_copy.EtCopyError("m", "NotFound")
    with pytest.raises(TypeError):
        et_copy.EtCopyError()


def test_it_pickles_with_every_field():
    e = et_copy.EtCopyError(
        "m", error="InvalidArgument", instruction="0:1", operator="et_copy::_h2d_copy.out", log=("x",)
    )
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is et_copy.EtCopyError
    assert (str(back), back.error, back.instruction, back.operator, back.log) == (
        "m",
        "InvalidArgument",
        "0:1",
        "et_copy::_h2d_copy.out",
        ("x",),
    )


def test_one_the_bindings_raised_carries_the_executorch_error_name_and_pickles():
    with pytest.raises(et_copy.EtCopyError) as info:
        _C.DeviceBuffer(16, 0, 0, 256)  # device memory on the CPU device
    assert info.value.error == "InvalidArgument"
    assert "cannot be on the CPU device" in str(info.value)
    back = pickle.loads(pickle.dumps(info.value))
    assert (str(back), back.error, back.instruction, back.operator, back.log) == (
        str(info.value),
        "InvalidArgument",
        None,
        None,
        (),
    )
