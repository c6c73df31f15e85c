"""Picking the next token by Gumbel-max: one definition, run inside the
exported program (so that only the token leaves the device) and on the host
(for programs that return logits), so that both pick the same tokens.

Sampling from softmax(logits / T) is the argmax of ``logits / T + G``, with
G independent Gumbel(0, 1) noise per vocabulary entry; multiplying by T > 0
keeps the argmax, so the pick is ``argmax(logits + T * G)``, which at T = 0
is the greedy argmax with no branch. Top-k keeps the entries at or above the
k-th largest logit.

The noise is a pure function of (seed, position, vocabulary index): integer
hashing in int64 with every product below 2**49 (no overflow, so ExecuTorch's
kernels and torch compute the same bits), then u in (0, 1) and
G = -log(-log(u)). No generator state: a sequence's tokens depend on its
seed and positions only, so reset() and a second session reproduce them.
"""

from __future__ import annotations

import torch

_PRIME = 2**31 - 1  # the hash's modulus: a value below 2**31 times a multiplier below 2**17 fits in int64
# (multiplier, fold divisor) per round: multiply modulo the prime, then fold the
# high bits into the low ones, so that neighbouring keys give unrelated values.
_ROUNDS = ((48271, 2**16), (69621, 2**13), (16807, 2**15))


def _mix(h: torch.Tensor) -> torch.Tensor:
    for multiplier, fold in _ROUNDS:
        h = torch.remainder(h * multiplier + 12345, _PRIME)
        h = torch.bitwise_xor(h, torch.floor_divide(h, fold))
    return h


def noise_bits(seed: torch.Tensor, position: torch.Tensor, vocab: int) -> torch.Tensor:
    """The integer part of :func:`gumbel_noise`: 23 bits ``[1, vocab]`` int64
    per vocabulary entry, the seed, the position and the index hashed in
    turn (each key mixed, not added, so that (seed, position) pairs do not
    share noise). Exact on every machine: integer arithmetic only."""
    h = _mix(torch.remainder(seed, _PRIME))
    h = _mix(torch.remainder(h + torch.remainder(position, _PRIME), _PRIME))
    h = _mix(torch.remainder(h.unsqueeze(-1) + torch.arange(vocab, dtype=torch.int64), _PRIME))
    return torch.floor_divide(h, 2**8)  # the top 23 of the hash's 31 bits


def gumbel_noise(seed: torch.Tensor, position: torch.Tensor, vocab: int) -> torch.Tensor:
    """Gumbel(0, 1) noise ``[1, vocab]`` float32 for the token sampled at
    ``position`` (int64 ``[1]``) with ``seed`` (int64 ``[1]``, >= 0), from
    :func:`noise_bits`. The bits are exact everywhere; the two logarithms are
    the kernels' own (vectorised math differs by an ULP or so between CPUs and
    between torch and ExecuTorch), so a near-tie can pick differently on
    another machine, never on the same one."""
    # The bits, centred: exact in float32 and strictly inside (0, 1), so the noise is finite.
    u = (noise_bits(seed, position, vocab).to(torch.float32) + 0.5) * 2.0**-23
    return -torch.log(-torch.log(u))


def pick_token(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    seed: torch.Tensor,
    position: torch.Tensor,
    max_top_k: int,
) -> torch.Tensor:
    """The token ``[1]`` int64 picked from ``logits`` ``[1, vocab]``:
    greedy when ``temperature`` (float32 ``[1]``) is 0, else sampled from
    softmax(logits / temperature) over the ``top_k`` (int64 ``[1]``, 0 for
    all) most likely, with the noise of ``seed`` at ``position``.
    ``max_top_k`` is the largest top_k the graph can honour (a static
    bound: ExecuTorch's topk takes a constant k); a larger one is clamped to
    it, so callers check it first (:class:`~et_copy.llm.Session` does)."""
    logits = logits.to(torch.float32)
    vocab = logits.shape[-1]
    k = min(max_top_k, vocab)
    largest = torch.topk(logits, k, dim=-1).values  # [1, k], descending
    kth = torch.gather(largest, -1, (torch.clamp(top_k, 1, k) - 1).unsqueeze(0))
    threshold = torch.where(top_k.unsqueeze(0) > 0, kth, torch.full_like(kth, float("-inf")))
    scores = logits + temperature.unsqueeze(0) * gumbel_noise(seed, position, vocab)
    scores = torch.where(logits >= threshold, scores, torch.full_like(scores, float("-inf")))
    return torch.argmax(scores, dim=-1)


def host_pick(
    logits: torch.Tensor, temperature: float, top_k: int | None, seed: int, position: int, max_top_k: int
) -> int:
    """:func:`pick_token` on the host, for a program that returns logits."""
    return int(
        pick_token(
            logits.reshape(1, -1),
            torch.tensor([temperature], dtype=torch.float32),
            torch.tensor([top_k or 0]),
            torch.tensor([seed]),
            torch.tensor([position]),
            max_top_k,
        )[0]
    )
