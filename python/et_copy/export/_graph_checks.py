"""What the delegate routes check of a graph on its way down: things a
device program cannot do (a method input updated in place, a resident
output with no device), and whether a partitioner delegated anything."""

from __future__ import annotations

from typing import Sequence

import torch

from ._errors import ExportArgumentError


def refuse_input_mutation(exported: dict, op: str, stage: str) -> None:
    """A method input updated in place would need its new value copied back
    to the caller's host tensor after every call; ExecuTorch would instead
    return it as an extra output, and the caller's tensor would keep its old
    value. Refused: keep such state in a buffer, or return the new value.
    ``stage`` is the one whose result shows it."""
    from torch.export.graph_signature import OutputKind

    for name, ep in exported.items():
        mutated = [s.target for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_INPUT_MUTATION]
        if mutated:
            raise ExportArgumentError(
                op,
                "module",
                f"method '{name}' updates its input(s) {mutated} in place, which a device program cannot "
                "write back to the caller; register that state as a buffer (it then lives on the device) or "
                "return the new value",
                method=name,
                stage=stage,
            )


def refuse_own_copies(exported: dict, op: str) -> None:
    """A module that calls ``torch.ops.et_copy``'s copies itself, lowered to
    a backend that gets copies inserted at its boundary: its own copies would
    end up inside the delegate, where the h2d's output is no device tensor,
    and every execution would fail. Refused at export, pointing at
    ``insert_copies=False`` (the copies alone, as the module wrote them)."""
    own = {torch.ops.et_copy._h2d_copy.default, torch.ops.et_copy._d2h_copy.default}
    for name, ep in exported.items():
        calls = sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function" and n.target in own})
        if calls:
            raise ExportArgumentError(
                op,
                "module",
                f"method '{name}' calls {', '.join(calls)} itself, but a device backend gets its copies inserted "
                "at its boundary: leave the copies out of the module, or, for a module that only copies, "
                "export it with export_device_program(..., insert_copies=False)",
                method=name,
                stage="export",
            )


def check_resident_outputs(edge, outputs: Sequence[int], op: str) -> None:
    """Each resident output must be a delegate's result: nothing else has a device to stay on."""
    from executorch.exir.delegate import executorch_call_delegate
    from torch.export.graph_signature import OutputKind

    for name in edge.methods:
        ep = edge.exported_program(name)
        results = ep.graph_module.graph.output_node().args[0]
        user = [k for k, s in enumerate(ep.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
        for j in outputs:
            node = results[user[j]] if j < len(user) else None
            source = node.args[0] if isinstance(node, torch.fx.Node) and node.args else None
            if not (isinstance(source, torch.fx.Node) and source.target is executorch_call_delegate):
                raise ExportArgumentError(
                    op,
                    "resident_outputs",
                    f"method '{name}': resident output {j} is not a device backend's output, "
                    "so it has no device to stay on",
                    method=name,
                    stage="lowering",
                )


def has_delegate(edge) -> bool:
    """Whether any method of ``edge`` calls a delegate."""
    from executorch.exir.delegate import executorch_call_delegate

    return any(
        n.op == "call_function" and n.target is executorch_call_delegate
        for method in edge.methods
        for n in edge.exported_program(method).graph.nodes
    )
