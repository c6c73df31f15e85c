"""The compiled device backend, ahead of time: AOTInductor code in a delegate record
(:mod:`et_copy.backends.aoti` gives its names; this module imports executorch's exporter).

docs/design.md, "A compiled device backend (issue 34)", parts 3 and 4.

- :class:`AotiDevicePartitioner` partitions as the simulated backend's
  partitioner does (one shared base, :class:`et_copy.backends.partitioner.DevicePartitioner`),
  for the backend ``"AotiDeviceBackend"``, with the compile specs
  ``target_device`` and ``aoti_target`` (``cpu``: code for the CPU, run on the
  simulated device; ``cuda``: code for a GPU).
- :class:`AotiDeviceBackend` compiles each partition with
  ``torch._inductor.aot_compile`` into a ``.so`` that holds code only: every
  constant (parameters, buffers, lifted constants) goes to the outer
  program's named data under its content key, as the simulated backend's
  weights do, and the runtime binds them, and the state in the session's
  arena, as *user-managed* constants by the FQN the compiled model reports.
  A mutable buffer is a constant the compiled code updates in place.

The ``.so`` is cached by content (:mod:`et_copy.backends.aoti._compile_cache`).
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import platform
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec

from ..._dtypes import scalar_type_code
from ..partitioner import DevicePartitioner
from ..preprocess import DevicePreprocess
from ..record import RECORD_VERSION, delegate_record, device_of, record_header
from ..state import StateSlot, mutable_state
from . import BACKEND_ID, PAYLOAD_AOTI, _aoti, _compile_cache, _cpu_layouts, _quantized
from ._constant_reads import copies_as_views
from ._quantized import QuantizedWeightError, read_quantized_packed

TARGET_KEY = "aoti_target"  # CompileSpec: what the code is compiled for
TARGETS = ("cpu", "cuda")

__all__ = [
    "TARGETS",
    "AotiDeviceBackend",
    "AotiDevicePartitioner",
    "compile_options",
    "compile_stats",
    "default_target",
]

_log = logging.getLogger(__name__)


def default_target() -> str:
    """``cuda`` when a GPU serves cuda: et-copy's CUDA allocator or another
    library's (upstream's CUDA backend registers its own); the code then runs
    on a GPU. Else ``cpu`` (the simulated device, or nothing registered yet)."""
    from ..._registration import allocator_info

    info = allocator_info("cuda")
    return "cpu" if info is None or info.get("name") == "simulated" else "cuda"


class AotiDevicePartitioner(DevicePartitioner):
    """Partitions a graph for the compiled backend: one delegate with the
    whole graph, its weights and its mutable buffers, on ``device`` ("cuda"
    or "cuda:N"), compiled for ``target`` ("cpu" or "cuda"; None:
    :func:`default_target`)."""

    backend_id = BACKEND_ID

    def __init__(self, device: str = "cuda:0", target: str | None = None) -> None:
        if target is None:
            target = default_target()
        if target not in TARGETS:
            raise ValueError(f"et_copy.AotiDevicePartitioner: target must be one of {TARGETS}, got {target!r}")
        self.target = target
        super().__init__(device, [CompileSpec(TARGET_KEY, target.encode())])


def target_of(compile_specs: Sequence[CompileSpec]) -> str:
    for spec in compile_specs:
        if spec.key == TARGET_KEY:
            target = bytes(spec.value).decode()
            if target not in TARGETS:
                raise ValueError(
                    f"et_copy.{BACKEND_ID}: compile spec '{TARGET_KEY}' is {target!r}, not one of {TARGETS}"
                )
            return target
    raise ValueError(f"et_copy.{BACKEND_ID}: the partition has no '{TARGET_KEY}' compile spec")


# Flags for GCC, with which Inductor compiles the host C++ (the kernels at -O3). GCC 12 (12.2 seen)
# miscompiles ATen's AVX-512 transpose of a 32x32 bf16 tile (at::vec::transpose_mxn<BFloat16>),
# which a kernel calls to read a bf16 tensor transposed (a KV cache's K^T): where a file calls it
# twice or more, GCC clones it for the constant strides, turns the loop that stores the transposed
# rows into one memcpy from its stack array, and drops most of the stores into that array; the
# tile comes out as stack garbage (a bf16 Qwen3's prefill: all-NaN logits). Without the
# loop-to-memcpy rewrite the stores stay. Inductor has no option for extra flags; its `-march=`
# value reaches the compiler as written, split at spaces, so they ride on it.
GCC_FLAGS = ("-fno-tree-loop-distribute-patterns",)


def _compiles_with_gcc() -> bool:
    from torch._inductor.cpp_builder import is_gcc

    return bool(is_gcc())


def _march(options: dict[str, Any]) -> str:
    """The ``-march=`` value of ``options`` without :data:`GCC_FLAGS`."""
    return str(options.get("cpp.march") or "").split(" ")[0]


def compile_options(target: str) -> dict[str, Any]:
    """AOTInductor's options for ``target`` (part of the cache key)."""
    options: dict[str, Any] = {
        "aot_inductor.package": False,  # one .so, not a .pt2 archive
        "aot_inductor.package_constants_in_so": False,  # the weights come from the program's named data
        # Inductor writes 1-d constants of up to 8 elements, and 0-d ones, into the code as literals:
        # their values would then be in the .so (and the cache key, which ignores values, would lie).
        "always_keep_tensor_constants": True,
        # Inductor folds a constant whose elements are all equal (a LayerNorm's ones, a zeroed KV cache, a
        # step counter at 1) into a `full`: for a weight its value would be in the code, and for a mutable
        # buffer every run would start from its export-time value (seen: `steps.copy_(steps + 1)` always wrote 2).
        "joint_graph_constant_folding": False,
        "freezing": False,  # parameters stay constants the runtime binds, not folded into the code
        # Inductor's default: a depthwise conv has no Triton template and falls back to ATen.
        "max_autotune_conv_backends": "ATEN,TRITON",
        # Every parallel region asks OpenMP for the calling thread's count at run time, which the runtime
        # sets per execution (et_copy.runtime.load's threads). Without it the code depends on the exporting
        # process's torch.get_num_threads() (serial code at 1; num_threads(n) written in when n is not
        # the machine's CPU count), which the cache key does not name.
        "cpp.dynamic_threads": True,
    }
    # The host code (all of it on the CPU, the wrapper on CUDA) is for this machine's ISA unless
    # TORCHINDUCTOR_CPP_MARCH says otherwise; the cache key then names the machine.
    march = torch._inductor.config.cpp.march or "native"
    options["cpp.march"] = " ".join([march, *GCC_FLAGS]) if _compiles_with_gcc() else march
    if target == "cuda":
        options["aot_inductor.embed_kernel_binary"] = True  # the kernels inside the .so, not files beside it
    return options


