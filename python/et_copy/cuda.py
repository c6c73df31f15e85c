"""et_copy on real NVIDIA GPUs.

:func:`use_cuda` registers et_copy's CUDA allocator with ExecuTorch;
:func:`cuda_status` says what the CUDA runtime and driver report without
registering anything. :func:`use_stream` puts the copies and the compiled
backend on the caller's CUDA stream. The rest serves ``DeviceTensor``'s
zero-copy exports (``__cuda_array_interface__``, ``__dlpack__``) and the copy
benchmark.

The extension links the CUDA runtime statically: it imports on machines with
no GPU or driver, and CUDA is first touched when one of these is called.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from . import _C
from ._device import CUDA
from ._errors import EtCopyError

if TYPE_CHECKING:
    from ._tensors import DeviceTensor

_NOT_BUILT = "this et_copy was built without the CUDA toolkit, so it has no CUDA allocator"

# DLPack's device type for CUDA memory.
_DL_CUDA = 2

# DLPack (type code, bits) per dtype: kDLInt 0, kDLUInt 1, kDLFloat 2,
# kDLBfloat 4, kDLComplex 5, kDLBool 6.
_DLPACK_DTYPES: dict[torch.dtype, tuple[int, int]] = {
    torch.uint8: (1, 8),
    torch.int8: (0, 8),
    torch.int16: (0, 16),
    torch.int32: (0, 32),
    torch.int64: (0, 64),
    torch.float16: (2, 16),
    torch.float32: (2, 32),
    torch.float64: (2, 64),
    torch.complex64: (5, 64),
    torch.complex128: (5, 128),
    torch.bool: (6, 8),
    torch.bfloat16: (4, 16),
}

# __cuda_array_interface__ typestr per dtype (numpy's; bfloat16 has none).
_TYPESTRS: dict[torch.dtype, str] = {
    torch.uint8: "|u1",
    torch.int8: "|i1",
    torch.int16: "<i2",
    torch.int32: "<i4",
    torch.int64: "<i8",
    torch.float16: "<f2",
    torch.float32: "<f4",
    torch.float64: "<f8",
    torch.complex64: "<c8",
    torch.complex128: "<c16",
    torch.bool: "|b1",
}


def built_with_cuda() -> bool:
    """True when this et_copy's extension holds the CUDA allocator."""
    return bool(getattr(_C, "WITH_CUDA", False))


def _require_built(op: str) -> None:
    """EtCopyError("NotSupported") naming ``op`` when this et_copy has no CUDA allocator."""
    if not built_with_cuda():
        raise EtCopyError(f"{op}: {_NOT_BUILT}", error="NotSupported")


def cuda_status() -> dict[str, Any]:
    """What the CUDA runtime and driver report, registering nothing.

    Keys: built (bool), runtime_version and driver_version (ints such as
    13000; driver 0 = no driver), device_count (None when CUDA is
    unusable), error (ExecuTorch error name or None), cuda_error (e.g.
    "cudaErrorInsufficientDriver" or None), message (why there is no
    device, in words), devices (a dict per device: index, name,
    compute_capability, total_memory, pci_bus_id).
    """
    if not built_with_cuda():
        return {
            "built": False,
            "runtime_version": None,
            "driver_version": None,
            "device_count": None,
            "error": "NotSupported",
            "cuda_error": None,
            "message": _NOT_BUILT,
            "devices": [],
        }
    status: dict[str, Any] = dict(_C.cuda_status())
    status["built"] = True
    status["devices"] = [dict(_C.cuda_device_properties(i)) for i in range(status["device_count"] or 0)]
    return status


def use_cuda() -> str:
    """Serves DeviceType CUDA with et_copy's CUDA allocator (a real GPU).

    Idempotent: returns "registered", then "already et_copy". Returns
    "already other", registering nothing, when another library's allocator
    serves CUDA already (upstream ExecuTorch's CUDA backend registers its
    own when its library loads): et_copy's copies, :mod:`et_copy.runtime`
    and the compiled backend (target cuda) then run on that allocator, and
    only what needs et_copy's own (:func:`et_copy.allocator_stats`,
    :func:`et_copy.counting`, :func:`set_copy_config`'s tuning) does not
    apply; docs/cuda.md, "Beside upstream's CUDA backend". Raises
    EtCopyError, registering nothing, when:

    - et_copy's simulated device serves CUDA
      (``error="RegistrationAlreadyRegistered"``): it is no GPU, and
      ExecuTorch cannot replace a registered allocator;
    - there is no CUDA driver, the driver is too old, or it sees no device
      (``error="NotFound"``; the message says which);
    - this et_copy was built without CUDA (``error="NotSupported"``).

    After a failure the registry is as it was: use_simulated_device() still
    works.
    """
    _require_built("et_copy.use_cuda")
    return _C.use_cuda()  # the policy is C++'s et_copy::use_cuda


