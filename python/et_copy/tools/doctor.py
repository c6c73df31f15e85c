"""``python -m et_copy doctor``: what this process can see.

Prints the executorch and torch versions, who provides the et_copy kernels
and the CUDA allocator in ExecuTorch's registries, and what the CUDA runtime
and driver report (or why there is no device). Registers nothing unless
``--register`` is given: the registries cannot undo a registration.

``python -m et_copy doctor PROGRAM.pte`` instead lists the compiled code the
program carries (docs/runtime.md, "Untrusted programs"): for each
AotiDeviceBackend delegate, its method, target, torch version, payload size
and SHA-256, whether the payload's bytes match that digest, and whether this
machine trusts it. It reads the program and runs none of it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from .. import _C
from .._errors import EtCopyError
from .._ops import D2H_COPY_OUT, H2D_COPY_OUT
from .._registration import allocator_info, kernel_owner, register_kernels
from ..cuda import cuda_status, use_cuda

_OWNERS = {
    "already et_copy": "et_copy",
    "already other": "another library (e.g. the executorch wheel's kernels)",
    "absent": "nobody",
}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cuda_version(v: int | None) -> str | None:
    return None if not v else f"{v // 1000}.{v % 1000 // 10}"


def _register() -> dict[str, str]:
    done = {}
    try:
        for op, outcome in register_kernels().items():
            done[op] = outcome
    except EtCopyError as e:
        done["kernels"] = f"failed: {e}"
    try:
        done["cuda allocator"] = use_cuda()
    except EtCopyError as e:
        done["cuda allocator"] = f"not registered ({e.error}): {e}"
    return done


def report(*, register: bool = False) -> dict[str, Any]:
    """The doctor's findings as a dict (what ``--json`` prints)."""
    out: dict[str, Any] = {
        "et_copy": {
            "version": _version("et-copy"),
            "extension": os.path.abspath(_C.__file__),
            "built_with_cuda": bool(getattr(_C, "WITH_CUDA", False)),
        },
        "executorch": _version("executorch"),
        "torch": {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(),
        },
    }
    if register:
        out["registered_now"] = _register()
    owners = {op: kernel_owner(op) for op in (H2D_COPY_OUT, D2H_COPY_OUT)}
    out["kernels"] = {op: _OWNERS.get(owner, owner) for op, owner in owners.items()}
    out["cuda_allocator"] = allocator_info("cuda")
    out["cuda"] = cuda_status()
    return out


class NotAProgram(ValueError):
    """The file is not an ExecuTorch program doctor can read."""


def _record_lines(record: bytes) -> tuple[dict[str, list[str]], int]:
    """A delegate record's text lines by kind (delegate_record.h), and where
    its payload starts. Reads only what doctor shows; the runtime's parser
    (et_copy/delegate_record.h) is the one that accepts or refuses a record."""
    magic = f"{_C.DELEGATE_RECORD_MAGIC} {_C.DELEGATE_RECORD_VERSION}\n".encode()
    if not record.startswith(magic):
        raise ValueError(f"the record does not start with {magic.decode().strip()!r}")
    lines: dict[str, list[str]] = {}
    at = len(magic)
    while True:
        end = record.find(b"\n", at)
        if end < 0:
            raise ValueError("the record has no payload line")
        fields = record[at:end].decode("utf-8", errors="replace").split("\t")
        lines.setdefault(fields[0], fields[1:])
        at = end + 1
        if fields[0] == "payload":
            return lines, at


def _code_entry(method: str, record: bytes) -> dict[str, Any]:
    from ..backends.aoti import _aoti

    try:
        lines, at = _record_lines(record)
    except ValueError as e:
        return {"method": method, "error": str(e)}
    payload = record[at:]
    target = lines.get("target", [])
    digest = lines.get("digest", [])
    sha256 = digest[1] if len(digest) == 2 and digest[0] == "sha256" else None
    found = hashlib.sha256(payload).hexdigest()
    return {
        "method": method,
        "target": target[0] if target else None,
        "torch": target[1] if len(target) > 1 else None,
        "payload_nbytes": len(payload),
        "sha256": sha256,
        "payload_sha256": found,
        "matches": sha256 == found,
        "trusted": _aoti.is_trusted_code(found) if sha256 == found else False,
    }


