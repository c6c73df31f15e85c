"""The compiled backend's baseline: a method's AOTInductor .so taken out of
the program's bytes and run directly by torch's own AOTI runner
(``torch._C._aoti.AOTIModelContainerRunnerCpu``) on host tensors, its
constants bound user-managed as AotiDeviceBackend binds them: every weight
over the named data's bytes, every state tensor over one arena laid out as
the delegate record says (zeros, then the initial values). What remains
between this and ``Method.execute`` on et_copy.runtime is our path around
the compiled code."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field

import torch

from ..._dtypes import SCALAR_TYPE_CODES

_DTYPES = {code: dtype for dtype, code in SCALAR_TYPE_CODES.items()}


@dataclass
class DelegateRecord:
    """A delegate record of the version this runtime reads: its header lines,
    split at tabs, by kind."""

    lines: dict[str, list[list[str]]] = field(default_factory=dict)
    payload_kind: str = ""
    payload: bytes = b""


def parse_record(blob: bytes) -> DelegateRecord:
    from ..._C import DELEGATE_RECORD_MAGIC, DELEGATE_RECORD_VERSION

    head = f"{DELEGATE_RECORD_MAGIC} {DELEGATE_RECORD_VERSION}\n".encode()
    if not blob.startswith(head):
        raise ValueError(f"not a version-{DELEGATE_RECORD_VERSION} delegate record (it starts {blob[: len(head)]!r})")
    record, at = DelegateRecord(), len(head)
    while True:
        end = blob.index(b"\n", at)
        line = blob[at:end].decode().split("\t")
        at = end + 1
        if line[0] == "payload":
            record.payload_kind, record.payload = line[1], blob[at : at + int(line[2])]
            return record
        record.lines.setdefault(line[0], []).append(line)


@dataclass
class MethodDelegate:
    """A method's one delegate: its record, the program's named data (key ->
    bytes), and which method input feeds each of the delegate's inputs (the
    partition orders its inputs its own way)."""

    record: DelegateRecord
    named: dict[str, bytes]
    input_order: list[int]


def method_delegate(pte: bytes, method: str) -> MethodDelegate:
    """``method``'s one delegate, read back from the serialized program."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import DelegateCall

    pte_file = deserialize_pte_binary(pte)
    program = pte_file.program
    (plan,) = [p for p in program.execution_plan if p.name == method]
    (delegate,) = plan.delegates
    record = parse_record(bytes(program.backend_delegate_data[delegate.processed.index].data))
    named = pte_file.named_data
    data = {key: bytes(named.buffers[entry.buffer_index]) for key, entry in named.pte_data.items()} if named else {}
    (call,) = [
        i.instr_args for chain in plan.chains for i in chain.instructions if isinstance(i.instr_args, DelegateCall)
    ]
    n_in = int(record.lines["io"][0][1])
    return MethodDelegate(record, data, [_method_input(plan, v) for v in call.args[:n_in]])


def _method_input(plan, value: int) -> int:
    """The method input that ``value`` is, or that the h2d copy writing it reads."""
    from executorch.exir.schema import KernelCall

    inputs = list(plan.inputs)
    if value in inputs:
        return inputs.index(value)
    for chain in plan.chains:
        for i in chain.instructions:
            args = i.instr_args
            if isinstance(args, KernelCall) and "h2d_copy" in plan.operators[args.op_index].name:
                if value in args.args[1:] and args.args[0] in inputs:
                    return inputs.index(args.args[0])
    raise ValueError(f"the delegate's input value {value} is neither a method input nor an h2d copy of one")


def _tensor(line: list[str], data: bytearray | memoryview) -> torch.Tensor:
    """A tensor over ``data`` as a record's ``tensor`` line lays it out."""
    dtype = _DTYPES[int(line[2])]
    sizes = [int(s) for s in line[3].split(",")] if line[3] else []
    strides = [int(s) for s in line[4].split(",")] if line[4] else []
    flat = torch.frombuffer(data, dtype=dtype) if len(data) else torch.empty(0, dtype=dtype)
    return flat.as_strided(sizes, strides)


class DirectRunner:
    """``record``'s .so in torch's AOTI runner with every constant bound
    user-managed over host memory this object owns. ``share_state_with``:
    another method's runner of the same program, whose state arena this one
    binds too (a prefill and its decode), as a session's methods share one."""

    arena: torch.Tensor

    def __init__(self, delegate: MethodDelegate, share_state_with: DirectRunner | None = None) -> None:
        record, named = delegate.record, delegate.named
        self.input_order = delegate.input_order
        if record.payload_kind != "aoti":
            raise ValueError(f"the record's payload is {record.payload_kind!r}, not an AOTInductor model")
        with tempfile.NamedTemporaryFile(suffix=".so") as f:  # a loaded library stays mapped
            f.write(record.payload)
            f.flush()
            self.runner = torch._C._aoti.AOTIModelContainerRunnerCpu(f.name, 1)
        (arena,) = record.lines.get("arena", [["arena", "-", "0"]])
        if share_state_with is not None and share_state_with.arena.numel() != int(arena[2]):
            raise ValueError(
                f"DirectRunner: share_state_with has a {share_state_with.arena.numel()}-byte arena, this record "
                f"lays out {arena[2]} bytes"
            )
        self.arena = (
            torch.zeros(int(arena[2]), dtype=torch.uint8) if share_state_with is None else share_state_with.arena
        )
        states = {s[1]: s for s in record.lines.get("state", [])}
        for _, _, offset, nbytes, initial in states.values():
            if initial != "-":
                start = int(offset)
                self.arena[start : start + int(nbytes)] = torch.frombuffer(bytearray(named[initial]), dtype=torch.uint8)
        weights = {w[1]: w[2] for w in record.lines.get("weight", [])}
        self.constants: dict[str, torch.Tensor] = {}
        for line in record.lines.get("tensor", []):
            fqn = line[1]
            if fqn in weights:
                self.constants[fqn] = _tensor(line, bytearray(named[weights[fqn]]))
            else:
                _, _, offset, nbytes, _ = states[fqn]
                view = self.arena[int(offset) : int(offset) + int(nbytes)]
                self.constants[fqn] = _tensor(line, view.numpy().data)
        # Bind what the model reads (it may read fewer than the record holds), by original FQN.
        by_name = {}
        for name, fqn in self.runner.get_constant_names_to_original_fqns().items():
            if fqn not in self.constants:
                raise ValueError(f"the model reads constant {fqn!r}, which the record lacks")
            by_name[name] = self.constants[fqn]
        self.runner.update_constant_buffer(by_name, False, True, True)

    def inputs_of(self, method_inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """The model's inputs, in its order, from the method's."""
        return [method_inputs[i] for i in self.input_order]

    def run(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """One run on inputs in the model's order (:meth:`inputs_of`)."""
        return self.runner.run(inputs)
