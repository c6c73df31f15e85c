"""Type stub for et_copy's compiled core (use the et_copy package instead)."""

from types import ModuleType
from typing import Literal, Sequence, TypeAlias, TypedDict, TypeVar, final

import torch
from typing_extensions import (
    Buffer,  # collections.abc.Buffer from Python 3.12
    CapsuleType,  # types.CapsuleType from Python 3.13
)

from ._device import Device

_T = TypeVar("_T", bound="DeviceTensor")
# What the copies read (python/bindings/tensor_reader.cpp), and out, which they return.
_Tensor: TypeAlias = "torch.Tensor | DeviceTensor"
_Out = TypeVar("_Out", bound="torch.Tensor | DeviceTensor")

H2D_COPY_OUT: str
D2H_COPY_OUT: str

# The core's limits (runtime/include/et_copy/limits.h) and its device names.
MAX_TENSOR_DIMS: int
MAX_DEVICES: int
MIN_DEVICE_INDEX: int
MAX_DEVICE_INDEX: int
DEVICE_ALIGNMENT: int
TENSOR_ALIGNMENT: int

def device_name(device_type: int, device_index: int) -> str: ...

# The exception every et_copy failure raises (et_copy.EtCopyError is this class).
class EtCopyError(RuntimeError):
    error: str
    instruction: str | None
    operator: str | None
    log: tuple[str, ...]
    def __init__(
        self,
        message: str,
        *,
        error: str = "Internal",
        instruction: str | None = None,
        operator: str | None = None,
        log: list[str] | tuple[str, ...] = (),
    ) -> None: ...

# The copies read torch tensors and et_copy.DeviceTensors themselves
# (python/bindings/tensor_reader.cpp) and return out. Raw METH_FASTCALL
# functions: positional arguments only.
def h2d_copy(self: _Tensor, out: _Out, dynamic_out: bool, /) -> _Out: ...
def d2h_copy(self: _Tensor, out: _Out, dynamic_out: bool, /) -> _Out: ...
def run_registered(op: str, self: _Tensor, out: _Out, dynamic_out: bool) -> _Out: ...
def dense_strides(sizes: Sequence[int], dim_order: Sequence[int]) -> list[int]: ...
def dim_order_of(strides: Sequence[int]) -> list[int]: ...
def dtype_codes() -> dict[torch.dtype, int]: ...
def unsupported_dtype_message(dtype: object, op: str, arg: str) -> str: ...

# et_copy::registration_name's words.
_Outcome = Literal["registered", "already et_copy", "already other", "failed", "absent"]

# (op name, outcome, ExecuTorch Error name) per kernel.
def register_kernels() -> list[tuple[str, _Outcome, str]]: ...
def kernel_owner(op: str) -> Literal["already et_copy", "already other", "absent"]: ...
def use_simulated_device(device_count: int, host_readable: bool | None) -> Literal["registered", "already et_copy"]: ...
def describe_allocator(device_type: int) -> str: ...

@final
class AllocatorInfo(TypedDict):
    owner: Literal["et_copy", "other"]
    name: str  # "simulated", "cuda"; "foreign" for another library's
    device_count: int | None
    device_count_error: str | None  # the Error name when counting failed
    host_readable: bool | None  # the simulated device's mode for new allocations; None for others

def allocator_info(device_type: int) -> AllocatorInfo | None: ...

# allocations, deallocations, live_allocations, bytes_outstanding,
# peak_bytes_outstanding, h2d/d2h/d2d _copies and _bytes, failed_calls.
def allocator_stats(device_type: int) -> dict[str, int]: ...

# Counting scopes (CountingDeviceAllocator::open_scope): allocations,
# deallocations, live_allocations, bytes_outstanding, peak_bytes_outstanding
# of the allocations made since the scope opened.
def open_counting_scope(device_type: int) -> int: ...
def counting_scope_stats(device_type: int, scope: int) -> dict[str, int]: ...
def close_counting_scope(device_type: int, scope: int) -> dict[str, int]: ...

# SimulatedDeviceAllocator::kDefaultHostReadable: the simulated device's one default mode.
SIMULATED_DEVICE_DEFAULT_HOST_READABLE: bool
PROGRAM_RECORD_KEY: str
LLM_METHODS: dict[str, str]  # role -> method name (et_copy/llm_methods.h)
PROGRAM_RECORD_VERSION: int
DELEGATE_RECORD_MAGIC: str
DELEGATE_RECORD_VERSION: int

# The inspection hook: simulated device bytes through the host alias, as a
# debugger reads a GPU (uncounted; InvalidArgument outside one live allocation).
def simulated_device_host_alias(ptr: int, nbytes: int, device_index: int) -> int: ...
def simulated_device_read(ptr: int, nbytes: int, device_index: int) -> bytearray: ...
def simulated_device_write(ptr: int, data: Buffer, device_index: int) -> None: ...

