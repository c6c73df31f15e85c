"""The four implementations, run on guarded buffers, and the judgement of
what each did.

- ``aot``: ``torch.ops.et_copy._h2d_copy`` / ``_d2h_copy``, the functional
  op, on host stand-ins (at trace time every tensor is a host tensor). Its
  result is the reference for valid cases.
- ``aot_out``: the ``.out`` op on host stand-ins of the case's tensors.
- ``et_copy``: et-copy's kernel called directly, through
  ``et_copy.h2d_copy``/``d2h_copy`` with an explicit ``out``.
- ``registry``: whatever kernel ExecuTorch's registry resolves for the op
  name (``et_copy.run_registered``); with ``executorch.runtime`` imported,
  the executorch wheel's.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import traceback
import zlib
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..._errors import EtCopyError
from ..._ops import d2h_copy, h2d_copy, run_registered
from ..._tensors import DeviceTensor, contiguous_strides
from .cases import Case, dtype_name
from .guards import Guarded, GuardedDevice, GuardedHost, guard_size, pattern, raw_bytes

IMPLEMENTATIONS = ("aot", "aot_out", "et_copy", "registry")

#: Column titles.
LABELS = {"aot": "aot", "aot_out": "aot.out", "et_copy": "et_copy", "registry": "registry"}


@dataclass
class Finding:
    kind: str  # a stable identifier, e.g. "out_of_bounds_write"
    message: str

    def to_json(self) -> dict:
        return {"kind": self.kind, "message": self.message}


@dataclass
class Result:
    """What one implementation did with one case."""

    impl: str
    verdict: str = "ok"  # "ok", "finding" or "n/a"
    cell: str = "ok"  # short text for the table
    behaviour: str = ""  # a sentence
    findings: list[Finding] = field(default_factory=list)
    error: dict | None = None  # {"type", "error", "message"} when it raised
    log: str = ""  # what the call wrote to stderr (ExecuTorch's log)
    matches_aot: bool | None = None  # valid cases: same bytes, shape and layout as the aot result

    def add(self, kind: str, message: str) -> None:
        self.findings.append(Finding(kind, message))
        self.verdict = "finding"

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "cell": self.cell,
            "behaviour": self.behaviour,
            "findings": [f.to_json() for f in self.findings],
            "error": self.error,
            "log": self.log,
            "matches_aot": self.matches_aot,
        }


class CapturedStderr:
    """Redirects file descriptor 2 around a call: ExecuTorch's kernels and
    allocators log there from C++, which would tear the table apart."""

    def __init__(self) -> None:
        self.text = ""

    def __enter__(self) -> "CapturedStderr":
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        with self._file:
            self._file.seek(0)
            self.text = self._file.read().decode("utf-8", "replace").strip()


# --- inputs -----------------------------------------------------------------


def _strided(t: torch.Tensor) -> torch.Tensor:
    return t[..., ::2]


@functools.lru_cache(maxsize=4)
def self_fill(case: Case) -> torch.Tensor:
    """Bytes of self's dense buffer. Valid cases get random bytes (NaN
    payloads included: a byte copy must keep them); invalid cases get small
    counting values so a dtype conversion is exact and recognisable."""
    n_elems = int(torch.Size(case.self_base_shape()).numel())
    if case.valid:
        gen = torch.Generator().manual_seed(zlib.crc32(case.name.encode()))
        if case.dtype == torch.bool:
            return torch.randint(0, 2, (n_elems,), generator=gen, dtype=torch.uint8)
        return torch.randint(0, 256, (n_elems * case.dtype.itemsize,), generator=gen, dtype=torch.uint8)
    values = torch.arange(1, n_elems + 1, dtype=torch.int64)
    if case.dtype == torch.bool:
        values = values % 2
    return values.to(case.dtype).view(torch.uint8) if n_elems else torch.empty(0, dtype=torch.uint8)


def self_values(case: Case) -> torch.Tensor:
    """Self as a host tensor with the case's layout (what every
    implementation is given, wherever it lives)."""
    return GuardedHost(
        "self",
        case.dtype,
        case.self_base_shape(),
        0,
        self_fill(case),
        dim_order=case.dim_order,
        view=_strided if case.self_strided else None,
    ).tensor


class Inputs:
    """Guarded self and out for one call, placed as ``host_only`` says."""

    def __init__(self, case: Case, *, host_only: bool, out_shape: tuple[int, ...] | None = None) -> None:
        guard = guard_size(case.self_nbytes(), case.out_nbytes())
        self_on = "host" if host_only else case.self_on
        out_on = "host" if host_only else case.out_on
        fill = self_fill(case)
        if self_on == "host":
            self.self_buf: Guarded = GuardedHost(
                "self",
                case.dtype,
                case.self_base_shape(),
                guard,
                fill,
                dim_order=case.dim_order,
                view=_strided if case.self_strided else None,
            )
        else:
            self.self_buf = GuardedDevice(
                "self", case.dtype, case.shape, guard, fill, dim_order=case.dim_order, device_index=case.device_index
            )
        shape = out_shape or case.out_base_shape()
        assert case.out_dtype is not None  # Case.__post_init__ set it
        out_fill = pattern(int(torch.Size(shape).numel()) * case.out_dtype.itemsize, 3)
        if out_on == "host":
            self.out_buf: Guarded = GuardedHost(
                "out",
                case.out_dtype,
                shape,
                guard,
                out_fill,
                dim_order=case.out_dim_order,
                view=_strided if case.out_strided else None,
            )
        else:
            self.out_buf = GuardedDevice(
                "out",
                case.out_dtype,
                shape,
                guard,
                out_fill,
                dim_order=case.out_dim_order,
                dynamic=case.out_dynamic,
                device_index=case.device_index,
            )
        self.self = self.self_buf.tensor
        self.out = self.out_buf.tensor
        self.out_shape_before = tuple(self.out.shape)
        # A dynamic-bound torch out is a capacity the kernel may shrink.
        self.dynamic_torch_out = case.out_dynamic and out_on == "host"

    def free(self) -> None:
        self.self_buf.free()
        self.out_buf.free()


# --- calling ----------------------------------------------------------------


def _aot_op(case: Case, overload: str):
    return getattr(getattr(torch.ops.et_copy, f"_{case.direction}_copy"), overload)


def _error_dict(e: BaseException) -> dict:
    return {"type": type(e).__name__, "error": getattr(e, "error", None), "message": str(e)}


def _out_values(inputs: Inputs, case: Case) -> torch.Tensor:
    """out's current elements, as a host tensor."""
    out = inputs.out
    if isinstance(out, torch.Tensor):
        return out.clone()
    assert case.out_dtype is not None  # Case.__post_init__ set it
    body = inputs.out_buf.body()[: out.nbytes].view(case.out_dtype)
    return body.as_strided(tuple(out.shape), contiguous_strides(tuple(out.shape), out.dim_order))


