"""An LLM decode step: a tiny seeded Qwen3-MoE (transformers) exported with
its compute, weights and KV caches in the (simulated) device's backend,
picking its token on the device. Timed: ``decode_next`` on ``et_copy.runtime``
(the step the device pipeline runs per token: the last pick fed back on the
device, nothing in, 8 bytes out), ``decode`` (id and position in) through
``et_copy.runtime`` and through ``executorch.runtime``, against the
baseline: the same model as a plain host program (its caches host mutable
buffers, no device, no copies) on ``executorch.runtime``, which is what the
device pipeline costs over no device at all. Also timed: the model exported
with its state held by the caller (what a runtime without device state is
left with: the caches cross to the device and back every step).

``decode`` runs at position 0, so every run picks the same token whatever
the rest of the cache holds (executorch.runtime never writes the state's
start value), and the bench checks that they do before timing.
``decode_next`` runs at the positions after it, restarted at position 0
(untimed) before it reaches the end of the cache; the plain host program
has a ``decode_next`` too (its methods share their mutable buffers, as
executorch's multi-method LLM exports do), run through the same positions
and checked to pick the same tokens: the device pipeline's baseline, the
same steps with no device.

The load is timed too: ``et_copy.runtime.load`` and the first method's
load, which is when the device backend uploads the weights (counted).

With the compiled backend (``backends`` holds ``"aoti"``): the model
exported with ``backend="aoti"``, its ``decode`` and ``decode_next`` on
et_copy.runtime, against the same decode ``.so`` taken out of the program's
bytes and run directly by torch's AOTI runner on host tensors
(:mod:`._aoti`): the ratio is what our path around the compiled code costs.
Its export and compile are timed (from the compile cache as found, and with
``cold_compile`` first from an empty one), and its load beside the
simulated backend's.

Each backend's rows are its entry of :data:`ROWS`, by its word of
et_copy.backends' table: ``--backend`` takes every word of the table, and
one the section has no rows for is refused by name (:func:`refusal`), never
skipped."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from ..._quiet import wrap_log_hooks
from ...backends import BACKENDS
from ._timing import Config, measure, python_sampler

DEVICE_STATE = "device-state .pte on executorch.runtime"
ET_COPY_RUNTIME = "the same .pte on et_copy.runtime"
DECODE_NEXT = "the same .pte's decode_next on et_copy.runtime"
HOST_STATE = "caller-held state .pte on executorch.runtime"
PLAIN_HOST = "plain host .pte (no device) on executorch.runtime"
PLAIN_NEXT = "plain host .pte's decode_next on executorch.runtime"
BASELINE = PLAIN_HOST
STEPS_CHECKED = 8  # decode_next picks compared with the plain program's before timing
ARCHITECTURE = "qwen3_moe"  # attention only: position 0 reads no state it did not write


AOTI_DECODE = "compiled (aoti) .pte's decode on et_copy.runtime"
AOTI_NEXT = "compiled (aoti) .pte's decode_next on et_copy.runtime"
AOTI_DIRECT = "its decode .so run directly by torch's AOTI runner (host tensors)"


@dataclasses.dataclass(frozen=True)
class _Run:
    """What every backend's rows are checked and compared against: the plain host program's."""

    model: Any
    max_seq_len: int
    token: torch.Tensor
    pos: torch.Tensor
    expected: int  # the plain program's decode pick at position 0
    plain_picks: list[int]
    plain_load: float


@dataclasses.dataclass(frozen=True)
class BackendRows:
    """What the llm section times for one word of et_copy.backends' table:
    ``export(model, max_seq_len, cold_compile, progress)`` gives the
    program's bytes and its export figures; ``rows(run, pte, exported,
    load)`` gives its timed cases, what must stay alive while they run, and
    its entries of the section's document."""

    export: Callable[[Any, int, bool, Any], tuple[bytes, dict]]
    rows: Callable[[_Run, bytes, dict, dict], tuple[dict, dict, dict]]


