"""The build tools the C++-driving tests share: cmake >= 3.28 (executorch's
imported targets need it), ninja and ctest, from the PyPI packages in the
test extra, else from PATH."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


def _tool(module: str, attr: str, name: str) -> str:
    try:
        mod = __import__(module)
        return str(Path(getattr(mod, attr)) / name)
    except ImportError:
        found = shutil.which(name)
        if not found:
            pytest.fail(f"{name} is needed to build the C++ parts: pip install '.[test]'")
        return found


CMAKE = _tool("cmake", "CMAKE_BIN_DIR", "cmake")
NINJA = _tool("ninja", "BIN_DIR", "ninja")
CTEST = str(Path(CMAKE).with_name("ctest"))