def _layout_matches(t, shape: tuple[int, ...], dim_order: tuple[int, ...]) -> bool:
    if isinstance(t, DeviceTensor):
        return tuple(t.dim_order) == tuple(dim_order)
    if t.numel() == 0:
        return True
    expected = contiguous_strides(shape, dim_order)
    return all(size <= 1 or t.stride(d) == expected[d] for d, size in enumerate(shape))


def run_case(case: Case, capture: CapturedStderr, reference: dict | None = None) -> dict[str, Result]:
    """Runs ``case`` through every implementation; never raises."""
    results: dict[str, Result] = {}
    ref: dict = {}
    for impl in IMPLEMENTATIONS:
        try:
            results[impl] = _RUNNERS[impl](case, capture, ref)
        except Exception as e:  # a bug in the harness itself: report it, keep going
            r = Result(impl, cell="HARNESS ERROR")
            r.add("harness_error", f"the harness failed: {type(e).__name__}: {e}")
            r.log = traceback.format_exc()
            results[impl] = r
    return results


# torch clones and copies no tensor of a quantized dtype that lacks a
# quantizer (pytorch#74540: empty_strided refuses them), and the AOT ops are
# a clone and a copy_. For those dtypes the AOT reference runs on the same
# bytes under the integer dtype of the same width, viewed back after.
_QUANTIZED_AS = {torch.qint8: torch.int8, torch.quint8: torch.uint8, torch.qint32: torch.int32}