@dataclass
class CompileStats:
    """What :class:`AotiDeviceBackend` did in this process: compiles, cache hits, seconds compiling."""

    compiles: int = 0
    hits: int = 0
    seconds: float = 0.0

    def since(self, before: CompileStats) -> dict[str, Any]:
        """What was done after ``before`` (a copy taken earlier, ``dataclasses.replace(compile_stats)``),
        as the bench reports it: compiles, cache_hits, compile_seconds."""
        return {
            "compiles": self.compiles - before.compiles,
            "cache_hits": self.hits - before.hits,
            "compile_seconds": self.seconds - before.seconds,
        }


compile_stats = CompileStats()


@dataclass(frozen=True)
class _Compiled:
    so: bytes
    path: Path  # a file holding ``so``: the cache's, or a temporary one
    temporary: bool  # the file is ours to delete (the cache is off)
    sha256: str  # of ``so``: the record's digest line, and what this machine trusts


def _host_fingerprint() -> str:
    """What "-march=native" resolves to: the machine and its CPU flags."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:
        pass
    return f"{platform.machine()} {flags}"


def _compile_inputs(
    edge_program, target: str, op: str = "et_copy.AotiDeviceBackend"
) -> tuple[torch.fx.GraphModule, list[Any]]:
    """The module AOTInductor compiles and its example inputs (the placeholders'
    fake tensors, so dynamic dims stay symbolic)."""
    ep = edge_program
    if target == "cuda":
        from torch.export.passes import move_to_device_pass

        ep = move_to_device_pass(ep, "cuda")
    module = ep.module()
    for fqn, value in ep.constants.items():
        # ep.module() makes a lifted constant a plain attribute, which AOTInductor renames
        # (_tensor_constant0); as a buffer it keeps its FQN, the name the runtime binds.
        if isinstance(value, torch.Tensor):
            owner, _, leaf = fqn.rpartition(".")
            sub = module.get_submodule(owner)
            if leaf not in sub._buffers:
                delattr(sub, leaf)
                sub.register_buffer(leaf, value, persistent=False)
    for sub in module.modules():
        # The record's bytes are contiguous and its strides say so: compile for that layout.
        for table in (sub._parameters, sub._buffers):
            for leaf, t in table.items():
                if t is not None and not t.is_contiguous():
                    table[leaf] = (
                        torch.nn.Parameter(t.contiguous(), False) if table is sub._parameters else t.contiguous()
                    )
    # A quantized weight's matmuls and gathers read its stored bytes, never a float copy of it
    # (docs/design.md, "Quantized weights and experts"); its packed forms become constants of the module.
    try:
        # ATen's int4 layout follows the ISA ATen dispatches to: only for code compiled for this machine alone.
        read_quantized_packed(
            module, target, host_bound=target == "cpu" and _march(compile_options(target)) == "native"
        )
    except QuantizedWeightError as e:
        raise RuntimeError(f"{op}: {e}") from None
    # A weight's *_copy views (a Linear's permute_copy of its weight) would each be a full copy of the
    # weight on every call; as views, Inductor reads it in place (mm over a transposed view). Other
    # copies stay, but select/slice/split_copy, which have no lowering or C shim, become view + clone.
    copies_as_views(module, set(ep.graph_signature.buffers_to_mutate.values()))
    vals = {n.name: n.meta["val"] for n in ep.graph.nodes if n.op == "placeholder"}
    return module, [vals[name] for name in ep.graph_signature.user_inputs]


def _key_parts(module, example, edge_program, options: dict, target: str) -> dict[str, Any]:
    """Everything the compiled code depends on, and nothing of the weights' values."""
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    return {
        "graph": module.code,
        "ranges": sorted(f"{k}: {v}" for k, v in edge_program.range_constraints.items()),
        "inputs": [
            (str(v.dtype), [str(s) for s in v.shape], [str(s) for s in v.stride()])
            if isinstance(v, torch.Tensor)
            else repr(v)
            for v in example
        ],
        "constants": sorted((k, str(t.dtype), list(t.shape), list(t.stride())) for k, t in named.items()),
        "mutated": sorted(edge_program.graph_signature.buffers_to_mutate.values()),
        "torch": torch.__version__,
        "options": options,
        "target": target,
        "host": _host_fingerprint() if _march(options) == "native" else "",
        "record": RECORD_VERSION,
        "cache": _compile_cache.FORMAT,
        # A graph that calls the quantized kernels by name (._quantized, ._cpu_layouts): their code is part of
        # it. Only such a graph: a float model's key does not change with them.
        "kernels": _kernels_digest() if _calls_kernels(module) else "",
    }


