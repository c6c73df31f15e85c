"""A backend subpackage's ahead-of-time names, imported on first use: its
``__init__`` stays light (registering and running need no exporter), and
its partitioner and preprocess come from its ``_export`` module, which
imports executorch's exporter, when one of their names is first asked for."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_export(package: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name it lacks, from ``package._export``."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__") or name == "_export":  # (the import below asks for _export first)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        export = importlib.import_module("._export", package)
        try:
            return getattr(export, name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