def _aot_view(t: torch.Tensor | DeviceTensor) -> torch.Tensor:
    assert isinstance(t, torch.Tensor)  # the AOT op gets host tensors only: Inputs(host_only=True)
    return t.view(_QUANTIZED_AS[t.dtype]) if t.dtype in _QUANTIZED_AS else t


def _run_aot(case: Case, capture: CapturedStderr, ref: dict) -> Result:
    r = Result("aot")
    if not case.valid:
        r.verdict, r.cell = "n/a", "n/a"
        r.behaviour = "takes no out and sees no devices: nothing in this case concerns it"
        return r
    inputs = Inputs(case, host_only=True)
    try:
        with capture:
            result = _aot_op(case, "default")(_aot_view(inputs.self))
            assert isinstance(inputs.self, torch.Tensor)
            if case.dtype in _QUANTIZED_AS:
                result = result.view(case.dtype)
        r.log = capture.text
    except Exception as e:
        r.log = capture.text
        r.error = _error_dict(e)
        r.cell = "REJECTS"
        r.add("rejects_valid", f"raised {type(e).__name__}: {e}")
        return r
    expected = inputs.self_buf.initial_body()
    for v in inputs.self_buf.check(body_must_not_change=True):
        r.add("modified_self" if v.where == "inside" else "out_of_bounds_write", v.describe())
    if result.untyped_storage().data_ptr() == inputs.self.untyped_storage().data_ptr():
        r.add("aliases_self", "returned a view of self, not a new tensor")
    if tuple(result.shape) != case.shape or result.dtype != case.dtype:
        r.add(
            "wrong_shape",
            f"returned {dtype_name(result.dtype)}{list(result.shape)}, expected "
            f"{dtype_name(case.dtype)}{list(case.shape)}",
        )
    elif case.dim_order is not None and not _layout_matches(result, case.shape, case.dim_order):
        r.add("wrong_layout", f"returned strides {list(result.stride())}, not dim order {list(case.dim_order)}")
    elif not torch.equal(raw_bytes(result), expected):
        r.add("wrong_bytes", "returned bytes that differ from self's")
    ref.update(bytes=raw_bytes(result).clone(), shape=tuple(result.shape), same_as_self=r.verdict == "ok")
    r.behaviour = (
        "returns a new tensor with self's bytes" if r.verdict == "ok" else "; ".join(f.message for f in r.findings)
    )
    r.cell = "ok" if r.verdict == "ok" else _cell(r)
    return r


def _run_aot_out(case: Case, capture: CapturedStderr, ref: dict) -> Result:
    # torch tensors carry no bound: at trace time a dynamic-bound out has
    # self's shape, so valid dynamic cases hand the op an out of that shape.
    shape = case.shape if case.valid and case.out_dynamic else None
    inputs = Inputs(case, host_only=True, out_shape=shape)
    op = _aot_op(case, "out")

    def call():
        returned = op(_aot_view(inputs.self), out=_aot_view(inputs.out))
        if returned is not inputs.out and returned.data_ptr() != inputs.out.data_ptr():
            raise _NotOut()

    return _judge(Result("aot_out"), case, inputs, capture, call, ref, kernel=False)


class _NotOut(Exception):
    pass


def _et_copy_kernel(case: Case, inputs: Inputs) -> None:
    # Invalid cases hand the copies what they must refuse (a device out for d2h, ...).
    copy: Callable[..., object] = h2d_copy if case.direction == "h2d" else d2h_copy
    copy(inputs.self, out=inputs.out, dynamic_out=inputs.dynamic_torch_out)


def _registry_kernel(case: Case, inputs: Inputs) -> None:
    run_registered(case.op, inputs.self, inputs.out, dynamic_out=inputs.dynamic_torch_out)


