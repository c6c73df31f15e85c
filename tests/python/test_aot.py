"""The et_copy torch.library namespace: one definition per process, exact
schemas, and trace-time behaviour in eager, fake, export and to_edge."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import et_copy
import et_copy.aot as aot
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

OPS = ["_h2d_copy", "_d2h_copy"]
EXPECTED = {
    "_h2d_copy": "et_copy::_h2d_copy(Tensor self) -> Tensor",
    "_h2d_copy.out": "et_copy::_h2d_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "_d2h_copy": "et_copy::_d2h_copy(Tensor self) -> Tensor",
    "_d2h_copy.out": "et_copy::_d2h_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
}


def run_fresh(code: str) -> dict:
    """Runs ``code`` in a new interpreter; returns the JSON its last line prints."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def op(name: str):
    return getattr(torch.ops.et_copy, name)


# --- this process: executorch is installed, so its definition is adopted ----------------


def test_ensure_registered_adopts_the_installed_executorch_definition_and_is_idempotent():
    first = et_copy.ensure_registered()
    assert first == aot.ADOPTED_EXECUTORCH
    assert aot.ensure_registered() == first


@pytest.mark.parametrize("qualified", sorted(EXPECTED))
def test_schema_is_exactly_et_copys(qualified):
    name, _, overload = qualified.partition(".")
    assert str(getattr(op(name), overload or "default")._schema) == EXPECTED[qualified]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool, torch.bfloat16, torch.complex64])
def test_functional_returns_a_new_tensor_equal_to_self(name, dtype):
    x = torch.arange(12).reshape(3, 4).to(dtype)
    y = op(name)(x)
    assert torch.equal(y, x) and y.dtype == dtype
    assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    y.zero_() if dtype != torch.bool else y.logical_not_()
    assert torch.equal(x, torch.arange(12).reshape(3, 4).to(dtype)), "writing the result changed self"


@pytest.mark.parametrize("name", OPS)
def test_out_variant_writes_out_and_returns_it(name):
    x = torch.randn(2, 5)
    out = torch.full((2, 5), float("nan"))
    returned = op(name).out(x, out=out)
    assert returned is out
    assert torch.equal(out, x)


@pytest.mark.parametrize("name", OPS)
def test_ops_propagate_shape_and_dtype_under_fake_tensor_mode(name):
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.empty(4, 7, dtype=torch.float16))
        y = op(name)(x)
        out = torch.empty(4, 7, dtype=torch.float16)
        returned = op(name).out(x, out=out)
    assert y.shape == (4, 7) and y.dtype == torch.float16
    assert returned is out


class _Boundary(torch.nn.Module):
    def forward(self, x):
        return torch.ops.et_copy._d2h_copy(torch.ops.et_copy._h2d_copy(x) * 3)


def _targets(graph) -> list:
    return [n.target for n in graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "non_strict"])
def test_torch_export_keeps_the_ops_in_the_graph(strict):
    x = torch.randn(3, 2)
    ep = torch.export.export(_Boundary(), (x,), strict=strict)
    targets = _targets(ep.graph)
    assert targets[0] == torch.ops.et_copy._h2d_copy.default
    assert targets[-1] == torch.ops.et_copy._d2h_copy.default
    assert torch.equal(ep.module()(x), x * 3)


def test_to_edge_keeps_the_ops_when_preserve_ops_names_them():
    from executorch.exir import EdgeCompileConfig, to_edge

    ep = torch.export.export(_Boundary(), (torch.randn(3, 2),), strict=False)
    edge = to_edge(ep, compile_config=EdgeCompileConfig(preserve_ops=aot.preserve_ops()))
    names = [str(t) for t in _targets(edge.exported_program().graph)]
    assert any("et_copy._h2d_copy" in n for n in names), names
    assert any("et_copy._d2h_copy" in n for n in names), names


def test_to_edge_without_preserve_ops_decomposes_the_ops():
    # docs/design.md, sharp edge 6: why export helpers must pass preserve_ops.
    from executorch.exir import to_edge

    ep = torch.export.export(_Boundary(), (torch.randn(3, 2),), strict=False)
    names = [str(t) for t in _targets(to_edge(ep).exported_program().graph)]
    assert not any("et_copy" in n for n in names), names


# --- fresh processes: import order and the paths where executorch is absent ------------

_SCHEMAS = """
import torch
def schemas():
    out = {}
    for name in ("_h2d_copy", "_d2h_copy"):
        packet = getattr(torch.ops.et_copy, name)
        out[name] = str(packet.default._schema)
        out[name + ".out"] = str(packet.out._schema)
    return out
"""


@pytest.fixture(scope="module")
def import_sequence() -> dict:
    """One fresh process: import et_copy, then et_copy.aot, then executorch.exir."""
    return run_fresh("""
        import json, sys, torch
        facts = {}
        import et_copy
        facts["after_import_et_copy"] = {"defined": hasattr(torch.ops.et_copy, "_h2d_copy"),
                                         "exir": "executorch.exir" in sys.modules}
        import et_copy.aot
        facts["after_import_aot"] = {"outcome": et_copy.aot._outcome,  # what the import itself did
                                     "exir": sorted(m for m in sys.modules if m.startswith("executorch.exir"))}
        adopted = et_copy.aot._adopted_module
        import executorch.exir
        import executorch.exir.passes._device_copy_ops_registry as registry
        from executorch.exir.passes.propagate_device_pass import PropagateDevicePass
        import executorch.exir.passes
        facts["after_import_exir"] = {
            "same": registry is adopted,
            "bound": executorch.exir.passes._device_copy_ops_registry is registry,
            "file": registry.__spec__.origin.endswith("_device_copy_ops_registry.py"),
            "outcome": et_copy.ensure_registered()}
        print(json.dumps(facts))
    """)


