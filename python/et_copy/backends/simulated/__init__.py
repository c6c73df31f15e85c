"""The simulated device's backend: each partition a nested ExecuTorch
program, run with ExecuTorch's CPU kernels by the C++
``SimulatedDeviceBackend`` (backends/simulated) over the simulated device's
memory.

Its runtime side is reached through its own extension, ``_simulated``,
which links et-copy's shared runtime: loading it describes the backend (a
refusal names its registration), and ``et_copy.use_simulated_device()``
registers it. Its ahead-of-time side (:class:`SimulatedDevicePartitioner`
and the preprocess :class:`SimulatedDeviceBackend`) is in ``_export``,
imported when one of its names is first used here: it imports executorch's
exporter, which running programs does not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy_export import lazy_export
from . import _simulated

if TYPE_CHECKING:  # the names __getattr__ below gives, for type checkers
    from ._export import SimulatedDeviceBackend, SimulatedDevicePartitioner

BACKEND_ID = "SimulatedDeviceBackend"  # the C++ backend registers under this name (et_copy::kSimulatedDeviceBackend)
PAYLOAD_PROGRAM = _simulated.PAYLOAD_PROGRAM  # the payload is a nested .pte (this backend)

__all__ = ["BACKEND_ID", "SimulatedDeviceBackend", "SimulatedDevicePartitioner"]


__getattr__ = lazy_export(__name__)
