"""Progress lines for the commands' long steps (export, compile, load, each
baseline and benchmark section), so that a minute of work is not a minute
of silence.

They go to stderr, timestamped, and only when stderr is a terminal and the
command was not given ``-q``: a pipe, a log file or a test sees only the
command's own output.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

Progress = Callable[[str], None]


def progress_lines(quiet: bool = False, stream: TextIO | None = None) -> Progress:
    """A function that writes ``  [HH:MM:SS] message`` lines to ``stream``
    (stderr) when it is a terminal and not ``quiet``; else one that writes
    nothing."""
    out = sys.stderr if stream is None else stream
    if quiet or not out.isatty():
        return _silent

    def say(message: str) -> None:
        print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=out, flush=True)

    return say


def _silent(message: str) -> None:
    """Writes nothing: the progress of a command run with -q or without a terminal."""
