"""``python -m et_copy bench``: how fast et_copy moves bytes, against the
baselines users would pick instead (torch copies, memcpy, cudaMemcpy).

Sections: Python call overhead, C++ kernel overhead, throughput by size on
the simulated device, a whole program and an LLM decode step through
executorch.runtime and et_copy.runtime, and CUDA rows when a GPU and
et_copy's CUDA allocator are present. ``--only llm-mid`` (not in the default
run: it takes many minutes) times a mid-size dense Qwen3 against
transformers eager and torch.compile; ``--only verify`` (not in the default
run either: it exports 128 MiB of weights) times a load with and without
``verify_data=True``. Prints a table with ratios to each
baseline; ``--json`` and ``--plot`` save the results."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from ...backends import BACKENDS, DEFAULT_BACKEND
from .._progress import Progress, progress_lines
from ._timing import Config

SECTIONS = ("overhead", "kernel", "throughput", "program", "llm", "cuda", "llm-mid", "llm-moe", "verify")
# llm-mid exports a 322.5 MiB model twice per variant (6 minutes on 2 cores with the compile
# cache warm), llm-moe a 647 MiB MoE, verify a 128 MiB one: they run when --only names them, not by default.
DEFAULT_SECTIONS = SECTIONS[:-3]
QUICK_SIZES = (4096, 65536, 1 << 20)


def _parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    scale = units.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in units else t
    try:
        value = int(digits) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 4096, 64K, 16M)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"size must be at least 1 byte, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m et_copy bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", metavar="PATH", help="write every figure (and the machine description) as JSON")
    p.add_argument("--plot", metavar="PATH", help="write a PNG of GB/s against size (needs matplotlib)")
    p.add_argument(
        "--only",
        metavar="LIST",
        default=",".join(DEFAULT_SECTIONS),
        help=f"comma-separated sections to run (default {','.join(DEFAULT_SECTIONS)}; also: llm-mid, a "
        "mid-size dense model against transformers, float and quantized, many minutes; llm-moe, the same for a "
        "mid-size MoE; verify, the cost of verify_data=True at load)",
    )
    p.add_argument(
        "--sizes", metavar="SIZE", nargs="+", type=_parse_size, help="throughput sizes (default 4K, 16K, ... 256M)"
    )
    p.add_argument("--repeats", type=int, default=None, help=f"samples per case (default {Config.repeats}; --quick 3)")
    p.add_argument(
        "--sample-ms",
        type=float,
        default=None,
        help=f"target length of one sample (default {Config.sample_s * 1e3:g}; --quick 1)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a tiny configuration for smoke tests: 3 sizes, few short samples, small program",
    )
    p.add_argument(
        "--backend",
        choices=(*sorted(BACKENDS), "both"),
        default="both",
        help="the device backends the llm section times (default both: every backend of et_copy.backends; aoti: "
        "the compiled backend, beside the same .so run directly by torch); a backend the section has no rows for "
        "is refused by name",
    )
    p.add_argument(
        "--cold-compile",
        action="store_true",
        help="also time the compiled backend's export with an empty compile cache (minutes on 2 cores); "
        "by default the export uses the cache and says so",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads of the llm-mid table, ours and torch's alike (default 1)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="show third-party warnings and log lines too")
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines on stderr (off anyway without a terminal)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in SECTIONS]
    if unknown:
        print(
            f"et_copy bench: unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}",
            file=sys.stderr,
        )
        return 2
    if args.plot:
        from ._plot import MISSING, have_matplotlib

        if not have_matplotlib():
            print(f"et_copy bench: {MISSING}", file=sys.stderr)
            return 2
    config = Config(
        repeats=args.repeats or (3 if args.quick else Config.repeats),
        sample_s=(args.sample_ms if args.sample_ms is not None else (1.0 if args.quick else Config.sample_s * 1e3))
        / 1e3,
    )
    if config.repeats < 1 or config.sample_s <= 0:
        print("et_copy bench: --repeats and --sample-ms must be positive", file=sys.stderr)
        return 2
    if args.threads < 1:
        print(f"et_copy bench: --threads must be at least 1, got {args.threads}", file=sys.stderr)
        return 2
    for path in (args.json, args.plot):
        if path:  # e.g. build/bench.json in a fresh checkout: make the folder now, not after the run
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    from ._throughput import DEFAULT_SIZES

    sizes = tuple(args.sizes) if args.sizes else (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    backends = tuple(BACKENDS) if args.backend == "both" else (args.backend,)
    if "llm" in only:
        from ._llm import refusal

        # Every word --backend takes is timed or refused here, by name, before anything runs.
        refused = [r for r in map(refusal, backends) if r is not None]
        if refused:
            print("et_copy bench: " + "; ".join(refused), file=sys.stderr)
            return 2
    doc = run(
        only,
        config,
        sizes,
        quick=args.quick,
        backends=backends,
        cold_compile=args.cold_compile,
        threads=args.threads,
        progress=progress_lines(args.quiet),
    )

    from ._report import render, write_json

    print(render(doc))
    if args.json:
        write_json(doc, args.json)
        print(f"\nwrote {args.json}")
    if args.plot:
        if doc.get("throughput") or doc.get("cuda"):
            from ._plot import write_plot

            write_plot(doc, args.plot)
            print(f"wrote {args.plot}")
        else:
            print("no plot: neither the throughput nor the CUDA section ran", file=sys.stderr)
    return 0


def run(
    only: list[str],
    config: Config,
    sizes: tuple[int, ...],
    *,
    quick: bool = False,
    backends: tuple[str, ...] = (DEFAULT_BACKEND,),
    cold_compile: bool = False,
    threads: int = 1,
    progress: Progress | None = None,
) -> dict:
    """Runs the chosen sections and returns the document the report and
    the JSON are made from. ``progress`` gets a line as each step starts
    (:func:`~et_copy.tools._progress.progress_lines`; default: none)."""
    _progress = progress or progress_lines(quiet=True)
    import et_copy

    from . import _machine, _report

    started = time.monotonic()
    et_copy.use_simulated_device()
    # Loads the executorch wheel's kernel library first (it registers the
    # et_copy op names), so the registry rows have a kernel to resolve.
    et_copy.register_kernels()
    doc: dict = {
        "machine": _machine.describe(),
        "config": {
            "repeats": config.repeats,
            "sample_s": config.sample_s,
            "sections": only,
            "sizes": list(sizes),
            "quick": quick,
            "backends": list(backends),
            "cold_compile": cold_compile,
            "threads": threads,
        },
        "skipped": {},
    }
    if "overhead" in only:
        from ._overhead import python_overhead

        _progress("Python call overhead")
        doc["python_overhead"] = python_overhead(config)
    if "kernel" in only:
        from ._overhead import kernel_overhead

        _progress("C++ kernel overhead")
        doc["kernel_overhead"] = kernel_overhead(config)
    if "throughput" in only:
        from ._throughput import throughput

        doc["throughput"] = throughput(sizes, config, progress=_progress)
    if "program" in only:
        from ._program import DEFAULT_SHAPES, program_level

        shapes = ((256,),) if quick else DEFAULT_SHAPES
        try:
            doc["program"] = program_level(config, shapes, progress=_progress)
        except ImportError as e:
            doc["skipped"]["program"] = f"executorch's AOT or runtime Python modules are missing: {e}"
    if "verify" in only:
        from ._verify import verify_cost

        try:
            doc["verify"] = verify_cost(config, quick=quick, progress=_progress)
        except ImportError as e:
            doc["skipped"]["verify"] = f"executorch's AOT stack is missing: {e}"
    if "llm" in only:
        from ._llm import decode_step

        try:
            doc["llm"] = decode_step(
                config,
                max_seq_len=16 if quick else 64,
                progress=_progress,
                backends=backends,
                cold_compile=cold_compile,
            )
        except ImportError as e:
            doc["skipped"]["llm"] = f"transformers or executorch's AOT stack is missing: {e}"
    if "cuda" in only:
        from . import _cuda

        reason = _cuda.unavailable_reason()
        if reason is not None:
            doc["skipped"]["cuda"] = reason
        else:
            _progress("CUDA rows (child process)")
            try:
                doc["cuda"] = _cuda.run(sizes, config)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                # Report it with the rest instead of losing the other sections.
                doc["skipped"]["cuda"] = f"the CUDA benchmark failed: {str(e)[-2000:]}"
    for section, kind in (("llm-mid", "dense"), ("llm-moe", "moe")):
        if section not in only:
            continue
        from ._llm_mid import mid_size

        et_copy.use_aoti_backend()
        key = section.replace("-", "_")
        try:
            doc[key] = mid_size(
                threads=threads,
                quick=quick,
                rounds=config.repeats,
                budget_s=5.0 if quick else 60.0,
                progress=_progress,
                kind=kind,
            )
        except ImportError as e:
            doc["skipped"][key] = f"transformers or executorch's AOT stack is missing: {e}"
    doc["targets"] = _report.targets(doc)
    doc["elapsed_s"] = round(time.monotonic() - started, 1)
    return doc
