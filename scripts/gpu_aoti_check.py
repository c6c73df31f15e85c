#!/usr/bin/env python3
"""The compiled-backend steps of scripts/gpu_check.sh: device programs whose
compute is AOTInductor code, run by libtorch's AOTI runtime inside et-copy's
``AotiDeviceBackend`` (docs/design.md, "A compiled device backend").

    python scripts/gpu_aoti_check.py --out DIR            # on a GPU: use_cuda(), compiled for CUDA
    python scripts/gpu_aoti_check.py --dry-run --out DIR  # anywhere: the simulated device, compiled
                                                          # for the CPU (the same code path)

Steps (run in the order 2, 3, 1, so the north star comes first), each one
line `PASS: <step>: ...`, `SKIP: <step>: <why>` or `FAIL: <step>: <why>`:

1. generic models (an MLP, a convnet with a depthwise conv, an attention
   block, several outputs) through ``export_device_program(backend="aoti")``,
   against eager on the same device;
2. tiny LLMs (``--archs``, default Qwen 3.5 MoE and Qwen3-MoE)
   through ``export_llm(backend="aoti", pick="device")``: greedy tokens equal
   transformers' ``generate()`` on the same device, and the bytes each
   decoded token moves (h2d, d2h) read from et-copy's allocator counters;
3. a decode benchmark (``--bench``): a random-init dense model of at least
   1 GiB of bf16 weights, decode tokens/s through et-copy against
   transformers' ``generate()`` with a static cache, eager and under
   ``torch.compile``, in one run; weight bytes per token over step time as a
   fraction of the GPU's memory bandwidth; the same decode on the caller's
   stream (``et_copy.cuda.use_stream``): its tokens/s, and the copies' host
   waits per token with and without it.

The exit status is 1 when any step failed. Compiles are cached by content
(``$XDG_CACHE_HOME/et_copy/aoti``), so a second run reuses them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

# H200's HBM3e bandwidth, for the fraction the decode step reaches (bytes/s).
PEAK_BANDWIDTH = {"H200": 4.8e12, "H100": 3.35e12}


class Skip(Exception):
    """A step this machine cannot take; not a failure."""


def say(kind: str, step: str, text: str) -> None:
    print(f"{kind}: {step}: {text}", flush=True)


class Steps:
    def __init__(self) -> None:
        self.failed = False
        self.figures: dict = {}

    def run(self, name, fn):
        start = time.monotonic()
        try:
            result = fn()
        except Skip as e:
            say("SKIP", name, str(e))
            return None
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            lines = str(e).strip().splitlines()
            say("FAIL", name, f"{type(e).__name__}: {lines[-1] if lines else ''}"[:400])
            self.failed = True
            return None
        say("PASS", name, f"{time.monotonic() - start:.0f} s" + (f"; {result}" if isinstance(result, str) else ""))
        return result if result is not None else True


def _generic_models():
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))

        def forward(self, x):
            return self.net(x)

    class DepthwiseConvNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dw = torch.nn.Conv1d(16, 16, 4, groups=16, padding=3)
            self.pw = torch.nn.Conv1d(16, 8, 1)

        def forward(self, x):
            return torch.nn.functional.silu(self.pw(self.dw(x)[..., : x.shape[-1]]))

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)
            self.norm = torch.nn.LayerNorm(32)

        def forward(self, x):
            return self.norm(x + self.attn(x, x, x, need_weights=False)[0])

    class TwoOutputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 8)

        def forward(self, x):
            y = self.a(x)
            return y.softmax(-1), y.amax(-1)

    torch.manual_seed(0)
    return [
        ("MLP", MLP().eval(), (torch.randn(4, 32),)),
        ("depthwise convnet", DepthwiseConvNet().eval(), (torch.randn(1, 16, 12),)),
        ("attention block", Attention().eval(), (torch.randn(1, 6, 32),)),
        ("two outputs", TwoOutputs().eval(), (torch.randn(3, 8),)),
    ]


def generic(args, device: str) -> str:
    import et_copy.runtime
    import torch
    from et_copy.export import export_device_program

    worst = 0.0
    for name, model, inputs in _generic_models():
        program = export_device_program(model, inputs, backend="aoti")
        method = et_copy.runtime.load(program.buffer).load_method("forward")
        got = method.execute(list(inputs))
        with torch.no_grad():
            want = model.to(device)(*(x.to(device) for x in inputs))
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            err = (g.float() - w.float().cpu()).abs().max().item()
            worst = max(worst, err)
            if not err <= 1e-4:
                raise AssertionError(f"{name}: max abs difference {err:.3g} from eager on {device}")
    return f"4 models equal eager on {device} (max abs diff {worst:.2g})"


def _reference_tokens(model, prompt, new_tokens: int, device: str) -> list[int]:
    import torch

    with torch.no_grad():
        model = model.to(device)
        out = model.generate(
            torch.tensor([prompt], device=device), max_new_tokens=new_tokens, eos_token_id=None, do_sample=False
        )
    model.to("cpu")
    return out[0, len(prompt) :].tolist()


def tiny_llm(arch: str, args, device: str, steps: Steps) -> str:
    import et_copy.llm

    model = et_copy.llm.tiny_model(arch)
    start = time.monotonic()
    program = et_copy.llm.export_llm(model, max_seq_len=args.max_seq_len, pick="device", backend="aoti")
    export_s = time.monotonic() - start
    start = time.monotonic()
    with et_copy.counting() as load:
        llm = et_copy.llm.DeviceLLM(program.buffer)
        session = llm.new_session()
    prompt = [1, 2, 3, 4, 5]
    got = session.generate(prompt, max_new_tokens=args.new_tokens)
    load_s = time.monotonic() - start
    want = _reference_tokens(model, prompt, args.new_tokens, device)
    h2d, d2h = got.decode_bytes_per_token()
    steps.figures[arch] = {
        "tokens": got.tokens,
        "transformers": want,
        "decode_h2d_bytes_per_token": h2d,
        "decode_d2h_bytes_per_token": d2h,
        "export_s": round(export_s, 1),
        "load_and_generate_s": round(load_s, 2),
        "load_h2d_bytes": load.h2d_bytes,
    }
    if list(got.tokens) != list(want):
        raise AssertionError(f"tokens {got.tokens} differ from transformers' {want} on {device}")
    if (h2d, d2h) != (0, 8):
        raise AssertionError(f"a decoded token moved {h2d:.0f} B in and {d2h:.0f} B out, not 0 and 8")
    # A new session after the first is gone uploads its state only: the weights stay with the program.
    del session
    with et_copy.counting() as again:
        second = llm.new_session()
        second.generate(prompt, max_new_tokens=1)
    steps.figures[arch]["second_session_h2d_bytes"] = again.h2d_bytes
    return (
        f"tokens {got.tokens} == transformers on {device}; per decoded token {h2d:.0f} B in, {d2h:.0f} B out; "
        f"export {export_s:.0f} s; weights+state up at load {load.h2d_bytes} B, second session {again.h2d_bytes} B"
    )


def _bench_config(args):
    from transformers import Qwen3Config

    # A dense Qwen3 of about 0.7 B parameters: 1.3 GiB of bf16 weights.
    return Qwen3Config(
        vocab_size=32000,
        hidden_size=args.bench_hidden,
        intermediate_size=args.bench_hidden * 4,
        num_hidden_layers=args.bench_layers,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=args.bench_hidden // 16,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )


def _time_generate(model, prompt, new_tokens: int, device: str, **kwargs) -> tuple[float, float]:
    """(seconds of the timed run, seconds of the warm-up run) of transformers' generate()."""
    import torch

    ids = torch.tensor([prompt], device=device)
    runs = []
    for _ in range(2):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, **kwargs)
        torch.cuda.synchronize()
        runs.append(time.perf_counter() - start)
        assert out.shape[1] == len(prompt) + new_tokens
    return runs[1], runs[0]