def _run_kernel(impl: str, call):
    def run(case: Case, capture: CapturedStderr, ref: dict) -> Result:
        inputs = Inputs(case, host_only=False)
        try:
            return _judge(Result(impl), case, inputs, capture, lambda: call(case, inputs), ref, kernel=True)
        finally:
            inputs.free()

    return run


def _judge(r: Result, case: Case, inputs: Inputs, capture: CapturedStderr, call, ref: dict, *, kernel: bool) -> Result:
    raised = None
    try:
        with capture:
            call()
    except _NotOut:
        r.add("returns_other", "did not return out")
    except Exception as e:
        raised = e
    r.log = capture.text
    if raised is not None:
        r.error = _error_dict(raised)

    out_violations = inputs.out_buf.check()
    self_violations = inputs.self_buf.check(body_must_not_change=True)
    for v in out_violations + self_violations:
        r.add("modified_self" if v.where == "inside" else "out_of_bounds_write", v.describe())
    body = inputs.out_buf.body()
    before = inputs.out_buf.initial_body()
    shape_after = tuple(inputs.out.shape)

    if case.valid:
        _judge_valid(r, case, inputs, raised, body, before, shape_after, ref)
    else:
        _judge_invalid(r, case, inputs, raised, body, before, shape_after, kernel)
    if r.verdict != "ok":
        r.cell = _cell(r)
    return r


def _judge_valid(r, case, inputs, raised, body, before, shape_after, ref) -> None:
    if raised is not None:
        r.add("rejects_valid", f"raised {type(raised).__name__}: {raised}")
        r.behaviour = "rejects a valid copy"
        return
    expected = inputs.self_buf.initial_body()
    n = expected.numel()
    if shape_after != case.shape:
        r.add("wrong_shape", f"left out with shape {list(shape_after)}, expected {list(case.shape)}")
    elif not _layout_matches(inputs.out, case.shape, case.dim_order):
        r.add("wrong_layout", f"left out in another layout than dim order {list(case.dim_order)}")
    bytes_ok = torch.equal(body[:n], expected)
    if not bytes_ok:
        changed = int((body[:n] != expected).sum())
        r.add("wrong_bytes", f"{changed} of out's {n} bytes differ from self's")
    if not torch.equal(body[n:], before[n:]):
        changed = int((body[n:] != before[n:]).sum())
        r.add("writes_beyond_shape", f"changed out's capacity beyond its new shape ({changed} bytes)")
    if ref:
        same_bytes = bytes_ok if ref["same_as_self"] else torch.equal(body[:n], ref["bytes"])
        r.matches_aot = bool(shape_after == ref["shape"] and same_bytes)
        if not r.matches_aot and r.verdict == "ok":
            r.add("differs_from_aot", "out differs from what the AOT functional op returns")
    r.behaviour = "copies self's bytes into out" if r.verdict == "ok" else "; ".join(f.message for f in r.findings)


def _judge_invalid(r, case, inputs, raised, body, before, shape_after, kernel) -> None:
    if raised is not None:
        untouched = torch.equal(body, before) and shape_after == inputs.out_shape_before
        if not untouched:
            r.add(
                "touched_out_on_reject",
                "raised, but changed out "
                + ("(its bytes)" if shape_after == inputs.out_shape_before else f"(its shape, to {list(shape_after)})"),
            )
        if kernel and not isinstance(raised, EtCopyError):
            r.add("unexpected_exception", f"raised {type(raised).__name__}, not et_copy.EtCopyError: {raised}")
        r.behaviour = f"rejects: {raised}"
        if r.verdict == "ok":
            r.cell = "rejects"
        return
    r.add("accepts_invalid", f"accepts it ({case.reason}): {_classify(case, inputs, body, shape_after, kernel)}")
    r.behaviour = "; ".join(f.message for f in r.findings)


