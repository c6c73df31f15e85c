"""The exception every et_copy failure raises."""

from __future__ import annotations


class EtCopyError(RuntimeError):
    """An et_copy operation was rejected or failed.

    ``error`` is the ExecuTorch ``Error`` name (``"InvalidArgument"``,
    ``"NotFound"``, ...); the message names the op, the argument and the
    problem.
    """

    def __init__(self, message: str, *, error: str = "Internal") -> None:
        super().__init__(message)
        self.error = error

    def __reduce__(self):  # keep .error across pickling (multiprocessing)
        return (_rebuild, (str(self), self.error))


def _rebuild(message: str, error: str) -> EtCopyError:
    return EtCopyError(message, error=error)
