"""The program section: whole programs, exported with et_copy.export, run in
one process by eager PyTorch, by ``executorch.runtime`` (the wheel's kernels
serve the et_copy ops) and by ``et_copy.runtime`` (et-copy's kernels, scoped
to the method), on the simulated device; and the control, the same model
exported without device planning, on ``executorch.runtime``.

Valid programs (real architectures on both export routes) must give
eager's outputs on both runtimes, byte-identical to each other and to the
control (the same compute kernels run), with exactly the copies the
program's plan names, and must hold no device memory once dropped.
Tampered programs (parity/tamper.py) must be rejected cleanly by
et_copy.runtime; the wheel's column runs them in a child process, since
the wheel's kernels corrupt memory on some of them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import torch

from ..._counting import counting
from ..._quiet import wrap_log_hooks
from .architectures import MODELS, Model
from .runners import CapturedStderr, Finding

ROUTES = ("device",)  # export_device_program: the compute in the simulated device's backend
CONTROL = "control"  # the same model exported without device planning, on executorch.runtime
COLUMNS = (CONTROL, "executorch.runtime", "et_copy.runtime")
JUDGED_COLUMN = "et_copy.runtime"
COUNTERS = ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes")


@dataclass(frozen=True)
class Program:
    name: str
    description: str
    valid: bool = True  # False: tampered, to be rejected

    def describe(self) -> str:
        return self.description


def _programs() -> list[Program]:
    out = []
    for model in MODELS:
        out.append(Program(f"program/{model.name}/device", f"{model.description}; in the device backend"))
    from .tamper import TAMPERS  # noqa: PLC0415 (imports executorch.exir only when listed)

    for tamper in TAMPERS:
        doc = (tamper.__doc__ or tamper.__name__.replace("_", " ")).strip()
        out.append(Program(f"program/tampered/{tamper.__name__}", f"RoundTrip, tampered: {doc}", valid=False))
    return out


@dataclass
class Cell:
    text: str = ""
    ok: bool = True


@dataclass
class ProgramResult:
    program: Program
    cells: dict[str, Cell] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    log: str = ""

    @property
    def verdict(self) -> str:
        return "ok" if self.cells.get(JUDGED_COLUMN, Cell(ok=False)).ok else "finding"

    def add(self, column: str, kind: str, message: str) -> None:
        self.findings.append(Finding(kind, f"{column}: {message}"))

    def to_json(self) -> dict:
        return {
            "name": self.program.name,
            "description": self.program.description,
            "valid": self.program.valid,
            "verdict": self.verdict,
            "cells": {k: {"text": c.text, "ok": c.ok} for k, c in self.cells.items()},
            "findings": [f.to_json() for f in self.findings],
            "details": self.details,
            "log": self.log,
        }


# ---- exporting --------------------------------------------------------------


def _export(model: Model, route: str):
    from ...export import export_device_program

    module, example, inputs, dynamic_shapes = model.build()
    manager = export_device_program(module, example, dynamic_shapes=dynamic_shapes)
    return module, inputs, manager


def _export_control(model: Model, route: str) -> bytes:
    """The model exported the plain way: no device, no delegate."""
    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir.passes import MemoryPlanningPass

    module, example, _, dynamic_shapes = model.build()
    exported = torch.export.export(module, example, dynamic_shapes=dynamic_shapes, strict=False)
    edge = to_edge(exported)
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False))
    return bytes(edge.to_executorch(config).buffer)


def _nbytes(t) -> int:
    """Bytes of a plan's tensor value at its planned sizes."""
    from ..._dtypes import SCALAR_TYPE_CODES

    dtype = {code: d for d, code in SCALAR_TYPE_CODES.items()}[int(t.scalar_type)]
    return math.prod(t.sizes) * dtype.itemsize


