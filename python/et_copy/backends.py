"""One word chooses the device backend (docs/design.md, "One word chooses").

``backend="simulated"`` (et_copy.backend: a nested ExecuTorch program run
with ExecuTorch's CPU kernels on the simulated device) or ``"aoti"``
(et_copy.aoti: AOTInductor code, for the CPU on the simulated device and
for CUDA on a GPU). The exporters take the word; a partitioner object is
still accepted where one was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from executorch.exir.backend.partitioner import Partitioner

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "partitioner_for"]


def _simulated(device: str) -> Partitioner:
    from .backend import SimulatedDevicePartitioner

    return SimulatedDevicePartitioner(device)


def _aoti(device: str) -> Partitioner:
    from .aoti import AotiDevicePartitioner

    return AotiDevicePartitioner(device)


# word -> partitioner factory (device -> partitioner); the modules import executorch, so lazily.
BACKENDS: dict[str, Callable[[str], Partitioner]] = {"simulated": _simulated, "aoti": _aoti}
DEFAULT_BACKEND = "simulated"


def check_backend(backend: object, *, op: str, arg: str = "backend") -> str:
    """``backend`` when it is one of :data:`BACKENDS`' words, else ValueError naming ``op``, ``arg`` and the choices."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"{op}: {arg} must be one of {sorted(BACKENDS)}, got {backend!r}")
    return backend


def partitioner_for(
    backend: str, device: str = "cuda:0", *, op: str = "et_copy.backends.partitioner_for"
) -> Partitioner:
    """The partitioner of ``backend`` ("simulated" or "aoti") for ``device``."""
    return BACKENDS[check_backend(backend, op=op)](device)
