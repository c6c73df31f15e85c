"""The argument checks of program.cpp's _C functions, reached directly (the
Python wrappers check some first), both sides of each edge: verification 0
and 1 taken, -1 and 2 refused naming it; a program or data file that cannot
be mapped named by path; an unknown method named with the methods there are;
every method name from the first to the last; and write_etdump's files (the
debug buffer's only when the program was loaded with one, an unwritable
path refused); the planned buffers, the first and the last, as the program
plans them."""

from __future__ import annotations

from pathlib import Path

import et_copy
import pytest
import torch
from et_copy import _C, runtime
from executorch.exir._serialize._program import deserialize_pte_binary
from runtime_programs import export_programs


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    out = export_programs(tmp_path_factory)
    et_copy.use_simulated_device()
    runtime._load_wheel_libraries()  # the CPU kernels the programs call, as runtime.load loads them
    return out


@pytest.fixture(scope="module")
def data(programs):
    return torch.load(programs / "data.pt")


def affine_out(program, data):
    x, y = data["affine"]
    method = program.new_session().load_method("forward")
    outs = [torch.zeros(3, 4), torch.zeros(())]
    assert method.execute([x, y], outs) == [None, None]  # each tensor output filled in place
    return outs[0]


@pytest.mark.parametrize("verification", [0, 1])
def test_both_verification_levels_load_and_run(programs, data, verification):
    program = _C.load_program((programs / "affine.pte").read_bytes(), verification)
    x, y = data["affine"]
    torch.testing.assert_close(affine_out(program, data), x * 2.0 + y)


@pytest.mark.parametrize("verification", [-1, 2, 2**31 - 1])
def test_a_verification_level_outside_0_and_1_is_refused_naming_it(programs, verification):
    message = (
        r"^et_copy.runtime.load: verification must be Verification.Minimal \(0\) or "
        rf"Verification.InternalConsistency \(1\), got {verification}$"
    )
    with pytest.raises(et_copy.EtCopyError, match=message) as info:
        _C.load_program((programs / "affine.pte").read_bytes(), verification)
    assert info.value.error == "InvalidArgument"


def test_a_program_file_that_cannot_be_mapped_is_named(programs, tmp_path):
    missing = tmp_path / "missing.pte"
    with pytest.raises(et_copy.EtCopyError, match=rf"^et_copy.runtime.load: cannot map {missing} \(missing, "):
        _C.load_program_file(str(missing))
    empty = tmp_path / "empty.pte"  # mapped, then refused by the loader, still named
    empty.write_bytes(b"")
    with pytest.raises(et_copy.EtCopyError, match=f"^et_copy.runtime.load: loading the program failed(.|\n)*{empty}"):
        _C.load_program_file(str(empty))
    program = _C.load_program_file(str(programs / "affine.pte"))
    assert program.method_names == ["forward"]


def test_a_data_file_that_cannot_be_mapped_is_named(programs, tmp_path):
    path = tmp_path / "missing.ptd"
    with pytest.raises(et_copy.EtCopyError, match=f"^et_copy.runtime.load: data_path: cannot map {path} "):
        _C.load_program((programs / "affine.pte").read_bytes(), 1, str(path))


def test_every_method_name_is_listed_and_an_unknown_one_is_refused_naming_them(programs):
    program = _C.load_program((programs / "constant.pte").read_bytes())
    assert sorted(program.method_names) == ["forward", "rows"]
    assert program.method_meta("rows")["name"] == "rows"
    assert program.method_meta("forward")["name"] == "forward"
    names = str(program.method_names).replace("[", r"\[").replace("]", r"\]")
    unknown = rf"^et_copy.runtime: the program has no method 'row' \(it has: {names}\)$"
    with pytest.raises(et_copy.EtCopyError, match=unknown):
        program.method_meta("row")
    with pytest.raises(
        et_copy.EtCopyError,
        match=rf"^et_copy.runtime: loading method 'row': the program has no method of that name \(it has: {names}\)$",
    ):
        program.new_session().load_method("row")


@pytest.mark.parametrize("debug_buffer_size", [0, 1 << 20])
def test_the_debug_buffer_is_written_only_when_the_program_has_one(programs, data, tmp_path, debug_buffer_size):
    program = _C.load_program((programs / "affine.pte").read_bytes(), 1, None, True, debug_buffer_size)
    affine_out(program, data)
    etdump, debug = tmp_path / "run.etdp", tmp_path / "run.bin"
    program.write_etdump(str(etdump), str(debug))
    assert etdump.stat().st_size > 0
    if debug_buffer_size == 0:
        assert not debug.exists()
    else:
        assert debug.stat().st_size == debug_buffer_size


def test_write_etdump_refuses_an_unwritable_path_and_a_program_without_a_profiler(programs, data, tmp_path):
    program = _C.load_program((programs / "affine.pte").read_bytes(), 1, None, True, 0)
    affine_out(program, data)
    with pytest.raises(et_copy.EtCopyError, match=f"write_etdump_result_to_file: cannot write {tmp_path}$") as info:
        program.write_etdump(str(tmp_path))  # a directory
    assert info.value.error == "AccessFailed"
    plain = _C.load_program((programs / "affine.pte").read_bytes())
    with pytest.raises(et_copy.EtCopyError, match="loaded without enable_etdump=True") as info:
        plain.write_etdump(str(tmp_path / "x.etdp"))
    assert info.value.error == "InvalidState"


@pytest.mark.parametrize("load", ["bytes", "file"])
def test_by_default_a_profiled_program_has_no_debug_buffer(programs, data, tmp_path, load):
    path = programs / "affine.pte"
    program = (
        _C.load_program(path.read_bytes(), 1, None, True)
        if load == "bytes"
        else _C.load_program_file(str(path), 1, None, True)
    )
    affine_out(program, data)
    program.write_etdump(str(tmp_path / "run.etdp"), str(tmp_path / "run.bin"))
    assert (tmp_path / "run.etdp").stat().st_size > 0
    assert not (tmp_path / "run.bin").exists()


def test_planned_buffers_are_read_first_to_last_as_the_program_plans_them():
    # A copy program: its host buffer (ExecuTorch's buffer 1, after the reserved 0), then its device one.
    et_copy.use_simulated_device()
    path = Path(__file__).parents[1] / "cpp/programs/roundtrip.pte"
    sizes = deserialize_pte_binary(path.read_bytes()).program.execution_plan[0].non_const_buffer_sizes[1:]
    program = runtime.load(path)
    for meta in (program.metadata("forward"), program.load_method("forward").metadata):
        buffers = [
            (meta.memory_planned_buffer_size(i), meta.memory_planned_buffer_device(i))
            for i in range(meta.num_memory_planned_buffers())
        ]
        assert buffers == list(zip(sizes, ["cpu", "cuda:0"], strict=True))
