"""Writes the table of argument kinds the load check (argument_kinds.h) reads:
per operator that ExecuTorch's kernels implement, the EValue kinds each
kernel-call argument may hold, from the operator's schema in torch's registry.

    python gen_argument_kinds.py OUT.cpp

Run by CMake at build time (runtime/CMakeLists.txt) with the build's Python,
which has torch and executorch (both build requirements). The operators:
those ExecuTorch's kernel yaml files name (portable functions.yaml,
custom_ops.yaml, et_copy_ops.yaml, quantized.yaml), those the wheel's
runtime registers (portable_lib._get_operator_names, when it imports), and
every schema in the namespaces whose kernels our exports use (prim ops,
dim_order_ops, et_copy, llama, quantized_decomposed). An operator whose
schema is not found is left out (its calls load unchecked) and named on
stderr; tests/python/test_argument_kinds.py checks that every operator in our
real exports is in the table.

A kernel call's arguments, as ExecuTorch's emitter writes them (checked on
real programs): every schema argument in order, out arguments included, then
one slot for the result (a TensorList for several results). A schema with no
result (`-> ()`, e.g. split_with_sizes_copy.out) may have that slot or not.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

# Bits: 1 << the flatbuffer KernelTypes tag (executorch/schema/program.fbs).
NONE, INT, BOOL, DOUBLE, TENSOR, STRING, INT_LIST, DOUBLE_LIST, BOOL_LIST, TENSOR_LIST, OPT_TENSOR_LIST = (
    1 << t for t in range(1, 12)
)
ANY = 0xFFFF
SCALAR = INT | DOUBLE | BOOL  # EValue::toScalar takes these three

NAMESPACES = ("executorch_prim", "dim_order_ops", "et_copy", "llama", "quantized_decomposed")
# aten operators ExecuTorch implements as prim ops (no yaml entry).
PRIM_ATEN = ("aten::sym_size.int", "aten::sym_numel", "aten::sym_stride.int", "aten::sym_storage_offset")
# Calls the emitter writes itself (exir/emit/_emitter.py), with no schema in
# torch's registry: (name, [(argument, kinds)]) including the result slot.
EMITTER_ONLY = {
    "executorch_prim::et_view.default": [("self", TENSOR), ("size", INT_LIST), ("out", TENSOR)],
    "executorch_prim::et_copy_index.tensor": [("copy_to", TENSOR), ("copy_from", TENSOR), ("index", INT)],
}


def kinds(t) -> int:
    kind = t.kind()
    if kind == "OptionalType":
        inner = kinds(t.getElementType())
        return ANY if inner == ANY else inner | NONE
    if kind == "ListType":
        elem = t.getElementType()
        ek = elem.kind()
        if ek == "TensorType":
            return TENSOR_LIST
        if ek == "OptionalType" and elem.getElementType().kind() == "TensorType":
            return OPT_TENSOR_LIST
        return {"IntType": INT_LIST, "SymIntType": INT_LIST, "FloatType": DOUBLE_LIST, "BoolType": BOOL_LIST}.get(
            ek, ANY
        )
    return {
        "TensorType": TENSOR,
        "IntType": INT,  # also ScalarType, Layout, MemoryFormat
        "SymIntType": INT,
        "FloatType": DOUBLE,
        "BoolType": BOOL,
        "SymBoolType": BOOL,
        "NumberType": SCALAR,
        "StringType": STRING,
        "DeviceObjType": INT,  # EValue::toDevice reads an Int
        "NoneType": NONE,
    }.get(kind, ANY)


def result_kinds(returns) -> int:
    if len(returns) == 1:
        return kinds(returns[0].type)
    return TENSOR_LIST if all(r.type.kind() == "TensorType" for r in returns) else ANY


def yaml_names(site: Path) -> tuple[set[str], list[str]]:
    """Operator names from `op:` entries and schema strings from `func:` ones."""
    names, funcs = set(), []
    for rel in (
        "kernels/portable/functions.yaml",
        "kernels/portable/custom_ops.yaml",
        "kernels/portable/et_copy_ops.yaml",
        "kernels/quantized/quantized.yaml",
    ):
        path = site / rel
        if not path.is_file():
            print(f"gen_argument_kinds: no {path}", file=sys.stderr)
            continue
        for line in path.read_text().splitlines():
            if line.startswith("- op: "):
                name = line[len("- op: ") :].strip()
                names.add(name if "::" in name else "aten::" + name)
            elif line.startswith("- func: "):
                func = line[len("- func: ") :].strip()
                funcs.append(func if "::" in func.split("(")[0] else "aten::" + func)
    return names, funcs


def full_name(schema) -> str:
    return schema.name + ("." + schema.overload_name if schema.overload_name else "")


def main(out: str) -> int:
    import torch

    for module in (
        "executorch.exir",  # executorch_prim, dim_order_ops, et_copy
        "executorch.extension.llm.custom_ops.custom_ops",  # llama
        "executorch.kernels.quantized",  # quantized_decomposed
    ):
        try:
            importlib.import_module(module)
        except Exception as e:  # an op namespace we cannot see is reported below, not fatal
            print(f"gen_argument_kinds: cannot import {module}: {e}", file=sys.stderr)
    spec = importlib.util.find_spec("executorch")
    site = Path(list(spec.submodule_search_locations)[0]) if spec and spec.submodule_search_locations else Path()
    wanted, funcs = yaml_names(site)
    wanted.update(PRIM_ATEN)
    try:
        from executorch.extension.pybindings import portable_lib

        wanted.update(portable_lib._get_operator_names())
    except Exception as e:
        print(f"gen_argument_kinds: no runtime operator list: {e}", file=sys.stderr)

    schemas = {}
    for s in torch._C._jit_get_all_schemas():
        name = full_name(s)
        if name in wanted or s.name.split("::")[0] in NAMESPACES:
            schemas.setdefault(name, s)
    for func in funcs:
        s = torch._C.parse_schema(func)
        schemas.setdefault(full_name(s), s)

    table: dict[str, tuple[int, int, list[tuple[str, int]]]] = {}
    for name, s in schemas.items():
        args = [(a.name, kinds(a.type)) for a in s.arguments]
        # The result slot; with no result the emitter may still write one (the out argument again).
        args.append(("result", result_kinds(s.returns) if s.returns else ANY))
        table[name] = (len(s.arguments), len(s.returns), args)
    for name, args in EMITTER_ONLY.items():
        table[name] = (len(args) - 1, 1, args)
    missing = sorted(wanted - table.keys())
    if missing:
        print(f"gen_argument_kinds: no schema for {len(missing)} operators, left unchecked: {missing}", file=sys.stderr)

    lines = [
        "// Generated by tools/gen_argument_kinds.py from the schemas of",
        f"// torch {torch.__version__}; do not edit.",
        '#include "argument_kinds_table.h"',
        "",
        "namespace et_copy::internal {",
        "namespace {",
        "const ArgumentKinds kArguments[] = {",
    ]
    ops, first = [], 0
    for name in sorted(table):
        schema_args, returns, args = table[name]
        for arg, k in args:
            lines.append(f'    {{"{arg}", 0x{k:04x}}},')
        ops.append(f'    {{"{name}", {first}, {len(args)}, {schema_args}, {returns}}},')
        first += len(args)
    lines += ["};", "const OperatorKinds kOperators[] = {", *ops, "};", "} // namespace", ""]
    lines += [
        "executorch::runtime::Span<const OperatorKinds> operator_kinds_table() {",
        "  return {kOperators, sizeof(kOperators) / sizeof(kOperators[0])};",
        "}",
        "",
        "const ArgumentKinds* argument_kinds_of(const OperatorKinds& op) {",
        "  return kArguments + op.first_argument;",
        "}",
        "",
        "} // namespace et_copy::internal",
        "",
    ]
    text = "\n".join(lines)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:  # unchanged: no rebuild
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
