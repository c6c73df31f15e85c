"""et_copy.runtime as a drop-in for executorch.runtime: code written against
executorch.runtime's documented API, unchanged but for its import line,
runs with et-copy's kernels; loading mmaps files and takes a .ptd."""

from __future__ import annotations

import io
import re

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
from et_copy.export import export_device_program  # noqa: E402


class Affine(torch.nn.Module):
    def forward(self, x, y):
        return x * 2.0 + y


def executorch_runtime_user(runtime_module, pte_path: str, data: bytes, x, y):
    """What a user of executorch.runtime writes (its documented API)."""
    Runtime, Verification = runtime_module.Runtime, runtime_module.Verification
    runtime = Runtime.get()
    results = []
    for source in (pte_path, data, bytearray(data), io.BytesIO(data)):
        program = runtime.load_program(source, verification=Verification.Minimal)
        assert program.method_names == {"forward"}
        meta = program.metadata("forward")
        assert (meta.name(), meta.num_inputs(), meta.num_outputs()) == ("forward", 2, 1)
        assert meta.input_tensor_meta(0).sizes() == (3, 4)
        assert meta.output_tensor_meta(0).nbytes() == 48
        method = program.load_method("forward")
        assert method.metadata.num_inputs() == 2
        results.append(method.execute([x, y])[0])
    assert "et_copy::_h2d_copy.out" in runtime.operator_registry.operator_names
    assert isinstance(runtime.backend_registry.registered_backend_names, list)
    return results


@pytest.fixture(scope="module")
def pte(tmp_path_factory):
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    data = bytes(export_device_program(Affine(), (x, y)).buffer)
    path = tmp_path_factory.mktemp("api") / "affine.pte"
    path.write_bytes(data)
    return str(path), data, x, y


def test_code_written_for_executorch_runtime_runs_with_the_import_changed(pte):
    import et_copy.runtime

    et_copy.use_simulated_device()
    path, data, x, y = pte
    for out in executorch_runtime_user(et_copy.runtime, path, data, x, y):
        assert torch.equal(out, Affine()(x, y))


def test_the_same_code_on_executorch_runtime_agrees(pte):
    import executorch.runtime

    et_copy.use_simulated_device()
    path, data, x, y = pte
    for out in executorch_runtime_user(executorch.runtime, path, data, x, y):
        assert torch.equal(out, Affine()(x, y))


def executorch_runtime_profiler(runtime_module, data: bytes, x, y, out_dir) -> list:
    """What a user of executorch.runtime writes to profile a program (its
    documented ETDump example), read back with executorch's Inspector."""
    from executorch.devtools import Inspector

    program = runtime_module.Runtime.get().load_program(data, enable_etdump=True, debug_buffer_size=1 << 20)
    method = program.load_method("forward")
    for _ in range(3):
        method.execute([x, y])
    etdump, debug = out_dir / "profile.etdp", out_dir / "debug.bin"
    program.write_etdump_result_to_file(str(etdump), str(debug))
    assert etdump.stat().st_size > 0 and debug.stat().st_size == 1 << 20
    inspector = Inspector(etdump_path=str(etdump), debug_buffer_path=str(debug))
    (execute,) = [b for b in inspector.event_blocks if b.name == "Execute"]
    return [(event.name, len(event.perf_data.raw)) for event in execute.events if event.perf_data is not None]


# executorch's Inspector views the debug buffer's bytes with torch.frombuffer.
@pytest.mark.filterwarnings("ignore:The given buffer is not writable:UserWarning")
@pytest.mark.parametrize("runtime_name", ["executorch.runtime", "et_copy.runtime"])
def test_an_etdump_profile_names_each_operator_of_every_execution(pte, tmp_path, runtime_name):
    import importlib

    et_copy.use_simulated_device()
    events = executorch_runtime_profiler(importlib.import_module(runtime_name), pte[1], pte[2], pte[3], tmp_path)
    # Three executions, each timed: the compute is one call of the device backend's delegate.
    assert ("DELEGATE_CALL", 3) in events, events
    assert not [name for name, _ in events if name in ("native_call_mul.out", "native_call_add.out")], events
    if runtime_name == "et_copy.runtime":
        # et-copy's kernels name themselves as the wheel's do; one h2d per input, one d2h.
        assert events.count(("native_call__h2d_copy.out", 3)) == 2
        assert events.count(("native_call__d2h_copy.out", 3)) == 1


