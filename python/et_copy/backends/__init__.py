"""et-copy's device backends, ahead of time: one word chooses one
(docs/design.md, "Device backends"), and this table says what the word
means on both sides of a program.

- ``"simulated"`` (:mod:`et_copy.backends.simulated`): a nested ExecuTorch
  program run with ExecuTorch's CPU kernels on the simulated device.
- ``"aoti"`` (:mod:`et_copy.backends.aoti`): AOTInductor code, for the CPU
  on the simulated device and for CUDA on a GPU.

A backend from another package adds itself with one entry point in the
group ``et_copy.backends`` (its pyproject's
``[project.entry-points."et_copy.backends"]``, naming its :class:`Backend`),
read when this package is imported; :func:`add_backend` adds one by hand.
:func:`use_backend` registers any word's runtime side.

Each backend is a subpackage holding its partitioner and its
``BackendDetails`` (and its private modules: the compiled backend's compile
cache, weight reads and quantized kernels); what they share (the delegate
record, the partitioning, the state arena, preprocess over every method) is
in this package's modules. The exporters and the tools take the word and
read the rest here; a partitioner object is still accepted where one was.
The subpackages import executorch, so the table imports them when a word is
used.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from executorch.exir.backend.partitioner import Partitioner

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "Backend",
    "add_backend",
    "check_backend",
    "partitioner_for",
    "resolve_backend",
    "use_backend",
]

ENTRY_POINT_GROUP = "et_copy.backends"


@dataclass(frozen=True)
class Backend:
    """One of et-copy's device backends, by its word."""

    word: str
    backend_id: str  #: the delegates' backend id, and the name the C++ backend registers under
    module: str  #: the module holding its partitioner and BackendDetails
    partitioner_class: str
    register: Callable[[], str]  #: registers the runtime side (idempotent: "registered", then "already et_copy")
    summary: str  #: what it computes with, for --help texts

    def partitioner(self, device: str) -> Partitioner:
        """The backend's partitioner for ``device`` ("cuda" or "cuda:N")."""
        cls = getattr(importlib.import_module(self.module), self.partitioner_class)
        return cls(device)


def _register_simulated() -> str:
    # The backend alone: the simulated device itself is the caller's choice (use_simulated_device).
    from .._registration import register_simulated_device_backend

    return register_simulated_device_backend()


def _register_aoti() -> str:
    from .._registration import use_aoti_backend

    return use_aoti_backend()


BACKENDS: dict[str, Backend] = {
    b.word: b
    for b in (
        Backend(
            "simulated",
            "SimulatedDeviceBackend",
            "et_copy.backends.simulated._export",
            "SimulatedDevicePartitioner",
            _register_simulated,
            "ExecuTorch's CPU kernels over the simulated device",
        ),
        Backend(
            "aoti",
            "AotiDeviceBackend",
            "et_copy.backends.aoti._export",
            "AotiDevicePartitioner",
            _register_aoti,
            "AOTInductor code, compiled for the CPU here and for CUDA on a GPU",
        ),
    )
}
DEFAULT_BACKEND = "simulated"


def add_backend(backend: Backend) -> Backend:
    """Adds a device backend of another package (its own folder) under ``backend.word``.

    From then on the exporters' and the tools' ``backend=`` take the word, as
    they take et-copy's own. Adding an equal entry again returns the one in
    the table (idempotent). TypeError when ``backend`` is no :class:`Backend`;
    ValueError when the word is not one plain word, or when the word or the
    backend id is taken by another entry (the table keeps one meaning each).
    """
    op = "et_copy.backends.add_backend"
    if not isinstance(backend, Backend):
        raise TypeError(f"{op}: backend must be an et_copy.backends.Backend, got {type(backend).__name__}")
    word = backend.word
    if not isinstance(word, str) or not word.isidentifier():
        raise ValueError(f"{op}: backend.word must be one word (letters, digits, _), got {word!r}")
    known = BACKENDS.get(word)
    if known is not None:
        if known == backend:
            return known
        raise ValueError(f"{op}: the word {word!r} is taken by {known.backend_id}")
    for other in BACKENDS.values():
        if other.backend_id == backend.backend_id:
            raise ValueError(f"{op}: backend id {backend.backend_id!r} is taken by the word {other.word!r}")
    BACKENDS[word] = backend
    return backend


def check_backend(backend: object, *, op: str, arg: str = "backend") -> str:
    """``backend`` when it is one of :data:`BACKENDS`' words, else ValueError naming ``op``, ``arg`` and the choices."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"{op}: {arg} must be one of {sorted(BACKENDS)}, got {backend!r}")
    return backend


def resolve_backend(backend: object, *, op: str, arg: str = "backend") -> Backend:
    """The backend ``backend`` names; None is :data:`DEFAULT_BACKEND`. ValueError as :func:`check_backend`."""
    return BACKENDS[DEFAULT_BACKEND if backend is None else check_backend(backend, op=op, arg=arg)]


def partitioner_for(
    backend: str | None, device: str = "cuda:0", *, op: str = "et_copy.backends.partitioner_for"
) -> Partitioner:
    """The partitioner of ``backend`` (a word of :data:`BACKENDS`; None: the default) for ``device``."""
    return resolve_backend(backend, op=op).partitioner(device)


def use_backend(backend: str) -> str:
    """Registers the runtime side of the backend ``backend`` names (one of
    :data:`BACKENDS`' words, another package's too): "registered", then
    "already et_copy". ValueError for an unknown word, as :func:`check_backend`;
    the backend's own error when its runtime refuses it."""
    return BACKENDS[check_backend(backend, op="et_copy.backends.use_backend")].register()


def _add_entry_points() -> None:
    """Adds every backend another package's entry point names. One that fails
    to load or is refused is left out with a warning naming it: a broken
    package must not stop et-copy's own words from working."""
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            add_backend(entry.load())
        except Exception as error:  # noqa: BLE001 (any failure of another package's code)
            warnings.warn(
                f"et_copy.backends: the entry point {entry.name} = {entry.value!r} (group {ENTRY_POINT_GROUP}) "
                f"was left out: {type(error).__name__}: {error}",
                RuntimeWarning,
                stacklevel=2,
            )


_add_entry_points()