def refusal(word: str) -> str | None:
    """Why the llm section cannot time the backend ``word``, or None when
    it can (its word is in both et_copy.backends' table and :data:`ROWS`)."""
    if word not in BACKENDS:
        return f"--backend {word}: not a backend of et_copy.backends (one of {', '.join(sorted(BACKENDS))})"
    if word not in ROWS:
        return (
            f"--backend {word}: the llm section has no rows for the backend {word!r} "
            f"({BACKENDS[word].backend_id}); it times {', '.join(sorted(ROWS))} "
            "(a backend's rows are an entry of et_copy.tools.bench._llm.ROWS)"
        )
    return None


def decode_step(
    config: Config,
    *,
    max_seq_len: int = 64,
    progress=None,
    backends: tuple[str, ...] = ("simulated",),
    cold_compile: bool = False,
) -> dict:
    """Seconds to export are not timed, except the compiled backend's
    export and compile (reported apart); each sample times one decode
    Method.execute. ``backends``: which device backends' programs to time
    (the plain host program is always the baseline), each by its rows in
    :data:`ROWS`; ValueError naming a word the section has no rows for
    (:func:`refusal`), before anything runs. Needs transformers and
    executorch's AOT stack (raises ImportError without them) and the
    simulated allocator registered."""
    refused = [r for r in map(refusal, backends) if r is not None]
    if refused:
        raise ValueError("et_copy bench: " + "; ".join(refused))
    import transformers  # noqa: F401  (the model's architecture)
    from executorch.runtime import Runtime

    wrap_log_hooks()  # its pybindings, first loaded here, hook the log too

    from et_copy import llm

    model = llm.tiny_model(ARCHITECTURE)
    _say(progress, f"llm: exporting a tiny {ARCHITECTURE} for {', '.join(backends)} and as a plain host program")
    plain_pte = _plain_host_program(model, max_seq_len)  # kept: the loaded Program reads these bytes
    ptes, exported = {}, {}
    for word in backends:
        BACKENDS[word].register()
        ptes[word], exported[word] = ROWS[word].export(model, max_seq_len, cold_compile, progress)
    # First, while no loaded program holds the weights (the backends share them by content).
    loads = {word: _timed_load(pte) for word, pte in ptes.items()}
    plain_load = _timed_plain_load(plain_pte)
    plain_program = Runtime.get().load_program(plain_pte)
    plain, plain_next = plain_program.load_method(llm.DECODE), plain_program.load_method(llm.DECODE_NEXT)
    token, pos = torch.tensor([[1]]), torch.tensor([0])
    expected = _token(plain.execute([token, pos]))
    run = _Run(model, max_seq_len, token, pos, expected, _picks(plain, plain_next, token, pos), plain_load)
    cases = {
        PLAIN_HOST: python_sampler(lambda: plain.execute([token, pos])),
        PLAIN_NEXT: _decode_next_sampler(plain, plain_next, token, pos, max_seq_len),
    }
    doc: dict = {"architecture": ARCHITECTURE, "max_seq_len": max_seq_len, "backends": list(backends)}
    keep = []  # the loaded programs and runners the samplers use
    for word in backends:
        rows, held, entries = ROWS[word].rows(run, ptes[word], exported[word], loads[word])
        cases.update(rows)
        keep.append(held)
        doc.update(entries)
    _say(progress, "llm: timing one decode step")
    doc.update(baseline=BASELINE, results=measure(cases, config))
    return doc


def _simulated_export(model, max_seq_len: int, cold_compile: bool, progress) -> tuple[bytes, dict]:
    """The simulated backend's program, its export timed, and the same model with its state held by the caller."""
    from et_copy import llm

    exported = _timed_export(model, max_seq_len, "simulated")
    exported["host_pte"] = llm.export_llm(model, max_seq_len=max_seq_len, pick="device", state_on_device=False).buffer
    return exported.pop("pte"), exported