def _classify(case: Case, inputs: Inputs, body: torch.Tensor, shape_after: tuple[int, ...], kernel: bool) -> str:
    """What an implementation that accepted an invalid case wrote."""
    assert case.out_dtype is not None and case.out_dim_order is not None  # Case.__post_init__ set them
    assert case.dim_order is not None
    parts = []
    if shape_after != inputs.out_shape_before:
        parts.append(f"resizes out to {list(shape_after)}")
    src = self_values(case)
    out_vals = _out_values(inputs, case)
    src_bytes = raw_bytes(src.contiguous() if case.self_strided else src)
    n = min(src_bytes.numel(), body.numel())
    raw_same = n > 0 and torch.equal(body[:n], src_bytes[:n])
    values_same = False
    try:
        converted = torch.broadcast_to(src, tuple(out_vals.shape)).to(out_vals.dtype)
        values_same = torch.equal(converted, out_vals)
    except RuntimeError:
        pass
    if raw_same and kernel:
        same = values_same and case.out_dtype != case.dtype
        parts.append(
            f"copies self's bytes unconverted ({n} bytes)" + (", which here equal the converted values" if same else "")
        )
    elif values_same:
        what = []
        if case.out_dtype != case.dtype:
            what.append(
                f"converts {dtype_name(case.dtype)} to {dtype_name(case.out_dtype)}"
                + (" (same bytes here)" if raw_same else "")
            )
        if tuple(out_vals.shape) != case.shape:
            what.append(f"broadcasts {list(case.shape)} to {list(out_vals.shape)}")
        if case.out_dim_order != case.dim_order and len(case.out_dim_order) == len(case.dim_order):
            what.append("rearranges the elements into out's dim order")
        parts += what or [
            "copies as if the case were valid"
            if kernel
            else "copies: it sees host tensors only, so where a tensor lives is not its to check"
        ]
    elif raw_same:
        parts.append(f"copies self's bytes unconverted ({n} bytes)")
    elif case.self_strided and torch.equal(body[:n], inputs.self_buf.initial_body()[:n]):
        parts.append(f"copies {n} bytes of memory from self's data pointer, ignoring its strides")
    elif case.out_strided and isinstance(inputs.out, torch.Tensor):
        parts.append("writes self's bytes without regard to out's strides")
    else:
        parts.append("writes bytes that are neither self's nor its converted values")
    return ", ".join(parts)


def _cell(r: Result) -> str:
    kinds = {f.kind for f in r.findings}
    if "out_of_bounds_write" in kinds:
        reach = 0
        for f in r.findings:
            if f.kind == "out_of_bounds_write":
                digits = [int(w) for w in f.message.split() if w.isdigit()]
                reach = max(reach, digits[0] if digits else 0)
        return f"OOB WRITE +{reach}B"
    if "accepts_invalid" in kinds:
        msg = next(f.message for f in r.findings if f.kind == "accepts_invalid")
        for word, label in (
            ("converts", "converts"),
            ("broadcasts", "broadcasts"),
            ("rearranges", "rearranges"),
            ("unconverted", "copies raw"),
            ("ignoring", "copies raw"),
            ("without regard", "copies raw"),
            ("as if", "accepts"),
            ("host tensors only", "copies"),
        ):
            if word in msg:
                return label
        return "accepts"
    for kind, label in (
        ("harness_error", "HARNESS ERROR"),
        ("rejects_valid", "REJECTS"),
        ("touched_out_on_reject", "TOUCHES OUT"),
        ("modified_self", "MODIFIES SELF"),
        ("wrong_bytes", "WRONG BYTES"),
        ("wrong_shape", "WRONG SHAPE"),
        ("wrong_layout", "WRONG LAYOUT"),
        ("writes_beyond_shape", "WRITES PAST SHAPE"),
        ("differs_from_aot", "DIFFERS"),
        ("aliases_self", "ALIASES"),
        ("unexpected_exception", "WRONG ERROR"),
        ("returns_other", "WRONG RETURN"),
    ):
        if kind in kinds:
            return label
    return "finding"


_RUNNERS = {
    "aot": _run_aot,
    "aot_out": _run_aot_out,
    "et_copy": _run_kernel("et_copy", _et_copy_kernel),
    "registry": _run_kernel("registry", _registry_kernel),
}
