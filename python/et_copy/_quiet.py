"""Third-party noise off for et_copy's commands, unless asked for (``-v``).

Without ``verbose``, inside ``quiet()``:

- Python warnings are ignored (torch's ``FutureWarning``s and "ComplexHalf
  support is experimental", executorch's deprecations). et_copy itself warns
  about nothing: what it has to say it prints or raises.
- The ``torch``, ``torchao`` and ``executorch`` loggers pass only errors
  (torchao's "Failed to load ..._C_mxfp8..." lines, torch's ``_pytree``
  warnings).
- ExecuTorch's C++ info and debug lines (its ``cpuinfo`` lines) stay off
  stderr; its errors still show. executorch's pybindings register a log
  hook of their own when first loaded, over et_copy's: code that imports
  ``executorch.runtime`` calls :func:`wrap_log_hooks` after it.

Everything is put back on exit, so it nests. A command calls it once,
around its import and its run::

    with quiet(args.verbose):
        ...

Not thread-safe: ``warnings`` and ``logging`` state is process-wide.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator

# Loggers of the libraries et_copy imports (children inherit their level).
THIRD_PARTY_LOGGERS = ("torch", "torchao", "executorch", "transformers")


@contextlib.contextmanager
def quiet(verbose: bool = False) -> Iterator[None]:
    """Runs the body with third-party warnings and info lines off; with
    ``verbose`` it changes nothing."""
    if verbose:
        yield
        return
    from . import _C

    loggers = [logging.getLogger(name) for name in THIRD_PARTY_LOGGERS]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        forwarded = _C.set_forwarded_log_levels(False)
        # transformers configures its logger from this when first imported, over any level set before.
        verbosity = os.environ.get("TRANSFORMERS_VERBOSITY")
        os.environ["TRANSFORMERS_VERBOSITY"] = "error"
        try:
            yield
        finally:
            if verbosity is None:
                os.environ.pop("TRANSFORMERS_VERBOSITY", None)
            else:
                os.environ["TRANSFORMERS_VERBOSITY"] = verbosity
            _C.set_forwarded_log_levels(forwarded)
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


def wrap_log_hooks() -> None:
    """Puts et_copy's log hook back over whatever registered one since (the
    first ``import executorch.runtime`` does: its pybindings' hook would
    print the thread pool's "[cpuinfo_utils.cpp:71] Reading file ..." lines
    inside ``quiet()``). Keeps the current setting; idempotent."""
    from . import _C

    _C.set_forwarded_log_levels(_C.set_forwarded_log_levels(False))