_KERNEL_MODULES = (_quantized, _cpu_layouts)


def _calls_kernels(module: torch.fx.GraphModule) -> bool:
    names = {m.__name__ for m in _KERNEL_MODULES}
    return any(n.op == "call_function" and getattr(n.target, "__module__", None) in names for n in module.graph.nodes)


def _kernels_digest() -> str:
    return hashlib.sha256("".join(inspect.getsource(m) for m in _KERNEL_MODULES).encode()).hexdigest()


def _compile(edge_program, target: str, op: str) -> tuple[_Compiled, torch.fx.GraphModule]:
    if target == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"{op}: compile spec '{TARGET_KEY}' is 'cuda', which compiles on a machine whose torch sees a GPU "
            f"(this torch, {torch.__version__}, sees none); export with target='cpu' for the simulated device"
        )
    module, example = _compile_inputs(edge_program, target, op)
    options = compile_options(target)
    key = _compile_cache.cache_key(_key_parts(module, example, edge_program, options, target))
    so = _compile_cache.lookup(key)
    source = None
    if so is not None:
        compile_stats.hits += 1
        _log.debug("%s: cache hit %s", op, key)
    else:
        start = time.monotonic()
        with torch.no_grad():
            path = torch._inductor.aot_compile(module, tuple(example), options=options)
        if not isinstance(path, str):
            raise RuntimeError(f"{op}: AOTInductor returned {path!r}, expected the path of one .so")
        cpp = Path(path).with_suffix(".cpp")
        source = cpp.read_text() if cpp.exists() else None
        _refuse_proxy_calls(source, op)
        so = Path(path).read_bytes()
        compile_stats.compiles += 1
        compile_stats.seconds += time.monotonic() - start
        _log.debug("%s: compiled %s in %.1f s", op, key, time.monotonic() - start)
    digest = hashlib.sha256(so).hexdigest()
    # This machine compiled it (now, or for its cache): its programs run here with no extra step.
    _aoti.trust_compiled_code(digest, compiled_here=True)
    stored = _compile_cache.store(key, so, source)
    if stored is not None:
        return _Compiled(so, stored, temporary=False, sha256=digest), module
    fd, tmp = tempfile.mkstemp(suffix=".so")
    with open(fd, "wb") as f:
        f.write(so)
    return _Compiled(so, Path(tmp), temporary=True, sha256=digest), module


PROXY_CALL = "aoti_torch_proxy_executor_call_function("  # how Inductor's C++ wrapper calls an op with no shim


