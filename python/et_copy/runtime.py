"""Running ExecuTorch programs with et-copy's kernels: ``et_copy.runtime``.

``executorch.runtime`` runs a program's ``et_copy`` copies through the kernels
of the wheel's kernel library, which registers those names first and checks
less (a dtype mismatch writes past ``out``). ``et_copy.runtime`` loads the
same program with et-copy's kernels scoped to each method
(``et_copy::method_kernels()``): every other operator, and every delegate,
resolves from ExecuTorch's registry as usual, and nothing is registered, so
it works whichever of the two was imported first.

    from et_copy.runtime import Runtime                # executorch.runtime's API
    program = Runtime.get().load_program("model.pte")  # a path (mmapped), bytes, or a file object
    method = program.load_method("forward")
    outputs = method.execute([x])

``et_copy.runtime.load(...)`` is the same call. Code written against
``executorch.runtime`` switches with its import line: ``Runtime``,
``Verification``, ``Program.method_names`` (a set), ``Program.metadata``,
``Method.metadata``, ``Runtime.operator_registry`` and
``Runtime.backend_registry`` behave as there.

Inputs are torch tensors and :class:`et_copy.DeviceTensor` s; host outputs come
back as torch tensors, device outputs (methods exported with
``skip_d2h_for_method_outputs``) as DeviceTensors that the caller owns, so
one method's device output can be the next method's device input with no
host round trip.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import operator
import os
from typing import Any, Callable, Mapping, Protocol, Sequence, SupportsIndex, Union

import torch

from . import _C
from ._device import Device
from ._dtypes import SCALAR_TYPE_CODES
from ._errors import EtCopyError
from ._registration import _wheel_library
from ._tensors import DeviceTensor, empty

# A device backend's load option (backend_options of load): a bool, an int or a str.
BackendOptionValue = Union[bool, int, str]

__all__ = [
    "BackendRegistry",
    "Method",
    "MethodMetadata",
    "OperatorRegistry",
    "Program",
    "Runtime",
    "Session",
    "TensorMetadata",
    "Verification",
    "load",
]


class Verification(enum.IntEnum):
    """How much of a program is verified at load, as executorch.runtime's
    ``Verification`` (the same names and values). Wherever et_copy.runtime
    takes one it also takes executorch.runtime's own ``Verification`` and
    an int of the same meaning."""

    Minimal = 0
    InternalConsistency = 1


def _verification(value: object) -> Verification:
    """``value`` as our Verification: ours, executorch.runtime's (a pybind11
    enum: an int by ``__index__``, with the same names and values), or an
    int. A bool, a float or a str is none of these; a name that disagrees
    with the value is refused rather than guessed."""
    if isinstance(value, Verification):
        return value
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise TypeError(f"et_copy.runtime: verification must be a Verification or an int, got {type(value).__name__}")
    try:
        level = Verification(operator.index(value))
    except ValueError:
        raise ValueError(
            f"et_copy.runtime: verification {value!r} is none of {[f'{v.name} ({v.value})' for v in Verification]}"
        ) from None
    name = getattr(value, "name", None)
    if isinstance(name, str) and name != level.name:
        raise ValueError(f"et_copy.runtime: verification {value!r} is named {name!r} but has the value of {level.name}")
    return level


class TensorMetadata:
    """A tensor input, output or attribute of a method, as the program
    declares it, with executorch.runtime's ``TensorInfo`` accessors:
    ``sizes()`` (the upper bound, for a dynamic shape), ``dtype()``
    (ExecuTorch's ScalarType code), ``is_memory_planned()`` (in the method's
    planned memory, else bound per call), ``nbytes()``; and what a device
    program needs besides: ``device()`` ("cpu" or "cuda:N"), ``dim_order()``,
    ``torch_dtype()`` (None for a ScalarType torch has no dtype for) and
    ``name()``."""

    def __init__(self, d: _C.TensorInfo) -> None:
        self._d = d

    def sizes(self) -> tuple[int, ...]:
        return tuple(self._d["shape"])

    def dtype(self) -> int:
        return self._d["dtype"]

    def torch_dtype(self) -> torch.dtype | None:
        return _DTYPES.get(self._d["dtype"])

    def is_memory_planned(self) -> bool:
        return self._d["memory_planned"]

    def nbytes(self) -> int:
        return self._d["nbytes"]

    def name(self) -> str:
        return self._d["name"]

    def device(self) -> str:
        return str(Device(self._d["device_type"], self._d["device_index"]))

    def dim_order(self) -> tuple[int, ...]:
        return tuple(self._d["dim_order"])

    def __repr__(self) -> str:
        return (
            f"TensorMetadata(sizes={list(self.sizes())}, dtype={self.dtype()}, device={self.device()}, "
            f"is_memory_planned={self.is_memory_planned()}, nbytes={self.nbytes()})"
        )


class MethodMetadata:
    """A method's metadata with executorch.runtime's ``MethodMeta``
    accessors: ``name()``, ``num_inputs()``, ``num_outputs()``,
    ``num_attributes()``, ``input_tensor_meta(i)``, ``output_tensor_meta(i)``,
    ``attribute_tensor_meta(i)`` (IndexError out of range, ValueError for a
    value that is not a tensor), ``num_memory_planned_buffers()``,
    ``memory_planned_buffer_size(i)``; and, for a device program,
    ``memory_planned_buffer_device(i)``, ``input_tag(i)`` / ``output_tag(i)``
    (ExecuTorch's EValue Tag code of an input or output that is not a
    tensor, None for a tensor)."""

    def __init__(self, d: _C.MethodMeta) -> None:
        self._d = d

    def name(self) -> str:
        return self._d["name"]

    def num_inputs(self) -> int:
        return len(self._d["inputs"])

    def num_outputs(self) -> int:
        return len(self._d["outputs"])

    def num_attributes(self) -> int:
        return len(self._d["attributes"])

    def _entry(
        self, kind: str, entries: Sequence[_C.TensorInfo | _C.ValueInfo | None], index: int
    ) -> _C.TensorInfo | _C.ValueInfo | None:
        if not 0 <= index < len(entries):
            raise IndexError(f"{self.name()}: {kind} {index} out of range (it has {len(entries)})")
        return entries[index]

    def _tensor(self, kind: str, entries: Sequence[_C.TensorInfo | _C.ValueInfo | None], index: int) -> TensorMetadata:
        entry = self._entry(kind, entries, index)
        if entry is None or "tag" in entry:
            raise ValueError(f"{self.name()}: {kind} {index} is not a tensor")
        return TensorMetadata(entry)

    def _tag(self, kind: str, entries: Sequence[_C.TensorInfo | _C.ValueInfo | None], index: int) -> int | None:
        entry = self._entry(kind, entries, index)
        return entry["tag"] if entry is not None and "tag" in entry else None

    def input_tensor_meta(self, index: int) -> TensorMetadata:
        return self._tensor("input", self._d["inputs"], index)

    def output_tensor_meta(self, index: int) -> TensorMetadata:
        return self._tensor("output", self._d["outputs"], index)

    def attribute_tensor_meta(self, index: int) -> TensorMetadata:
        return self._tensor("attribute", self._d["attributes"], index)

    def input_tag(self, index: int) -> int | None:
        return self._tag("input", self._d["inputs"], index)

    def output_tag(self, index: int) -> int | None:
        return self._tag("output", self._d["outputs"], index)

    def num_memory_planned_buffers(self) -> int:
        return len(self._d["planned_buffers"])

    def memory_planned_buffer_size(self, index: int) -> int:
        return self._d["planned_buffers"][index]["nbytes"]

    def memory_planned_buffer_device(self, index: int) -> str:
        b = self._d["planned_buffers"][index]
        return str(Device(b["device_type"], b["device_index"]))

    def __repr__(self) -> str:
        return f"MethodMetadata(name={self.name()}, num_inputs={self.num_inputs()}, num_outputs={self.num_outputs()})"


_DTYPES = {code: dtype for dtype, code in SCALAR_TYPE_CODES.items()}

# The executorch wheel's CPU kernels and XNNPACK backend, loaded as
# executorch.runtime loads them: dlopen of an already-loaded library is a
# no-op, so the two runtimes can come in either order and nothing registers twice.
_WHEEL_LIBRARIES = ("libexecutorch_kernels_optimized.so", "libexecutorch_backend_xnnpack.so")
_loaded_wheel_libraries = False


def _load_wheel_libraries() -> None:
    global _loaded_wheel_libraries
    if _loaded_wheel_libraries:
        return
    for name in _WHEEL_LIBRARIES:
        path = _wheel_library(name)
        if path is not None:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    _loaded_wheel_libraries = True


AnyTensor = Union[torch.Tensor, DeviceTensor]


class _Readable(Protocol):
    def read(self) -> bytes: ...


# What a program is loaded from: a path, its bytes, or a file opened for reading.
ProgramSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, _Readable]
# What a method takes per input, and gives back per output (None: nothing).
Value = Union[torch.Tensor, DeviceTensor, int, float, bool]


class Method:
    """A loaded method: :attr:`metadata` and :meth:`execute`. Not
    thread-safe: one call at a time per Method (as ExecuTorch's Method)."""

    def __init__(self, core: _C.Method) -> None:
        self._core = core
        self.name: str = core.name
        self.metadata = MethodMetadata(core.meta())
        self._makers = [_maker(self.metadata, i) for i in range(self.metadata.num_outputs())]

    def execute(
        self, inputs: Sequence[Value], *, outputs: Sequence[AnyTensor | None] | None = None
    ) -> list[Value | None]:
        """Runs the method on ``inputs`` (torch tensors, DeviceTensors, Python
        scalars, in the method's order) and returns its outputs: torch tensors
        for host outputs, DeviceTensors for device outputs, fresh each call.

        ``outputs`` may give, per output, a tensor to write that output into
        (one with the output's dtype, device, dim order and capacity); None
        entries, or no ``outputs``, let et_copy.runtime allocate them. Raises
        EtCopyError (with ``.error``, ``.instruction``, ``.operator`` and
        ``.log`` when the runtime failed inside a kernel), TypeError or
        ValueError for inputs the method cannot take; the bindings check
        every value before anything runs.
        """
        makers = self._makers
        outs: Sequence[AnyTensor | None]
        if outputs is None:
            outs = [make() if make is not None else None for make in makers]
        elif isinstance(outputs, (list, tuple)) and len(outputs) == len(makers):
            outs = [make() if given is None and make is not None else given for given, make in zip(outputs, makers)]
        else:
            outs = outputs  # the bindings say what is wrong with it
        result = self._core.execute(inputs, outs)
        # Tensor outputs were written, and reshaped, in place; the others come back as values.
        return [value if out is None else out for out, value in zip(outs, result)]


def _maker(metadata: MethodMetadata, index: int) -> Callable[[], AnyTensor] | None:
    """What makes a fresh tensor for output ``index`` on each call (None: not
    a tensor). The bindings refused, at load, the outputs none can be made for."""
    if metadata.output_tag(index) is not None:
        return None
    m = metadata.output_tensor_meta(index)
    shape, dtype, dim_order, device = m.sizes(), m.torch_dtype(), m.dim_order(), m.device()
    assert dtype is not None  # the bindings refused, at load, an output whose dtype torch lacks
    if device != "cpu":
        return functools.partial(empty, shape, dtype, device, dynamic=True, dim_order=dim_order)
    if list(dim_order) == sorted(dim_order):
        return functools.partial(torch.empty, shape, dtype=dtype)
    return functools.partial(torch.empty_permuted, shape, dim_order, dtype=dtype)


class Session:
    """One sequence on a loaded program: its own state on the device, and
    the methods that run on it (:meth:`load_method`). Methods of one session
    share its state (an LLM's prefill and decode); two sessions never see
    each other's. The state starts at its initial value (zeros, or the
    value the program stores), written through the device allocator's h2d
    copy when the first method with state is loaded, and again on
    :meth:`reset`.

    A session costs its state (:attr:`state_nbytes`); the weights and the
    scratch memory are the program's, shared by every session, so one
    execution runs at a time per program.
    """

    def __init__(self, core: _C.Session) -> None:
        self._core = core  # holds the program's core: no reference back to the Program (no cycle to collect)
        self._methods: dict[str, Method] = {}

    def load_method(self, name: str = "forward") -> Method:
        """The method ``name`` on this session's state, loaded once (a
        second call returns the same Method). Its planned buffers live on
        the devices the program names, through the registered
        DeviceAllocator (call :func:`et_copy.use_simulated_device` or
        :func:`et_copy.use_cuda` first). Raises EtCopyError saying what failed."""
        if not isinstance(name, str):
            raise TypeError(f"et_copy.runtime.Session.load_method: name must be a str, got {type(name).__name__}")
        method = self._methods.get(name)
        if method is None:
            method = self._methods[name] = Method(self._core.load_method(name))
        return method

    def reset(self) -> None:
        """Puts the state back to its start, through counted h2d copies: the
        next execution starts a new sequence. Raises EtCopyError
        (NotSupported) for a program that does not keep its state apart
        (one not exported by et_copy.export)."""
        self._core.reset()

    @property
    def state_nbytes(self) -> int:
        """Bytes of this session's state (0 until a method with state is loaded)."""
        return self._core.state_nbytes

    @property
    def device_nbytes(self) -> int:
        """Device bytes this session holds: its state, plus all of its
        methods' planned memory for a program without a state of its own."""
        return self._core.device_nbytes


class Program:
    """A loaded, verified program: :attr:`method_names`, :meth:`load_method`,
    :meth:`new_session`."""

    def __init__(self, core: _C.Program) -> None:
        self._core = core
        self._default: Session | None = None

    @property
    def method_names(self) -> set[str]:
        """The program's method names, as a set (as executorch.runtime's)."""
        return set(self._core.method_names)

    def metadata(self, method_name: str) -> MethodMetadata:
        """``method_name``'s metadata, read from the program without loading
        the method. Raises EtCopyError (InvalidArgument) for a name the
        program lacks."""
        return MethodMetadata(self._core.method_meta(method_name))

    def load_method(self, name: str = "forward") -> Method:
        """Loads ``name`` with et-copy's kernels for its et_copy operators, in
        the program's default session: methods loaded here share one state,
        and a second call returns the same Method (as executorch.runtime's
        Program caches its methods). Raises EtCopyError saying what failed."""
        if not isinstance(name, str):
            raise TypeError(f"et_copy.runtime.Program.load_method: name must be a str, got {type(name).__name__}")
        if self._default is None:
            self._default = self.new_session()
        return self._default.load_method(name)

    def new_session(self) -> Session:
        """A new :class:`Session`: independent state, the program's weights and scratch."""
        _load_wheel_libraries()  # before the first method load snapshots the registry
        return Session(self._core.new_session())

    def write_etdump_result_to_file(
        self, etdump_path: str | os.PathLike, debug_buffer_path: str | os.PathLike | None = None
    ) -> None:
        """Writes the ETDump profile recorded since the last write (the
        program was loaded with ``enable_etdump=True``) to ``etdump_path``,
        and the debug buffer to ``debug_buffer_path`` when the program has
        one, as executorch.runtime's. Read it with
        ``executorch.devtools.Inspector(etdump_path=...)``. Raises
        EtCopyError: InvalidState without ``enable_etdump``, NotFound when
        nothing was recorded."""
        debug = None if debug_buffer_path is None else os.fspath(debug_buffer_path)
        self._core.write_etdump(os.fspath(etdump_path), debug)

    @property
    def device_scratch_nbytes(self) -> int:
        """Device bytes of scratch memory allocated for the methods loaded so far, shared by all sessions."""
        return self._core.device_scratch_nbytes


class OperatorRegistry:
    """The operators ExecuTorch's registry holds (executorch.runtime's
    ``Runtime.operator_registry``); et-copy's kernels serve the et_copy ones
    per method, whatever the registry says."""

    @property
    def operator_names(self) -> set[str]:
        _load_wheel_libraries()
        return set(_C.operator_names())


class BackendRegistry:
    """The delegate backends registered with ExecuTorch (executorch.runtime's
    ``Runtime.backend_registry``)."""

    @property
    def registered_backend_names(self) -> list[str]:
        _load_wheel_libraries()
        return list(_C.backend_names())

    def is_available(self, backend_name: str) -> bool:
        return backend_name in self.registered_backend_names


class Runtime:
    """executorch.runtime's ``Runtime``, running programs with et-copy's
    kernels and sessions: ``Runtime.get().load_program(...)``."""

    @staticmethod
    @functools.lru_cache(maxsize=1)
    def get() -> Runtime:
        """The Runtime singleton."""
        return Runtime()

    def __init__(self) -> None:
        self.operator_registry = OperatorRegistry()
        self.backend_registry = BackendRegistry()

    def load_program(
        self,
        data: ProgramSource,
        *,
        verification: Verification | int = Verification.InternalConsistency,
        enable_etdump: bool = False,
        debug_buffer_size: int = 0,
        data_path: str | os.PathLike | None = None,
        threads: int | None = None,
        verify_data: bool = False,
        trust_code: bool = False,
        backend_options: Mapping[str, Mapping[str, BackendOptionValue]] | None = None,
    ) -> Program:
        """Loads a program from a path (mmapped, not read), bytes, a
        bytearray or memoryview, or a file-like object, verified at
        ``verification`` (ours, executorch.runtime's, or its int). ``data_path`` is a .ptd file holding data the
        program keeps outside the .pte (weights). ``enable_etdump`` records
        an ETDump profile of every method the program runs (write it with
        :meth:`Program.write_etdump_result_to_file`); ``debug_buffer_size``
        bytes, when not 0, also hold the intermediate outputs that live on
        the host (device tensors are not read back for it). ``threads`` is
        the intra-op threads the compiled backend (``backend="aoti"``) runs
        each method's code with, on the thread that calls ``execute``; None
        keeps the backend's default, one thread, which a machine shared
        with other work needs (docs/benchmarks.md, "Threads"); pass e.g.
        ``os.cpu_count()`` on a machine of your own. The simulated backend
        computes on one thread whatever it is. ``verify_data`` checks every
        weight and initial state value against the SHA-256 it is stored
        under as it is copied to the device (docs/runtime.md, "Untrusted
        programs"). ``trust_code`` runs the compiled code this program
        carries (``backend="aoti"``) though this machine did not compile
        it: that code runs in this process, so pass it only for a program
        from a source you trust; :func:`et_copy.backends.aoti.trust` trusts by
        digest instead. ``backend_options`` passes a device backend its own
        options, opaque to the runtime: ``{backend id: {key: bool, int or
        str}}`` (``"*"``: every device backend), given to the backend as
        runtime specs when each method loads; ``threads``, ``verify_data``
        and ``trust_code`` are options for every backend, set over
        ``backend_options["*"]`` (a backend's own value still wins). Raises
        EtCopyError (InvalidProgram, ...) for a malformed program or an
        option that cannot be passed, TypeError for what is none of these
        and ValueError for a ``threads`` below 1."""
        level = int(_verification(verification))
        data_file = None if data_path is None else os.fspath(data_path)
        every: dict[str, BackendOptionValue] = {
            _C.THREADS_SPEC: _threads(threads),
            _C.VERIFY_DATA_SPEC: _flag("verify_data", verify_data),
            _C.TRUST_CODE_SPEC: _flag("trust_code", trust_code),
        }
        options = (
            level,
            data_file,
            bool(enable_etdump),
            int(debug_buffer_size),
            _backend_options(backend_options, every),
        )
        _load_wheel_libraries()
        if isinstance(data, (str, os.PathLike)):
            path = os.fspath(data)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"et_copy.runtime: no program file {path!r}")
            return _loaded(_C.load_program_file, path, options)
        if isinstance(data, (bytes, bytearray, memoryview)):
            return _loaded(_C.load_program, bytes(data), options)
        if hasattr(data, "read"):
            return _loaded(_C.load_program, data.read(), options)
        raise TypeError(
            "et_copy.runtime: a program is a path, bytes, bytearray, memoryview or a file-like object, "
            f"got {type(data).__name__}"
        )


