"""What every et-copy device backend's preprocess does around its own
lowering of one partition: the copy of the partition it is handed, and one
state arena laid out over every method's partitions, so that the methods of
a program agree on it."""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from executorch.exir.backend.backend_details import PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec

from .state import StateSlot, layout_of


def copy_for_preprocess(edge_program):
    """The isolated program a device backend's preprocess gets
    (``BackendDetails.copy_exported_program_for_preprocess``): the graph
    deep-copied, as executorch does, but the constants' and buffers' tensors
    shared with the partition instead of copied (executorch's copy held
    every weight of every method once more). Preprocess reads them and
    writes the graph only."""
    shared = [*edge_program.state_dict.values(), *edge_program.constants.values()]
    return copy.deepcopy(edge_program, {id(t): t for t in shared})


class DevicePreprocess:
    """Mixed into a backend's ``BackendDetails`` subclass, which names it and
    lowers one partition (:meth:`lower_partition`). A mixin, not a base:
    executorch 1.5.1 finds a backend among ``BackendDetails.__subclasses__()``,
    its direct subclasses only, by the class's name (its ``backend_id``)."""

    backend_id: ClassVar[str]

    @staticmethod
    def lower_partition(
        edge_program, compile_specs: list[CompileSpec], layout: dict[str, StateSlot], arena_nbytes: int
    ) -> PreprocessResult:
        raise NotImplementedError

    @classmethod
    def copy_exported_program_for_preprocess(cls, edge_program, compile_specs):
        return copy_for_preprocess(edge_program)

    @classmethod
    def preprocess(cls, edge_program, compile_specs: list[CompileSpec]) -> PreprocessResult:
        layout, size = layout_of([edge_program], cls.backend_id)
        return cls.lower_partition(edge_program, compile_specs, layout, size)

    @classmethod
    def preprocess_multimethod(cls, edge_programs, compile_specs) -> dict[str, list[Any]]:
        layout, size = layout_of([p for programs in edge_programs.values() for p in programs], cls.backend_id)
        return {
            name: [cls.lower_partition(p, specs, layout, size) for p, specs in zip(programs, compile_specs[name])]
            for name, programs in edge_programs.items()
        }
