"""An LLM decode step: a tiny seeded Qwen3-MoE (transformers) exported with
its compute, weights and KV caches in the (simulated) device's backend, one
decode step through ``et_copy.runtime`` (a session holds the state) and the
same .pte through ``executorch.runtime``, against the baseline: the same
model as a plain host program (its caches host mutable buffers, no device,
no copies) on ``executorch.runtime``, which is what the device pipeline
costs over no device at all. Also timed: the model exported with its state
held by the caller (what a runtime without device state is left with: the
caches cross to the device and back every step).

Every step decodes position 0, so the three runs compute the same logits
whatever the rest of the cache holds (executorch.runtime never writes the
state's start value), and the bench checks that they do before timing."""

from __future__ import annotations

import torch

from ._timing import Config, measure, python_sampler

DEVICE_STATE = "device-state .pte on executorch.runtime"
ET_COPY_RUNTIME = "the same .pte on et_copy.runtime"
HOST_STATE = "caller-held state .pte on executorch.runtime"
PLAIN_HOST = "plain host .pte (no device) on executorch.runtime"
BASELINE = PLAIN_HOST
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
        progress(f"llm: exporting a tiny {ARCHITECTURE} twice (device state, host state)")
    device_pte = llm.export_llm(model, max_seq_len=max_seq_len).buffer
    host_pte = llm.export_llm(model, max_seq_len=max_seq_len, state_on_device=False).buffer
    theirs = Runtime.get().load_program(device_pte).load_method(llm.DECODE)
    host = Runtime.get().load_program(host_pte).load_method(llm.DECODE)
    plain_pte = _plain_host_program(model, max_seq_len)  # kept: the loaded Program reads these bytes
    plain = Runtime.get().load_program(plain_pte).load_method(llm.DECODE)
    session = et_copy_runtime.load(device_pte).new_session()
    ours = session.load_method(llm.DECODE)
    state = llm.HostStateStep(llm.StatefulCausalLM(model, max_seq_len)).initial_state()
    token, pos = torch.tensor([[1]]), torch.tensor([0])
    host_inputs = [token, pos, *state]

    expected = host.execute(host_inputs)[0]
    for name, method in ((DEVICE_STATE, theirs), (ET_COPY_RUNTIME, ours), (PLAIN_HOST, plain)):
        got = method.execute([token, pos])[0]
        if not torch.allclose(got, expected, rtol=1e-4, atol=1e-5):
            raise RuntimeError(f"et_copy bench: {name} decoded other logits than the host-state run; not timing it")
    s0 = et_copy.allocator_stats()
    ours.execute([token, pos])
    s1 = et_copy.allocator_stats()
    if progress is not None:
        progress("llm: timing one decode step")
    results = measure(
        {
            DEVICE_STATE: python_sampler(lambda: theirs.execute([token, pos])),
            ET_COPY_RUNTIME: python_sampler(lambda: ours.execute([token, pos])),
            HOST_STATE: python_sampler(lambda: host.execute(host_inputs)),
            PLAIN_HOST: python_sampler(lambda: plain.execute([token, pos])),
        },
        config,
    )
    return {
        "architecture": ARCHITECTURE,
        "max_seq_len": max_seq_len,
        "state_nbytes": session.state_nbytes,
        "host_state_nbytes": sum(t.numel() * t.element_size() for t in state),
        "bytes_per_step": {"h2d": s1["h2d_bytes"] - s0["h2d_bytes"], "d2h": s1["d2h_bytes"] - s0["d2h_bytes"]},
        "baseline": BASELINE,
        "runtimes": [DEVICE_STATE, ET_COPY_RUNTIME],
        "results": results,
    }


def _plain_host_program(model, max_seq_len: int) -> bytes:
    """The decode step as ExecuTorch exports an LLM for the CPU: its caches
    host mutable buffers updated in place, no device and no et_copy op."""
    import warnings

    from executorch.exir import ExecutorchBackendConfig, to_edge

    from et_copy import llm

    step = llm.StatefulCausalLM(model, max_seq_len).eval()
    exported = torch.export.export(step, (torch.tensor([[0]]), torch.tensor([0])), strict=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mutation on a buffer in the model is detected", UserWarning)
        return to_edge({llm.DECODE: exported}).to_executorch(ExecutorchBackendConfig(run_reinplace_pass=True)).buffer
