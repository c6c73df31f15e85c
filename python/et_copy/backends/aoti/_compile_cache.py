"""A content-addressed cache of compiled device code (AOTInductor .so files).

A CPU compile takes 14 to 50 s on a 2-core machine, and exporting the same
model twice (tests, prefill and decode re-exported) compiles the same graph
again. The cache file is named by a hash of everything the compiled code
depends on (the caller's key parts: graph, input specs, constants' metadata,
torch version, options, target), never by the weights' values, which the
code does not hold.

Where: ``$XDG_CACHE_HOME/et_copy/aoti/<key>.so`` (default ``~/.cache``), and
beside it the generated C++ it was built from, ``<sha256 of the .so>.cpp``,
so that what a program's code does can be read back (its weight reads,
:mod:`et_copy.backends.aoti._constant_reads`).
``ET_COPY_AOTI_CACHE=0`` turns it off; a path there moves it. Writes are atomic (a temporary file
in the same folder, then a rename), so a concurrent reader sees a whole file
or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from . import _aoti

CACHE_ENV = "ET_COPY_AOTI_CACHE"
# Part of every key: entries of an older format (before 2: no C++ kept beside the .so) are never hit.
FORMAT = 2


def cache_dir() -> Path | None:
    """The cache folder, or None when ``ET_COPY_AOTI_CACHE=0`` turns the cache off;
    ``ET_COPY_AOTI_CACHE=/some/dir`` puts it there instead. The C++ core
    decides (et_copy/code_trust.h), as it reads the same folder for the
    digests of the code this machine compiled."""
    folder = _aoti.compile_cache_dir()
    return Path(folder) if folder else None


def cache_key(parts: dict[str, Any]) -> str:
    """sha256 of ``parts`` as canonical JSON (sorted keys; what JSON cannot say, as str)."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def lookup(key: str) -> bytes | None:
    """The cached bytes for ``key``, or None (a miss, or the cache is off)."""
    return _read(f"{key}.so")


def store(key: str, data: bytes, source: str | None = None) -> Path | None:
    """Stores ``data`` under ``key`` atomically; returns its path, or None when
    the cache is off. ``source``, the generated code ``data`` was built from,
    is kept beside it under ``data``'s SHA-256 (:func:`source_of`). A folder
    that cannot be written is not an error: the export goes on without the
    cache."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if source is not None:
            _write_atomically(folder, f"{hashlib.sha256(data).hexdigest()}.cpp", source.encode())
        _write_atomically(folder, f"{key}.so", data)
    except OSError:
        return None
    return folder / f"{key}.so"


def source_of(data: bytes) -> str | None:
    """The generated code the compiled ``data`` was built from, when this
    machine's cache compiled it; else None."""
    source = _read(f"{hashlib.sha256(data).hexdigest()}.cpp")
    return None if source is None else source.decode()


def _read(name: str) -> bytes | None:
    """The cache file ``name``'s bytes, or None (absent, or the cache is off)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        return (folder / name).read_bytes()
    except FileNotFoundError:
        return None


def _write_atomically(folder: Path, name: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, folder / name)
    except BaseException:
        os.unlink(tmp)
        raise
