"""The commands' progress lines: on stderr when it is a terminal, never with
-q or into a pipe (et_copy.tools._progress)."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys

import pytest
from et_copy.tools._progress import progress_lines

LINE = re.compile(r"^  \[\d\d:\d\d:\d\d\] Python call overhead\r?$", re.M)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_lines_go_to_a_terminal_and_nowhere_else():
    tty = Terminal()
    progress_lines(stream=tty)("exporting")
    assert re.fullmatch(r"  \[\d\d:\d\d:\d\d\] exporting\n", tty.getvalue())
    quiet = Terminal()
    progress_lines(quiet=True, stream=quiet)("exporting")
    pipe = io.StringIO()
    progress_lines(stream=pipe)("exporting")
    assert quiet.getvalue() == pipe.getvalue() == ""


def bench_stderr_on_a_terminal(*flags: str) -> str:
    """What ``bench --only overhead`` writes to stderr when that is a terminal."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "et_copy",
            "bench",
            "--only",
            "overhead",
            "--repeats",
            "1",
            "--sample-ms",
            "0.5",
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=secondary,
        text=True,
    )
    os.close(secondary)
    seen = b""
    while True:
        ready, _, _ = select.select([primary], [], [], 300)
        if not ready:
            proc.kill()
            pytest.fail(f"no output for 300 s: {seen!r}")
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    proc.communicate(timeout=300)
    os.close(primary)
    assert proc.returncode == 0, seen
    return seen.decode(errors="replace")


@pytest.mark.parametrize("flags", [(), ("-q",)], ids=["terminal", "quiet"])
def test_bench_says_what_it_runs_on_a_terminal_unless_quiet(flags):
    shown = bench_stderr_on_a_terminal(*flags)
    assert bool(LINE.search(shown)) == (not flags), shown
