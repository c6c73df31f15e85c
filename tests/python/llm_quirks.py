"""Model changes the LLM tests use to make export_llm's wrapper check fail."""

from __future__ import annotations

import torch


class StaticCacheQuirk(torch.nn.Module):
    """A decoder layer that computes differently when the cache is static:
    the kind of architecture quirk export_llm's check is there to catch."""

    def __init__(self, layer: torch.nn.Module) -> None:
        super().__init__()
        self.inner = layer

    def forward(self, hidden_states, *args, **kwargs):
        from transformers import StaticCache

        out = self.inner(hidden_states, *args, **kwargs)
        return out + 0.5 if isinstance(kwargs.get("cache"), StaticCache) else out
