"""What the exporter does with a program's named data besides the
backends' blobs: the program record (the exporter-runtime contract), and
where the device backends' weights go (the .pte, or a .ptd beside it)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .. import _C
from ..backends.record import WEIGHT_KEY
from ._errors import ExportArgumentError

# The data file's tag: ExecutorchProgramManager.write_tensor_data_to_file(dir) writes it as dir/weights.ptd.
WEIGHTS_FILE = "weights"


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


def move_weights_to_data_file(edge) -> None:
    """Moves every weight that et-copy's device backends stored (named data
    under ``et_copy.weight:``) out of the .pte into the data file
    :data:`WEIGHTS_FILE` (executorch's external named data, a .ptd). The
    program record and the state's initial values stay in the .pte: the
    runtime reads the record from the program itself. The bytes are not
    copied: the entries change maps, the buffers stay."""
    store = edge._named_data_store
    weights = {key: entry for key, entry in store.pte_data.items() if key.startswith(WEIGHT_KEY)}
    for key in weights:
        del store.pte_data[key]
    if weights:
        store.external_data.setdefault(WEIGHTS_FILE, {}).update(weights)


def save(program, path: str | os.PathLike) -> tuple[Path, Path | None]:
    """Writes ``program`` (an ExecutorchProgramManager) to ``path`` (a .pte)
    and, when it keeps its weights outside (``external_weights=True``), its
    data file beside it: ``path`` with the suffix ``.ptd``. Both are
    streamed from the program's buffers, never assembled in memory (as
    ``program.buffer`` would). Load them with ``et_copy.runtime.load(pte,
    data_path=ptd)``. Returns (the .pte's path, the .ptd's path or None).
    Raises :class:`ExportArgumentError` (a ValueError) for a path that does
    not end in .pte, and TypeError for what is not a program."""
    from executorch.exir import ExecutorchProgramManager

    op = "et_copy.export.save"
    if not isinstance(program, ExecutorchProgramManager):
        raise TypeError(f"{op}: program must be an ExecutorchProgramManager, got {type(program).__name__}")
    pte = Path(path)
    if pte.suffix != ".pte":
        raise ExportArgumentError(op, "path", f"path must end in .pte (the .ptd goes beside it), got {str(path)!r}")
    with open(pte, "wb") as f:
        program.write_to_file(f)
    # executorch names the data file after its tag: write it in a private folder, then move it beside the .pte.
    with tempfile.TemporaryDirectory(dir=pte.parent, prefix=".et_copy_") as folder:
        program.write_tensor_data_to_file(folder)
        written = sorted(os.listdir(folder))
        if len(written) > 1:
            raise ExportArgumentError(
                op,
                "program",
                f"the program has {len(written)} data files ({written}); write them with "
                "program.write_tensor_data_to_file(dir)",
            )
        if not written:
            return pte, None
        ptd = pte.with_suffix(".ptd")
        os.replace(os.path.join(folder, written[0]), ptd)
    return pte, ptd
