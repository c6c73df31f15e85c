"""``python -m et_copy parity``: the AOT device copy ops against the runtime
kernels, byte for byte, in one process.

Every case of an embedded matrix (every dtype, shapes from 0-d to large,
both directions, static and dynamic-bound outs, and invalid calls) runs
through the AOT functional op, the AOT ``.out`` op, et-copy's kernel, and
the kernel ExecuTorch's registry holds for the op name (the executorch
wheel's, once ``executorch.runtime`` is imported). Each buffer has guard
bytes around it, so an out-of-bounds write is reported, not suffered. Then
the program section (``program/*``, programs.py): real models exported with
et_copy.export on both routes, run by eager, executorch.runtime and
et_copy.runtime in this process, and tampered programs.

Exit status: 0 when et-copy's kernel copies every valid case exactly as the
AOT op does and rejects every invalid case with ``out`` untouched, and
et_copy.runtime gives eager's outputs with exact copies on every valid
program and rejects every tampered one; 1 otherwise; 2 for a
usage error. Findings about the other implementations are reported and do
not change the exit status.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from .cases import Case, all_cases, select

__all__ = ["main", "run"]


def _memory_words(host_readable: bool) -> str:
    return "host-readable (not what a GPU gives)" if host_readable else "host-unreadable (faults as a GPU's would)"


def _environment(host_readable: bool | None = None) -> dict:
    """Loads what the run compares, in the order that keeps both registries
    valid: executorch.runtime first (its kernels, and the et_copy namespace
    through executorch.exir), then et_copy's AOT adoption and the simulated
    device with one device (so index 1 and up are missing), its memory
    host-readable or not as ``host_readable`` says (None: the default)."""
    import torch

    from .runners import CapturedStderr

    env: dict = {"torch": torch.__version__}
    # Importing executorch prints third-party noise (torchao's optional
    # libraries, a torch deprecation): kept in the JSON, out of the table.
    capture = CapturedStderr()
    try:
        with capture:
            import executorch.runtime  # noqa: F401  (registers the wheel's kernels)
        from importlib.metadata import version

        env["executorch"] = version("executorch")
    except Exception as e:  # not installed or broken: the registry holds what et_copy registers
        env["executorch"] = f"not importable ({type(e).__name__}: {e})"
    env["import_log"] = capture.text
    import et_copy
    from et_copy import aot

    env["aot_namespace"] = aot.ensure_registered()
    from ... import _C

    if host_readable is None:
        host_readable = _C.SIMULATED_DEVICE_DEFAULT_HOST_READABLE
    et_copy.use_simulated_device(device_count=1, host_readable=host_readable)
    if et_copy.kernel_owner(et_copy.H2D_COPY_OUT) == "absent":
        et_copy.register_kernels()
    owners = {et_copy.kernel_owner(op) for op in (et_copy.H2D_COPY_OUT, et_copy.D2H_COPY_OUT)}
    env["registry_owner"] = (
        "the executorch wheel's kernels"
        if owners == {"already other"}
        else "et-copy's kernels"
        if owners == {"already et_copy"}
        else f"mixed: {sorted(owners)}"
    )
    env["et_copy"] = et_copy.__version__
    env["device"] = "simulated CUDA, 1 device"
    # The case matrix's device buffers. Every kernel, the wheel's included,
    # moves device bytes through the allocator's copies, which read the
    # host alias, so every column runs on either kind.
    env["device_memory"] = _memory_words(host_readable)
    return env


def run(cases: list[Case], programs: list | None = None, *, progress: bool = False, host_readable: bool | None = None):
    """Runs ``cases`` and the end-to-end ``programs``; returns (results,
    program results, environment, seconds). ``host_readable`` is the case
    matrix's device memory (None: the simulated device's default); the
    programs run on the default, see programs.run_programs."""
    from .programs import run_programs
    from .report import Progress
    from .runners import CapturedStderr, run_case

    programs = programs or []
    total = len(cases) + len(programs)
    bar = Progress(total, progress)
    bar.status("loading executorch.runtime and the AOT ops...")
    env = _environment(host_readable)
    capture = CapturedStderr()
    start = time.perf_counter()
    results, program_results = [], []
    try:
        for i, case in enumerate(cases):
            bar.update(i, case.name)
            results.append(run_case(case, capture))
        program_results = run_programs(programs, lambda i, name: bar.update(len(cases) + i, name))
        if programs:
            from ... import _C

            env["program_device_memory"] = _memory_words(_C.SIMULATED_DEVICE_DEFAULT_HOST_READABLE)
        bar.update(total, "done")
    finally:
        bar.close()
    return results, program_results, env, time.perf_counter() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m et_copy parity",
        description="Check the AOT device copy ops against et-copy's kernel and the registry's, byte for byte.",
        epilog="PATTERN: comma-separated globs on case names (see --list), e.g. 'h2d/float32/*', "
        "'invalid/*', '*.channels_last*'; a pattern without * ? [ matches as a substring "
        "('bfloat16', 'dtype_mismatch'); a pattern starting with ! excludes ('!large').",
    )
    parser.add_argument("--cases", metavar="PATTERN", help="run only the cases PATTERN selects")
    parser.add_argument("--list", action="store_true", help="list the (selected) cases and exit")
    parser.add_argument("--json", metavar="PATH", help="write the full result as JSON to PATH")
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="one table row per valid case, not per dtype, and third-party warnings and log lines",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument(
        "--device-memory",
        choices=("host-readable", "unreadable"),
        help="the simulated device memory of the case matrix: host-unreadable (a host access faults, as on a GPU) "
        "or host-readable (not what a GPU gives); default: the simulated device's default. The "
        "program section always runs on the default",
    )
    parser.add_argument(
        "--no-programs",
        action="store_true",
        help="skip the program/* section (real models exported and run by eager, executorch.runtime "
        "and et_copy.runtime, and tampered programs; about a minute)",
    )
    args = parser.parse_args(argv)

    from .programs import PROGRAMS, Program

    cases = select(all_cases(), args.cases)
    programs = [] if args.no_programs else select(PROGRAMS, args.cases)
    if not cases and not programs:
        print(f"et_copy parity: no case matches {args.cases!r} (see --list)", file=sys.stderr)
        return 2
    if args.list:
        listed: list[Case | Program] = [*cases, *programs]
        for item in listed:
            print(f"{item.name:<64} {item.describe()}")
        return 0

    import torch

    from .report import passed, render, to_json, verdict

    # The work is many small memory compares: one thread is fastest and
    # stays out of the way of whatever else the machine runs.
    torch.set_num_threads(1)
    host_readable = None if args.device_memory is None else args.device_memory == "host-readable"
    results, program_results, env, seconds = run(
        cases, programs, progress=not args.no_progress and sys.stderr.isatty(), host_readable=host_readable
    )
    print(render(cases, results, env, program_results, verbose=args.verbose))
    print(f"({len(cases) + len(programs)} cases in {seconds:.1f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(to_json(cases, results, env, seconds, program_results), f, indent=1)
        print(f"full result: {args.json}")
    return 0 if passed(verdict(cases, results, program_results)) else 1
