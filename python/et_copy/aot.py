"""The ``et_copy`` torch.library namespace: the AOT side of the device copy ops.

After :func:`ensure_registered` (which importing this module calls),
``torch.ops.et_copy`` has exactly these four operators::

    _h2d_copy(Tensor self) -> Tensor
    _h2d_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
    _d2h_copy(Tensor self) -> Tensor
    _d2h_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)

At trace time every tensor is a host tensor, so the functional form returns a
new tensor equal to ``self`` (a clone, never an alias) and ``.out`` copies
``self`` into ``out`` and returns ``out``. The ops are CompositeImplicitAutograd,
so they run in eager mode and under FakeTensorMode, ``torch.export`` keeps them
in the graph, and ``to_edge`` keeps them when
``EdgeCompileConfig(preserve_ops=PRESERVE_OPS)`` names them.

torch allows one definition of a namespace per process, and executorch
defines this one in ``executorch/exir/passes/_device_copy_ops_registry.py``,
which ``import executorch.exir`` imports. Defining ours first would make that
import fail, so executorch's definition is adopted whenever it is installed
(its schemas are checked against ours) and ours is defined only when it is
absent. Executorch's registry file is loaded on its own, under its real module
name, so adopting it costs milliseconds rather than the seconds that importing
all of ``executorch.exir`` takes, and a later ``import executorch.exir``
finds it already loaded instead of defining the namespace again.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading

import torch

from ._errors import EtCopyError

NAMESPACE = "et_copy"

#: The schemas et_copy's kernels implement, keyed by "name.overload".
SCHEMAS: dict[str, str] = {
    "_h2d_copy": "_h2d_copy(Tensor self) -> Tensor",
    "_h2d_copy.out": "_h2d_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "_d2h_copy": "_d2h_copy(Tensor self) -> Tensor",
    "_d2h_copy.out": "_d2h_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
}

#: Where executorch defines the namespace (imported by ``import executorch.exir``).
EXECUTORCH_REGISTRY_MODULE = "executorch.exir.passes._device_copy_ops_registry"

ADOPTED_EXECUTORCH = "adopted executorch"
DEFINED_BY_ET_COPY = "defined by et_copy"
ADOPTED_EXISTING = "adopted an existing definition"

_lock = threading.Lock()
_outcome: str | None = None
_library: torch.library.Library | None = None  # ours, kept alive for the process
_adopted_module = None  # executorch's registry, when loaded by us and not yet imported


def ensure_registered() -> str:
    """Makes ``torch.ops.et_copy._h2d_copy``/``_d2h_copy`` (and ``.out``) available.

    Idempotent and thread-safe. Returns how the namespace came to be:

    - ``"adopted executorch"``: executorch's registry defines it (loaded now
      if it was not already);
    - ``"defined by et_copy"``: executorch's registry is absent or cannot be
      imported, so et_copy defined it;
    - ``"adopted an existing definition"``: some other library defined it
      before us (its schemas still match ours).

    Raises :class:`et_copy.EtCopyError` naming the operator and both schemas
    when the adopted definition differs from ours, or naming the failure when
    the namespace cannot be defined.
    """
    global _outcome
    with _lock:
        if _outcome is None:
            outcome = _register()
            _verify_schemas(outcome)
            _outcome = outcome
        return _outcome


def _register() -> str:
    if sys.modules.get(EXECUTORCH_REGISTRY_MODULE) is not None or _adopted_module is not None:
        return ADOPTED_EXECUTORCH
    if _namespace_defined():
        return ADOPTED_EXISTING
    if _load_executorch_registry():
        return ADOPTED_EXECUTORCH
    _define_our_own()
    return DEFINED_BY_ET_COPY


def _namespace_defined() -> bool:
    return any(_find_schema(name) is not None for name in SCHEMAS)


def _find_schema(qualified: str) -> str | None:
    """The registered schema of "name.overload" in our namespace, or None."""
    name, _, overload = qualified.partition(".")
    try:
        packet = getattr(getattr(torch.ops, NAMESPACE), name)
        op = getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        return None
    return str(op._schema)


def _registry_locations() -> list[str]:
    """Folders where executorch's registry file would live (no executorch import)."""
    try:
        import executorch  # a namespace package: cheap, runs no executorch code
    except ImportError:
        return []
    return [os.path.join(root, "exir", "passes") for root in getattr(executorch, "__path__", [])]


