"""A mid-size LLM step (issue 44): a random-init dense Qwen3 of 322.5 MiB
of fp32 weights (:data:`MID_CONFIG`, seeded, nothing downloaded), and the
same in bf16, decoding one token and prefilling a 128-token prompt.

Rows, per dtype, timed interleaved in one process at one thread count
(``threads``: torch's intra-op threads for the torch rows, ``threads=`` of
et_copy.runtime.load for ours):

- the program exported with ``backend="aoti"`` on et_copy.runtime;
- the program exported with ``backend="simulated"`` (ExecuTorch's portable
  kernels in a nested program: the reference, not the target);
- the aoti program's ``.so`` run directly by torch's AOTI runner
  (:class:`._aoti.DirectRunner`): what our path around the compiled code costs;
- transformers eager with a ``StaticCache``;
- transformers under ``torch.compile`` (CPU Inductor), warmed up, its
  compile time reported.

Each program is exported once per run (the compiled code comes from the
compile cache when it is there). The machine's memory bandwidth is measured
in the same run (a 1 GiB torch copy, one thread and all), and the decode
step's weight bytes read per second are reported as a fraction of it.

The thread figures (issue 44, part 3): the aoti decode step of the fp32
model with 1 and with 2 threads (two loads of the one program), alternated
call by call, 200 calls each: the 2-thread median against the 1-thread one,
and the slowest 2-thread call against its median. They run in child
processes, one with OpenMP's wait policy as the environment has it and one
with ``OMP_WAIT_POLICY=PASSIVE`` (libgomp reads it once, when torch loads it)."""

from __future__ import annotations

import dataclasses
import functools
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ._rss import peak_growth
from ._timing import Stats, stats_of

MID_CONFIG: dict[str, Any] = {
    "vocab_size": 32000,
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 4,
    "num_attention_heads": 12,
    "num_key_value_heads": 6,
    "head_dim": 64,
    "tie_word_embeddings": False,
}
# --quick: the same shape of model, small enough for a smoke test.
QUICK_CONFIG: dict[str, Any] = {
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "tie_word_embeddings": False,
}
# --only llm-moe: a random-init Qwen3-MoE of 647 MiB in fp32 (32 experts, 4 chosen), issue 53's.
MOE_CONFIG: dict[str, Any] = {
    **MID_CONFIG,
    "moe_intermediate_size": 384,
    "num_experts": 32,
    "num_experts_per_tok": 4,
}
QUICK_MOE_CONFIG: dict[str, Any] = {
    **QUICK_CONFIG,
    "moe_intermediate_size": 32,
    "num_experts": 8,
    "num_experts_per_tok": 2,
}
# A kind of model: its transformers classes, its config and --quick's.
KINDS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    "dense": ("Qwen3Config", "Qwen3ForCausalLM", MID_CONFIG, QUICK_CONFIG),
    "moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", MOE_CONFIG, QUICK_MOE_CONFIG),
}
SEED = 0
PROMPT_LEN, MAX_SEQ_LEN = 128, 160
QUICK_PROMPT_LEN, QUICK_MAX_SEQ_LEN = 8, 16
# (dtype, quantize): the float models, and bf16 with int8 and int4 weights (et_copy.llm.quantize), bf16
# being the CPU's fast quantized path (docs/llm.md).
VARIANTS: tuple[tuple[str, str | None], ...] = (
    ("float32", None),
    ("bfloat16", None),
    ("bfloat16", "int8"),
    ("bfloat16", "int4"),
)

AOTI = "et_copy.runtime, backend='aoti'"
SIMULATED = "et_copy.runtime, backend='simulated'"
DIRECT = "the same .so run directly (torch's AOTI runner)"
EAGER = "transformers eager, static cache"
COMPILED = "transformers, torch.compile (CPU Inductor)"
ROWS = (AOTI, SIMULATED, DIRECT, EAGER, COMPILED)
BASELINE = EAGER

THREAD_CALLS = 200  # per thread count, alternated
THREAD_SPIKE = 3.0  # the slowest call of 200 at most this times the median
WAIT_POLICIES = ("as found", "PASSIVE")
BANDWIDTH_BYTES = 1 << 30


@dataclass
class _Step:
    """One model's decode and prefill callables, by row."""

    decode: dict[str, Callable[[], object]]
    prefill: dict[str, Callable[[], object]]


def _say(progress, message: str) -> None:
    if progress is not None:
        progress(message)