def _require_real_cuda(t: DeviceTensor, what: str) -> None:
    """Raises unless ``t`` is live CUDA memory: of et_copy's CUDA allocator,
    or of another library's that the CUDA runtime calls memory of ``t``'s
    device (a zero-copy export of anything else would hand a consumer
    pointers it cannot read)."""
    if t.freed:
        raise ValueError(f"DeviceTensor.{what}: the tensor's memory was freed")
    info = _C.allocator_info(CUDA)
    if info is not None and info["owner"] == "et_copy" and info["name"] == "cuda":
        return
    if info is not None and info["owner"] == "other":
        if not built_with_cuda():
            found = "this et_copy was built without CUDA, so it cannot ask the CUDA runtime"
        else:
            try:
                owner = _C.cuda_pointer_device(t.data_ptr())
            except EtCopyError as e:
                owner, found = None, f"the CUDA runtime cannot say whose it is ({e})"
            if owner == t.device.index:
                return
            if owner is not None:
                found = "the CUDA runtime calls it host memory" if owner < 0 else f"it is on CUDA device {owner}"
        raise EtCopyError(
            f"DeviceTensor.{what}: needs real CUDA memory of cuda:{t.device.index}, and this tensor's memory "
            f"comes from another library's allocator: {found}",
            error="NotSupported",
        )
    served = _C.describe_allocator(CUDA)
    raise EtCopyError(
        f"DeviceTensor.{what}: needs real CUDA memory, but this tensor's memory comes from {served} "
        "(simulated memory is host memory standing in for a GPU); call et_copy.use_cuda() on a GPU machine",
        error="NotSupported",
    )


def dlpack_device(t: DeviceTensor) -> tuple[int, int]:
    _require_real_cuda(t, "__dlpack_device__")
    return (_DL_CUDA, t.device.index)


def dlpack(
    t: DeviceTensor, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: bool | None = None
) -> Any:
    """A DLPack capsule over ``t``'s CUDA memory (no copy).

    et_copy's copies are complete when they return, so the data is ready
    on any consumer ``stream``; not so for a copy made under
    :func:`use_stream`: it is ready on that stream, and a consumer on
    another one must wait for it (torch: ``wait_stream``). The capsule keeps ``t`` alive; calling
    ``t.free()`` while a consumer still uses the memory is the caller's bug.
    """
    _require_real_cuda(t, "__dlpack__")
    if copy:
        raise BufferError("DeviceTensor.__dlpack__: copy=True is not supported; the export is always zero-copy")
    if dl_device is not None and tuple(dl_device) != (_DL_CUDA, t.device.index):
        raise BufferError(f"DeviceTensor.__dlpack__: the tensor is on (2, {t.device.index}), not {tuple(dl_device)}")
    code, bits = _DLPACK_DTYPES[t.dtype]
    return _C.cuda_dlpack(
        t, t.data_ptr(), t.device.index, list(t.shape), _C.dense_strides(list(t.shape), list(t.dim_order)), code, bits
    )


def cuda_array_interface(t: DeviceTensor) -> dict[str, Any]:
    """Numba/CuPy's ``__cuda_array_interface__`` (version 3) for ``t``."""
    _require_real_cuda(t, "__cuda_array_interface__")
    typestr = _TYPESTRS.get(t.dtype)
    if typestr is None:
        raise TypeError(f"DeviceTensor.__cuda_array_interface__: {t.dtype} has no typestr; use __dlpack__ instead")
    natural = tuple(range(t.dim()))
    strides = None
    if tuple(t.dim_order) != natural:
        strides = tuple(s * t.itemsize for s in _C.dense_strides(list(t.shape), list(t.dim_order)))
    # stream None: no synchronisation is needed, the copies already waited
    # (a copy made under use_stream is the caller's to order: docs/cuda.md, "Streams").
    return {
        "shape": tuple(t.shape),
        "typestr": typestr,
        "data": (t.data_ptr(), False),
        "strides": strides,
        "version": 3,
        "stream": None,
    }


def copy_config() -> dict[str, Any]:
    """How pageable host memory is copied: pageable ("staged" or "direct"),
    staging_threshold and chunk_bytes (bytes)."""
    _require_built("et_copy.cuda.copy_config")
    return dict(_C.cuda_copy_config())


def set_copy_config(
    pageable: str | None = None, *, staging_threshold: int | None = None, chunk_bytes: int | None = None
) -> None:
    """Changes how et_copy's CUDA allocator copies pageable (not pinned) host
    memory, for this process. Each argument left out keeps its current
    value (:func:`copy_config`); the defaults are "direct", 1 MiB and 8 MiB.

    - ``pageable``: "staged" copies through et_copy's pinned double buffers,
      overlapping the host memcpy of one chunk with the DMA of the previous;
      "direct" leaves staging to the driver (``cudaMemcpyAsync``).
    - ``staging_threshold``: pageable copies smaller than this many bytes go
      direct even when staged (staging buys nothing there); at least 0.
    - ``chunk_bytes``: bytes per staging chunk, 64 KiB to 1 GiB; each copy
      lane holds two pinned buffers of this size.

    Pinned and registered host memory always takes the direct DMA path.
    Copies already running keep the configuration they started with.
    Raises EtCopyError("InvalidArgument"), changing nothing, for a value
    outside these ranges, and EtCopyError("NotSupported") when et_copy was
    built without CUDA. Which setting is fastest depends on the machine:
    ``python -m et_copy bench`` and ``python -m et_copy.tools.bench.cuda_copy`` measure it
    (docs/cuda.md)."""
    _require_built("et_copy.cuda.set_copy_config")
    now = _C.cuda_copy_config()
    for name, value in (("staging_threshold", staging_threshold), ("chunk_bytes", chunk_bytes)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"et_copy.cuda.set_copy_config: {name} must be an int, got {type(value).__name__}")
    _C.set_cuda_copy_config(
        now["pageable"] if pageable is None else pageable,
        now["staging_threshold"] if staging_threshold is None else staging_threshold,
        now["chunk_bytes"] if chunk_bytes is None else chunk_bytes,
    )