def _simulated_rows(run: _Run, pte: bytes, exported: dict, load: dict) -> tuple[dict, dict, dict]:
    """The simulated backend's rows (:func:`_simulated_cases`) and its entries: the state, the bytes a
    step moves, the load and export figures, and the runtimes and pipeline its targets compare."""
    host_pte = exported.pop("host_pte")
    cases, held = _simulated_cases(pte, host_pte, run.model, run.max_seq_len, run.token, run.pos, run.expected)
    step = _checked_step("the simulated backend", held, run.plain_picks, run.token, run.pos)
    entries = {
        "state_nbytes": held["session"].state_nbytes,
        "host_state_nbytes": held["host_state_nbytes"],
        "bytes_per_step": {"h2d": step.h2d_bytes, "d2h": step.d2h_bytes},
        "load": {**load, "plain_seconds": run.plain_load},
        "pipeline": DECODE_NEXT,
        "pipeline_baseline": PLAIN_NEXT,
        "runtimes": [DEVICE_STATE, ET_COPY_RUNTIME],
        "simulated_export": exported,
    }
    return cases, held, entries


def _aoti_export_rows(model, max_seq_len: int, cold_compile: bool, progress) -> tuple[bytes, dict]:
    """The compiled backend's program, its export and compile timed (:func:`_aoti_export`)."""
    exported = _aoti_export(model, max_seq_len, cold_compile, progress)
    return exported["as_found"].pop("pte"), exported


def _aoti_rows(run: _Run, pte: bytes, exported: dict, load: dict) -> tuple[dict, dict, dict]:
    """The compiled backend's rows (:func:`_aoti_cases`) and its entry, ``aoti``."""
    cases, held = _aoti_cases(pte, run.max_seq_len, run.token, run.pos, run.expected)
    step = _checked_step("the compiled backend", held, run.plain_picks, run.token, run.pos)
    entry = {
        "decode": AOTI_DECODE,
        "decode_next": AOTI_NEXT,
        "direct": AOTI_DIRECT,
        "state_nbytes": held["session"].state_nbytes,
        "bytes_per_step": {"h2d": step.h2d_bytes, "d2h": step.d2h_bytes},
        "export": exported,
        "load": {**load, "plain_seconds": run.plain_load},
    }
    return cases, held, {"aoti": entry}


def _say(progress, message: str) -> None:
    if progress is not None:
        progress(message)


def _picks(decode, decode_next, token, pos) -> list[int]:
    """The token of a decode at position 0, then of the decode_next steps after it."""
    picks = [_token(decode.execute([token, pos]))]
    return picks + [_token(decode_next.execute([])) for _ in range(STEPS_CHECKED)]


def _token(outputs) -> int:
    """The picked token, from a method's outputs (a host tensor)."""
    out = outputs[0]
    assert isinstance(out, torch.Tensor)  # et_copy.runtime may also give DeviceTensors; a pick comes back
    return int(out[0])


def _checked_step(backend: str, held: dict, plain_picks: list[int], token, pos):
    """The counts of one decode_next of `backend` (the bytes a pipeline step moves), once its
    decode_next picks are the plain host program's."""
    import et_copy

    if _picks(held["ours"], held["following"], token, pos) != plain_picks:
        raise RuntimeError(
            f"et_copy bench: {backend}'s decode_next picked other tokens than the plain host program's; not timing it"
        )
    with et_copy.counting() as step:
        held["following"].execute([])
    return step


def _check(name: str, got: int, expected: int) -> None:
    if got != expected:
        raise RuntimeError(
            f"et_copy bench: {name} picked token {got}, the plain host program {expected}; not timing it"
        )