def mid_model(dtype: torch.dtype, *, quick: bool = False, kind: str = "dense", quantize: str | None = None):
    """The benchmark's model of ``kind`` (:data:`KINDS`: a dense Qwen3 or a
    Qwen3-MoE), its weights drawn from :data:`SEED` (the caller's RNG state
    is left as it was; a MoE's router weights too), in eval mode, quantized
    by :func:`et_copy.llm.quantize` when ``quantize`` names a scheme."""
    import transformers

    from et_copy import llm

    config_class, model_class, config, quick_config = KINDS[kind]
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        model = getattr(transformers, model_class)(
            getattr(transformers, config_class)(**(quick_config if quick else config))
        )
    torch.nn.Module.to(model, dtype)  # in place (transformers' own `to` has a narrower signature)
    model = llm.prepare(model)
    return model if quantize is None else llm.quantize(model, quantize)


def _stored_nbytes(t: torch.Tensor) -> int:
    """A weight's bytes as the compiled backend stores them: a torchao
    quantized weight as its values (int4: two a byte) and its scales (and
    its zero points where any is not zero); a float weight as it is."""
    if type(t) in (torch.Tensor, torch.nn.Parameter) or not hasattr(t, "qdata"):
        return t.numel() * t.element_size()
    bits = 4 if getattr(t, "target_dtype", None) == getattr(torch, "int4") else 8
    qdata, scale, zero = getattr(t, "qdata"), getattr(t, "scale"), getattr(t, "zero_point", None)
    nbytes = qdata.numel() * bits // 8 + scale.numel() * scale.element_size()
    if isinstance(zero, torch.Tensor) and bool(zero.ne(0).any()):
        nbytes += zero.numel() * scale.element_size()
    return nbytes


def weight_bytes(model) -> dict[str, int]:
    """All the weights' bytes in their stored form, and those one decode
    step must read: every weight but the embedding table, of which it reads
    one row, and of the experts only the chosen ones' share (top-k of E).
    Quantized experts are buffers (their bytes and scales), not parameters."""
    params = dict(model.named_parameters())
    params.update((n, b) for n, b in model.named_buffers() if n.endswith(("_stored", "_scale")))
    total = sum(_stored_nbytes(p) for p in params.values())
    embed = model.get_input_embeddings().weight
    embed_nbytes = _stored_nbytes(embed)
    experts = sum(_stored_nbytes(p) for name, p in params.items() if ".experts." in name)
    config = model.config
    chosen = getattr(config, "num_experts_per_tok", 0) / max(getattr(config, "num_experts", 0) or 1, 1)
    reads = total - embed_nbytes + embed_nbytes // embed.shape[0] - experts + int(experts * chosen)
    return {"total": total, "decode_reads": reads}


