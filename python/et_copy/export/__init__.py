"""Building ExecuTorch programs that cross a device boundary with et_copy's ops.

The routes (docs/export.md says when to use which):

- :func:`export_device_program` / :func:`export_device_methods`: the
  module's compute in a device backend (``backend="simulated"`` or
  ``"aoti"``, :mod:`et_copy.backends`, or a ``partitioner``), with
  ``_h2d_copy`` before it and ``_d2h_copy`` after; with nothing to
  compute, or ``insert_copies=False``, the copies alone, planned on the
  device by :class:`DevicePlanningPass` (no state: that needs a backend).
- :func:`lower_to_device`: upstream's recipe (``to_edge_transform_and_lower``
  and its skip flags) with the same backends, or another partitioner
  annotated as the device by :func:`with_target_device`.

Every route that delegates lowers through one path (``_lowering.lower``),
given a device backend, and with ``external_weights=True`` keeps the
weights in a .ptd beside the .pte (:func:`save` writes both); every route writes the program record and raises
:class:`ExportError` (:class:`ExportArgumentError` for bad input). The
modules: ``_routes`` (the functions), ``_lowering`` (the one path and the
backend choice), ``_copy_only``, ``_methods`` (per-method export and
to_edge), ``_boundary`` (:class:`DeviceBoundary`), ``_device_planning``
(:class:`DevicePlanningPass`), ``_boundary_planning``
(:class:`BoundaryPlanningPass`), ``_target_device``
(:func:`with_target_device`), ``_graph_checks``, ``_named_data`` (the
program record, the weights' .ptd and :func:`save`) and ``_errors``.

All need executorch's AOT stack (``executorch.exir``), imported here, which
takes seconds: ``import et_copy`` does not import this package.
"""

from __future__ import annotations

from ._boundary import DeviceBoundary
from ._boundary_planning import BoundaryPlanningPass
from ._device_planning import DevicePlanningPass
from ._errors import ExportArgumentError, ExportError
from ._methods import MethodInputs
from ._named_data import WEIGHTS_FILE, save
from ._routes import export_device_methods, export_device_program, lower_to_device
from ._target_device import TARGET_DEVICE_KEY, TargetDevicePartitioner, with_target_device

__all__ = [
    "BoundaryPlanningPass",
    "DeviceBoundary",
    "DevicePlanningPass",
    "ExportArgumentError",
    "ExportError",
    "MethodInputs",
    "TARGET_DEVICE_KEY",
    "TargetDevicePartitioner",
    "WEIGHTS_FILE",
    "export_device_methods",
    "export_device_program",
    "lower_to_device",
    "save",
    "with_target_device",
]
