"""et_copy.runtime as a drop-in for executorch.runtime: code written against
executorch.runtime's documented API, unchanged but for its import line,
runs with et-copy's kernels; loading mmaps files and takes a .ptd."""

from __future__ import annotations

import io

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


def test_loading_refuses_what_is_not_a_program_and_unsupported_options(pte, tmp_path):
    import et_copy.runtime
    from et_copy.runtime import Runtime

    with pytest.raises(FileNotFoundError, match="no program file"):
        Runtime.get().load_program(str(tmp_path / "missing.pte"))
    with pytest.raises(TypeError, match="got int"):
        Runtime.get().load_program(3)
    with pytest.raises(ValueError):
        Runtime.get().load_program(pte[1], verification=7)
    with pytest.raises(et_copy.EtCopyError, match="enable_etdump") as info:
        Runtime.get().load_program(pte[1], enable_etdump=True)
    assert info.value.error == "NotSupported"
    empty = tmp_path / "empty.pte"
    empty.write_bytes(b"")
    with pytest.raises(et_copy.EtCopyError):
        et_copy.runtime.load(str(empty))
    meta = Runtime.get().load_program(pte[1]).metadata("forward")
    with pytest.raises(IndexError):
        meta.input_tensor_meta(2)
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
    assert torch.allclose(program.load_method("forward").execute([x])[0], model(x))
    # Without its data file the method cannot load, and says why.
    with pytest.raises(et_copy.EtCopyError, match="external_data_map is null"):
        Runtime.get().load_program(tmp_path / "linear.pte").load_method("forward")
