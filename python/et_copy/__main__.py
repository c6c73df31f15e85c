"""``python -m et_copy <command>``: a thin layer over the Python API.

Each command lives in its own module with a ``main(argv) -> int``; this
file only dispatches, importing the one module it runs. Every command runs
inside ``_quiet.quiet()``, which keeps third-party warnings and info lines
off the output unless the command line has ``-v``/``--verbose`` (each of
them takes it).
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "demo": ("et_copy.tools.demo", "round-trip tensors through the simulated device and show what moved"),
    "parity": ("et_copy.tools.parity", "check the AOT ops against the runtime kernels, byte for byte"),
    "doctor": ("et_copy.tools.doctor", "show versions, registered kernels and allocators, and CUDA devices"),
    "bench": ("et_copy.tools.bench", "measure call overhead and throughput against torch and memcpy"),
    "generate": ("et_copy.tools.generate", "an LLM with its state on the device, beside executorch.runtime and eager"),
}


def _usage() -> str:
    lines = ["usage: python -m et_copy <command> [options]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "  --cmake-dir  print the folder holding et_copy's CMake package"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] == "--cmake-dir":
        from ._cmake import cmake_dir

        try:
            print(cmake_dir())
        except FileNotFoundError as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    command = COMMANDS.get(argv[0])
    if command is None:
        print(f"et_copy: unknown command {argv[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    from ._quiet import quiet

    # Decided before the command's own parser runs: the noise comes from
    # imports, some at the top of the command's module.
    with quiet(verbose="-v" in argv[1:] or "--verbose" in argv[1:]):
        return _run(command[0], argv[1:])


def _run(module_name: str, argv: list[str]) -> int:
    module = importlib.import_module(module_name)
    return int(module.main(argv) or 0)


if __name__ == "__main__":
    sys.exit(main())
