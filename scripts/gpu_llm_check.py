#!/usr/bin/env python3
"""The LLM step of scripts/gpu_check.sh: exports a tiny transformers LLM
(default Qwen 3.5 MoE, et_copy.llm.tiny_model) through upstream's
CudaPartitioner (AOTInductor), runs it on et_copy.runtime with
et_copy.use_cuda(), and compares its greedy tokens with transformers'
generate().

    python scripts/gpu_llm_check.py --out DIR            # on a GPU machine
    python scripts/gpu_llm_check.py --dry-run --out DIR  # anywhere: the same
        # steps with et-copy's SimulatedDevicePartitioner and simulated device

Each step prints one line, `PASS: ...`, `SKIP: ...` (what this machine or
wheel lacks, with the reason) or `FAIL: ...`; the exit status is 1 when any
step failed, else 0. The program goes to DIR/llm.pte (and DIR/*.ptd when the
backend keeps its data outside).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import traceback
from pathlib import Path


class Skip(Exception):
    """A step this machine or wheel cannot take; not a failure."""


def say(kind: str, step: str, text: str) -> None:
    print(f"{kind}: {step}: {text}", flush=True)


def cuda_partitioner():
    """Upstream's CudaPartitioner, or Skip naming what is missing."""
    try:
        from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    except Exception as e:  # the wheel lacks the module, or it needs what is absent here
        raise Skip(f"executorch.backends.cuda is not importable here ({type(e).__name__}: {e})") from e
    import torch

    if not torch.cuda.is_available():
        raise Skip("torch sees no CUDA device (AOTInductor compiles for a GPU)")
    if shutil.which("nvcc") is None:
        raise Skip("no nvcc on PATH (AOTInductor's CUDA compile needs it)")
    return CudaPartitioner([])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="simulated device and partitioner: runs with no GPU")
    ap.add_argument("--out", type=Path, default=Path("/tmp/et_copy_gpu_check"), help="where the program goes")
    ap.add_argument("--arch", default="qwen3_5_moe", help="et_copy.llm.tiny_model's architecture")
    ap.add_argument("--max-seq-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=6)
    ap.add_argument(
        "--quantize", choices=("int8", "int4"), help="et_copy.llm.quantize the model first (experts included)"
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    mode = "simulated device (dry run)" if args.dry_run else "CUDA"
    weights = f", {args.quantize} weights" if args.quantize else ""
    sizes = f"max_seq_len {args.max_seq_len}, {args.new_tokens} tokens"
    print(f"gpu_llm_check: {args.arch}{weights}, {mode}, {sizes}", flush=True)
    t0 = time.monotonic()
    failed = False

    def step(name, run):
        nonlocal failed
        start = time.monotonic()
        try:
            result = run()
        except Skip as e:
            say("SKIP", name, str(e))
            return None
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            say("FAIL", name, f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}")
            failed = True
            return None
        say("PASS", name, f"{time.monotonic() - start:.0f} s")
        return result if result is not None else True

    partitioner = None
    if not args.dry_run:
        partitioner = step("CudaPartitioner", cuda_partitioner)
        if partitioner is None:
            return 1 if failed else 0

    def build_model():
        try:
            import et_copy.llm
        except ImportError as e:
            raise Skip(f"et_copy.llm needs transformers ({e})") from e
        try:
            tiny = et_copy.llm.tiny_model(args.arch)
        except (ImportError, AttributeError) as e:  # an older transformers without this architecture
            raise Skip(f"this transformers cannot build {args.arch} ({type(e).__name__}: {e})") from e
        if args.quantize is None:
            return tiny
        try:
            import torchao  # noqa: F401
        except ImportError as e:
            raise Skip(f"--quantize needs torchao ({e})") from e
        return et_copy.llm.quantize(tiny, args.quantize)  # the eager reference is the quantized model too

    model = step(f"tiny_model({args.arch!r})", build_model)
    if model is None:
        return 1 if failed else 0

    def export():
        import et_copy.llm

        # The linear-attention conv as shifts: upstream's Triton-only options have no grouped-conv template.
        program = et_copy.llm.export_llm(
            model, max_seq_len=args.max_seq_len, partitioner=partitioner, depthwise_conv_as_shifts=True
        )
        pte = args.out / "llm.pte"
        pte.write_bytes(program.buffer)
        if getattr(program, "_tensor_data", None):
            program.write_tensor_data_to_file(str(args.out))
        return pte

    through = type(partitioner).__name__ if partitioner else "SimulatedDevicePartitioner"
    pte = step(f"export_llm through {through}", export)
    if pte is None:
        return 1

    def generate():
        import et_copy
        import et_copy.llm
        import et_copy.runtime

        registered = et_copy.use_simulated_device() if args.dry_run else et_copy.use_cuda()
        data = sorted(args.out.glob("*.ptd"))
        try:
            program = et_copy.runtime.load(pte, data_path=data[0] if data else None)
            session = et_copy.llm.DeviceLLM(program).new_session()
        except Exception as e:
            if not args.dry_run and "CudaBackend" in str(e):
                raise Skip(f"no CudaBackend runtime is registered (executorch's CPU wheel has none): {e}") from e
            raise
        prompt = [1, 2, 3, 4]
        got = session.generate(prompt, max_new_tokens=args.new_tokens).tokens
        want = et_copy.llm.eager_generate(model, prompt, args.new_tokens)
        print(f"  device: {registered}; tokens {got}, transformers {want}", flush=True)
        if list(got) != list(want):
            raise AssertionError(f"tokens {got} differ from transformers' {want}")

    step("generate on et_copy.runtime equals transformers", generate)
    print(f"gpu_llm_check: {'FAIL' if failed else 'done'} in {time.monotonic() - t0:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