def _simulated_cases(device_pte, host_pte, model, max_seq_len, token, pos, expected) -> tuple[dict, dict]:
    """The simulated backend's rows: its .pte on both runtimes, and with the state held by the caller."""
    from executorch.runtime import Runtime

    wrap_log_hooks()  # its pybindings, first loaded here, hook the log too

    from et_copy import llm
    from et_copy import runtime as et_copy_runtime

    theirs = Runtime.get().load_program(device_pte).load_method(llm.DECODE)
    host = Runtime.get().load_program(host_pte).load_method(llm.DECODE)
    session = et_copy_runtime.load(device_pte).new_session()
    ours, following = session.load_method(llm.DECODE), session.load_method(llm.DECODE_NEXT)
    state = llm.HostStateStep(llm.StatefulCausalLM(model, max_seq_len)).initial_state()
    host_inputs = [token, pos, *state]
    _check(HOST_STATE, _token(host.execute(host_inputs)), expected)
    for name, method in ((DEVICE_STATE, theirs), (ET_COPY_RUNTIME, ours)):
        _check(name, _token(method.execute([token, pos])), expected)
    cases = {
        DEVICE_STATE: python_sampler(lambda: theirs.execute([token, pos])),
        ET_COPY_RUNTIME: python_sampler(lambda: ours.execute([token, pos])),
        DECODE_NEXT: _decode_next_sampler(ours, following, token, pos, max_seq_len),
        HOST_STATE: python_sampler(lambda: host.execute(host_inputs)),
    }
    held = {"session": session, "ours": ours, "following": following, "theirs": theirs, "host": host}
    held["host_state_nbytes"] = sum(t.numel() * t.element_size() for t in state)
    return cases, held


def _aoti_cases(pte, max_seq_len, token, pos, expected) -> tuple[dict, dict]:
    """The compiled backend's rows: its .pte on et_copy.runtime, and its decode .so run directly by torch."""
    from et_copy import llm
    from et_copy import runtime as et_copy_runtime

    from ._aoti import DirectRunner, method_delegate

    # The compiled code at torch's thread count, as the direct run below has it.
    session = et_copy_runtime.load(pte, threads=torch.get_num_threads()).new_session()
    ours, following = session.load_method(llm.DECODE), session.load_method(llm.DECODE_NEXT)
    direct = DirectRunner(method_delegate(pte, llm.DECODE))
    direct_inputs = direct.inputs_of([token, pos])
    _check(AOTI_DECODE, _token(ours.execute([token, pos])), expected)
    _check(AOTI_DIRECT, int(direct.run(direct_inputs)[0][0]), expected)
    cases = {
        AOTI_DECODE: python_sampler(lambda: ours.execute([token, pos])),
        AOTI_NEXT: _decode_next_sampler(ours, following, token, pos, max_seq_len),
        AOTI_DIRECT: python_sampler(lambda: direct.run(direct_inputs)),
    }
    return cases, {"session": session, "ours": ours, "following": following, "direct": direct}


def _timed_export(model, max_seq_len: int, backend: str) -> dict:
    import time

    from et_copy import llm

    start = time.perf_counter()
    pte = llm.export_llm(model, max_seq_len=max_seq_len, pick="device", backend=backend).buffer
    return {"seconds": time.perf_counter() - start, "pte": pte}


def _aoti_export(model, max_seq_len: int, cold: bool, progress) -> dict:
    """export_llm(backend="aoti") timed, with the compile cache as it is
    (the partitions compiled or found), and with ``cold`` first in an empty
    cache folder (every partition compiled), then again from it (cached)."""
    import os

    from et_copy.backends import aoti
    from et_copy.backends.aoti import _compile_cache

    def timed() -> dict:
        before = dataclasses.replace(aoti.compile_stats)
        out = _timed_export(model, max_seq_len, "aoti")
        out.update(aoti.compile_stats.since(before))
        return out

    if not cold:
        _say(progress, "llm: exporting for backend aoti (compiled code from the cache when it is there)")
        return {"as_found": timed()}
    import tempfile

    saved = os.environ.get(_compile_cache.CACHE_ENV)
    with tempfile.TemporaryDirectory(prefix="et_copy_aoti_cold_") as folder:
        os.environ[_compile_cache.CACHE_ENV] = folder
        try:
            _say(progress, "llm: exporting for backend aoti, cold (an empty compile cache: minutes on 2 cores)")
            cold_run = timed()
            cold_run.pop("pte")
            _say(progress, "llm: exporting for backend aoti again, from that cache")
            cached = timed()
        finally:
            if saved is None:
                os.environ.pop(_compile_cache.CACHE_ENV, None)
            else:
                os.environ[_compile_cache.CACHE_ENV] = saved
    return {"cold": cold_run, "as_found": cached}


