"""The delegate record every et-copy device backend writes (docs/design.md,
"The delegate record"): the header lines all backends share (device,
weights, state, arena), then a payload line naming whose payload follows
(``payload\tprogram`` for the simulated backend, ``payload\taoti`` for the
compiled one). ``runtime/src/delegate_record.cpp`` reads it. The weights'
and state's bytes go to the outer program's named data under content keys,
so every method and backend stores, and uploads, a tensor once."""

from __future__ import annotations

import hashlib
from typing import Sequence

import torch
from executorch.exir._serialize._cord import FileBackedData
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.compile_spec_schema import CompileSpec

from .. import _C
from .._device import parse_device
from .state import StateSlot

TARGET_DEVICE_KEY = "target_device"  # executorch's PropagateDevicePass reads this CompileSpec key
# The record's magic and version: C++ owns them (delegate_record.h).
RECORD_MAGIC, RECORD_VERSION = _C.DELEGATE_RECORD_MAGIC, _C.DELEGATE_RECORD_VERSION
WEIGHT_KEY = "et_copy.weight:"  # + content hash: a weight's bytes in the outer program's named data
STATE_KEY = "et_copy.state:"  # + content hash: a state tensor's non-zero initial value


class TensorBytes(FileBackedData):
    """A tensor's bytes (contiguous, in memory order) as named data, read
    from the tensor's own memory: storing, hashing and writing the .pte or
    .ptd copy nothing, where ``bytes`` would copy every weight once per
    method (issue 44: a 322 MiB model's export grew by 6.4x its weights).
    executorch 1.5.1's NamedDataStore and Cord take a FileBackedData
    through ``len``, ``prefix``, ``sha256``, ``to_bytes`` and
    ``write_to_file``, which this answers from memory instead of a file.
    The tensor must not change while a program holds it: an exported
    program's weights are the module's parameters, read when the program is
    written (docs/export.md)."""

    def __init__(self, t: torch.Tensor) -> None:
        t = t.detach().contiguous()  # a copy only for a tensor that is not contiguous already
        self._tensor = t  # keeps the memory alive
        self._view = t.reshape(-1).view(torch.uint8).numpy().data if t.numel() else memoryview(b"")
        self._size = self._view.nbytes
        self._sha256 = hashlib.sha256(self._view).digest()
        self._path, self._finalizer = "", None  # FileBackedData's fields; no file to remove

    def prefix(self, size: int) -> bytes:
        return self._view[:size].tobytes()

    def sha256(self) -> bytes:
        return self._sha256

    def to_bytes(self) -> bytes:
        return self._view.tobytes()

    def __bytes__(self) -> bytes:  # bytes(entry), as for the bytes a store held before
        return self.to_bytes()

    def write_to_file(self, outfile) -> None:
        outfile.write(self._view)

    def is_zero(self) -> bool:
        """Every byte is zero."""
        return not bool(self._tensor.reshape(-1).view(torch.uint8).any()) if self._size else True


def device_of(compile_specs: Sequence[CompileSpec], backend_id: str) -> tuple[str, int]:
    """("cuda", index) from the target_device compile spec (the record names the type as text)."""
    for spec in compile_specs:
        if spec.key == TARGET_DEVICE_KEY:
            d = parse_device(bytes(spec.value).decode(), op=f"et_copy.{backend_id}")
            return str(d).split(":")[0], d.index
    raise ValueError(f"et_copy.{backend_id}: the partition has no '{TARGET_DEVICE_KEY}' compile spec")


def store_tensor(store: NamedDataStore, prefix: str, t: torch.Tensor | TensorBytes) -> tuple[str, int]:
    """Adds ``t``'s bytes (contiguous) to the outer program's named data under a
    content key (``prefix`` + sha256): identical tensors of several methods
    or backends are stored, and uploaded, once. The store reads them from
    ``t``'s memory (:class:`TensorBytes`), without a copy. Returns (key, nbytes)."""
    data = t if isinstance(t, TensorBytes) else TensorBytes(t)
    key = prefix + data.sha256().hex()[:32]
    store.add_named_data(key, data, alignment=_C.TENSOR_ALIGNMENT)
    return key, len(data)


def record_header(
    store: NamedDataStore,
    device: tuple[str, int],
    weights: dict[str, torch.Tensor],
    state: dict[str, torch.Tensor],
    layout: dict[str, StateSlot],
    arena: tuple[str, int] | None,
) -> list[str]:
    """The lines every delegate record starts with (docs/design.md, "The
    delegate record, version 2"): magic and version, the device, a ``weight``
    line per entry of ``weights`` (fqn -> value, in that order, the bytes
    stored in ``store``), a ``state`` line per mutable buffer (name order,
    its slot in ``layout``; a non-zero initial value stored too) and, with
    state, the ``arena`` line (nested buffer index or "-", nbytes)."""
    lines = [f"{RECORD_MAGIC} {RECORD_VERSION}", f"device\t{device[0]}\t{device[1]}"]
    for fqn, value in weights.items():
        key, nbytes = store_tensor(store, WEIGHT_KEY, value)
        lines.append(f"weight\t{fqn}\t{key}\t{nbytes}")
    for name in sorted(state):
        initial = "-"
        if not TensorBytes(state[name]).is_zero():  # all-zero state is not stored: the runtime zero-fills the arena
            # A copy (state is small): the module's buffer changes whenever the module runs.
            initial, _ = store_tensor(store, STATE_KEY, state[name].clone())
        lines.append(f"state\t{name}\t{layout[name].offset}\t{layout[name].nbytes}\t{initial}")
    if state and arena is not None:
        lines.append(f"arena\t{arena[0]}\t{arena[1]}")
    return lines


def delegate_record(header: Sequence[str], kind: str, payload: bytes) -> bytes:
    """The processed bytes: ``header`` lines, the payload line, then the payload."""
    return ("\n".join([*header, f"payload\t{kind}\t{len(payload)}"]) + "\n").encode() + payload
