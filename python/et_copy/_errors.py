"""The exception every et_copy failure raises: ``EtCopyError``, defined by
the bindings (python/bindings/module.cpp), which raise it themselves.

``EtCopyError(message, *, error="Internal", instruction=None,
operator=None, log=())`` is a RuntimeError. ``error`` is the ExecuTorch
``Error`` name (``"InvalidArgument"``, ``"NotFound"``, ...); the message
names the op, the argument and the problem. When a program failed in
``et_copy.runtime``, ``instruction`` ("chain:instruction") and ``operator``
name where, when ExecuTorch said, and ``log`` holds the error lines it
logged (the kernel's own diagnostic among them); otherwise they are None and
empty. The fields survive pickling (multiprocessing).
"""

from __future__ import annotations

from ._C import EtCopyError

__all__ = ["EtCopyError"]