def test_a_profile_needs_enable_etdump_and_a_recorded_run(pte, tmp_path):
    from et_copy.runtime import Runtime

    et_copy.use_simulated_device()
    with pytest.raises(et_copy.EtCopyError, match="without enable_etdump=True") as info:
        Runtime.get().load_program(pte[1]).write_etdump_result_to_file(str(tmp_path / "a.etdp"))
    assert info.value.error == "InvalidState"
    program = Runtime.get().load_program(pte[1], enable_etdump=True)
    with pytest.raises(et_copy.EtCopyError, match="nothing was recorded") as info:
        program.write_etdump_result_to_file(str(tmp_path / "a.etdp"))
    assert info.value.error == "NotFound" and not (tmp_path / "a.etdp").exists()
    program.load_method("forward").execute([pte[2], pte[3]])
    program.write_etdump_result_to_file(tmp_path / "a.etdp")  # a Path works too
    assert (tmp_path / "a.etdp").stat().st_size > 0


def test_a_profile_that_cannot_be_written_raises_access_failed_naming_the_path(pte, tmp_path):
    from et_copy.runtime import Runtime

    et_copy.use_simulated_device()
    missing = tmp_path / "no_such_dir"
    for etdump, debug in ((missing / "a.etdp", None), (tmp_path / "a.etdp", missing / "debug.bin")):
        program = Runtime.get().load_program(pte[1], enable_etdump=True, debug_buffer_size=1 << 10)
        method = program.load_method("forward")
        method.execute([pte[2], pte[3]])
        with pytest.raises(et_copy.EtCopyError, match=f"cannot write {debug or etdump}") as info:
            program.write_etdump_result_to_file(etdump, debug)
        assert info.value.error == "AccessFailed"
        # The failed write took the profile: a second one has nothing, and the next execution records again.
        with pytest.raises(et_copy.EtCopyError, match="nothing was recorded") as info:
            program.write_etdump_result_to_file(tmp_path / "b.etdp", tmp_path / "b.bin")
        assert info.value.error == "NotFound"
        method.execute([pte[2], pte[3]])
        program.write_etdump_result_to_file(tmp_path / "c.etdp", tmp_path / "c.bin")
        assert (tmp_path / "c.etdp").stat().st_size > 0 and (tmp_path / "c.bin").stat().st_size == 1 << 10


def _debug_buffer_refusal(program, pte) -> tuple[int, int]:
    """Executes forward on a program whose debug buffer is too small: the
    EtCopyError's (bytes needed, bytes given), after checking what it says."""
    with pytest.raises(et_copy.EtCopyError, match="debug buffer of") as info:
        program.load_method("forward").execute([pte[2], pte[3]])
    message = str(info.value)
    assert info.value.error == "OutOfResources", message
    assert "load the program with enable_etdump=True and a larger debug_buffer_size" in message, message
    # Named: the instruction and its operator whose value did not fit, or the method's outputs.
    assert (info.value.operator is None) == (info.value.instruction is None), message
    assert (info.value.instruction is None) == ("logging the method's outputs" in message), message
    found = re.search(
        r"debug buffer of (\d+) bytes is full: logging this run's tensors would take (\d+) bytes", message
    )
    assert found, message
    size, needed = found.groups()
    return int(needed), int(size)


# executorch's Inspector views the debug buffer's bytes with torch.frombuffer.
@pytest.mark.filterwarnings("ignore:The given buffer is not writable:UserWarning")
def test_a_debug_buffer_too_small_for_an_execution_is_refused_not_an_abort(pte, tmp_path):
    import et_copy.runtime
    from executorch.devtools import Inspector

    et_copy.use_simulated_device()
    with pytest.raises(et_copy.EtCopyError, match="debug_buffer_size 9223372036854775808 is too large"):
        et_copy.runtime.load(pte[1], enable_etdump=True, debug_buffer_size=1 << 63)
    # 16 bytes: ETDumpGen alone aborts the process on the first tensor it logs.
    small = et_copy.runtime.load(pte[1], enable_etdump=True, debug_buffer_size=16)
    needed, size = _debug_buffer_refusal(small, pte)
    assert size == 16 and needed > 16
    # The program stays usable: its profile (the run's events, without the values) is written.
    small.write_etdump_result_to_file(tmp_path / "small.etdp", tmp_path / "small.bin")
    assert (tmp_path / "small.etdp").stat().st_size > 0 and (tmp_path / "small.bin").stat().st_size == 16
    # Exactly the bytes needed: the execution runs, its values are written.
    exact = et_copy.runtime.load(pte[1], enable_etdump=True, debug_buffer_size=needed)
    method = exact.load_method("forward")
    (out,) = method.execute([pte[2], pte[3]])
    assert torch.equal(out, Affine()(pte[2], pte[3]))
    exact.write_etdump_result_to_file(tmp_path / "exact.etdp", tmp_path / "exact.bin")
    assert (tmp_path / "exact.bin").stat().st_size == needed and any((tmp_path / "exact.bin").read_bytes())
    inspector = Inspector(etdump_path=str(tmp_path / "exact.etdp"), debug_buffer_path=str(tmp_path / "exact.bin"))
    (execute,) = [b for b in inspector.event_blocks if b.name == "Execute"]
    # The program output, read back from the debug buffer.
    assert [torch.equal(t, out) for t in execute.run_output or []] == [True], execute.run_output
    # Writing emptied it: the next execution runs; the one after finds it full...
    method.execute([pte[2], pte[3]])
    assert _debug_buffer_refusal(exact, pte)[0] > needed
    # ...and after writing, it runs again.
    exact.write_etdump_result_to_file(tmp_path / "full.etdp", tmp_path / "full.bin")
    method.execute([pte[2], pte[3]])
    # One byte fewer: refused, with the same bytes needed.
    one_short = et_copy.runtime.load(pte[1], enable_etdump=True, debug_buffer_size=needed - 1)
    assert _debug_buffer_refusal(one_short, pte) == (needed, needed - 1)


