"""What the LLM tests run eagerly: a model change that export_llm's wrapper
check must catch, and the wrapper's own greedy tokens."""

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


def wrapper_tokens(wrapper, prompt: list[int], n: int) -> list[int]:
    """Greedy tokens from a host-picking StatefulCausalLM run eagerly: a
    prefill of the prompt, then one decode per token."""
    wrapper.reset()
    with torch.no_grad():
        tokens = [int(wrapper(torch.tensor([prompt]), torch.arange(len(prompt))).argmax())]
        for position in range(len(prompt), len(prompt) + n - 1):
            tokens.append(int(wrapper(torch.tensor([[tokens[-1]]]), torch.tensor([position])).argmax()))
    return tokens