def test_import_et_copy_makes_the_ops_available_without_importing_executorch_exir(import_sequence):
    assert import_sequence["after_import_et_copy"] == {"defined": True, "exir": False}


def test_aot_module_registers_by_loading_only_executorchs_registry_file(import_sequence):
    assert import_sequence["after_import_aot"] == {"outcome": "adopted executorch", "exir": []}


def test_executorch_exir_imports_after_registration_and_gets_the_same_registry_module(import_sequence):
    assert import_sequence["after_import_exir"] == {
        "same": True,
        "bound": True,
        "file": True,
        "outcome": "adopted executorch",
    }


def test_ensure_registered_after_import_executorch_exir_adopts_it():
    result = run_fresh(
        _SCHEMAS
        + """
import json
import executorch.exir
import et_copy
print(json.dumps({"outcome": et_copy.ensure_registered(), "schemas": schemas()}))
"""
    )
    assert result["outcome"] == "adopted executorch"
    assert result["schemas"] == EXPECTED


_BLOCK_BY_NONE = "import sys; sys.modules['executorch.exir.passes._device_copy_ops_registry'] = None\n"
_BLOCK_BY_FINDER = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.endswith("_device_copy_ops_registry"):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Blocker())
"""


@pytest.mark.parametrize("blocker", [_BLOCK_BY_NONE, _BLOCK_BY_FINDER], ids=["sys_modules_none", "meta_path"])
def test_ensure_registered_defines_its_own_namespace_when_executorchs_cannot_be_imported(blocker):
    result = run_fresh(
        blocker
        + _SCHEMAS
        + """
import json, torch
import et_copy
outcome = et_copy.ensure_registered()
again = et_copy.ensure_registered()
x = torch.arange(6.0)
y = torch.ops.et_copy._h2d_copy(x)
out = torch.zeros(6)
ret = torch.ops.et_copy._d2h_copy.out(y, out=out)
class M(torch.nn.Module):
    def forward(self, x):
        return torch.ops.et_copy._d2h_copy(torch.ops.et_copy._h2d_copy(x) + 1)
graph_ops = [str(n.target) for n in torch.export.export(M(), (x,)).graph.nodes if n.op == "call_function"]
print(json.dumps({"outcome": outcome, "again": again, "schemas": schemas(),
                  "clone": torch.equal(y, x) and y.data_ptr() != x.data_ptr(),
                  "out": ret is out and torch.equal(out, x), "graph": graph_ops}))
"""
    )
    assert result["outcome"] == result["again"] == "defined by et_copy"
    assert result["schemas"] == EXPECTED
    assert result["clone"] and result["out"]
    assert result["graph"] == ["et_copy._h2d_copy.default", "aten.add.Tensor", "et_copy._d2h_copy.default"]


_FOREIGN_DEFINITION = """
import sys, types, torch
lib = torch.library.Library("et_copy", "DEF")
lib.define("_h2d_copy(Tensor self, int extra) -> Tensor")
lib.define("_h2d_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)")
lib.define("_d2h_copy(Tensor self) -> Tensor")
"""


def test_ensure_registered_names_each_schema_difference_in_executorchs_definition():
    # Stand in for an executorch whose registry defines different schemas.
    result = run_fresh(
        _FOREIGN_DEFINITION
        + """
import json
sys.modules["executorch.exir.passes._device_copy_ops_registry"] = types.ModuleType("registry")
import et_copy
try:
    et_copy.ensure_registered()
    print(json.dumps({"raised": False}))
except et_copy.EtCopyError as e:
    print(json.dumps({"raised": True, "message": str(e), "error": e.error}))
"""
    )
    assert result["raised"]
    message = result["message"]
    assert "executorch's registry" in message
    assert "et_copy::_h2d_copy(Tensor self, int extra) -> Tensor" in message
    assert EXPECTED["_h2d_copy"] in message
    assert "et_copy::_d2h_copy.out is missing" in message
    assert "_h2d_copy.out is" not in message, "a matching schema was reported as a difference"


def test_ensure_registered_rejects_a_mismatched_definition_from_another_library():
    result = run_fresh(
        _FOREIGN_DEFINITION
        + """
import json, et_copy
try:
    et_copy.ensure_registered()
    print(json.dumps({"raised": False}))
except et_copy.EtCopyError as e:
    print(json.dumps({"raised": True, "message": str(e)}))
"""
    )
    assert result["raised"]
    assert "the existing definition" in result["message"]
    assert "int extra" in result["message"]


def test_ensure_registered_adopts_a_matching_definition_from_another_library():
    result = run_fresh("""
import json, torch
lib = torch.library.Library("et_copy", "DEF")
for name in ("_h2d_copy", "_d2h_copy"):
    lib.define(name + "(Tensor self) -> Tensor")
    lib.define(name + ".out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)")
import et_copy
print(json.dumps({"outcome": et_copy.ensure_registered()}))
""")
    assert result["outcome"] == "adopted an existing definition"
