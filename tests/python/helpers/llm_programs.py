"""LLM programs exported once per test process. test_llm.py and
test_llm_breadth.py check the same tiny seeded models with the same
settings; an export takes 15 to 90 s here, so the first test that needs an
(architecture, settings) pair exports it and the rest reuse the bytes."""

from __future__ import annotations

import torch
from et_copy import llm

_PROGRAMS: dict[tuple, tuple[torch.nn.Module, bytes]] = {}


def exported(arch: str, **settings) -> tuple[torch.nn.Module, bytes]:
    """(``llm.tiny_model(arch)``, ``llm.export_llm(model, **settings)``'s
    bytes), exported on first use. Raises what export_llm raises, every time."""
    key = (arch, tuple(sorted(settings.items())))
    if key not in _PROGRAMS:
        model = llm.tiny_model(arch)
        _PROGRAMS[key] = (model, bytes(llm.export_llm(model, **settings).buffer))
    return _PROGRAMS[key]


def is_exported(arch: str, **settings) -> bool:
    return (arch, tuple(sorted(settings.items()))) in _PROGRAMS