def _loaded(load: Any, source: Any, options: tuple[Any, ...]) -> Program:
    """``load(source, *options)`` as a Program; a refusal that names a backend
    of et_copy.backends' table (another package's too) whose runtime side is
    not registered says which call registers it."""
    try:
        return Program(load(source, *options))
    except EtCopyError as error:
        hint = _registration_hint(str(error))
        if not hint:
            raise
        raise EtCopyError(
            f"{error}\n  {hint}",
            error=error.error,
            instruction=error.instruction,
            operator=error.operator,
            log=error.log,
        ) from None


def _registration_hint(message: str) -> str:
    """What registers the table's backend that ``message`` names, when it is not
    registered and the message does not say so already ("" otherwise)."""
    if "is not registered" in message:
        return ""  # the backend's own library described it (backend_hint, device_backend.h)
    from .backends import BACKENDS

    registered = set(_C.backend_names())
    for backend in BACKENDS.values():
        if f"'{backend.backend_id}'" in message and backend.backend_id not in registered:
            return (
                f"backend '{backend.backend_id}' (the word {backend.word!r}) is not registered: "
                f"call et_copy.backends.use_backend({backend.word!r}) before loading"
            )
    return ""


def _backend_options(
    given: Mapping[str, Mapping[str, BackendOptionValue]] | None, every: dict[str, BackendOptionValue]
) -> dict[str, dict[str, BackendOptionValue]]:
    """The bindings' options by backend id: ``given``, with the conveniences
    in ``every`` set for every backend when not at their defaults (0, False)."""
    if given is not None and not isinstance(given, Mapping):
        raise TypeError(f"et_copy.runtime.load: backend_options must be a mapping, got {type(given).__name__}")
    options = {backend: dict(entries) for backend, entries in (given or {}).items()}
    for key, value in every.items():
        if value is not False and value != 0:
            options.setdefault(_C.EVERY_BACKEND, {})[key] = value
    return options