@pytest.mark.filterwarnings("ignore:The given buffer is not writable:UserWarning")
def test_a_profile_written_twice_without_an_execution_between_raises_not_found(pte, tmp_path):
    import et_copy.runtime
    from executorch.devtools import Inspector

    et_copy.use_simulated_device()
    program = et_copy.runtime.load(pte[1], enable_etdump=True, debug_buffer_size=1 << 12)
    method = program.load_method("forward")
    method.execute([pte[2], pte[3]])
    program.write_etdump_result_to_file(tmp_path / "1.etdp", tmp_path / "1.bin")
    with pytest.raises(et_copy.EtCopyError, match="nothing was recorded") as info:
        program.write_etdump_result_to_file(tmp_path / "2.etdp", tmp_path / "2.bin")
    assert info.value.error == "NotFound" and not (tmp_path / "2.etdp").exists()
    del method  # the program's method goes; the profile stays the program's
    program.load_method("forward").execute([pte[2], pte[3]])
    program.write_etdump_result_to_file(tmp_path / "3.etdp", tmp_path / "3.bin")
    # A profile after the first is whole: one execution, its intermediate outputs in the debug buffer again.
    inspector = Inspector(etdump_path=str(tmp_path / "3.etdp"), debug_buffer_path=str(tmp_path / "3.bin"))
    assert [b.name for b in inspector.event_blocks if b.name == "Execute"] == ["Execute"]


def test_loading_refuses_what_is_not_a_program_and_unsupported_options(pte, tmp_path):
    import et_copy.runtime
    from et_copy.runtime import Runtime

    et_copy.use_simulated_device()  # the metadata below needs the program loaded, so its device served
    with pytest.raises(FileNotFoundError, match="no program file"):
        Runtime.get().load_program(str(tmp_path / "missing.pte"))
    with pytest.raises(TypeError, match="got int"):
        Runtime.get().load_program(3)
    with pytest.raises(ValueError):
        Runtime.get().load_program(pte[1], verification=7)
    empty = tmp_path / "empty.pte"
    empty.write_bytes(b"")
    with pytest.raises(et_copy.EtCopyError):
        et_copy.runtime.load(str(empty))
    meta = Runtime.get().load_program(pte[1]).metadata("forward")
    with pytest.raises(IndexError, match=r"input 2 out of range \(it has 2\)"):
        meta.input_tensor_meta(2)
    for index in (-1, -3):  # no Python-style counting from the end: -1 is not the last input
        with pytest.raises(IndexError, match=f"input {index} out of range"):
            meta.input_tensor_meta(index)
    with pytest.raises(IndexError, match="output 1 out of range"):
        meta.output_tensor_meta(1)
    with pytest.raises(et_copy.EtCopyError, match="no method 'backward'"):
        Runtime.get().load_program(pte[1]).metadata("backward")


def test_a_missing_data_file_is_named(pte, tmp_path):
    from et_copy.runtime import Runtime

    with pytest.raises(et_copy.EtCopyError, match="data_path"):
        Runtime.get().load_program(pte[1], data_path=str(tmp_path / "weights.ptd"))


