"""et_copy: ExecuTorch's device copy ops, end to end.

The runtime side (this module's functions) runs et_copy's C++ kernels on
torch tensors through an ExecuTorch DeviceAllocator: the simulated device
(host memory standing in for CUDA) or a real GPU. Nothing is registered with
ExecuTorch until you call a ``use_*`` or ``register_*`` function.

Importing et_copy makes the AOT ops, ``torch.ops.et_copy``, available (as
torch extensions register their ops at import), adopting executorch's
definition when it is installed: :func:`ensure_registered`.
"""

from __future__ import annotations

# _C links libtorch_python by name; importing torch first loads it, so _C
# imports wherever torch lives (a --target install puts et_copy elsewhere).
import torch  # noqa: F401  (isort: keep first)

from ._counting import Counts, counting
from ._dtypes import SUPPORTED_DTYPES
from ._errors import EtCopyError
from ._ops import D2H_COPY_OUT, H2D_COPY_OUT, d2h_copy, h2d_copy, run_registered
from ._registration import (
    allocator_info,
    allocator_stats,
    kernel_owner,
    register_kernels,
    register_simulated_device_backend,
    use_aoti_backend,
    use_simulated_device,
)
from ._tensors import DeviceTensor, empty

# The shipped device backends: each one's own extension describes it to the
# runtime when it loads (a program's refusal names the call that registers
# it), registering nothing; their ahead-of-time sides load on first use.
from .backends import aoti as _aoti_backend  # noqa: F401
from .backends import simulated as _simulated_backend  # noqa: F401
from .cuda import use_cuda

__version__ = "0.1.0"


def ensure_registered() -> str:
    """Makes ``torch.ops.et_copy`` available, adopting executorch's definition
    when installed; see :func:`et_copy.aot.ensure_registered`. ``import
    et_copy`` has called it; call it to learn the outcome, or to see the error
    when executorch's definition does not match et-copy's schemas."""
    from .aot import ensure_registered as _ensure_registered

    return _ensure_registered()


try:
    from . import aot as aot  # re-exported; its import defines or adopts the namespace: milliseconds
except EtCopyError:
    # executorch's schemas differ from ours: import et_copy still works for the
    # runtime side, and ensure_registered() raises the difference when asked.
    pass


__all__ = [
    "Counts",
    "D2H_COPY_OUT",
    "DeviceTensor",
    "EtCopyError",
    "H2D_COPY_OUT",
    "SUPPORTED_DTYPES",
    "allocator_info",
    "allocator_stats",
    "counting",
    "d2h_copy",
    "empty",
    "ensure_registered",
    "h2d_copy",
    "kernel_owner",
    "register_kernels",
    "register_simulated_device_backend",
    "run_registered",
    "use_cuda",
    "use_aoti_backend",
    "use_simulated_device",
]
