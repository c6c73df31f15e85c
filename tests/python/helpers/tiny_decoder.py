"""Autoregressive decoding with the KV cache resident on the device.

A small decoder-only transformer (random weights, learned positions, a KV
cache, greedy decoding) exported as one device-planned method that takes
``(token, position, k_cache, v_cache)`` and returns ``(logits, k_cache,
v_cache)``. In the resident program the caches are device inputs and
outputs (``DeviceBoundary``'s resident_inputs/outputs): per step only the
token and position go in (16 bytes) and only the logits come out, while the
caches pass from one step to the next as ``DeviceTensor``s. The baseline is
the same model with every input and output copied, as a runtime without
device-resident I/O must do: the caches cross both ways every step.

A test model since et_copy.llm (docs/llm.md) runs real LLMs with their
state as device mutable buffers: it pins device-resident method inputs and
outputs (export_device_program's resident_inputs/resident_outputs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

COUNTERS = ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes")


@dataclass(frozen=True)
class Config:
    vocab: int = 64
    dim: int = 32
    layers: int = 2
    heads: int = 2
    max_seq: int = 48


class TinyDecoder(torch.nn.Module):
    """One decode step of a pre-norm decoder-only transformer. The cache
    update is functional (``where`` on the position's slot), so the step
    exports with static shapes and the new caches are outputs."""

    def __init__(self, config: Config = Config(), seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        c = self.config = config
        self.embed = torch.nn.Embedding(c.vocab, c.dim)
        self.position = torch.nn.Embedding(c.max_seq, c.dim)
        self.norm1 = torch.nn.ModuleList(torch.nn.LayerNorm(c.dim) for _ in range(c.layers))
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(c.dim, 3 * c.dim) for _ in range(c.layers))
        self.proj = torch.nn.ModuleList(torch.nn.Linear(c.dim, c.dim) for _ in range(c.layers))
        self.norm2 = torch.nn.ModuleList(torch.nn.LayerNorm(c.dim) for _ in range(c.layers))
        self.mlp = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(c.dim, 2 * c.dim), torch.nn.GELU(), torch.nn.Linear(2 * c.dim, c.dim))
            for _ in range(c.layers)
        )
        self.head = torch.nn.Linear(c.dim, c.vocab)

    def empty_cache(self) -> torch.Tensor:
        c = self.config
        return torch.zeros(c.layers, c.max_seq, c.dim)

    def forward(self, token, pos, k_cache, v_cache):
        c = self.config
        head_dim = c.dim // c.heads
        x = self.embed(token) + self.position(pos)  # [1, dim]
        slots = torch.arange(c.max_seq)
        write = (slots == pos).unsqueeze(-1)  # this step's slot
        visible = slots <= pos  # causal: every slot written so far
        keys, values = [], []
        for i in range(c.layers):
            q, k, v = self.qkv[i](self.norm1[i](x)).split(c.dim, dim=-1)
            k_all = torch.where(write, k, k_cache[i])  # [max_seq, dim]
            v_all = torch.where(write, v, v_cache[i])
            keys.append(k_all)
            values.append(v_all)
            qh = q.view(1, c.heads, head_dim).transpose(0, 1)  # [heads, 1, head_dim]
            kh = k_all.view(c.max_seq, c.heads, head_dim).transpose(0, 1)
            vh = v_all.view(c.max_seq, c.heads, head_dim).transpose(0, 1)
            scores = (qh @ kh.transpose(1, 2)) / head_dim**0.5
            attn = scores.masked_fill(~visible, float("-inf")).softmax(-1)
            x = x + self.proj[i]((attn @ vh).transpose(0, 1).reshape(1, c.dim))
            x = x + self.mlp[i](self.norm2[i](x))
        return self.head(x).reshape(c.vocab), torch.stack(keys), torch.stack(values)


def _example(model: TinyDecoder) -> tuple:
    return torch.tensor([1]), torch.tensor([0]), model.empty_cache(), model.empty_cache()


def export_resident(model: TinyDecoder, device: str = "cuda:0"):
    """The decode step with its caches resident on ``device``."""
    from et_copy.export import export_device_program

    return export_device_program(model, _example(model), device=device, resident_inputs=(2, 3), resident_outputs=(1, 2))


def export_baseline(model: TinyDecoder, device: str = "cuda:0"):
    """The same step with every input and output copied (caches included)."""
    from et_copy.export import export_device_program

    return export_device_program(model, _example(model), device=device)


@dataclass
class Step:
    token: int
    seconds: float
    h2d_bytes: int
    d2h_bytes: int
    device_bytes_outstanding: int


@dataclass
class Decode:
    tokens: list[int] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    @property
    def tokens_per_second(self) -> float:
        return len(self.steps) / sum(s.seconds for s in self.steps)

    def bytes_per_token(self) -> tuple[float, float]:
        n = len(self.steps)
        return sum(s.h2d_bytes for s in self.steps) / n, sum(s.d2h_bytes for s in self.steps) / n


def _stats() -> dict:
    import et_copy

    return et_copy.allocator_stats()


def _step(method, token: int, pos: int, k, v, outputs=None):
    before = _stats()
    start = time.perf_counter()
    logits, k, v = method.execute([torch.tensor([token]), torch.tensor([pos]), k, v], outputs=outputs)
    seconds = time.perf_counter() - start
    after = _stats()
    step = Step(
        int(logits.argmax()),
        seconds,
        after["h2d_bytes"] - before["h2d_bytes"],
        after["d2h_bytes"] - before["d2h_bytes"],
        after["bytes_outstanding"],
    )
    return step, k, v


def decode_resident(method, model: TinyDecoder, prompt: list[int], n_tokens: int) -> Decode:
    """Greedy decoding with the caches kept on the device: two cache pairs,
    written in turn, so no step allocates. Feeds the prompt one token per
    step (its steps count as prefill), then ``n_tokens`` generated ones."""
    import et_copy

    shape = tuple(model.empty_cache().shape)
    caches = [[et_copy.empty(shape, torch.float32) for _ in range(2)] for _ in range(2)]
    for k in caches[0]:
        et_copy.h2d_copy(model.empty_cache(), out=k)  # the zeroed start state, once
    return _loop(
        prompt, n_tokens, lambda i, tok: _step(method, tok, i, *caches[i % 2], outputs=[None, *caches[(i + 1) % 2]])[0]
    )


def decode_baseline(method, model: TinyDecoder, prompt: list[int], n_tokens: int) -> Decode:
    """The same loop with the caches on the host, crossing every step."""
    state = [model.empty_cache(), model.empty_cache()]

    def one(i: int, tok: int) -> Step:
        step, state[0], state[1] = _step(method, tok, i, *state)
        return step

    return _loop(prompt, n_tokens, one)


def decode_eager(model: TinyDecoder, prompt: list[int], n_tokens: int) -> list[int]:
    k, v = model.empty_cache(), model.empty_cache()
    out: list[int] = []
    tok = prompt[0]
    with torch.no_grad():
        for i in range(len(prompt) + n_tokens - 1):
            logits, k, v = model(torch.tensor([tok]), torch.tensor([i]), k, v)
            tok = prompt[i + 1] if i + 1 < len(prompt) else int(logits.argmax())
            if i + 1 >= len(prompt):
                out.append(tok)
    return out


def _loop(prompt: list[int], n_tokens: int, step) -> Decode:
    result = Decode()
    tok = prompt[0]
    for i in range(len(prompt) + n_tokens - 1):
        s = step(i, tok)
        result.steps.append(s)
        tok = prompt[i + 1] if i + 1 < len(prompt) else s.token
        if i + 1 >= len(prompt):
            result.tokens.append(tok)
    return result
