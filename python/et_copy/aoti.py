"""Deprecated, removed in et-copy 0.2.0: the compiled device backend moved to
:mod:`et_copy.backends.aoti` (docs/export.md, "Deprecated module names").
Its names still resolve here, to the same objects, each with a
DeprecationWarning naming its new home."""

from __future__ import annotations

import warnings
from typing import Any

from .backends import aoti as _aoti

#: The release that removes this module (tests/python/test_backends_table.py holds the package to it).
REMOVED_IN = "0.2.0"


def __getattr__(name: str) -> Any:
    value = getattr(_aoti, name)
    warnings.warn(
        f"et_copy.aoti is deprecated and is removed in et-copy {REMOVED_IN}: use et_copy.backends.aoti.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