def _threads(threads: int | None) -> int:
    """The bindings' thread count for ``threads`` (0: the backends' default)."""
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"et_copy.runtime.load: threads must be an int or None, got {type(threads).__name__}")
    if threads < 1:
        raise ValueError(f"et_copy.runtime.load: threads must be at least 1, got {threads}")
    return threads


def _flag(name: str, value: bool) -> bool:
    """A load flag, which must be a bool: a digest or path passed where a flag goes is a mistake to name."""
    if not isinstance(value, bool):
        raise TypeError(f"et_copy.runtime.load: {name} must be a bool, got {type(value).__name__}")
    return value


def load(
    program: ProgramSource,
    *,
    verification: Verification | int = Verification.InternalConsistency,
    enable_etdump: bool = False,
    debug_buffer_size: int = 0,
    data_path: str | os.PathLike | None = None,
    threads: int | None = None,
    verify_data: bool = False,
    trust_code: bool = False,
    backend_options: Mapping[str, Mapping[str, BackendOptionValue]] | None = None,
) -> Program:
    """``Runtime.get().load_program(program, ...)``, with the same arguments."""
    return Runtime.get().load_program(
        program,
        verification=verification,
        enable_etdump=enable_etdump,
        debug_buffer_size=debug_buffer_size,
        data_path=data_path,
        threads=threads,
        verify_data=verify_data,
        trust_code=trust_code,
        backend_options=backend_options,
    )
