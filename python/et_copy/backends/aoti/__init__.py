"""The compiled device backend: AOTInductor code in a delegate record, run
by the C++ ``AotiDeviceBackend`` (backends/aoti; docs/design.md, "A compiled
device backend (issue 34)").

Its runtime side is reached through its own extension, ``_aoti``, which
links et-copy's shared runtime: loading it describes the backend (a refusal
names its registration), ``et_copy.use_aoti_backend()`` registers it, and
:func:`trust` trusts compiled code. Its ahead-of-time side
(:class:`AotiDevicePartitioner`, the preprocess :class:`AotiDeviceBackend`,
:func:`compile_options`, ``compile_stats``, ...) is in ``_export``, imported
when one of its names is first used here: it imports executorch's exporter,
which running programs does not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy_export import lazy_export
from . import _aoti

if TYPE_CHECKING:  # the names __getattr__ below gives, for type checkers
    from ._export import GCC_FLAGS as GCC_FLAGS
    from ._export import PROXY_CALL as PROXY_CALL
    from ._export import TARGET_KEY as TARGET_KEY
    from ._export import (
        TARGETS,
        AotiDeviceBackend,
        AotiDevicePartitioner,
        compile_options,
        compile_stats,
        default_target,
    )
    from ._export import CompileStats as CompileStats
    from ._export import target_of as target_of

BACKEND_ID = "AotiDeviceBackend"  # the C++ backend registers under this name (et_copy.use_aoti_backend())
PAYLOAD_AOTI = _aoti.PAYLOAD_AOTI  # the record's payload kind: an AOTInductor .so

__all__ = [
    "BACKEND_ID",
    "TARGETS",
    "AotiDeviceBackend",
    "AotiDevicePartitioner",
    "compile_options",
    "compile_stats",
    "default_target",
]


def trust(*digests: str) -> None:
    """Trusts, for this process, the compiled code of each SHA-256 digest
    (64 lowercase hex digits, as ``python -m et_copy doctor PROGRAM.pte``
    lists a program's code): programs carrying it load with no
    ``trust_code``. Code this machine compiled is trusted already.
    Raises TypeError for a digest that is not a str, EtCopyError
    (InvalidArgument) for one that is not 64 lowercase hex digits; the
    digests before it are trusted."""
    for digest in digests:
        if not isinstance(digest, str):
            raise TypeError(
                f"et_copy.backends.aoti.trust: a digest is a str of 64 hex digits, got {type(digest).__name__}"
            )
        _aoti.trust_compiled_code(digest)


__getattr__ = lazy_export(__name__)