def _refuse_proxy_calls(source: str | None, op: str) -> None:
    """An op with no C shim is called through AOTInductor's proxy executor,
    which needs a side file and a libtorch dispatcher call the runtime does
    not make. ``source`` is the generated wrapper's C++."""
    calls = [line.strip() for line in (source or "").splitlines() if PROXY_CALL in line]
    if calls:
        raise RuntimeError(
            f"{op}: the compiled code calls {len(calls)} op(s) through AOTInductor's proxy executor, which "
            f"the runtime has no use for: {calls[0]}"
        )


def _container_constants(compiled: _Compiled, target: str) -> dict[str, int] | None:
    """FQN -> ScalarType code of every constant the compiled model has, as its
    container reports them (the names the runtime binds); None when the
    container cannot be created here (CUDA code on a machine with no GPU)."""
    runner: Any
    if target == "cpu":
        runner = torch._C._aoti.AOTIModelContainerRunnerCpu(str(compiled.path), 1)
    elif torch.cuda.is_available() and hasattr(torch._C._aoti, "AOTIModelContainerRunnerCuda"):
        runner = torch._C._aoti.AOTIModelContainerRunnerCuda(str(compiled.path), 1, "cuda")
    else:
        return None
    fqns = runner.get_constant_names_to_original_fqns()
    dtypes = runner.get_constant_names_to_dtypes()
    return {fqns[name]: int(dtypes[name]) for name in fqns}


def _used_constants(module: torch.fx.GraphModule) -> list[str]:
    """The constants the compiled graph reads (its get_attr targets)."""
    return [str(n.target) for n in module.graph.nodes if n.op == "get_attr" and "_guards_fn" not in str(n.target)]


def _contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(list(shape)):
        strides.append(step)
        step *= max(int(size), 1)
    return strides[::-1]


def _tensor_line(fqn: str, t: torch.Tensor, op: str) -> str:
    code = scalar_type_code(t.dtype, op=op, arg=f"constant '{fqn}'")
    sizes = ",".join(str(int(s)) for s in t.shape)
    strides = ",".join(str(s) for s in _contiguous_strides(t.shape))
    return f"tensor\t{fqn}\t{code}\t{sizes}\t{strides}"


def _preprocess(edge_program, compile_specs, layout: dict[str, StateSlot], arena_nbytes: int) -> PreprocessResult:
    op = f"et_copy.{BACKEND_ID}.preprocess"
    device = device_of(compile_specs, BACKEND_ID)
    target = target_of(compile_specs)
    state = mutable_state(edge_program)
    compiled, module = _compile(edge_program, target, op)
    # The partition's constants, and those the compile step added (a quantized weight's packed form).
    values = {**dict(module.named_buffers()), **edge_program.state_dict, **edge_program.constants}
    try:
        reported = _container_constants(compiled, target)
    finally:
        if compiled.temporary:
            compiled.path.unlink()  # a loaded library stays mapped
    names = sorted(reported) if reported is not None else sorted(set(_used_constants(module)))
    for fqn in names:
        if fqn not in values:
            raise RuntimeError(
                f"{op}: the compiled model has constant '{fqn}', which the partition does not hold "
                f"(it holds {sorted(values)})"
            )
        if reported is not None and reported[fqn] != scalar_type_code(values[fqn].dtype, op=op, arg=fqn):
            raise RuntimeError(
                f"{op}: the compiled model's constant '{fqn}' has dtype code {reported[fqn]}, "
                f"the partition's is {values[fqn].dtype}"
            )
    missing = sorted(set(state) - set(names))
    if missing:
        raise RuntimeError(f"{op}: the compiled model does not hold the state {missing}, so it cannot update it")
    weights = {fqn: values[fqn] for fqn in names if fqn not in state}
    store = NamedDataStore()
    header = record_header(store, device, weights, state, layout, ("-", arena_nbytes))
    header += [_tensor_line(fqn, values[fqn], op) for fqn in [*weights, *sorted(state)]]
    header.append(f"target\t{target}\t{torch.__version__}")
    sig = edge_program.graph_signature
    header.append(f"io\t{len(sig.user_inputs)}\t{len(sig.user_outputs)}")
    header.append(f"digest\tsha256\t{compiled.sha256}")
    record = delegate_record(header, PAYLOAD_AOTI, compiled.so)
    return PreprocessResult(processed_bytes=record, data_store_output=store.get_named_data_store_output())


class AotiDeviceBackend(DevicePreprocess, BackendDetails):
    """Preprocess for the C++ ``AotiDeviceBackend``: each partition becomes a
    delegate record whose payload is an AOTInductor ``.so`` (see the module
    docstring), over one state arena for every method (DevicePreprocess)."""

    backend_id = BACKEND_ID
    lower_partition = staticmethod(_preprocess)