def _load_executorch_registry() -> bool:
    """Runs executorch's registry file on its own, without importing its parents.

    Finds it through ``sys.meta_path`` like a normal import, so an import
    blocker (or ``sys.modules[name] = None``) hides it. The module is kept out
    of ``sys.modules``: a finder hands this same module object to the first
    real import of its name, so that import still imports the parent packages
    and binds the attribute on ``executorch.exir.passes``, without running the
    file (and defining the namespace) a second time. Returns False when the
    file is absent or blocked; raises EtCopyError when it exists but fails.
    """
    global _adopted_module
    name = EXECUTORCH_REGISTRY_MODULE
    if name in sys.modules:  # present as None: deliberately blocked
        return False
    locations = _registry_locations()
    if not locations:
        return False
    spec = None
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec(name, locations, None)
        except ImportError:
            return False
        if spec is not None:
            break
    if spec is None or spec.loader is None:
        return False
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError:
        return False
    except Exception as exc:
        raise EtCopyError(
            f"et_copy.ensure_registered: executorch's registry {spec.origin} failed to define the "
            f"{NAMESPACE} namespace: {exc}",
            error="Internal",
        ) from exc
    _adopted_module = module
    sys.meta_path.insert(0, _AdoptedRegistryFinder(module))
    return True


class _AdoptedRegistryFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers the first import of executorch's registry with the module
    ensure_registered already ran; declines every other name."""

    def __init__(self, module) -> None:
        self._module = module
        self._spec = module.__spec__

    def find_spec(self, fullname, path=None, target=None):
        if fullname != EXECUTORCH_REGISTRY_MODULE:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, origin=self._spec.origin)

    def create_module(self, spec):
        return self._module

    def exec_module(self, module) -> None:
        # Already executed: only restore the spec the import system replaced,
        # and step aside (sys.modules answers every later import).
        module.__spec__ = self._spec
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def __repr__(self) -> str:
        return f"<et_copy adopted {EXECUTORCH_REGISTRY_MODULE}>"


def _define_our_own() -> None:
    global _library
    try:
        lib = torch.library.Library(NAMESPACE, "DEF")
        for schema in SCHEMAS.values():
            lib.define(schema)
        # Trace-time semantics: both tensors are host tensors, so a copy is a
        # clone (functional) or copy_ (out). CompositeImplicitAutograd, like
        # executorch's definition, so both definitions trace identically.
        for name in ("_h2d_copy", "_d2h_copy"):
            lib.impl(name, _functional_copy, "CompositeImplicitAutograd")
            lib.impl(f"{name}.out", _out_copy, "CompositeImplicitAutograd")
    except Exception as exc:
        raise EtCopyError(
            f"et_copy.ensure_registered: could not define the {NAMESPACE} namespace: {exc}", error="Internal"
        ) from exc
    _library = lib


def _functional_copy(self: torch.Tensor) -> torch.Tensor:
    return self.clone()


def _out_copy(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return out.copy_(self)


def _verify_schemas(outcome: str) -> None:
    problems = []
    for qualified, expected in SCHEMAS.items():
        actual = _find_schema(qualified)
        expected_full = f"{NAMESPACE}::{expected}"
        if actual is None:
            problems.append(f"{NAMESPACE}::{qualified} is missing (et_copy expects `{expected_full}`)")
        elif actual != expected_full:
            problems.append(f"{NAMESPACE}::{qualified} is `{actual}`, et_copy expects `{expected_full}`")
    if problems:
        who = "executorch's registry" if outcome == ADOPTED_EXECUTORCH else "the existing definition"
        raise EtCopyError(
            f"et_copy.ensure_registered: {who} ({outcome}) does not match et_copy's schemas: " + "; ".join(problems),
            error="NotSupported",
        )


def h2d_copy_op() -> torch._ops.OpOverload:
    """``torch.ops.et_copy._h2d_copy.default`` (registering first)."""
    ensure_registered()
    return torch.ops.et_copy._h2d_copy.default


def d2h_copy_op() -> torch._ops.OpOverload:
    """``torch.ops.et_copy._d2h_copy.default`` (registering first)."""
    ensure_registered()
    return torch.ops.et_copy._d2h_copy.default


def preserve_ops() -> list[torch._ops.OpOverload]:
    """The ops ``EdgeCompileConfig(preserve_ops=...)`` must name so ``to_edge``
    keeps the copies instead of decomposing them into ``_clone_dim_order``."""
    return [h2d_copy_op(), d2h_copy_op()]


ensure_registered()
