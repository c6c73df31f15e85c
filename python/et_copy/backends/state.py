"""The state arena's layout, one for every method of a program: each
mutable buffer at its aligned offset, in name order, so every method (and
every backend) derives the same offsets from the same state."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _C

STATE_ALIGNMENT = _C.TENSOR_ALIGNMENT  # each state tensor's offset in the arena (the core checks it)


@dataclass(frozen=True)
class StateSlot:
    """A state tensor's place in the state arena."""

    offset: int
    nbytes: int


def state_arena_layout(nbytes: dict[str, int], alignment: int = STATE_ALIGNMENT) -> tuple[dict[str, StateSlot], int]:
    """The state arena's layout: each state tensor (by name) at the next
    ``alignment`` boundary, in name order, so that every method of a program
    (and every exporter) derives the same offsets from the same state.
    Returns (slots by name, arena size rounded up to ``alignment``)."""
    slots, offset = {}, 0
    for name in sorted(nbytes):
        offset = -(-offset // alignment) * alignment
        slots[name] = StateSlot(offset, nbytes[name])
        offset += nbytes[name]
    return slots, -(-offset // alignment) * alignment


def mutable_state(ep) -> dict[str, torch.Tensor]:
    """Buffer name -> value, for the buffers the program mutates."""
    values = {**ep.state_dict, **ep.constants}
    return {fqn: values[fqn] for fqn in set(ep.graph_signature.buffers_to_mutate.values())}


def layout_of(programs, backend_id: str) -> tuple[dict[str, StateSlot], int]:
    """The state arena's layout over every method's partitions (:func:`state_arena_layout`);
    ValueError when two of them disagree on a state tensor's shape or dtype."""
    nbytes: dict[str, int] = {}
    shapes: dict[str, tuple] = {}
    for ep in programs:
        for name, value in mutable_state(ep).items():
            shape = (tuple(value.shape), value.dtype)
            if shapes.setdefault(name, shape) != shape:
                raise ValueError(
                    f"et_copy.{backend_id}: methods disagree on state '{name}': {shapes[name]} and {shape}"
                )
            nbytes[name] = value.nbytes
    return state_arena_layout(nbytes)
