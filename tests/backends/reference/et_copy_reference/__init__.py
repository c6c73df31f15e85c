"""The reference device backend, a package of its own: what another project
ships to give et-copy a backend. Its entry point (pyproject.toml, group
``et_copy.backends``) hands et-copy :data:`BACKEND`, which says its word,
its partitioner (and so its preprocess, the ``BackendDetails`` named by its
backend id) and how to register its runtime side."""

from __future__ import annotations

from et_copy.backends import Backend

BACKEND_ID = "ReferenceDeviceBackend"  # reference_backend.h: kReferenceDeviceBackend


def register() -> str:
    """Registers the backend with the runtime et_copy.runtime uses:
    "registered", then "already et_copy"."""
    import et_copy  # noqa: F401  (loads libet_copy_runtime.so, which the extension links, first)

    from . import _reference  # type: ignore[attr-defined]

    return str(_reference.register())


BACKEND = Backend(
    "reference",
    BACKEND_ID,
    "et_copy_reference.export",
    "ReferencePartitioner",
    register,
    "float32 elementwise steps (tests only)",
)
