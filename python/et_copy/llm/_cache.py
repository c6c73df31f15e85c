"""Exported LLM programs kept on disk, so that a repeat run skips the export.

An entry is the program's bytes under a key that hashes everything the
program is made from: the model's class, config and weights, the export
settings, and the versions of et-copy (with its Python sources, so a
development checkout's edits count), torch, executorch and transformers.
A change in any of them is a new key; nothing is ever reused on a guess.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ._export import export_llm

if TYPE_CHECKING:
    from transformers import PreTrainedModel

_SUFFIX = ".pte"


@dataclass(frozen=True)
class CachedProgram:
    """A program from :func:`export_llm_cached`: its bytes, the file that
    holds them (None when the cache was bypassed), and whether it was found
    there rather than exported."""

    buffer: bytes
    path: Path | None
    hit: bool


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/et_copy/llm``, or ``~/.cache/et_copy/llm``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "et_copy" / "llm"


def export_llm_cached(
    model: PreTrainedModel, *, cache_dir: str | os.PathLike | None = None, use_cache: bool = True, **settings: Any
) -> CachedProgram:
    """:func:`export_llm` ``(model, **settings)``, reusing the program a
    previous call stored in ``cache_dir`` (default :func:`default_cache_dir`)
    for the same model, weights, settings and versions (:func:`cache_key`).
    ``use_cache=False`` neither reads nor writes the cache. A program is
    stored only after export_llm's check passed, and written atomically, so
    a reader never sees half a file. Raises what export_llm raises, and
    OSError when the cache directory cannot be written."""
    if not use_cache:
        return CachedProgram(bytes(export_llm(model, **settings).buffer), None, False)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = directory / (cache_key(model, settings) + _SUFFIX)
    if path.is_file():
        data = path.read_bytes()
        if data:
            return CachedProgram(data, path, True)
    data = bytes(export_llm(model, **settings).buffer)
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".partial-", suffix=_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: concurrent writers of one key write the same bytes
    except BaseException:
        os.unlink(tmp)
        raise
    return CachedProgram(data, path, False)


def cache_key(model: PreTrainedModel, settings: dict[str, Any]) -> str:
    """The hex digest that names a program in the cache: the model's class,
    config and every parameter and buffer (name, dtype, shape, bytes), the
    export settings, and the versions of et-copy (and its Python sources),
    torch, executorch and transformers."""
    h = hashlib.sha256()
    config = model.config
    described = {
        "class": f"{type(model).__module__}.{type(model).__qualname__}",
        "config": config.to_dict(),
        # Chosen at run time, not always in to_dict(): both change the exported graph.
        "attn_implementation": getattr(config, "_attn_implementation", None),
        "experts_implementation": getattr(config, "_experts_implementation", None),
        "settings": settings,
        "versions": _versions(),
    }
    h.update(json.dumps(described, sort_keys=True, default=str).encode())
    tensors = dict(model.state_dict(keep_vars=True))
    tensors.update(model.named_buffers())  # non-persistent buffers too (rotary frequencies)
    for name in sorted(tensors):
        _hash_tensor(h, name, tensors[name].detach())
    h.update(_source_digest())
    return h.hexdigest()[:32]


def _hash_tensor(h: Any, name: str, t: torch.Tensor) -> None:
    h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
    flatten = getattr(t, "__tensor_flatten__", None)
    if flatten is not None:
        # A wrapper subclass (torchao's quantized weights) has no bytes of its own: its inner
        # tensors (integers, scales) and its metadata (block size, target type) are the weight.
        inner, context = flatten()
        h.update(f"{type(t).__qualname__}\0{context!r}".encode())
        for part in inner:
            _hash_tensor(h, f"{name}.{part}", getattr(t, part))
        return
    h.update(t.reshape(-1).contiguous().view(torch.uint8).numpy().data)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    import transformers

    import et_copy

    try:
        executorch = version("executorch")
    except PackageNotFoundError:
        executorch = "unknown"
    return {
        "et_copy": et_copy.__version__,
        "torch": torch.__version__,
        "executorch": executorch,
        "transformers": transformers.__version__,
    }


def _source_digest() -> bytes:
    """A hash of et-copy's installed Python sources: a program exported by
    edited code is not taken for one exported before the edit."""
    import et_copy

    h = hashlib.sha256()
    root = Path(et_copy.__file__).parent
    for file in sorted(root.rglob("*.py")):
        h.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    return h.digest()
