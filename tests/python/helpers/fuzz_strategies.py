"""Fuzzing et_copy's copy kernels: hypothesis strategies, guarded buffers,
and an oracle that says, from the kernels' documented contract alone, what
one call must do.

Cases go through et_copy.h2d_copy / d2h_copy (or run_registered) with
torch tensors and DeviceTensors, as a user would call them: the bindings
read both through one path (python/bindings/tensor_reader.cpp). Arbitrary
tensor metadata (negative or huge sizes, dim orders that are no permutation,
bad dynamism, device types and indices, null data), which only a malformed
program can hand the kernels, is fuzzed where it now enters: by the C++
target fuzz/fuzz_copy_kernels.cpp, against the same contract.

Every buffer sits between guard bytes. A case passes when it copies exactly
self's bytes and reshapes out as the oracle says, or raises EtCopyError with
the oracle's error while leaving out (bytes and shape), self, and every
guard byte untouched; in both, the allocator's counters move by exactly the
expected amounts. Only the simulated device is fuzzed: its memory is host
memory, so the tests read guard bytes directly.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import time
from dataclasses import dataclass, field

import et_copy
import fuzz_profiles
import torch
from et_copy import _C
from et_copy._dtypes import SCALAR_TYPE_CODES
from fuzz_profiles import PROFILE_ENV, PROFILES, profile_name, register_profiles  # noqa: F401
from hypothesis import settings
from hypothesis import strategies as st

H2D = "et_copy::_h2d_copy.out"
D2H = "et_copy::_d2h_copy.out"
CPU, CUDA = 0, 1
STATIC, DYNAMIC_BOUND, DYNAMIC_UNBOUND = 0, 1, 2

GUARD = 64  # bytes each side of every buffer; a multiple of every itemsize
HOST_GUARD_BYTE = 0xCD
DEVICE_GUARD_BYTE = 0x5A

# ExecuTorch ScalarType codes: et_copy's one dtype table.
DTYPE_CODES = dict(SCALAR_TYPE_CODES)
DTYPES = tuple(DTYPE_CODES)
UNSUPPORTED_DTYPES = (torch.quint4x2, torch.quint2x4, torch.float8_e8m0fnu)
INT32_MAX = 2**31 - 1

# ---------------------------------------------------------------- profiles


def fuzz_settings() -> settings:
    """Settings for one fuzz test, from the selected profile (applied per
    test, so other suites' hypothesis tests keep their own budgets)."""
    register_profiles()
    return settings(settings.get_profile(profile_name()))


# Cases run per kind in this process, and seconds spent in them; conftest
# prints these at the end of the session.
CASES: dict[str, int] = {}
SECONDS: dict[str, float] = {}
# How the cases ended ("copied" or the expected rejection), to show that the
# generators reach both successes and every check.
OUTCOMES: dict[str, int] = {}


def count_outcome(expect: "Expect") -> None:
    key = "copied" if expect.ok else expect.fragment
    OUTCOMES[key] = OUTCOMES.get(key, 0) + 1


def count_case(kind: str, started: float) -> None:
    assert kind in fuzz_profiles.KINDS, f"a new fuzz kind {kind!r}: add it to fuzz_profiles.KINDS and the docs"
    CASES[kind] = CASES.get(kind, 0) + 1
    SECONDS[kind] = SECONDS.get(kind, 0.0) + time.perf_counter() - started
    if CASES[kind] % 256 == 0:
        gc.collect()  # between cases: the fuzz tests run with the collector off


@contextlib.contextmanager
def collector_paused():
    """Counter deltas must be the case's alone: collect earlier garbage
    (device tensors held by cycles free their memory when collected), then
    keep the cycle collector from running inside a case."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ----------------------------------------------------------------- buffers


def read(ptr: int, n: int) -> bytes:
    return ctypes.string_at(ptr, n) if n else b""


class HostArena:
    """Host memory: GUARD bytes, a region of `nbytes`, GUARD bytes."""

    def __init__(self, nbytes: int, fill: bytes) -> None:
        self.nbytes = nbytes
        self.buf = torch.full((GUARD + nbytes + GUARD,), HOST_GUARD_BYTE, dtype=torch.uint8)
        self.base = self.buf.data_ptr()
        self.ptr = self.base + GUARD
        if nbytes:
            ctypes.memmove(self.ptr, fill[:nbytes], nbytes)

    def snapshot(self) -> bytes:
        return read(self.base, GUARD + self.nbytes + GUARD)

    def guards_intact(self) -> bool:
        return _guards_intact(self.snapshot(), self.nbytes, HOST_GUARD_BYTE)

    def release(self) -> None:
        pass


def _guards_intact(snap: bytes, nbytes: int, byte: int) -> bool:
    guard = bytes([byte]) * GUARD
    return snap[:GUARD] == guard and snap[GUARD + nbytes :] == guard


def random_bytes(seed: int, n: int) -> bytes:
    g = torch.Generator().manual_seed(seed)
    return bytes(torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g).numpy()) if n else b""


# ------------------------------------------------------------------ oracle


def numel(sizes) -> int:
    return math.prod(sizes) if sizes else 1


def dense_strides(sizes, dim_order) -> list[int]:
    strides = [0] * len(sizes)
    step = 1
    for d in reversed(dim_order):
        strides[d] = step
        step *= sizes[d]
    return strides


def resized_strides(sizes, dim_order) -> list[int]:
    """Strides ExecuTorch gives a tensor it resizes: dense in its dim order,
    with empty dims counted as size 1."""
    return dense_strides([max(s, 1) for s in sizes], dim_order)


def torch_dim_order(t: torch.Tensor) -> list[int]:
    """The dim order the bindings report for a torch tensor: outermost
    first by stride, ties in natural order (documented in et_copy._tensors)."""
    return sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))


@dataclass
class Meta:
    """One tensor as the kernels see it, plus where its memory lives."""

    dtype_code: int
    itemsize: int
    sizes: list[int]
    dim_order: list[int]
    strides: list[int]
    dynamism: int = STATIC
    capacity: list[int] | None = None
    device_type: int = CPU
    device_index: int = 0
    null_data: bool = False
    # memory: host, or simulated device memory allocated on alloc_index
    on_device: bool = False
    alloc_index: int = 0


@dataclass
class Expect:
    ok: bool
    error: str = ""
    fragment: str = ""
    allocator_failure: bool = False
    binding: bool = False  # rejected by the bindings' metadata checks
    nbytes: int = 0
    out_sizes: list[int] = field(default_factory=list)
    out_strides: list[int] = field(default_factory=list)


def _reject(fragment: str, error: str = "InvalidArgument", *, allocator: bool = False) -> Expect:
    return Expect(ok=False, error=error, fragment=fragment, allocator_failure=allocator)


SUPPORTED_CODES = set(DTYPE_CODES.values())


def _binding_check(m: Meta) -> Expect | None:
    """What TensorView (the bindings) rejects before any kernel runs."""
    e = _binding_check_inner(m)
    if e is not None:
        e.binding = True
    return e


def _binding_check_inner(m: Meta) -> Expect | None:
    if len(m.sizes) > 16:
        return _reject("ExecuTorch supports at most 16")
    if any(s < 0 for s in (m.capacity if m.capacity is not None else m.sizes)):
        return _reject("negative size")
    if m.dtype_code not in SUPPORTED_CODES:
        return _reject("unsupported dtype code")
    if not 0 <= m.dynamism <= 2:
        return _reject("shape dynamism")
    if not (0 <= m.device_type <= 127 and -128 <= m.device_index <= 127):
        return _reject("device type or index out of range")
    if any(not -(2**31) <= v <= INT32_MAX for v in list(m.sizes) + list(m.strides)):
        return _reject("does not fit")
    if any(not 0 <= v <= 255 for v in m.dim_order):
        return _reject("does not fit")
    if (
        m.capacity is not None
        and list(m.capacity) != list(m.sizes)
        and sorted(m.dim_order) != list(range(len(m.sizes)))
    ):
        # Built at its capacity, then resized: ExecuTorch's resize refuses a
        # dim order that is not a permutation.
        return _reject("shape does not fit the tensor's capacity")
    return None


def effective_strides(m: Meta) -> list[int]:
    """A dynamic tensor built at its capacity and resized to its current
    sizes gets dense strides; otherwise the given ones stand."""
    if m.capacity is not None and list(m.capacity) != list(m.sizes):
        return resized_strides(m.sizes, m.dim_order)
    return list(m.strides)


def _kernel_tensor_check(arg: str, m: Meta) -> Expect | None:
    n = m.itemsize
    for s in m.sizes:
        n *= s
    if n >= 2**64:
        return _reject(f"{arg} has a negative size or a byte count that overflows")
    if sorted(m.dim_order) != list(range(len(m.sizes))):
        return _reject(f"{arg} has a dim order that is not a permutation")
    if numel(m.sizes) != 0 and m.sizes:
        strides = effective_strides(m)
        expected = 1
        for d in reversed(m.dim_order):
            if m.sizes[d] != 1 and strides[d] != expected:
                return _reject(f"{arg} is not dense in its dim order")
            expected *= m.sizes[d]
    if m.device_type >= 2:
        return _reject(f"{arg} has unknown device type")
    return None


def oracle(op: str, s: Meta, o: Meta, device_count: int) -> Expect:
    """What et_copy's kernel must do with (self, out), in the order the
    contract in copy_ops.h lists its checks."""
    for m in (s, o):
        if (e := _binding_check(m)) is not None:
            return e
    for arg, m in (("self", s), ("out", o)):
        if (e := _kernel_tensor_check(arg, m)) is not None:
            return e
    h2d = op == H2D
    host, device = (s, o) if h2d else (o, s)
    host_arg, device_arg = ("self", "out") if h2d else ("out", "self")
    if host.device_type != CPU:
        return _reject(f"{host_arg} must be a host (CPU) tensor")
    if device.device_type == CPU:
        return _reject(f"{device_arg} must be a device tensor")
    if s.dtype_code != o.dtype_code:
        return _reject("dtype mismatch")
    if len(s.sizes) != len(o.sizes):
        return _reject("rank mismatch")
    if list(s.dim_order) != list(o.dim_order):
        return _reject("dim order mismatch")
    if not -1 <= device.device_index < device_count:
        return _reject(f"but the simulated allocator has {device_count} device(s)")
    nbytes = numel(s.sizes) * s.itemsize
    if nbytes > 0 and s.null_data:
        return _reject("self has no data")
    resized = list(s.sizes) != list(o.sizes)
    if resized:
        if o.dynamism == STATIC:
            return _reject("out has static shape")
        capacity = numel(o.capacity if o.capacity is not None else o.sizes)
        if numel(s.sizes) > capacity:
            return _reject("beyond the capacity of out")
    if nbytes > 0 and o.null_data:
        return _reject("out has no data")
    if nbytes > 0:
        claimed = 0 if device.device_index == -1 else device.device_index
        if not device.on_device or device.alloc_index != claimed:
            return _reject("the device allocator failed", allocator=True)
    out_strides = resized_strides(s.sizes, o.dim_order) if resized else effective_strides(o)
    return Expect(ok=True, nbytes=nbytes, out_sizes=list(s.sizes), out_strides=out_strides)


# -------------------------------------------------------------- strategies


@st.composite
def permutations_of(draw, rank: int) -> list[int]:
    return list(draw(st.permutations(range(rank))))


@dataclass
class PublicCase:
    op: str
    self_dtype: torch.dtype
    out_dtype: torch.dtype
    self_shape: list[int]
    out_shape: list[int]
    self_order: list[int]
    out_order: list[int]
    host_layout: str  # "dense" or "strided" (torch side only)
    host_strides: list[int]
    host_offset: int
    dynamic: bool
    device_index: int  # of the device-side tensor; >= 2 does not exist
    wrong_direction: str  # "", "self", "out"
    seed: int


@st.composite
def public_cases(draw) -> PublicCase:
    op = draw(st.sampled_from([H2D, D2H]))
    self_dtype = draw(st.sampled_from(DTYPES))
    roll = draw(st.integers(0, 9))
    out_dtype = self_dtype if roll > 1 else draw(st.sampled_from(DTYPES + UNSUPPORTED_DTYPES))
    if roll == 0 and draw(st.booleans()):
        self_dtype = draw(st.sampled_from(UNSUPPORTED_DTYPES))
    rank = draw(st.integers(0, 4))
    self_shape = draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank))
    shape_roll = draw(st.integers(0, 4))
    if shape_roll <= 1:
        out_shape = list(self_shape)
    elif shape_roll <= 3:
        out_shape = draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank))
    else:
        r = draw(st.integers(0, 4))
        out_shape = draw(st.lists(st.integers(0, 5), min_size=r, max_size=r))
    self_order = draw(permutations_of(rank)) if draw(st.booleans()) else list(range(rank))
    if len(out_shape) == rank and draw(st.integers(0, 3)):
        out_order = list(self_order)
    else:
        out_order = draw(permutations_of(len(out_shape)))
    host_layout = draw(st.sampled_from(["dense", "dense", "strided"]))
    host_rank = rank if op == H2D else len(out_shape)
    host_strides = draw(st.lists(st.integers(0, 9), min_size=host_rank, max_size=host_rank))
    host_offset = draw(st.integers(0, 3))
    dynamic = draw(st.booleans())
    device_index = draw(st.sampled_from([0, 1, 1, 0, 0, 2, 0, 1, 1, 0, 0, 3]))
    wrong_direction = draw(st.sampled_from([""] * 8 + ["self", "out"]))
    return PublicCase(
        op,
        self_dtype,
        out_dtype,
        self_shape,
        out_shape,
        self_order,
        out_order,
        host_layout,
        host_strides,
        host_offset,
        dynamic,
        device_index,
        wrong_direction,
        draw(st.integers(0, 2**31)),
    )


# ----------------------------------------------------------------- runners

_COPY_KEYS = {H2D: ("h2d_copies", "h2d_bytes"), D2H: ("d2h_copies", "d2h_bytes")}


def _check_counters(op: str, expect: Expect, before: dict, after: dict, ctx: str) -> None:
    delta = {k: after[k] - before[k] for k in before if k != "peak_bytes_outstanding"}
    copies, nbytes = _COPY_KEYS[op]
    other_copies, other_bytes = _COPY_KEYS[D2H if op == H2D else H2D]
    want = {k: 0 for k in delta}
    if expect.ok and expect.nbytes:
        want[copies], want[nbytes] = 1, expect.nbytes
    if not expect.ok and expect.allocator_failure:
        want["failed_calls"] = 1
    assert delta == want, f"counters moved by {delta}, expected {want}\n{ctx}"


def _check_error(err: BaseException | None, op: str, expect: Expect, runner: str, ctx: str) -> None:
    assert err is not None, f"expected {expect.error} ({expect.fragment!r}), the call succeeded\n{ctx}"
    assert isinstance(err, et_copy.EtCopyError), f"expected EtCopyError, got {err!r}\n{ctx}"
    assert err.error == expect.error, f"expected {expect.error} ({expect.fragment!r}), got {err.error}: {err}\n{ctx}"
    if not expect.binding:
        assert op in str(err), f"message does not name the op: {err}\n{ctx}"
        # The registry path reports the error code; the kernel logs the words.
        if runner == "direct":
            assert expect.fragment in str(err), f"expected {expect.fragment!r} in: {err}\n{ctx}"


def _host_tensor(dtype, shape, order, layout, strides, offset, seed):
    """A CPU tensor viewing the region of a HostArena: dense in `order`, or
    with the given element strides (possibly gaps, overlaps, zeros)."""
    if layout == "dense":
        strides = dense_strides(shape, order)
    extent = 1 + sum((s - 1) * st_ for s, st_ in zip(shape, strides)) if all(shape) else 0
    region = (extent + offset) * dtype.itemsize
    arena = HostArena(region, random_bytes(seed, region))
    typed = arena.buf[GUARD : GUARD + region].view(dtype) if region else torch.empty(0, dtype=torch.uint8).view(dtype)
    if dtype in UNSUPPORTED_DTYPES:
        # torch cannot restride a quantized tensor (an internal assert); et_copy rejects the dtype before the layout.
        return arena, typed
    # as_strided's offset counts from the start of the storage, not the view.
    t = torch.as_strided(typed, shape, strides, typed.storage_offset() + (offset if region else 0))
    return arena, t


def _device_tensor(dtype, shape, order, index, dynamic, seed):
    t = et_copy.empty(shape, dtype, f"cuda:{index}", dynamic=dynamic, dim_order=order)
    if t.capacity_nbytes:
        # Device memory faults on a host access: the simulated device's inspection hook writes it.
        _C.simulated_device_write(t.data_ptr(), random_bytes(seed, t.capacity_nbytes), t.device.index)
    return t


def _device_bytes(t) -> bytes:
    """A DeviceTensor's allocation, through the simulated device's inspection
    hook, which reaches exactly the allocation: a write past its end is
    caught by the allocator instead (see run_public_case)."""
    return bytes(_C.simulated_device_read(t.data_ptr(), t.capacity_nbytes, t.device.index))


def _meta_of(t, *, dynamic: bool) -> Meta:
    if isinstance(t, et_copy.DeviceTensor):
        return Meta(
            DTYPE_CODES[t.dtype],
            t.itemsize,
            list(t.shape),
            list(t.dim_order),
            dense_strides(list(t.shape), list(t.dim_order)),
            DYNAMIC_BOUND if t.dynamic else STATIC,
            list(t.capacity),
            CUDA,
            t.device.index,
            on_device=True,
            alloc_index=t.device.index,
        )
    return Meta(
        DTYPE_CODES[t.dtype],
        t.dtype.itemsize,
        list(t.shape),
        torch_dim_order(t),
        list(t.stride()),
        DYNAMIC_BOUND if dynamic else STATIC,
        list(t.shape) if dynamic else None,
        CPU,
        0,
    )


def _state(t, arena):
    """(shape, strides, every byte) of a tensor argument, guards included."""
    if isinstance(t, et_copy.DeviceTensor):
        return tuple(t.shape), None, _device_bytes(t)
    return tuple(t.shape), tuple(t.stride()), arena.snapshot()


def run_public_case(case: PublicCase, runner: str = "direct") -> None:
    """One call of et_copy's Python API; asserts the properties."""
    started = time.perf_counter()
    et_copy.use_simulated_device(2)
    h2d = case.op == H2D
    unsupported = case.self_dtype not in DTYPE_CODES or case.out_dtype not in DTYPE_CODES
    made = []  # DeviceTensors to free
    arenas = {}
    stats_start = et_copy.allocator_stats()
    try:

        def device(role, dtype, shape, order):
            t = _device_tensor(
                dtype, shape, order, case.device_index, case.dynamic and role == "out", case.seed + (role == "out")
            )
            made.append(t)
            return t

        def host(role, dtype, shape, order, layout):
            arena, t = _host_tensor(
                dtype,
                shape,
                order,
                layout,
                case.host_strides[: len(shape)] + [1] * (len(shape) - len(case.host_strides)),
                case.host_offset,
                case.seed + (role == "out"),
            )
            arenas[role] = arena
            return t

        self_on_device = (not h2d) != (case.wrong_direction == "self")
        out_on_device = h2d != (case.wrong_direction == "out")
        try:
            if self_on_device:
                self_t = device("self", case.self_dtype, case.self_shape, case.self_order)
            else:
                self_t = host(
                    "self", case.self_dtype, case.self_shape, case.self_order, case.host_layout if h2d else "dense"
                )
            if out_on_device:
                out_t = device("out", case.out_dtype, case.out_shape, case.out_order)
            else:
                out_t = host(
                    "out", case.out_dtype, case.out_shape, case.out_order, case.host_layout if not h2d else "dense"
                )
        except TypeError as e:  # an unsupported dtype, named before any memory is allocated
            assert unsupported, f"unexpected {e!r} for {case}"
            assert "et_copy does not move" in str(e)
            return
        except et_copy.EtCopyError as e:  # a device that does not exist
            assert case.device_index >= 2, f"unexpected {e!r} for {case}"
            assert e.error == "InvalidArgument", e
            after = et_copy.allocator_stats()
            assert after["failed_calls"] == stats_start["failed_calls"] + 1
            return
        assert case.device_index < 2 or not (self_on_device or out_on_device), (
            f"et_copy.empty accepted device cuda:{case.device_index} with 2 simulated devices"
        )

        expect = (
            None
            if unsupported
            else oracle(case.op, _meta_of(self_t, dynamic=False), _meta_of(out_t, dynamic=case.dynamic), 2)
        )
        self_before = _state(self_t, arenas.get("self"))
        out_before = _state(out_t, arenas.get("out"))
        stats0 = et_copy.allocator_stats()
        err = None
        try:
            if runner == "direct":
                copy = et_copy.h2d_copy if h2d else et_copy.d2h_copy
                copy(self_t, out=out_t, dynamic_out=case.dynamic)
            else:
                et_copy.run_registered(case.op, self_t, out_t, dynamic_out=case.dynamic)
        except Exception as e:  # noqa: BLE001 - judged below
            err = e
        stats1 = et_copy.allocator_stats()
        if unsupported:
            assert isinstance(err, TypeError) and "et_copy does not move" in str(err), f"{err!r} for {case}"
            assert _state(out_t, arenas.get("out")) == out_before
            return
        ctx = f"case={case}\nexpect={expect}"
        for role, arena in arenas.items():
            assert arena.guards_intact(), f"a guard byte around {role} changed\n{ctx}"
        # Every device byte moves through the simulated allocator, which refuses (and counts) any
        # range outside one live allocation: a kernel writing past a DeviceTensor's end shows here.
        assert et_copy.allocator_stats()["failed_calls"] == stats0["failed_calls"], (
            f"a device copy fell outside its allocation\n{ctx}"
        )
        assert _state(self_t, arenas.get("self")) == self_before, f"self changed\n{ctx}"
        if expect.ok:
            assert err is None, f"expected success, got {err!r}\n{ctx}"
            assert list(out_t.shape) == expect.out_sizes, f"out has shape {tuple(out_t.shape)}\n{ctx}"
            n = expect.nbytes
            if isinstance(self_t, et_copy.DeviceTensor):
                src = bytes(_C.simulated_device_read(self_t.data_ptr(), n, self_t.device.index))[:n]
            else:
                src = read(self_t.data_ptr(), n)
            shape, strides, after = _state(out_t, arenas.get("out"))
            start = 0 if isinstance(out_t, et_copy.DeviceTensor) else out_t.data_ptr() - arenas["out"].base
            before = out_before[2]
            assert after == before[:start] + src + before[start + n :], f"out does not hold exactly self's bytes\n{ctx}"
            if strides is not None:
                assert list(strides) == expect.out_strides, f"out strides {strides}\n{ctx}"
        else:
            _check_error(err, case.op, expect, runner, ctx)
            assert _state(out_t, arenas.get("out")) == out_before, f"a rejected call changed out\n{ctx}"
        _check_counters(case.op, expect, stats0, stats1, ctx)
        count_outcome(expect)
    finally:
        for t in made:
            t.free()
        end = et_copy.allocator_stats()
        assert end["bytes_outstanding"] == stats_start["bytes_outstanding"], "a fuzz case leaked device memory"
        count_case(f"public/{runner}", started)
