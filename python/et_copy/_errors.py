"""The exception every et_copy failure raises."""

from __future__ import annotations


class EtCopyError(RuntimeError):
    """An et_copy operation was rejected or failed.

    ``error`` is the ExecuTorch ``Error`` name (``"InvalidArgument"``,
    ``"NotFound"``, ...); the message names the op, the argument and the
    problem. When a program failed in ``et_copy.runtime``, ``instruction``
    ("chain:instruction") and ``operator`` name where, when ExecuTorch said,
    and ``log`` holds the error lines it logged (the kernel's own diagnostic
    among them); otherwise they are None and empty.
    """

    def __init__(
        self,
        message: str,
        *,
        error: str = "Internal",
        instruction: str | None = None,
        operator: str | None = None,
        log: list[str] | tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.error = error
        self.instruction = instruction
        self.operator = operator
        self.log = tuple(log)

    def __reduce__(self):  # keep the fields across pickling (multiprocessing)
        return (_rebuild, (str(self), self.error, self.instruction, self.operator, self.log))


def _rebuild(
    message: str, error: str, instruction: str | None = None, operator: str | None = None, log: tuple[str, ...] = ()
) -> EtCopyError:
    return EtCopyError(message, error=error, instruction=instruction, operator=operator, log=log)