def test_weights_in_a_ptd_file_are_read_through_data_path(tmp_path):
    from et_copy.runtime import Runtime
    from executorch.exir import ExecutorchBackendConfig, to_edge

    model, x = torch.nn.Linear(4, 3), torch.randn(2, 4)
    manager = to_edge(torch.export.export(model, (x,))).to_executorch(ExecutorchBackendConfig(external_constants=True))
    (tmp_path / "linear.pte").write_bytes(manager.buffer)
    manager.write_tensor_data_to_file(str(tmp_path))
    (ptd,) = tmp_path.glob("*.ptd")
    program = Runtime.get().load_program(tmp_path / "linear.pte", data_path=ptd)
    unloaded = program.metadata("forward")
    method = program.load_method("forward")
    assert torch.allclose(method.execute([x])[0], model(x))
    # The weights are the method's attributes, named, whether the method is loaded or not.
    for meta in (unloaded, method.metadata):
        attributes = [meta.attribute_tensor_meta(i) for i in range(meta.num_attributes())]
        assert sorted((a.name(), a.sizes(), a.device()) for a in attributes) == [
            ("bias", (3,), "cpu"),
            ("weight", (3, 4), "cpu"),
        ]
    # Without its data file the method cannot load, and says why.
    with pytest.raises(et_copy.EtCopyError, match="external_data_map is null"):
        Runtime.get().load_program(tmp_path / "linear.pte").load_method("forward")


# executorch's own tests of executorch.runtime, shipped in the 1.5.1 wheel
# (executorch/runtime/test/, upstream runtime/test/), run with only their
# module's `Runtime` name bound to et_copy.runtime.Runtime: everything else,
# executorch's `Verification` included, stays theirs.
EXECUTORCH_RUNTIME_TESTS = (
    "executorch.runtime.test.test_runtime",
    "executorch.runtime.test.test_runtime_etdump_gen",
    "executorch.runtime.test.test_runtime_xnnpack",
)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")  # their exports, not ours
@pytest.mark.parametrize("module_name", EXECUTORCH_RUNTIME_TESTS)
def test_executorch_s_own_runtime_tests_pass_with_only_runtime_swapped(module_name, monkeypatch):
    import importlib
    import unittest

    import et_copy.runtime

    module = pytest.importorskip(module_name)
    monkeypatch.setattr(module, "Runtime", et_copy.runtime.Runtime)
    et_copy.use_simulated_device()
    suite = unittest.defaultTestLoader.loadTestsFromModule(importlib.import_module(module_name))
    result = unittest.TestResult()
    suite.run(result)
    failures = [f"{test.id()}:\n{trace}" for test, trace in result.failures + result.errors]
    assert not failures, "\n".join(failures)
    assert result.testsRun == suite.countTestCases() > 0 and not result.skipped


def test_verification_is_ours_executorch_s_or_an_int_of_the_same_meaning(pte):
    from et_copy.runtime import Runtime, Verification
    from executorch.runtime import Verification as TheirVerification

    path, data, x, y = pte
    et_copy.use_simulated_device()  # the program's cuda tensors (alone, no earlier test registered it)
    for level in (TheirVerification.Minimal, TheirVerification.InternalConsistency, Verification.Minimal, 0, 1):
        out = Runtime.get().load_program(data, verification=level).load_method("forward").execute([x, y])[0]
        assert torch.equal(out, Affine()(x, y)), level
    with pytest.raises(ValueError, match=r"none of \['Minimal \(0\)', 'InternalConsistency \(1\)'\]"):
        Runtime.get().load_program(data, verification=2)
    for wrong in (True, 1.0, "Minimal"):
        with pytest.raises(TypeError, match="must be a Verification or an int"):
            Runtime.get().load_program(data, verification=wrong)

    class Named:  # what executorch.runtime's pybind11 enum is: an int by __index__, with a name
        def __init__(self, name, value):
            self.name, self.value = name, value

        def __index__(self):
            return self.value

    with pytest.raises(ValueError, match="is named 'Minimal' but has the value of InternalConsistency"):
        Runtime.get().load_program(data, verification=Named("Minimal", 1))
    for agreeing in (Named("InternalConsistency", 1), Named(None, 1), Named(3, 0)):  # a name that is no str is not one
        assert Runtime.get().load_program(data, verification=agreeing).method_names == {"forward"}


def test_a_method_name_that_is_not_a_str_is_refused_naming_the_function(pte):
    from et_copy.runtime import Runtime

    et_copy.use_simulated_device()
    program = Runtime.get().load_program(pte[1])
    session = program.new_session()
    for name in (0, b"forward", None):
        kind = type(name).__name__
        with pytest.raises(TypeError, match=rf"^et_copy.runtime.Program.load_method: name must be a str, got {kind}$"):
            program.load_method(name)
        with pytest.raises(TypeError, match=rf"^et_copy.runtime.Session.load_method: name must be a str, got {kind}$"):
            session.load_method(name)
    assert program.load_method("forward") is program.load_method()
    assert session.load_method("forward") is not program.load_method("forward")  # its own state