# Present only when built with the CUDA toolkit (WITH_CUDA is then True).
WITH_CUDA: bool

@final
class CudaStatus(TypedDict):
    runtime_version: int
    driver_version: int  # 0: no driver
    device_count: int | None  # None when CUDA is unusable
    error: str | None  # the ExecuTorch Error name
    cuda_error: str | None  # e.g. "cudaErrorInsufficientDriver"
    message: str

@final
class CudaDeviceProperties(TypedDict):
    index: int
    name: str
    compute_capability: tuple[int, int]
    total_memory: int
    pci_bus_id: str

@final
class CudaCopyConfig(TypedDict):
    pageable: Literal["staged", "direct"]
    staging_threshold: int
    chunk_bytes: int

def cuda_status() -> CudaStatus: ...
def cuda_device_properties(index: int) -> CudaDeviceProperties: ...
def use_cuda() -> Literal["registered", "already et_copy", "already other"]: ...
def cuda_pointer_device(ptr: int) -> int: ...
def cuda_copy_config() -> CudaCopyConfig: ...
def set_cuda_copy_config(pageable: str, staging_threshold: int, chunk_bytes: int) -> None: ...
def cuda_register_host(ptr: int, nbytes: int) -> None: ...
def cuda_unregister_host(ptr: int) -> None: ...
def set_cuda_stream(device: int, stream: int | None) -> None: ...
def cuda_stream(device: int) -> int | None: ...

# A DLPack capsule over CUDA memory that keeps `owner` alive until the consumer frees it.
def cuda_dlpack(
    owner: object, ptr: int, device: int, shape: Sequence[int], strides: Sequence[int], code: int, bits: int
) -> CapsuleType: ...