def _decode_next_sampler(decode, decode_next, token, pos, max_seq_len: int):
    """Times ``decode_next`` calls alone: before the position would pass the
    cache, a ``decode`` at position 0 (untimed) starts it over."""
    import time

    position = [max_seq_len]  # starts with a decode at 0

    def sample(iters: int) -> float:
        clock, total = time.perf_counter_ns, 0
        for _ in range(iters):
            if position[0] >= max_seq_len - 1:
                decode.execute([token, pos])
                position[0] = 1
            start = clock()
            decode_next.execute([])
            total += clock() - start
            position[0] += 1
        return total / iters

    return sample


def _timed_load(pte: bytes) -> dict:
    """Seconds to load ``pte`` and its decode method on et_copy.runtime (the
    device backend uploads the weights then; the compiled one also loads
    its code) and the bytes that crossed: one sample, as a user's load is."""
    import time

    import et_copy
    from et_copy import llm
    from et_copy import runtime as et_copy_runtime

    with et_copy.counting() as moved:
        start = time.perf_counter()
        et_copy_runtime.load(pte).new_session().load_method(llm.DECODE)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "h2d_bytes": moved.h2d_bytes}


def _timed_plain_load(plain_pte: bytes) -> float:
    """Seconds to load the plain host program and its decode on executorch.runtime."""
    import time

    from executorch.runtime import Runtime

    wrap_log_hooks()  # its pybindings, first loaded here, hook the log too

    from et_copy import llm

    start = time.perf_counter()
    Runtime.get().load_program(plain_pte).load_method(llm.DECODE)
    return time.perf_counter() - start


def _plain_host_program(model, max_seq_len: int) -> bytes:
    """The decode steps as ExecuTorch exports an LLM for the CPU: ``decode``
    and ``decode_next`` sharing their mutable buffers (the caches and the
    sampler's state, updated in place), no device and no et_copy op; the
    token picked as on the device."""
    import warnings

    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir.passes import MemoryPlanningPass

    from et_copy import llm

    from ..._exir_fixes import lifted_constants_in_signature_order
    from ...export._methods import as_forward

    step = llm.StatefulCausalLM(model, max_seq_len, pick="device").eval()
    decode = torch.export.export(step, (torch.tensor([[0]]), torch.tensor([0])), strict=True)
    with as_forward(step, "decode_next"):
        decode_next = torch.export.export(step, (), strict=True)
    config = ExecutorchBackendConfig(
        run_reinplace_pass=True,
        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True),
        emit_mutable_buffer_names=True,
    )
    with warnings.catch_warnings(), lifted_constants_in_signature_order():
        warnings.filterwarnings("ignore", "Mutation on a buffer in the model is detected", UserWarning)
        return to_edge({llm.DECODE: decode, llm.DECODE_NEXT: decode_next}).to_executorch(config).buffer


#: The rows of the llm section, by the word of et_copy.backends' table they time. ``--backend``
#: takes every word of the table; a word without rows here is refused by name (:func:`refusal`).
ROWS: dict[str, BackendRows] = {
    "simulated": BackendRows(_simulated_export, _simulated_rows),
    "aoti": BackendRows(_aoti_export_rows, _aoti_rows),
}
