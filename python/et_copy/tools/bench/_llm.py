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
load, which is when the device backend uploads the weights (counted)."""

from __future__ import annotations

import torch

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


def decode_step(config: Config, *, max_seq_len: int = 64, progress=None) -> dict:
    """Seconds to export are not timed; each sample times one decode
    Method.execute. Needs transformers and executorch's AOT stack (raises
    ImportError without them) and the simulated allocator registered."""
    import transformers  # noqa: F401  (the model's architecture)
    from executorch.runtime import Runtime

    import et_copy
    from et_copy import llm
    from et_copy import runtime as et_copy_runtime

    model = llm.tiny_model(ARCHITECTURE)
    if progress is not None:
        progress(f"llm: exporting a tiny {ARCHITECTURE} three ways (device state, host state, plain host)")
    device_pte = llm.export_llm(model, max_seq_len=max_seq_len, pick="device").buffer
    host_pte = llm.export_llm(model, max_seq_len=max_seq_len, pick="device", state_on_device=False).buffer
    plain_pte = _plain_host_program(model, max_seq_len)  # kept: the loaded Program reads these bytes
    # First, while no loaded program holds the weights (the backend shares them by content).
    load = _timed_load(device_pte, plain_pte)
    theirs = Runtime.get().load_program(device_pte).load_method(llm.DECODE)
    host = Runtime.get().load_program(host_pte).load_method(llm.DECODE)
    plain_program = Runtime.get().load_program(plain_pte)
    plain, plain_next = plain_program.load_method(llm.DECODE), plain_program.load_method(llm.DECODE_NEXT)
    session = et_copy_runtime.load(device_pte).new_session()
    ours = session.load_method(llm.DECODE)
    following = session.load_method(llm.DECODE_NEXT)
    state = llm.HostStateStep(llm.StatefulCausalLM(model, max_seq_len)).initial_state()
    token, pos = torch.tensor([[1]]), torch.tensor([0])
    host_inputs = [token, pos, *state]

    expected = int(host.execute(host_inputs)[0][0])
    for name, method in ((DEVICE_STATE, theirs), (ET_COPY_RUNTIME, ours), (PLAIN_HOST, plain)):
        out = method.execute([token, pos])[0]
        assert isinstance(out, torch.Tensor)  # the picked token, on the host
        got = int(out[0])
        if got != expected:
            raise RuntimeError(
                f"et_copy bench: {name} picked token {got}, the host-state run {expected}; not timing it"
            )
    picks = {}
    for name, (first, then) in {DECODE_NEXT: (ours, following), PLAIN_NEXT: (plain, plain_next)}.items():
        picks[name] = [int(first.execute([token, pos])[0][0])]
        picks[name] += [int(then.execute([])[0][0]) for _ in range(STEPS_CHECKED)]
    if picks[DECODE_NEXT] != picks[PLAIN_NEXT]:
        raise RuntimeError(
            f"et_copy bench: decode_next picked {picks[DECODE_NEXT]} on the device pipeline and "
            f"{picks[PLAIN_NEXT]} in the plain host program; not timing it"
        )
    with et_copy.counting() as step:
        following.execute([])
    if progress is not None:
        progress("llm: timing one decode step")
    results = measure(
        {
            DEVICE_STATE: python_sampler(lambda: theirs.execute([token, pos])),
            ET_COPY_RUNTIME: python_sampler(lambda: ours.execute([token, pos])),
            DECODE_NEXT: _decode_next_sampler(ours, following, token, pos, max_seq_len),
            HOST_STATE: python_sampler(lambda: host.execute(host_inputs)),
            PLAIN_HOST: python_sampler(lambda: plain.execute([token, pos])),
            PLAIN_NEXT: _decode_next_sampler(plain, plain_next, token, pos, max_seq_len),
        },
        config,
    )
    return {
        "architecture": ARCHITECTURE,
        "max_seq_len": max_seq_len,
        "state_nbytes": session.state_nbytes,
        "host_state_nbytes": sum(t.numel() * t.element_size() for t in state),
        "bytes_per_step": {"h2d": step.h2d_bytes, "d2h": step.d2h_bytes},
        "load": load,
        "baseline": BASELINE,
        "pipeline": DECODE_NEXT,
        "pipeline_baseline": PLAIN_NEXT,
        "runtimes": [DEVICE_STATE, ET_COPY_RUNTIME],
        "results": results,
    }


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


def _timed_load(pte: bytes, plain_pte: bytes) -> dict:
    """Seconds to load ``pte`` and its decode method on et_copy.runtime (the
    device backend uploads the weights then) and the bytes that crossed,
    beside the plain host program's load on executorch.runtime: one sample
    each, as a user's load is."""
    import time

    from executorch.runtime import Runtime

    import et_copy
    from et_copy import llm
    from et_copy import runtime as et_copy_runtime

    with et_copy.counting() as moved:
        start = time.perf_counter()
        et_copy_runtime.load(pte).new_session().load_method(llm.DECODE)
        seconds = time.perf_counter() - start
    start = time.perf_counter()
    Runtime.get().load_program(plain_pte).load_method(llm.DECODE)
    plain_seconds = time.perf_counter() - start
    return {"seconds": seconds, "h2d_bytes": moved.h2d_bytes, "plain_seconds": plain_seconds}


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
    from ...export import _entry

    step = llm.StatefulCausalLM(model, max_seq_len, pick="device").eval()
    decode = torch.export.export(step, (torch.tensor([[0]]), torch.tensor([0])), strict=True)
    with _entry(step, "decode_next"):
        decode_next = torch.export.export(step, (), strict=True)
    config = ExecutorchBackendConfig(
        run_reinplace_pass=True,
        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True),
        emit_mutable_buffer_names=True,
    )
    with warnings.catch_warnings(), lifted_constants_in_signature_order():
        warnings.filterwarnings("ignore", "Mutation on a buffer in the model is detected", UserWarning)
        return to_edge({llm.DECODE: decode, llm.DECODE_NEXT: decode_next}).to_executorch(config).buffer