def register_host_memory(t: torch.Tensor) -> None:
    """Page-locks a long-lived CPU tensor's memory (cudaHostRegister) so
    copies to and from it take the direct DMA path. Call
    :func:`unregister_host_memory` before the tensor is freed."""
    if t.device.type != "cpu":
        raise ValueError(f"et_copy.cuda.register_host_memory: the tensor must be on the CPU, got {t.device}")
    storage = t.untyped_storage()
    _C.cuda_register_host(storage.data_ptr(), storage.nbytes())


def unregister_host_memory(t: torch.Tensor) -> None:
    _C.cuda_unregister_host(t.untyped_storage().data_ptr())


def _stream_and_device(stream: Any, device: int | None, what: str) -> tuple[int | None, int]:
    """(handle or None, device index) for a torch CUDA stream, an int handle or None."""
    if device is not None and (isinstance(device, bool) or not isinstance(device, int)):
        raise TypeError(f"et_copy.cuda.{what}: device must be an int, got {type(device).__name__}")
    own_device: int | None = None
    if stream is None:
        handle = None
    elif isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    elif isinstance(getattr(stream, "cuda_stream", None), int):  # torch.cuda.Stream, ExternalStream
        handle = stream.cuda_stream
        index = getattr(getattr(stream, "device", None), "index", None)
        own_device = index if isinstance(index, int) else None
    else:
        raise TypeError(
            f"et_copy.cuda.{what}: stream must be a torch.cuda.Stream, an int handle (cudaStream_t) or None, "
            f"got {type(stream).__name__}"
        )
    if handle is not None and handle < 0:
        raise ValueError(f"et_copy.cuda.{what}: a stream handle is not negative, got {handle}")
    if own_device is not None and device is not None and own_device != device:
        raise ValueError(f"et_copy.cuda.{what}: the stream is of cuda:{own_device}, not of cuda:{device}")
    return handle, own_device if own_device is not None else (device if device is not None else 0)


def set_stream(stream: Any, device: int | None = None) -> None:
    """Queues et_copy's CUDA work for ``device`` on ``stream``, on the calling
    thread, until changed: the h2d/d2h copies (including those a method runs)
    and the compiled backend's runs and output copies.

    ``stream``: a ``torch.cuda.Stream`` (its ``cuda_stream`` and device are
    used), an int handle (a ``cudaStream_t``; 0 is the legacy default stream),
    or None for the default: copies on et_copy's own streams, each complete on
    return. ``device`` defaults to the stream's device, else 0.

    On the stream, a host-to-device copy returns before it runs: a pageable
    source is staged by et_copy and may be reused at once; a pinned source
    is read when the stream gets there, so keep it unchanged until the
    stream has passed the copy (a device-to-host copy on it, or a
    synchronisation). A device-to-host copy synchronises that stream only.
    Work queued there is ordered after what the stream already holds.
    The setting is per thread, like torch's current stream. Raises
    EtCopyError("NotSupported") when et_copy was built without CUDA,
    EtCopyError("InvalidArgument") for a device index outside
    0..``et_copy._C.MAX_DEVICE_INDEX`` (the limit limits.h owns).
    """
    _require_built("et_copy.cuda.set_stream")
    handle, index = _stream_and_device(stream, device, "set_stream")
    _C.set_cuda_stream(index, handle)


def current_stream(device: int = 0) -> int | None:
    """The calling thread's stream handle for ``device`` (:func:`set_stream`),
    or None when none is set."""
    _require_built("et_copy.cuda.current_stream")
    return _C.cuda_stream(device)


@contextlib.contextmanager
def use_stream(stream: Any, device: int | None = None) -> Iterator[None]:
    """:func:`set_stream` for a ``with`` block, then what the thread had
    before (a stream, or none) again::

        s = torch.cuda.Stream()
        with torch.cuda.stream(s), et_copy.cuda.use_stream(s):
            out = method.execute([x])  # copies and compiled code on s; one sync, the d2h's
    """
    _require_built("et_copy.cuda.use_stream")
    handle, index = _stream_and_device(stream, device, "use_stream")
    previous = _C.cuda_stream(index)
    _C.set_cuda_stream(index, handle)
    try:
        yield
    finally:
        _C.set_cuda_stream(index, previous)
