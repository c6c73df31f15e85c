"""What the exporter stores in a program's named data besides the backends'
blobs: the program record (the exporter-runtime contract)."""

from __future__ import annotations

from .. import _C


def write_program_record(edge, *, state_in_delegates: bool) -> None:
    """The program's record (C++'s et_copy/program_record.h, which owns the
    format): what et_copy.runtime's sessions may rely on, written, not guessed.
    Every route writes one. ``state_in_delegates``: all of the program's
    mutable state is inside its device delegates, so every planned buffer of
    the program itself is scratch. Otherwise the program has no state (the
    copy-only route refuses state), or another partitioner left its state
    out of its delegates, unnamed where the planner put it: each session then
    owns every planned buffer."""
    lines = [f"{_C.PROGRAM_RECORD_KEY} {_C.PROGRAM_RECORD_VERSION}"]
    if state_in_delegates:
        lines.append("state\tdelegates")
    edge._named_data_store.add_named_data(_C.PROGRAM_RECORD_KEY, ("\n".join(lines) + "\n").encode())