def compiled_code(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The compiled code the program at ``path`` carries (what ``doctor
    PROGRAM.pte --json`` prints): ``{"program": path, "compiled_code":
    [...]}``, one entry per AotiDeviceBackend delegate, in method order.
    An entry holds method, target, torch, payload_nbytes, sha256 (the
    record's digest line, None without one), payload_sha256 (of the bytes),
    matches and trusted (this machine trusts the digest; False when the
    bytes do not match it), or method and error for a record doctor cannot
    read. Raises OSError if the file cannot be read, NotAProgram if it is
    not an ExecuTorch program."""
    # executorch's own reader, which moves delegate segments back into the
    # program; imported here because it loads executorch.exir.
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import DataLocation

    from ..backends.aoti import BACKEND_ID

    data = Path(path).read_bytes()
    if data[4:6] != b"ET":
        raise NotAProgram(f"{path}: not an ExecuTorch program (no 'ET' file identifier at byte 4)")
    try:
        program = deserialize_pte_binary(data).program
    except Exception as e:  # any reader failure: the bytes are not a program it can read
        raise NotAProgram(f"{path}: not an ExecuTorch program executorch can read ({type(e).__name__}: {e})") from e
    code = []
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            if delegate.id != BACKEND_ID:
                continue
            where = delegate.processed
            if where.location != DataLocation.INLINE or where.index >= len(program.backend_delegate_data):
                code.append({"method": plan.name, "error": f"the delegate's data is not in the program ({where})"})
                continue
            code.append(_code_entry(plan.name, bytes(program.backend_delegate_data[where.index].data)))
    return {"program": str(path), "compiled_code": code}


def _render_code(r: dict[str, Any]) -> str:
    from ..backends.aoti import BACKEND_ID

    code = r["compiled_code"]
    if not code:
        return f"{r['program']}: no compiled code (no {BACKEND_ID} delegate); loading it runs no payload"
    lines = [f"{r['program']}: {len(code)} compiled payload(s); loading one runs its code"]
    for c in code:
        if "error" in c:
            lines.append(f"  method {c['method']}: unreadable record: {c['error']}")
            continue
        lines.append(f"  method {c['method']}: target {c['target']}, torch {c['torch']}, {c['payload_nbytes']} bytes")
        if c["sha256"] is None:
            lines.append(f"    SHA-256 {c['payload_sha256']} (the record has no digest line: the runtime refuses it)")
        elif c["matches"]:
            lines.append(f"    SHA-256 {c['sha256']} (the payload's bytes match it)")
        else:
            lines.append(f"    SHA-256 {c['sha256']} in the record, but the payload's bytes hash to")
            lines.append(f"            {c['payload_sha256']}: changed after export; the runtime refuses it")
        if c["matches"]:
            lines.append(
                "    trusted here (compiled on this machine, or trusted in this process)"
                if c["trusted"]
                else "    not trusted here: load(..., trust_code=True) or et_copy.backends.aoti.trust(digest) to run it"
            )
    return "\n".join(lines)


def _render(r: dict[str, Any]) -> str:
    lines = [
        f"et_copy      {r['et_copy']['version'] or '(not installed; running from a source tree)'}",
        f"  extension  {r['et_copy']['extension']}",
        "  CUDA       "
        + ("built in" if r["et_copy"]["built_with_cuda"] else "not built (no CUDA toolkit at build time)"),
        f"executorch   {r['executorch'] or 'not installed'}",
        f"torch        {r['torch']['version']} (CUDA build: {r['torch']['cuda'] or 'no'}; "
        f"CUDA available: {'yes' if r['torch']['cuda_available'] else 'no'})",
    ]
    if "registered_now" in r:
        lines.append("registered by --register:")
        lines += [f"  {k}: {v}" for k, v in r["registered_now"].items()]
    lines.append("kernels in ExecuTorch's registry:")
    lines += [f"  {op:<24} {who}" for op, who in r["kernels"].items()]
    alloc = r["cuda_allocator"]
    if alloc is None:
        lines.append(
            "CUDA allocator: none registered (et_copy.use_cuda() or et_copy.use_simulated_device() registers one)"
        )
    else:
        count = (
            alloc["device_count"] if alloc["device_count"] is not None else f"unknown ({alloc['device_count_error']})"
        )
        lines.append(f"CUDA allocator: {alloc['owner']}'s {alloc['name']} allocator, {count} device(s)")
    c = r["cuda"]
    if not c["built"]:
        lines.append(f"CUDA: {c['message']}")
    else:
        lines.append(
            f"CUDA runtime {_cuda_version(c['runtime_version'])} (linked statically), "
            f"driver {_cuda_version(c['driver_version']) or 'none'}"
        )
        if c["error"] is not None:
            lines.append(f"  no usable device: {c['message']}")
        for d in c["devices"]:
            cc = ".".join(str(x) for x in d["compute_capability"])
            lines.append(
                f"  cuda:{d['index']}  {d['name']}  sm_{cc.replace('.', '')}  "
                f"{d['total_memory'] / 2**30:.1f} GiB  {d['pci_bus_id']}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m et_copy doctor", description=__doc__.splitlines()[0])
    parser.add_argument(
        "program",
        nargs="?",
        help="a .pte file: list the compiled code it carries (method, target, torch, size, SHA-256, trust)",
    )
    parser.add_argument(
        "--register",
        action="store_true",
        help="first register et_copy's kernels (where absent) and its CUDA allocator (if a GPU is usable)",
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="show third-party warnings and log lines too")
    args = parser.parse_args(argv)
    if args.program is not None:
        if args.register:
            parser.error("--register does not go with a program")
        try:
            code = compiled_code(args.program)
        except (OSError, NotAProgram) as e:
            print(f"python -m et_copy doctor: {e}", file=sys.stderr)
            return 1
        print(json.dumps(code, indent=2) if args.json else _render_code(code))
        return 0
    r = report(register=args.register)
    print(json.dumps(r, indent=2) if args.json else _render(r))
    return 0
