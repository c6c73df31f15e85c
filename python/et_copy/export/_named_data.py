"""What the exporter stores in a program's named data besides the backends'
blobs: the program record (the exporter-runtime contract) and the copy-only
route's initial state."""

from __future__ import annotations

import torch

from .. import _C

INITIAL_STATE_KEY = "et_copy.initial_state:"  # + buffer name: a named blob holding a state buffer's start


def write_program_record(edge, *, state_in_delegates: bool) -> None:
    """The program's record (C++'s et_copy/program_record.h, which owns the
    format): what et_copy.runtime's sessions may rely on, written, not guessed.
    Every route writes one. ``state_in_delegates``: all of the program's
    mutable state is inside its device delegates, so every planned buffer of
    the program itself is scratch. Otherwise state outside the delegates is
    in the program's planned memory: named, in its last buffer (the copy-only
    route's arena, DevicePlanningPass), or unnamed where the planner put it
    (another partitioner that left the state out of its delegates)."""
    lines = [f"{_C.PROGRAM_RECORD_KEY} {_C.PROGRAM_RECORD_VERSION}"]
    if state_in_delegates:
        lines.append("state\tdelegates")
    edge._named_data_store.add_named_data(_C.PROGRAM_RECORD_KEY, ("\n".join(lines) + "\n").encode())


def keep_initial_state(edge) -> None:
    """Stores each state buffer's export-time value in the program, as named
    data, where it is not all zeros (the runtime zero-fills the others)."""
    seen: set[str] = set()
    for ep in (edge.exported_program(name) for name in edge.methods):
        values = {**ep.state_dict, **ep.constants}
        for fqn in set(ep.graph_signature.buffers_to_mutate.values()) - seen:
            seen.add(fqn)
            value = values.get(fqn)
            if isinstance(value, torch.Tensor) and bool(value.ne(0).any()):
                edge._named_data_store.add_named_data(
                    INITIAL_STATE_KEY + fqn, value.contiguous(), alignment=_C.TENSOR_ALIGNMENT
                )