def memory_bandwidth(nbytes: int = BANDWIDTH_BYTES, repeats: int = 5) -> dict[str, float]:
    """GB/s (1e9) of ``dst.copy_(src)`` over ``nbytes``, counting the bytes
    read and written (2 x nbytes, as STREAM's copy), and of ``src.sum()``
    (``nbytes`` read: what a decode step does to its weights), best of
    ``repeats``, with one thread and with all."""
    src = torch.ones(nbytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    saved = torch.get_num_threads()
    out = {}
    try:
        for label, threads in (("one_thread", 1), ("all_threads", len(_usable_cpus()))):
            torch.set_num_threads(threads)
            dst.copy_(src)  # first touch of dst's pages, untimed
            best = {"copy": float("inf"), "read": float("inf")}
            for _ in range(repeats):
                start = time.perf_counter()
                dst.copy_(src)
                best["copy"] = min(best["copy"], time.perf_counter() - start)
                start = time.perf_counter()
                src.sum()
                best["read"] = min(best["read"], time.perf_counter() - start)
            out[label] = 2 * nbytes / best["copy"] / 1e9
            out[f"read_{label}"] = nbytes / best["read"] / 1e9
            out[f"{label}_threads"] = threads
    finally:
        torch.set_num_threads(saved)
    return out


def _usable_cpus() -> set[int]:
    import os

    try:
        return os.sched_getaffinity(0)
    except AttributeError:
        return set(range(os.cpu_count() or 1))


def interleaved(cases: dict[str, Callable[[], object]], rounds: int, budget_s: float) -> dict[str, Stats]:
    """Times each case one call at a time, ``rounds`` rounds in a rotating
    order (a noisy neighbour hits every case alike). A case whose warm-up
    call says ``rounds`` calls would take over ``budget_s`` gets fewer
    rounds (at least 3): the simulated backend's portable kernels take
    seconds a call at this size."""
    names = list(cases)
    wanted = {}
    for name in names:
        start = time.perf_counter()
        cases[name]()  # the warm-up
        took = time.perf_counter() - start
        wanted[name] = max(3, min(rounds, int(budget_s / max(took, 1e-9))))
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            if len(samples[name]) < wanted[name]:
                start = time.perf_counter_ns()
                cases[name]()
                samples[name].append(float(time.perf_counter_ns() - start))
    return {name: stats_of(samples[name], 1) for name in names}


def _export(model, backend: str, max_seq_len: int, prompt_len: int) -> dict[str, Any]:
    from et_copy import llm
    from et_copy.backends import aoti

    before = dataclasses.replace(aoti.compile_stats)
    start = time.perf_counter()
    pte = llm.export_llm(
        model, max_seq_len=max_seq_len, max_prompt_len=prompt_len, pick="device", backend=backend
    ).buffer
    out: dict[str, Any] = {"seconds": time.perf_counter() - start, "pte": pte, "pte_nbytes": len(pte)}
    if backend == "aoti":
        out.update(aoti.compile_stats.since(before))
    return out


def _transformers_steps(model, max_seq_len: int, prompt: torch.Tensor, progress) -> tuple[_Step, dict]:
    """Eager and torch.compile'd steps of ``model``: a decode at position
    ``len(prompt)`` and a prefill of ``prompt``, the last position's logits
    only, as our programs compute. Both run transformers' modules on a
    static cache through :class:`et_copy.llm.StatefulCausalLM` (a
    StaticCache whose layers are buffers, its position set from
    ``cache_position``: the module export_llm traces). A bare transformers
    5.24 StaticCache counts the tokens it has seen and indexes past its end
    when steps repeat their positions, as every sample here does."""
    from et_copy import llm

    def stepper(compile_it: bool):
        wrapper = llm.StatefulCausalLM(model, max_seq_len, pick="host").eval()
        forward = torch.compile(wrapper, dynamic=False) if compile_it else wrapper

        def step(ids, positions):
            with torch.no_grad():
                return forward(ids, positions)

        return step

    eager, compiled = stepper(False), stepper(True)
    n = prompt.shape[1]
    token, position = torch.tensor([[1]]), torch.tensor([n])
    positions = torch.arange(n)
    _say(progress, "llm-mid: torch.compile of the decode step and the prefill (CPU Inductor)")
    compile_s = {}
    for what, args in (("decode", (token, position)), ("prefill", (prompt, positions))):
        start = time.perf_counter()
        compiled(*args)  # compiles
        compile_s[what] = time.perf_counter() - start
        compiled(*args)  # and warms up
    steps = _Step(
        decode={EAGER: lambda: eager(token, position), COMPILED: lambda: compiled(token, position)},
        prefill={EAGER: lambda: eager(prompt, positions), COMPILED: lambda: compiled(prompt, positions)},
    )
    eager(prompt, positions)
    picks = {"eager": int(eager(token, position)[0].argmax())}
    return steps, {"compile_seconds": compile_s, "picks": picks}


def _program_steps(ptes: dict[str, bytes], threads: int, prompt: torch.Tensor) -> tuple[_Step, dict, list[object]]:
    """Our programs' decode and prefill on et_copy.runtime, and the aoti
    program's .so run directly (decode and prefill), with the tokens each
    picks first."""
    from et_copy import llm
    from et_copy import runtime as et_copy_runtime

    from ._aoti import DirectRunner, method_delegate

    n = prompt.shape[1]
    token, position, positions = torch.tensor([[1]]), torch.tensor([n]), torch.arange(n)
    rows = {"aoti": AOTI, "simulated": SIMULATED}
    steps, picks, keep = _Step({}, {}), {}, list[object]()
    for backend, pte in ptes.items():
        session = et_copy_runtime.load(pte, threads=threads).new_session()
        decode, prefill = session.load_method(llm.DECODE), session.load_method(llm.PREFILL)
        keep.append(session)
        # The prefill writes the prompt's keys first, so that every decode attends over it.
        prefill.execute([prompt, positions])
        (picked,) = decode.execute([token, position])
        assert isinstance(picked, torch.Tensor)  # a host output: the token
        picks[backend] = int(picked[0])
        steps.decode[rows[backend]] = functools.partial(decode.execute, [token, position])
        steps.prefill[rows[backend]] = functools.partial(prefill.execute, [prompt, positions])
    if "aoti" in ptes:
        direct_decode = DirectRunner(method_delegate(ptes["aoti"], llm.DECODE))
        direct_prefill = DirectRunner(method_delegate(ptes["aoti"], llm.PREFILL), share_state_with=direct_decode)
        keep += [direct_decode, direct_prefill]
        decode_in = direct_decode.inputs_of([token, position])
        prefill_in = direct_prefill.inputs_of([prompt, positions])
        direct_prefill.run(prefill_in)
        picks["direct"] = int(direct_decode.run(decode_in)[0][0])
        steps.decode[DIRECT] = lambda: direct_decode.run(decode_in)
        steps.prefill[DIRECT] = lambda: direct_prefill.run(prefill_in)
    return steps, picks, keep


def variant_label(dtype_name: str, quantize: str | None) -> str:
    return dtype_name if quantize is None else f"{dtype_name}, {quantize} weights"


def _one_dtype(
    dtype_name: str,
    *,
    threads: int,
    quick: bool,
    rounds: int,
    budget_s: float,
    progress,
    kind: str = "dense",
    quantize: str | None = None,
) -> dict:
    dtype = getattr(torch, dtype_name)
    prompt_len, max_seq_len = (QUICK_PROMPT_LEN, QUICK_MAX_SEQ_LEN) if quick else (PROMPT_LEN, MAX_SEQ_LEN)
    model = mid_model(dtype, quick=quick, kind=kind, quantize=quantize)
    sizes = weight_bytes(model)
    label = variant_label(dtype_name, quantize)
    exports = {}
    for backend in ("aoti", "simulated"):
        _say(progress, f"llm-{kind}: {label}: export_llm(backend={backend!r}) of {sizes['total'] / 2**20:.1f} MiB")
        exports[backend], exports_peak = peak_growth(
            functools.partial(_export, model, backend, max_seq_len, prompt_len)
        )
        exports[backend]["peak_rss_growth"] = exports_peak
    ptes = {backend: e.pop("pte") for backend, e in exports.items()}
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        prompt = torch.randint(0, model.config.vocab_size, (1, prompt_len))
    torch.set_num_threads(threads)
    ours, picks, keep = _program_steps(ptes, threads, prompt)
    _, prefill_peak = peak_growth(ours.prefill[AOTI])  # the aoti prefill's own memory, beyond the loaded program
    theirs, about = _transformers_steps(model, max_seq_len, prompt, progress)
    picks.update(about["picks"])
    _say(progress, f"llm-{kind}: {label}: timing decode steps and prefills, {threads} thread(s)")
    decode = interleaved({name: {**ours.decode, **theirs.decode}[name] for name in ROWS}, rounds, budget_s)
    prefill = interleaved({name: {**ours.prefill, **theirs.prefill}[name] for name in ROWS}, rounds, budget_s)
    del keep
    return {
        "dtype": label,
        "quantize": quantize,
        "weights_nbytes": sizes["total"],
        "prefill_peak_rss_growth": prefill_peak,
        "decode_weight_bytes": sizes["decode_reads"],
        "export": exports,
        "torch_compile_seconds": about["compile_seconds"],
        "first_decode_token": picks,
        "decode": decode,
        "prefill": prefill,
        "ptes": ptes,  # for the thread figures; dropped from the document by run()
    }


def thread_figures(pte: bytes, prompt_len: int, calls: int = THREAD_CALLS) -> dict:
    """The aoti decode step with 1 and with 2 threads: two loads of ``pte``,
    alternated call by call, ``calls`` each."""
    from et_copy import llm
    from et_copy import runtime as et_copy_runtime

    token, position = torch.tensor([[1]]), torch.tensor([prompt_len])
    methods = {n: et_copy_runtime.load(pte, threads=n).new_session().load_method(llm.DECODE) for n in (1, 2)}
    for m in methods.values():
        m.execute([token, position])  # warm-up
    times: dict[int, list[float]] = {1: [], 2: []}
    for i in range(calls):
        for n in (1, 2) if i % 2 == 0 else (2, 1):
            start = time.perf_counter_ns()
            methods[n].execute([token, position])
            times[n].append(float(time.perf_counter_ns() - start))
    one, two = stats_of(times[1], 1), stats_of(times[2], 1)
    return {
        "calls": calls,
        "one_thread": one,
        "two_threads": two,
        "one_thread_max_ns": max(times[1]),
        "two_threads_max_ns": max(times[2]),
        "median_ratio": two.median_ns / one.median_ns,
        "two_threads_max_over_median": max(times[2]) / two.median_ns,
    }


def _thread_figures_in_child(pte: bytes, prompt_len: int, calls: int, policy: str) -> dict:
    """:func:`thread_figures` in a fresh process, with OMP_WAIT_POLICY=``policy``
    ("as found": the environment's), since libgomp reads it when it loads."""
    import json
    import os
    import sys
    import tempfile

    env = dict(os.environ)
    if policy != "as found":
        env["OMP_WAIT_POLICY"] = policy
    code = (
        "import json, sys, et_copy\n"
        "from et_copy.tools.bench import _llm_mid\n"
        "et_copy.use_simulated_device(); et_copy.use_aoti_backend()\n"
        "pte = open(sys.argv[1], 'rb').read()\n"
        "t = _llm_mid.thread_figures(pte, int(sys.argv[2]), int(sys.argv[3]))\n"
        "print(json.dumps({k: (v.to_json() if hasattr(v, 'to_json') else v) for k, v in t.items()}))\n"
    )
    with tempfile.NamedTemporaryFile(suffix=".pte") as f:
        f.write(pte)
        f.flush()
        done = subprocess.run(
            [sys.executable, "-c", code, f.name, str(prompt_len), str(calls)],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
        )
    if done.returncode != 0:
        raise RuntimeError(f"et_copy bench: the thread figures' child failed: {done.stderr[-2000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for key in ("one_thread", "two_threads"):
        got[key] = Stats(**got[key])
    got["wait_policy"] = env.get("OMP_WAIT_POLICY", "unset (libgomp's default: spin, then sleep)")
    return got


def mid_size(
    *,
    threads: int = 1,
    quick: bool = False,
    rounds: int = 15,
    budget_s: float = 60.0,
    progress=None,
    kind: str = "dense",
    variants: tuple[tuple[str, str | None], ...] = VARIANTS,
) -> dict:
    """The section's document for a model of ``kind`` (``llm-mid``: dense;
    ``llm-moe``: the MoE): the bandwidth, one entry per variant (dtype and
    quantization), the thread figures (the dense model's). Needs transformers
    and executorch's AOT stack (ImportError without them), the simulated
    allocator and the compiled backend registered."""
    import transformers  # noqa: F401  (the model's architecture)

    saved = torch.get_num_threads()
    try:
        _say(progress, "llm-mid: memory bandwidth (1 GiB torch copies)")
        nbytes = BANDWIDTH_BYTES >> (6 if quick else 0)
        bandwidth = {"nbytes": nbytes, **memory_bandwidth(nbytes, repeats=2 if quick else 5)}
        doc: dict = {
            "kind": kind,
            "config": KINDS[kind][3] if quick else KINDS[kind][2],
            "seed": SEED,
            "threads": threads,
            "prompt_len": QUICK_PROMPT_LEN if quick else PROMPT_LEN,
            "max_seq_len": QUICK_MAX_SEQ_LEN if quick else MAX_SEQ_LEN,
            "baseline": BASELINE,
            "rows": list(ROWS),
            "bandwidth_gb_s": bandwidth,
            "dtypes": [],
        }
        for name, quantize in variants:
            entry = _one_dtype(
                name,
                threads=threads,
                quick=quick,
                rounds=rounds,
                budget_s=budget_s,
                progress=progress,
                kind=kind,
                quantize=quantize,
            )
            ptes = entry.pop("ptes")
            if name == "float32" and kind == "dense":
                calls = 20 if quick else THREAD_CALLS
                doc["thread_figures"] = []
                for policy in WAIT_POLICIES:
                    _say(
                        progress,
                        f"llm-mid: float32: the aoti decode step with 1 and 2 threads, {calls} calls each, "
                        f"OMP_WAIT_POLICY {policy} (child process)",
                    )
                    try:
                        doc["thread_figures"].append(
                            _thread_figures_in_child(ptes["aoti"], doc["prompt_len"], calls, policy)
                        )
                    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                        # Reported with the rest rather than losing the section's figures.
                        doc.setdefault("thread_figures_failed", []).append(f"{policy}: {str(e)[-2000:]}")
            del ptes
            doc["dtypes"].append(entry)
        return doc
    finally:
        torch.set_num_threads(saved)