def expected_copies(manager, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> dict[str, int]:
    """The copies one execution makes, read off the program's plan: one per
    et_copy instruction, of its tensor's bytes (a method input or output
    counts at the size it runs with, for dynamic shapes)."""
    from executorch.exir.schema import KernelCall

    plan = manager.executorch_program.execution_plan[0]
    actual = {v: t.nbytes for v, t in zip(plan.inputs, inputs)} | {v: t.nbytes for v, t in zip(plan.outputs, outputs)}
    counts = dict.fromkeys(COUNTERS, 0)
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            if not isinstance(call, KernelCall):
                continue
            op = plan.operators[call.op_index]
            direction = {"et_copy::_h2d_copy": "h2d", "et_copy::_d2h_copy": "d2h"}.get(op.name)
            if direction is None:
                continue
            host_value = call.args[0] if direction == "h2d" else call.args[1]
            counts[f"{direction}_copies"] += 1
            counts[f"{direction}_bytes"] += actual.get(host_value, _nbytes(plan.values[host_value].val))
    return counts


# ---- comparing --------------------------------------------------------------


def _flat(outputs) -> list:
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    return [x for o in outputs for x in _flat(o)] if isinstance(outputs, (tuple, list)) else [outputs]


def _bytes(t: torch.Tensor) -> bytes:
    return bytes(t.contiguous().reshape(-1).view(torch.uint8).numpy()) if t.numel() else b""


def _compare(got: list, want: list) -> str | None:
    """None when ``got`` equals eager's ``want`` (close, for floating point
    computed by other kernels), else what differs."""
    if len(got) != len(want):
        return f"{len(got)} outputs, eager has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(g, torch.Tensor) or g.dtype != w.dtype or tuple(g.shape) != tuple(w.shape):
            what = f"{g.dtype}{list(g.shape)}" if isinstance(g, torch.Tensor) else type(g).__name__
            return f"output {i} is {what}, eager's is {w.dtype}{list(w.shape)}"
        try:
            torch.testing.assert_close(g, w.detach(), rtol=1e-4, atol=1e-5, equal_nan=True)
        except AssertionError as e:
            return f"output {i} differs from eager: {str(e).splitlines()[-1].strip() or 'values'}"
    return None


def _run_column(column: str, pte: bytes, inputs: list) -> tuple[list, dict, int]:
    """(outputs, counter deltas of the execution, device bytes still held
    once the method is dropped) on one runtime."""
    with counting() as held:
        if column in ("executorch.runtime", CONTROL):
            from executorch.runtime import Runtime

            wrap_log_hooks()  # its pybindings, first loaded here, hook the log too

            method = Runtime.get().load_program(pte).load_method("forward")
            with counting() as moved:
                outputs = [torch.clone(o) for o in method.execute(list(inputs))]
        else:
            from ... import runtime

            method = runtime.load(pte).load_method("forward")
            with counting() as moved:
                values = method.execute(list(inputs))
            outputs = [o for o in values if isinstance(o, torch.Tensor)]
            if len(outputs) != len(values):
                raise TypeError(f"et_copy parity: a program returned a value that is not a host tensor: {values}")
        del method
    copies = moved.as_dict()
    return outputs, {k: copies[k] for k in COUNTERS}, held.bytes_outstanding


def _run_valid(program: Program, result: ProgramResult) -> None:
    _, model_name, route = program.name.split("/")
    model = next(m for m in MODELS if m.name == model_name)
    module, inputs, manager = _export(model, route)
    with torch.no_grad():
        eager = [t.detach() for t in _flat(module(*inputs))]
    pte = bytes(manager.buffer)
    want_copies = expected_copies(manager, list(inputs), eager)
    result.details = {"pte_bytes": len(pte), "expected_copies": want_copies}
    programs = {CONTROL: _export_control(model, route)} if model.control else {}
    got = {}
    for column in COLUMNS:
        if column == CONTROL and not model.control:
            result.cells[column] = Cell("n/a (no compute)")
            continue
        cell = result.cells[column] = Cell()
        try:
            outputs, copies, held = _run_column(column, programs.get(column, pte), inputs)
        except Exception as e:  # noqa: BLE001 (a column's failure is a finding, not a crash)
            cell.text, cell.ok = f"error: {type(e).__name__}: {str(e).splitlines()[0][:90]}", False
            result.add(column, "program_failed", f"{type(e).__name__}: {e}")
            continue
        got[column] = outputs
        result.details[column] = {"copies": copies}
        problems = []
        differs = _compare(outputs, eager)
        if differs:
            problems.append(differs)
            result.add(column, "wrong_outputs", differs)
        want = dict.fromkeys(COUNTERS, 0) if column == CONTROL else want_copies
        if copies != want:
            problems.append(f"copies {copies} != plan's {want}")
            result.add(column, "wrong_copies", f"made {copies}, the plan names {want}")
        if held:
            problems.append(f"{held} device bytes held after the method was dropped")
            result.add(
                column, "device_memory_held", f"{held} device bytes still allocated after the method was dropped"
            )
        cell.ok = not problems
        cell.text = (
            ("= eager" if column == CONTROL else "= eager, copies exact") if cell.ok else "; ".join(problems)[:120]
        )
    # The same kernels compute on both runtimes and in the control: the bytes must agree exactly.
    for other in (CONTROL, "executorch.runtime"):
        if (
            other in got
            and JUDGED_COLUMN in got
            and ([_bytes(t) for t in got[other]] != [_bytes(t) for t in got[JUDGED_COLUMN]])
        ):
            result.cells[JUDGED_COLUMN].ok = False
            result.cells[JUDGED_COLUMN].text += f"; bytes differ from {other}'s"
            result.add(
                JUDGED_COLUMN, "differs_from_" + other.replace(".", "_"), f"outputs are not byte-identical to {other}'s"
            )


# ---- tampered programs ------------------------------------------------------

_X = "torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)"  # RoundTrip's input

_WHEEL_CHILD = f"""
import json, sys, torch, et_copy
et_copy.use_simulated_device()
from executorch.runtime import Runtime
x = {_X}
for path in sys.argv[1:]:
    try:
        out = Runtime.get().load_program(path).load_method("forward").execute([x])[0]
        said = {{"ran": True, "text": f"accepted: {{out.dtype}}{{list(out.shape)}} ({{out.nbytes}} bytes out)"}}
    except Exception as e:
        said = {{"ran": False, "text": "rejected: " + (str(e).splitlines() or [""])[0][:80]}}
    print(json.dumps({{"path": path, **said}}), flush=True)
"""


def _wheel_on_tampered(paths: list[str]) -> dict[str, dict]:
    """Each program on the wheel's runtime, in child processes: one runs them
    in turn; when one crashes it, the next child takes the rest."""
    said: dict[str, dict] = {}
    pending = list(paths)
    while pending:
        proc = subprocess.run(
            [sys.executable, "-c", _WHEEL_CHILD, *pending], capture_output=True, text=True, timeout=600
        )
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                entry = json.loads(line)
                said[entry["path"]] = entry
        pending = [p for p in pending if p not in said]
        if pending:  # the first unanswered one took the child down
            code = proc.returncode
            how = f"signal {-code}" if code < 0 else f"exit {code}"
            said[pending.pop(0)] = {"ran": None, "text": f"crashed the process ({how})"}
    return said


def _run_tampered(programs: list[Program], results: dict[str, ProgramResult]) -> None:
    from ... import runtime
    from ..._errors import EtCopyError
    from .tamper import original_program, tampered_programs

    data = tampered_programs(original_program())
    with tempfile.TemporaryDirectory(prefix="et_copy_parity_") as tmp:
        paths = {}
        for p in programs:
            name = p.name.rsplit("/", 1)[1]
            paths[p.name] = os.path.join(tmp, f"{name}.pte")
            with open(paths[p.name], "wb") as f:
                f.write(data[name])
        wheel = _wheel_on_tampered(list(paths.values()))
    for p in programs:
        result = results[p.name]
        w = wheel[paths[p.name]]
        result.cells["executorch.runtime"] = Cell(w["text"], ok=w["ran"] is False)
        if w["ran"] is not False:
            result.add("executorch.runtime", "accepted_tampered" if w["ran"] else "crashed", w["text"])
        cell = result.cells[JUDGED_COLUMN] = Cell()
        try:
            method = runtime.load(data[p.name.rsplit("/", 1)[1]]).load_method("forward")
            out = method.execute([torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)])[0]
            assert isinstance(out, torch.Tensor)  # the tampered program's one output is a host tensor
            cell.text, cell.ok = f"accepted: {out.dtype}{list(out.shape)}", False
            result.add(JUDGED_COLUMN, "accepted_tampered", cell.text)
        except EtCopyError as e:
            where = f" at {e.operator}" if e.operator else ""
            cell.text = f"rejected: {e.error}{where}"
            result.details[JUDGED_COLUMN] = {"error": e.error, "operator": e.operator, "message": str(e)}
        except Exception as e:  # noqa: BLE001
            cell.text, cell.ok = f"unclear error: {type(e).__name__}: {e}"[:120], False
            result.add(JUDGED_COLUMN, "unclear_error", f"{type(e).__name__}: {e}")


