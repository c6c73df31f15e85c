"""The delegate routes' memory planning: :class:`BoundaryPlanningPass` tidies
the copies executorch's PropagateDevicePass put around the device backend's
delegates (merged, resident ones removed, the scalar-constant workaround),
then plans as MemoryPlanningPass does."""

from __future__ import annotations

from typing import Any, Sequence, cast

import torch
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.tensor import TensorSpec


class BoundaryPlanningPass(MemoryPlanningPass):
    """The MemoryPlanningPass of the delegate route (:func:`lower_to_device`).

    Before planning, on the graph executorch's PropagateDevicePass left:

    - **Copy dedupe.** PropagateDevicePass copies a tensor to the device once
      per partition that reads it. Copies of the same tensor to the same
      device (and back from it) are merged into one, so an execution makes
      one h2d per (tensor, device) and one d2h per device tensor.
      ``copies_merged`` counts what the last run merged. Round trips
      between partitions on one device (``_h2d_copy(_d2h_copy(x))``) are
      already gone: PropagateDevicePass elides them (docs/export.md).
    - **Scalar-constant workaround** (executorch 1.5.1). A partition that
      reads a lifted 0-d constant (an attention scale, ``x * 0.5``) gets an
      ``_h2d_copy`` whose output spec is copied from the constant's, still
      marked constant but with no storage, and the emitter then fails with
      ``'NoneType' object has no attribute 'nbytes'``. Such a spec is the
      copy's output, not a constant: it is unmarked so it gets planned.
      ``constants_unmarked`` counts them. (tests/python/test_export.py tells
      when upstream no longer needs this.)
    - **Resident inputs and outputs.** ``resident_inputs`` / ``resident_outputs``
      (user input and output indices) stay on the device: the copy
      PropagateDevicePass put between such an input and the delegate, or
      between the delegate and such an output, is removed, and the tensor
      keeps the delegate's device, unplanned (the caller owns it). Upstream's
      own skip flags cover all method inputs or outputs, or none.
    """

    def __init__(
        self, *, resident_inputs: Sequence[int] = (), resident_outputs: Sequence[int] = (), **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.resident_inputs, self.resident_outputs = tuple(resident_inputs), tuple(resident_outputs)
        self.copies_merged = 0
        self.constants_unmarked = 0

    def run(self, graph_module: torch.fx.GraphModule, graph_signature=None):
        self.constants_unmarked = _unmark_copied_constants(graph_module)
        self.copies_merged = _merge_duplicate_copies(graph_module)
        if self.resident_inputs or self.resident_outputs:
            _keep_resident(graph_module, graph_signature, self.resident_inputs, self.resident_outputs)
        return super().run(graph_module, graph_signature)


def _keep_resident(
    graph_module: torch.fx.GraphModule, signature, inputs: Sequence[int], outputs: Sequence[int]
) -> None:
    """Removes the copies of resident method inputs and outputs (see BoundaryPlanningPass)."""
    from torch.export.graph_signature import OutputKind

    op = "et_copy.export"
    h2d, d2h = torch.ops.et_copy._h2d_copy.out, torch.ops.et_copy._d2h_copy.out
    placeholders = {n.name: n for n in graph_module.graph.nodes if n.op == "placeholder"}
    for i in inputs:
        node = placeholders[signature.user_inputs[i]]
        copies = [u for u in node.users if u.op == "call_function" and u.target is h2d]
        if len(copies) != 1 or len(node.users) != 1:
            raise ValueError(
                f"{op}: resident input {i} must be read by the device backend alone (it is read by "
                f"{sorted(str(u.target) for u in node.users)})"
            )
        (copy,) = copies
        spec = copy.meta["spec"]
        node.meta["spec"].device, node.meta["spec"].device_index = spec.device, spec.device_index
        _drop_copy(graph_module, copy, node)
    out_node = graph_module.graph.output_node()
    results = list(cast(Sequence[torch.fx.Node], out_node.args[0]))  # the output node's one argument
    user = [k for k, s in enumerate(signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    for j in outputs:
        copy = results[user[j]]
        if not (isinstance(copy, torch.fx.Node) and copy.target is d2h):
            raise ValueError(
                f"{op}: resident output {j} is not a device backend's output, so it has no device to stay on"
            )
        source = copy.args[0]
        assert isinstance(source, torch.fx.Node)  # a d2h copy's self
        results[user[j]] = source
        out_node.args = (tuple(results),)
        if not copy.users:
            _drop_copy(graph_module, copy, source)
    # The planner reads the graph's outputs from this spec, which PropagateDevicePass leaves
    # naming the delegate's outputs: each is then skipped as a graph output under
    # alloc_graph_output=False, and a delegate output only a d2h copy reads goes unplanned.
    out_node.meta["spec"] = tuple(a.meta.get("spec") if isinstance(a, torch.fx.Node) else None for a in results)
    graph_module.recompile()


def _drop_copy(graph_module: torch.fx.GraphModule, copy: torch.fx.Node, source: torch.fx.Node) -> None:
    """Replaces a copy with its source and erases it and its out buffer."""
    out = copy.kwargs.get("out")
    copy.replace_all_uses_with(source)
    graph_module.graph.erase_node(copy)
    if isinstance(out, torch.fx.Node) and not out.users:
        graph_module.graph.erase_node(out)


def _copy_nodes(graph_module: torch.fx.GraphModule):
    copies = (torch.ops.et_copy._h2d_copy.out, torch.ops.et_copy._d2h_copy.out)
    return [n for n in graph_module.graph.nodes if n.op == "call_function" and n.target in copies]


def _unmark_copied_constants(graph_module: torch.fx.GraphModule) -> int:
    h2d = torch.ops.et_copy._h2d_copy.out
    count = 0
    for node in _copy_nodes(graph_module):
        spec = node.meta.get("spec")
        if node.target is h2d and isinstance(spec, TensorSpec) and spec.const and spec.storage is None:
            spec.const = False
            count += 1
    return count


def _merge_duplicate_copies(graph_module: torch.fx.GraphModule) -> int:
    """Merges copies with the same op, source and destination device into the
    first; its output (and its out buffer) then serves every reader."""
    first: dict[tuple, torch.fx.Node] = {}
    merged = 0
    for node in _copy_nodes(graph_module):
        spec = node.meta.get("spec")
        source = node.args[0] if node.args else None
        if not isinstance(spec, TensorSpec) or not isinstance(source, torch.fx.Node):
            continue
        key = (node.target, source, spec.device, spec.device_index)
        kept = first.setdefault(key, node)
        if kept is node:
            continue
        out, kept_out = node.kwargs.get("out"), kept.kwargs.get("out")
        node.replace_all_uses_with(kept)
        graph_module.graph.erase_node(node)
        if isinstance(out, torch.fx.Node) and isinstance(kept_out, torch.fx.Node):
            out.replace_all_uses_with(kept_out)
            if not out.users:
                graph_module.graph.erase_node(out)
        merged += 1
    if merged:
        graph_module.recompile()
    return merged
