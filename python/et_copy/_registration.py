"""Registering et_copy's kernels and allocators with ExecuTorch, safely.

ExecuTorch's registries abort the process on a duplicate name or a second
allocator for a device type, and have no way to unregister. Everything here
checks first, registers only what is absent, and never runs at import.
"""

from __future__ import annotations

import ctypes
import os

from . import _C
from ._device import CUDA
from ._errors import EtCopyError


def _wheel_library(name: str) -> str | None:
    """Path of the executorch wheel's shared library ``name``, if installed."""
    try:
        import executorch
    except ImportError:
        return None
    # executorch is a namespace package: it has __path__ but no __file__.
    for root in executorch.__path__:
        path = os.path.join(root, "lib", name)
        if os.path.exists(path):
            return path
    return None


def register_kernels() -> dict[str, str]:
    """Registers et_copy's two kernels where ExecuTorch's registry lacks them.

    Returns ``{op_name: outcome}`` with outcome "registered", "already
    et_copy" or "already other". The executorch wheel's kernel library also
    registers these names, and loading it after ours would abort the
    process, so it is loaded first: in a process with the wheel installed
    the wheel's kernels stay in the registry and this reports "already
    other". Use :func:`h2d_copy`/:func:`d2h_copy` to run et_copy's own.
    """
    wheel_kernels = _wheel_library("libexecutorch_kernels_optimized.so")
    if wheel_kernels is not None:
        ctypes.CDLL(wheel_kernels, mode=ctypes.RTLD_GLOBAL)
    result: dict[str, str] = {}
    for op, outcome, error in _C.register_kernels():
        if outcome == "failed":
            raise EtCopyError(f"et_copy.register_kernels: ExecuTorch refused to register {op}", error=error)
        result[op] = outcome
    return result


def kernel_owner(op_name: str) -> str:
    """ "already et_copy", "already other" or "absent" for a kernel name."""
    return _C.kernel_owner(op_name)


def use_simulated_device(device_count: int = 1, *, host_readable: bool | None = None) -> str:
    """Serves DeviceType CUDA with a simulated device (no GPU needed).

    Registers et_copy's simulated allocator for CUDA, reporting
    ``device_count`` devices (1 to ``_C.MAX_DEVICES``, the core's limit;
    ValueError outside it). Returns "registered" or "already
    et_copy". Idempotent: a later call changes the device count and, when
    ``host_readable`` is given, the mode of allocations made after it
    (live ones keep theirs). Raises EtCopyError("RegistrationAlreadyRegistered")
    when a different CUDA allocator is registered, which ExecuTorch cannot
    replace. The policy is C++'s ``et_copy::use_simulated_device``.

    ``host_readable=False``: device memory faults on any host access
    (SIGSEGV), as a GPU's does; only the copies, a device backend and the
    inspection hooks reach its bytes, through the host alias.
    ``host_readable=True``: device memory is host memory, so CPU kernels can
    run on device tensors; that is not what a GPU gives. ``None`` keeps the
    current mode, which starts as C++'s
    ``SimulatedDeviceAllocator::kDefaultHostReadable`` (False: unreadable, as a GPU).
    :func:`allocator_info` reports the mode.

    It also registers the simulated device's backend, ``SimulatedDeviceBackend``
    (C++'s ``et_copy::register_simulated_device_backend``), which runs the
    delegates of device programs on this device; it raises
    EtCopyError("RegistrationAlreadyRegistered") when another library holds
    that backend name. The return value is the allocator's outcome; the
    backend's is :func:`register_simulated_device_backend`'s.
    """
    op = "et_copy.use_simulated_device"
    if not isinstance(device_count, int) or isinstance(device_count, bool):
        raise TypeError(f"{op}: device_count must be an int, got {type(device_count).__name__}")
    if host_readable is not None and not isinstance(host_readable, bool):
        raise TypeError(f"{op}: host_readable must be a bool or None, got {type(host_readable).__name__}")
    outcome = _C.use_simulated_device(device_count, host_readable)
    register_simulated_device_backend()
    return outcome


def register_simulated_device_backend() -> str:
    """Registers ``SimulatedDeviceBackend`` unless it is registered already.

    Idempotent: "registered" the first time, "already et_copy" after. Raises
    EtCopyError("RegistrationAlreadyRegistered") when another library
    registered a backend of that name, which ExecuTorch cannot replace.
    :func:`use_simulated_device` calls it. The backend's own extension
    (et_copy.backends.simulated's) registers it.
    """
    from .backends.simulated import _simulated

    return _simulated.register_simulated_device_backend()


def use_aoti_backend() -> str:
    """Registers ``AotiDeviceBackend``, the compiled device backend, unless it
    is registered already (C++'s ``et_copy::register_aoti_backend``).

    It runs delegates whose record carries an AOTInductor model: compiled
    for target ``cpu`` on the simulated device (:func:`use_simulated_device`),
    for ``cuda`` on a GPU (:func:`et_copy.use_cuda`), by the torch this
    package was built against (``AOTI_TORCH_VERSION`` of its extension,
    et_copy.backends.aoti's ``_aoti``, which registers it). Idempotent:
    "registered" the first time, "already et_copy" after. Raises
    EtCopyError("RegistrationAlreadyRegistered") when another library
    registered a backend of that name, which ExecuTorch cannot replace.
    Like :func:`register_simulated_device_backend` it registers only when
    asked: nothing registers it at import.
    """
    from .backends.aoti import _aoti

    return _aoti.register_aoti_backend()


def allocator_stats(device: str = "cuda") -> dict[str, int]:
    """Counters of et_copy's allocator serving ``device`` ("cuda"):
    allocations, deallocations, live_allocations, bytes_outstanding,
    peak_bytes_outstanding, h2d/d2h/d2d copies and bytes, failed_calls.
    EtCopyError("NotSupported") when another library's allocator serves it
    (it keeps no et_copy counters), "NotFound" when nothing does."""
    if str(device).partition(":")[0] != "cuda":
        raise ValueError(f"et_copy.allocator_stats: device must be 'cuda', got {device!r}")
    return dict(_C.allocator_stats(CUDA))


def allocator_info(device: str = "cuda") -> _C.AllocatorInfo | None:
    """Who serves ``device``: None, or a dict with owner ("et_copy" or
    "other"), name ("simulated", "cuda"; "foreign" for another library's
    allocator, whose device_count is None), device_count (or
    device_count_error), and host_readable:
    the simulated device's mode for new allocations (see
    :func:`use_simulated_device`), None for any other allocator."""
    if str(device).partition(":")[0] != "cuda":
        raise ValueError(f"et_copy.allocator_info: device must be 'cuda', got {device!r}")
    return _C.allocator_info(CUDA)
