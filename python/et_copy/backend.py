"""Deprecated, removed in et-copy 0.2.0: the simulated device's backend moved
to :mod:`et_copy.backends.simulated`, and what every backend shares to
:mod:`et_copy.backends` (docs/export.md, "Deprecated module names"). The
names this module had still resolve here, to the same objects, each with a
DeprecationWarning naming its new home."""

from __future__ import annotations

import warnings
from typing import Any

from .backends import partitioner, preprocess, record, simulated, state

#: The release that removes this module (tests/python/test_backends_table.py holds the package to it).
REMOVED_IN = "0.2.0"

_HOMES = (simulated, partitioner, record, state, preprocess)


def __getattr__(name: str) -> Any:
    homes = [home for home in _HOMES if hasattr(home, name)]
    if not homes:
        raise AttributeError(f"module 'et_copy.backend' has no attribute {name!r} (see et_copy.backends)")
    value = getattr(homes[0], name)
    # The module that defines it (a class's or a function's), else the first that holds it (a constant).
    home = next((h for h in homes if getattr(value, "__module__", None) == h.__name__), homes[0])
    warnings.warn(
        f"et_copy.backend is deprecated and is removed in et-copy {REMOVED_IN}: use {home.__name__}.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
