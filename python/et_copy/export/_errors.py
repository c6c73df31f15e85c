"""How an export fails: :class:`ExportError` for every failure, named, and
its :class:`ExportArgumentError` for bad input that et-copy's own checks find."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")


class ExportError(RuntimeError):
    """A failure of torch or executorch while exporting, named: ``op`` (the
    et_copy function), ``method`` (None when the stage covers every method),
    ``stage`` ("export", "to_edge", "lowering" or "to_executorch") and
    ``hint`` (the way out, when one is known). The original exception is the
    ``__cause__``."""

    def __init__(self, op: str, method: str | None, stage: str, cause: BaseException, hint: str = "") -> None:
        where = f"method '{method}': " if method is not None else ""
        text = f"{op}: {where}{stage} failed: {type(cause).__name__}: {cause}"
        super().__init__(text + (f"; {hint}" if hint else ""))
        self.op, self.method, self.stage, self.hint = op, method, stage, hint


class ExportArgumentError(ExportError, ValueError):
    """Bad input to an export function, found by et-copy's own checks:
    ``op`` (the function), ``argument`` (the parameter at fault, or the
    module for a graph it cannot export that way) and the problem, in the
    message; ``method`` when one method is at fault. ``stage`` is "arguments" for what is checked before exporting,
    else the stage whose result showed it. A ValueError too, as these
    failures always were."""

    def __init__(
        self, op: str, argument: str, problem: str, *, method: str | None = None, stage: str = "arguments"
    ) -> None:
        ValueError.__init__(self, f"{op}: {problem}")
        self.op, self.method, self.stage, self.hint = op, method, stage, ""
        self.argument = argument


def check_argument(op: str, argument: str, check: Callable[[], T]) -> T:
    """Runs one of et-copy's shared checks (a device, a backend word), which
    raise ValueError naming ``op``; that comes out as an ExportArgumentError."""
    try:
        return check()
    except ExportError:
        raise
    except ValueError as e:
        text = str(e)
        problem = text[len(op) + 2 :] if text.startswith(f"{op}: ") else text
        raise ExportArgumentError(op, argument, problem) from e


def run_stage(op: str, method: str | None, stage: str, strict: bool, run: Callable[[], Any]) -> Any:
    """Runs one stage of an export; what torch or executorch raises comes out as an ExportError."""
    try:
        return run()
    except ExportError:
        raise
    except Exception as e:
        hint = ""
        if not strict and "compiled_fn" in str(e):
            # torch 2.13's non-strict export fails this way on transformers' static caches,
            # in torch.export or later in to_edge's decompositions; strict export traces them.
            hint = "torch cannot export this module non-strict; pass strict=True"
        raise ExportError(op, method, stage, e, hint) from e
