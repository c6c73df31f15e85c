"""Deprecated: the compiled device backend moved to
:mod:`et_copy.backends.aoti` (docs/export.md, "Deprecated module names").
Its names still resolve here, to the same objects, for one release."""

from __future__ import annotations

from typing import Any

from .backends import aoti as _aoti


def __getattr__(name: str) -> Any:
    return getattr(_aoti, name)
