"""The load checks as _C exposes them (python/bindings/program.cpp): each
takes a program's bytes and returns None when it accepts them, or raises
EtCopyError naming the check, the error and the refusal. Run on the
committed test programs (tests/cpp/programs), so this takes no export."""

from __future__ import annotations

from pathlib import Path

import pytest
from et_copy import _C, EtCopyError

PROGRAMS = Path(__file__).resolve().parents[1] / "cpp" / "programs"
CHECKS = {"check_device_access": _C.check_device_access, "check_argument_kinds": _C.check_argument_kinds}


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("program", ["roundtrip.pte", "d2h_fails.pte"])
def test_a_program_the_checks_accept_returns_none(check, program):
    assert CHECKS[check]((PROGRAMS / program).read_bytes()) is None


@pytest.mark.parametrize("program", sorted(p.name for p in PROGRAMS.glob("*.pte")))
def test_every_committed_program_has_arguments_of_the_kinds_its_operators_take(program):
    assert _C.check_argument_kinds((PROGRAMS / program).read_bytes()) is None


def test_the_device_access_check_refuses_a_cpu_backend_on_device_memory_by_name():
    with pytest.raises(EtCopyError) as caught:
        _C.check_device_access((PROGRAMS / "add_relu_xnnpack.pte").read_bytes())
    assert str(caught.value).startswith("et_copy.check_device_access failed with InvalidProgram\n  ")
    assert "backend 'XnnpackBackend' does not run on that device" in str(caught.value)
    assert caught.value.error == "InvalidProgram"


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("data", [b"", b"\x10\x00\x00\x00"], ids=["empty", "root-offset-past-the-end"])
def test_bytes_that_are_no_program_are_refused_naming_the_check(check, data):
    with pytest.raises(EtCopyError) as caught:
        CHECKS[check](data)
    assert str(caught.value) == (
        f"et_copy.{check} failed with InvalidProgram\n  the program's flatbuffer has an offset outside the file"
    )


@pytest.mark.parametrize("check", CHECKS)
def test_a_program_that_is_not_bytes_is_a_type_error(check):
    with pytest.raises(TypeError):
        CHECKS[check]("roundtrip.pte")