def bench(args, device: str, steps: Steps) -> str:
    import et_copy.llm
    import torch
    from transformers import Qwen3ForCausalLM

    if device == "cpu":
        raise Skip("the decode benchmark compares against transformers on a GPU")
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(_bench_config(args)).to(torch.bfloat16).eval()
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if weight_bytes < 2**30:
        raise AssertionError(f"the benchmark model has {weight_bytes / 2**30:.2f} GiB of weights, under 1 GiB")
    prompt = list(range(1, 17))
    n = args.bench_tokens
    start = time.monotonic()
    program = et_copy.llm.export_llm(
        et_copy.llm.prepare(model), max_seq_len=len(prompt) + n + 8, pick="device", backend="aoti"
    )
    export_s = time.monotonic() - start
    start = time.monotonic()
    llm = et_copy.llm.DeviceLLM(program.buffer)
    session = llm.new_session()
    load_s = time.monotonic() - start
    session.generate(prompt, max_new_tokens=4)  # warm-up
    session.reset()
    with et_copy.counting() as lanes:
        ours = session.generate(prompt, max_new_tokens=n)
    ours_tps = ours.decode_tokens_per_second
    # The same decode on the caller's stream (docs/cuda.md, "Streams"): H2D queued, one wait per D2H.
    s = torch.cuda.Stream()
    session.reset()
    with et_copy.counting() as on_s, torch.cuda.stream(s), et_copy.cuda.use_stream(s):
        streamed = session.generate(prompt, max_new_tokens=n)
    if list(streamed.tokens) != list(ours.tokens):
        raise AssertionError(f"on the caller's stream the tokens are {streamed.tokens}, not {ours.tokens}")
    del session, llm, program
    model = model.to(device)
    eager_s, eager_warm = _time_generate(model, prompt, n, device, cache_implementation="static", disable_compile=True)
    compiled_s, compiled_warm = _time_generate(model, prompt, n, device, cache_implementation="static")
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in PEAK_BANDWIDTH.items() if k in name), float("nan"))
    step_s = 1 / ours_tps
    figures = {
        "gpu": name,
        "weights_GiB": round(weight_bytes / 2**30, 3),
        "export_s": round(export_s, 1),
        "load_s": round(load_s, 2),
        "et_copy_decode_tok_s": round(ours_tps, 1),
        "transformers_static_eager_tok_s": round(n / eager_s, 1),
        "transformers_static_compiled_tok_s": round(n / compiled_s, 1),
        "transformers_compile_warmup_s": round(compiled_warm, 1),
        "bandwidth_fraction": round(weight_bytes / step_s / peak, 3),
        "decode_bytes_per_token": ours.decode_bytes_per_token(),
        "et_copy_decode_tok_s_on_callers_stream": round(streamed.decode_tokens_per_second, 1),
        # Host waits of the copies per generated token (prefill included): every copy waits on
        # et-copy's lanes, only the D2H copies on the caller's stream.
        "copy_waits_per_token": round((lanes.h2d_copies + lanes.d2h_copies) / n, 2),
        "copy_waits_per_token_on_callers_stream": round(on_s.d2h_copies / n, 2),
    }
    steps.figures["bench"] = figures
    return (
        f"{figures['weights_GiB']} GiB bf16: et-copy {ours_tps:.0f} tok/s, transformers static eager "
        f"{n / eager_s:.0f} tok/s (x{ours_tps * eager_s / n:.2f}), compiled {n / compiled_s:.0f} tok/s "
        f"(x{ours_tps * compiled_s / n:.2f}); {figures['bandwidth_fraction']:.0%} of {peak / 1e12:.1f} TB/s; "
        f"on the caller's stream {streamed.decode_tokens_per_second:.0f} tok/s, copy waits per token "
        f"{figures['copy_waits_per_token']} -> {figures['copy_waits_per_token_on_callers_stream']}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="the simulated device, compiled for the CPU")
    ap.add_argument("--out", type=Path, default=Path("/tmp/et_copy_gpu_check"))
    ap.add_argument("--archs", default="qwen3_5_moe,qwen3_moe", help="et_copy.llm.tiny_model architectures")
    ap.add_argument("--max-seq-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=6)
    ap.add_argument("--no-generic", action="store_true")
    ap.add_argument("--bench", action="store_true", help="the mid-size decode benchmark (GPU only)")
    ap.add_argument("--bench-layers", type=int, default=8)
    ap.add_argument("--bench-hidden", type=int, default=2048)
    ap.add_argument("--bench-tokens", type=int, default=128)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    steps = Steps()
    t0 = time.monotonic()

    import et_copy
    import torch

    if args.dry_run:
        et_copy.use_simulated_device()
        device = "cpu"
    else:
        if not torch.cuda.is_available():
            say("SKIP", "compiled backend on CUDA", "torch sees no CUDA device")
            return 0
        et_copy.use_cuda()
        device = "cuda"
    outcome = et_copy.use_aoti_backend()
    print(f"gpu_aoti_check: torch {torch.__version__}, device {device}, AotiDeviceBackend {outcome}", flush=True)

    figures = args.out / "aoti_figures.json"
    # The north star first, then the benchmark, then the generic models: a step cut off by the
    # script's time limit leaves the earlier ones' lines and figures behind.
    for arch in [a for a in args.archs.split(",") if a]:
        steps.run(f"tiny {arch} through backend='aoti'", lambda arch=arch: tiny_llm(arch, args, device, steps))
        figures.write_text(json.dumps(steps.figures, indent=1, default=str))
    if args.bench:
        steps.run("decode benchmark against transformers", lambda: bench(args, device, steps))
        figures.write_text(json.dumps(steps.figures, indent=1, default=str))
    if not args.no_generic:
        steps.run("generic models through backend='aoti'", lambda: generic(args, device))
    print(json.dumps(steps.figures, default=str), flush=True)
    print(f"gpu_aoti_check: {'FAIL' if steps.failed else 'done'} in {time.monotonic() - t0:.0f} s", flush=True)
    return 1 if steps.failed else 0


if __name__ == "__main__":
    sys.exit(main())
