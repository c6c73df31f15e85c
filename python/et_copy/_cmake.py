"""Where et_copy's CMake package lives (``python -m et_copy --cmake-dir``).

The wheel installs the C++ library, its headers and the package config under
``et_copy/`` in site-packages (``lib/``, ``include/``, ``lib/cmake/et_copy``),
so a consumer passes ``-Det_copy_DIR=$(python -m et_copy --cmake-dir)``, or
builds with scikit-build-core, whose ``cmake.root`` entry point adds the
package folder to ``CMAKE_PREFIX_PATH`` by itself.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["cmake_dir"]


def cmake_dir() -> str:
    """Returns the folder holding ``et_copyConfig.cmake``.

    Raises FileNotFoundError when this et_copy has no CMake package: a
    development tree run from source (``PYTHONPATH=build/<dir>/pkg``) rather
    than an installed wheel; ``cmake --install <build dir>`` makes one there.
    """
    here = Path(__file__).resolve().parent / "lib" / "cmake" / "et_copy"
    if (here / "et_copyConfig.cmake").is_file():
        return str(here)
    raise FileNotFoundError(
        f"et_copy: no CMake package at {here}: this et_copy was not installed as a wheel "
        "(pip install et-copy), or was built without its C++ library; for a source build, "
        "run `cmake --install <build dir> --prefix <prefix>` and use <prefix>/lib/cmake/et_copy"
    )