class DeviceBuffer:
    def __init__(self, nbytes: int, device_type: int, device_index: int, alignment: int) -> None: ...
    @property
    def ptr(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def device_index(self) -> int: ...
    @property
    def freed(self) -> bool: ...
    def free(self) -> None: ...
    def slice(self, offset: int, nbytes: int) -> DeviceBuffer: ...

# Device memory with the metadata the kernels see (python/bindings/device_tensor.cpp),
# checked when made and read-only after; use et_copy.DeviceTensor, which adds cpu()
# and the DLPack exports.
class DeviceTensor:
    def __new__(
        cls: type[_T],
        buffer: DeviceBuffer,
        dtype: torch.dtype,
        device: Device,
        shape: Sequence[int],
        dim_order: Sequence[int] | None,
        dynamic: bool,
    ) -> _T: ...
    @classmethod
    def _allocate(
        cls: type[_T],
        shape: Sequence[int],
        dtype: torch.dtype,
        device: Device,
        dim_order: Sequence[int] | None,
        dynamic: bool,
        alignment: int,
    ) -> _T: ...
    @property
    def shape(self) -> torch.Size: ...
    @property
    def capacity(self) -> torch.Size: ...
    @property
    def dtype(self) -> torch.dtype: ...
    @property
    def device(self) -> Device: ...  # the (type, index) tuple it was made with
    @property
    def dim_order(self) -> tuple[int, ...]: ...
    @property
    def dynamic(self) -> bool: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def capacity_nbytes(self) -> int: ...
    @property
    def freed(self) -> bool: ...
    @property
    def _buffer(self) -> DeviceBuffer: ...
    def dim(self) -> int: ...
    def numel(self) -> int: ...
    def data_ptr(self) -> int: ...
    def free(self) -> None: ...

# A method's metadata (python/bindings/program.cpp's method_meta_dict, the one
# builder of both Program.method_meta and Method.meta): each tensor's TensorInfo
# with the device it lives on, a {"tag": EValue Tag code} for any other value
# (-1: unreadable), and the planned buffers with the device the program names.
@final
class TensorInfo(TypedDict):
    name: str
    dtype: int  # ExecuTorch ScalarType code
    shape: list[int]
    dim_order: list[int]
    nbytes: int
    memory_planned: bool
    device_type: int  # as the loaded method holds it, or (Program.method_meta) as the program places it
    device_index: int

@final
class ValueInfo(TypedDict):
    tag: int

@final
class PlannedBufferInfo(TypedDict):
    device_type: int
    device_index: int
    nbytes: int

@final
class MethodMeta(TypedDict):
    name: str
    inputs: list[TensorInfo | ValueInfo | None]  # None: a tensor whose TensorInfo is unreadable
    outputs: list[TensorInfo | ValueInfo | None]
    attributes: list[TensorInfo]
    planned_buffers: list[PlannedBufferInfo]

# et_copy.runtime's core (python/bindings/program.cpp); use et_copy.runtime.
class Program:
    @property
    def method_names(self) -> list[str]: ...
    @property
    def device_scratch_nbytes(self) -> int: ...
    def new_session(self) -> Session: ...
    def method_meta(self, name: str) -> MethodMeta: ...
    # The ETDump profile recorded since the last write (loaded with enable_etdump=True).
    def write_etdump(self, path: str, debug_buffer_path: str | None = None) -> None: ...

# A sequence's state on the device and the methods loaded on it (runtime/include/et_copy/sessions.h).
class Session:
    def load_method(self, name: str) -> Method: ...
    def reset(self) -> None: ...
    @property
    def state_nbytes(self) -> int: ...
    @property
    def device_nbytes(self) -> int: ...

class Method:
    @property
    def name(self) -> str: ...
    def meta(self) -> MethodMeta: ...
    # Checks every value first (method_io.cpp): TypeError, ValueError or EtCopyError.
    # outputs: per output None (not a tensor) or the tensor that receives it. Returns
    # per tensor output None, per other output its value.
    # inputs and outputs: a list or a tuple (TypeError for any other sequence).
    def execute(
        self,
        inputs: Sequence[_Tensor | int | float | bool],
        outputs: Sequence[_Tensor | None],
    ) -> list[int | float | bool | None]: ...

# verification: 0 Minimal, 1 InternalConsistency; data_path: a .ptd file; enable_etdump: an ETDump
# profile of every method, with debug_buffer_size bytes for the host tensors it logs;
# backend_options: per backend id (EVERY_BACKEND: every device backend), the options passed to it,
# opaque, as runtime specs at each method load (et_copy/backend_options.h).
def load_program(
    data: bytes,
    verification: int = 1,
    data_path: str | None = None,
    enable_etdump: bool = False,
    debug_buffer_size: int = 0,
    backend_options: dict[str, dict[str, bool | int | str]] = ...,
) -> Program: ...
def load_program_file(
    path: str,
    verification: int = 1,
    data_path: str | None = None,
    enable_etdump: bool = False,
    debug_buffer_size: int = 0,
    backend_options: dict[str, dict[str, bool | int | str]] = ...,
) -> Program: ...

EVERY_BACKEND: str
# The keys et_copy.runtime.load's threads, verify_data and trust_code set for every backend.
THREADS_SPEC: str
VERIFY_DATA_SPEC: str
TRUST_CODE_SPEC: str

# Refuses (EtCopyError, error "InvalidProgram") a program in which the host would read or write
# device memory: a CPU kernel or a backend not in `backends` taking a device tensor, a copy whose
# sides are swapped, a device-planned method input, an initial value written into device memory at
# load. backends=None: device_backends(). See et_copy::check_device_access.
def check_device_access(program: bytes, backends: Sequence[str] | None = None) -> None: ...

# Refuses (EtCopyError, InvalidProgram) a program with a kernel-call argument of a kind its operator's
# schema does not take. See et_copy::check_argument_kinds.
def check_argument_kinds(program: bytes) -> None: ...

# Whether the argument-kind table (generated from torch's schemas at build time) holds `operator`.
def has_argument_kinds(operator: str) -> bool: ...
def argument_kinds_operator_count() -> int: ...

# The delegate backend ids the DeviceAllocator serving CUDA allows on the device: the
# registered device backends whose runs_on accepts it (SimulatedDeviceBackend on the
# simulated device, AotiDeviceBackend on it and on a GPU), then "CudaBackend" on a GPU
# (et_copy's CUDA allocator or another library's); [] when nothing serves CUDA.
def device_backends() -> list[str]: ...
def operator_names() -> set[str]: ...
def backend_names() -> list[str]: ...
def set_forwarded_log_levels(info_and_debug: bool) -> bool: ...

# The benchmark's C++ timing loops and the tests' device probes
# (python/bindings/loops.cpp): the submodule et_copy._C.loops, reached as an
# attribute (`from et_copy._C import loops`), not importable by its dotted name.
class _Loops(ModuleType):
    @staticmethod
    def bench_kernel(
        kind: str, nbytes: int, iters: int, repeats: int, host: int = 0, device: int = 0
    ) -> list[float]: ...
    @staticmethod
    def bench_memcpy(dst: int, src: int, nbytes: int, iters: int, repeats: int) -> list[float]: ...
    @staticmethod
    def device_to_device(dst: int, src: int, nbytes: int, device_index: int) -> None: ...
    @staticmethod
    def kernel_address(kind: str) -> int: ...
    # Present only when built with the CUDA toolkit.
    @staticmethod
    def cuda_raw_memcpy(dst: int, src: int, nbytes: int, kind: str) -> None: ...
    @staticmethod
    def cuda_pointer_device(ptr: int) -> int: ...

loops: _Loops
