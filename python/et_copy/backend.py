"""Deprecated: the simulated device's backend moved to
:mod:`et_copy.backends.simulated`, and what every backend shares to
:mod:`et_copy.backends` (docs/export.md, "Deprecated module names"). The
names this module had still resolve here, to the same objects, for one
release."""

from __future__ import annotations

from typing import Any

from .backends import partitioner, preprocess, record, simulated, state

_HOMES = (simulated, partitioner, record, state, preprocess)


def __getattr__(name: str) -> Any:
    for home in _HOMES:
        if hasattr(home, name):
            return getattr(home, name)
    raise AttributeError(f"module 'et_copy.backend' has no attribute {name!r} (see et_copy.backends)")
