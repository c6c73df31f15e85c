"""The compiled partition reads each constant in place (issue 44).

The edge dialect spells every view as a copy (``permute_copy``,
``select_copy``, ...). Handed to AOTInductor as it is, a Linear's
``permute_copy`` of its weight compiles to a kernel that writes the whole
transposed weight into a fresh buffer on every call, before the matmul
reads it: three passes over the weights per step where one is needed.
:func:`copies_as_views` turns a weight's copies back into views before
compiling;
:func:`weight_copies` (on the graph, for any target) and
:func:`weight_copies_in_code` (on the generated CPU wrapper) find what is
left.
"""

from __future__ import annotations

import math
import re
from typing import Any, Collection

import torch


def view_of_copy(target: Any) -> Any:
    """The view op whose copy ``target`` is (permute_copy -> permute, ...), or None.
    ``view_copy`` becomes ``reshape``: its input may now be a non-contiguous view."""
    from executorch.exir.dialects.edge._ops import EdgeOpOverload

    op = target._op if isinstance(target, EdgeOpOverload) else target  # an edge op wraps its ATen op
    if not isinstance(op, torch._ops.OpOverload) or torch.Tag.view_copy not in op.tags:
        return None
    if op is torch.ops.aten.view_copy.default:
        return torch.ops.aten.reshape.default
    # torch generates each view_copy op from its view, with the same overloads (native_functions.yaml).
    packet = getattr(torch.ops.aten, op._schema.name.split("::")[-1].removesuffix("_copy"))
    return getattr(packet, op._overloadname)


def view_root(node: torch.fx.Node) -> torch.fx.Node:
    """What a chain of views starts from: the value whose memory they read."""
    while node.op == "call_function" and getattr(node.target, "is_view", False):
        node = node.args[0]  # type: ignore[assignment]  # a view's first argument is its base tensor
    return node


def _no_lowering() -> set[Any]:
    """The view copies Inductor has no lowering and no C shim for: left as they
    are, it would call them through the proxy executor, which the runtime
    lacks."""
    aten = torch.ops.aten
    return {aten.select.int, aten.slice.Tensor, aten.split.Tensor}


def copies_as_views(module: torch.fx.GraphModule, mutated: set[str]) -> None:
    """Rewrites each view copy of a weight (``permute_copy``, ``t_copy``,
    ``select_copy``, ...: a chain of them from a constant of ``module`` not
    in ``mutated``, the mutable buffers' FQNs) as its view, so the compiled
    code reads the weight where it is bound. A weight's view that the graph
    returns is cloned: an output must not alias a constant.

    Other view copies (of activations, inputs and state) keep their copy,
    which Inductor fuses into the kernels around it, except those with no
    lowering (:func:`_no_lowering`), which become their view and a clone:
    the copy's own meaning, a fresh tensor."""
    graph = module.graph
    no_lowering = _no_lowering()
    for node in list(graph.nodes):
        view = view_of_copy(node.target) if node.op == "call_function" else None
        if view is None:
            continue
        root = view_root(node.args[0])  # earlier copies of the chain are views already
        of_weight = root.op == "get_attr" and root.target not in mutated
        if not of_weight and view not in no_lowering:
            continue
        node.target = view
        # split and unbind return a list: each element read (a getitem) is a result; the others: the node.
        returns_list = str(view._schema.returns[0].type).startswith("List")
        for result in list(node.users) if returns_list else [node]:
            if not of_weight or any(user.op == "output" for user in result.users):
                with graph.inserting_after(result):
                    clone = graph.call_function(torch.ops.aten.clone.default, (result,))
                result.replace_all_uses_with(clone, delete_user_cb=lambda user, c=clone: user is not c)
    graph.lint()
    module.recompile()


def weight_copies(module: torch.fx.GraphModule, mutated: Collection[str] = ()) -> list[str]:
    """The nodes of ``module`` that copy a weight (a constant not in
    ``mutated``, through any views) into a fresh tensor: a view's copy or a
    clone, work repeated on every call. Empty for a graph whose weights
    AOTInductor reads in place."""
    copying = {torch.ops.aten.clone.default, torch.ops.aten.contiguous.default}
    found = []
    for node in module.graph.nodes:
        if node.op == "call_function" and (node.target in copying or view_of_copy(node.target) is not None):
            root = view_root(node.args[0])  # what the copy reads
            if root.op == "get_attr" and root.target not in mutated:
                found.append(f"{node.name} ({node.target}) of {root.target}")
    return found


def _ints(text: str) -> list[int] | None:
    """``{3072L, 768L}``'s numbers; None where a size is symbolic (a dynamic dim)."""
    values = [v.strip().rstrip("L") for v in text.split(",") if v.strip()]
    return [int(v) for v in values] if all(v.lstrip("-").isdigit() for v in values) else None


def weight_copies_in_code(source: str, state: Collection[str] = ()) -> list[str]:
    """The kernel calls of an AOTInductor CPU wrapper (``source``, its
    ``.cpp``) that read a weight (a constant of 2 or more dims whose FQN is
    not in ``state``, the mutable buffers) and write a buffer with at least as
    many elements: a copy of the weight (transposed, converted) made on every
    call. A matmul or a convolution reads its weight through an ATen call
    (``aoti_torch_cpu_mm_out``), not a kernel; an embedding or a norm writes
    less than it reads. State is left out: a step reads it to write its next
    value (a KV cache read with the new token's row is larger than the cache)."""
    names = dict(re.findall(r'constants_info_\[(\d+)\]\.name = "(\w+)";', source))
    shapes = dict(re.findall(r"constants_info_\[(\d+)\]\.shape = \{([^}]*)\};", source))
    fqns = dict(re.findall(r'constants_info_\[(\d+)\]\.original_fqn = "([^"]*)";', source))
    weights = {}
    for index, name in names.items():
        shape = _ints(shapes.get(index, ""))
        if shape is not None and len(shape) >= 2 and fqns.get(index) not in state:
            weights[name] = math.prod(shape)
    arrays = {name: _ints(values) for name, values in re.findall(r"int64_t (int_array_\d+)\[\] = \{([^}]*)\};", source)}
    buffers: dict[str, int | None] = {}
    for sizes, buf in re.findall(r"aoti_torch_empty_strided\(\d+, (int_array_\d+), .*?&(\w+)_handle\)", source):
        shape = arrays.get(sizes)
        buffers[buf] = math.prod(shape) if shape is not None else None
    for new, old in re.findall(r"auto (\w+) = std::move\((\w+)\);", source):
        buffers[new] = buffers.get(old)
    found = []
    for kernel, args in re.findall(r"^\s*(cpp_fused_\w+)\((.*)\);$", source, re.M):
        reads = [w for w in weights if re.search(rf"\(const [\w:]+\*\)\({w}\.data_ptr\(\)\)", args)]
        writes = re.findall(r"\((?!const )[\w:]+\*\)\((\w+)\.data_ptr\(\)\)", args)
        for weight in reads:
            for buf in writes:
                elements = buffers.get(buf)
                if elements is not None and elements >= weights[weight]:
                    found.append(f"{kernel} writes {buf} ({elements} elements) from {weight} ({weights[weight]})")
    return found