# ---- the section ------------------------------------------------------------


def run_programs(programs: list[Program], progress=None) -> list[ProgramResult]:
    """Runs the selected programs on the simulated device's default memory
    (et_copy's C++ ``kDefaultHostReadable``), whatever the case matrix ran
    on: until a device backend computes for them, their CPU kernels read
    device memory, which must then be host-readable. Never raises for a
    program's failure."""
    import et_copy
    from et_copy import _C

    et_copy.use_simulated_device(host_readable=_C.SIMULATED_DEVICE_DEFAULT_HOST_READABLE)
    results = {p.name: ProgramResult(p) for p in programs}
    capture = CapturedStderr()
    for i, p in enumerate(programs):
        if not p.valid:
            continue
        if progress is not None:
            progress(i, p.name)
        try:
            with capture:
                _run_valid(p, results[p.name])
        except Exception as e:  # noqa: BLE001 (export failed: every column fails)
            first = (str(e).strip().splitlines() or [""])[0][:300]  # exir appends the whole graph
            for column in COLUMNS:
                results[p.name].cells[column] = Cell(f"not exported: {type(e).__name__}", ok=False)
                results[p.name].add(column, "export_failed", f"{type(e).__name__}: {first}")
        results[p.name].log = capture.text
    tampered = [p for p in programs if not p.valid]
    if tampered:
        if progress is not None:
            progress(len(programs) - len(tampered), "tampered programs")
        with capture:
            _run_tampered(tampered, results)
    return [results[p.name] for p in programs]


PROGRAMS = _programs()
