"""The installed extension: loadable anywhere, linked to nothing it must not be."""

from __future__ import annotations

import re
import shutil
import subprocess

import et_copy._C as ext
import pytest


def dynamic_section() -> str:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    return subprocess.run([readelf, "-d", ext.__file__], capture_output=True, text=True, check=True).stdout


def test_extension_runpath_is_relative_to_itself():
    runpaths = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", dynamic_section())
    entries = [p for line in runpaths for p in line.split(":")]
    # No folder of the build machine (a deleted build-isolation env) may be searched.
    if "/build/" in ext.__file__:
        pytest.skip("in-tree development build: RUNPATH points at the configured wheel on purpose")
    assert entries and all(p.startswith("$ORIGIN") for p in entries), entries


def test_extension_links_no_libtorch_python_or_shared_cudart():
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dynamic_section())
    assert "libexecutorch.so" in needed
    forbidden = [n for n in needed if n.startswith(("libtorch", "libc10", "libpython", "libcudart"))]
    assert forbidden == []
