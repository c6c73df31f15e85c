"""Generating tokens from an exported LLM on et_copy.runtime, one session
per sequence."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ._export import DECODE, MAX_PROMPT_LEN, MAX_SEQ_LEN, PREFILL

_COUNTERS = ("h2d_bytes", "d2h_bytes")


@dataclass
class Step:
    """One execution: ``tokens_in`` ids went in, ``token`` came out."""

    kind: str  # "prefill" or "decode"
    tokens_in: int
    token: int
    seconds: float
    h2d_bytes: int
    d2h_bytes: int


@dataclass
class Generation:
    """What :meth:`Session.generate` produced, and what it cost."""

    prompt: list[int]
    tokens: list[int] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    def _of(self, kind: str) -> list[Step]:
        return [s for s in self.steps if s.kind == kind]

    @property
    def prefill_tokens_per_second(self) -> float:
        steps = self._of(PREFILL)
        seconds = sum(s.seconds for s in steps)
        return sum(s.tokens_in for s in steps) / seconds if seconds else float("nan")

    @property
    def decode_tokens_per_second(self) -> float:
        steps = self._of(DECODE)
        seconds = sum(s.seconds for s in steps)
        return len(steps) / seconds if seconds else float("nan")

    def decode_bytes_per_token(self) -> tuple[float, float]:
        """Mean (h2d, d2h) bytes of a decode step."""
        steps = self._of(DECODE)
        n = max(1, len(steps))
        return sum(s.h2d_bytes for s in steps) / n, sum(s.d2h_bytes for s in steps) / n


class DeviceLLM:
    """An LLM program from :func:`et_copy.llm.export_llm`, loaded on
    et_copy.runtime: :meth:`new_session` gives independent sequences on one
    copy of the weights and scratch memory."""

    def __init__(self, program: Any) -> None:
        import et_copy.runtime

        if isinstance(program, (str, os.PathLike, bytes, bytearray, memoryview)):
            program = et_copy.runtime.load(program)
        self.program = program
        names = set(program.method_names)
        if not {PREFILL, DECODE} <= names:
            raise ValueError(
                f"et_copy.llm.DeviceLLM: the program must have methods '{PREFILL}' and '{DECODE}' "
                f"(et_copy.llm.export_llm), it has {sorted(names)}"
            )

        missing = {MAX_SEQ_LEN, MAX_PROMPT_LEN} - names
        if missing:
            raise ValueError(f"et_copy.llm.DeviceLLM: the program lacks the constant methods {sorted(missing)}")
        self.max_seq_len = int(program.load_method(MAX_SEQ_LEN).execute([])[0])
        self.max_prompt_len = int(program.load_method(MAX_PROMPT_LEN).execute([])[0])

    def new_session(self) -> Session:
        """A new sequence with its own state on the device."""
        return Session(self.program.new_session(), self.max_seq_len, self.max_prompt_len)


class Session:
    """One sequence: its state on the device, its position, and
    :meth:`generate`. :meth:`reset` starts over."""

    def __init__(self, core: Any, max_seq_len: int, max_prompt_len: int) -> None:
        self._core = core
        self.prefill_method = core.load_method(PREFILL)
        self.decode_method = core.load_method(DECODE)
        out = self.decode_method.meta.outputs[0]
        self.picks_on_device = out.dtype == torch.int64
        self.max_prompt_len = max_prompt_len
        self.max_seq_len = max_seq_len
        self.position = 0

    @property
    def state_nbytes(self) -> int:
        return self._core.state_nbytes

    def reset(self) -> None:
        """Back to an empty sequence: the state's start, through counted h2d copies."""
        self._core.reset()
        self.position = 0

    def _run(self, method, kind: str, ids: Sequence[int], pick) -> Step:
        import et_copy

        n = len(ids)
        if self.position + n > self.max_seq_len:
            raise ValueError(
                f"et_copy.llm: the sequence would reach {self.position + n} tokens; the program holds "
                f"{self.max_seq_len} (export_llm's max_seq_len)"
            )
        inputs = [torch.tensor([list(ids)]), torch.arange(self.position, self.position + n)]
        before = et_copy.allocator_stats()
        start = time.perf_counter()
        out = method.execute(inputs)[0]
        seconds = time.perf_counter() - start
        after = et_copy.allocator_stats()
        self.position += n
        token = int(out[0]) if self.picks_on_device else pick(out[0])
        return Step(kind, n, token, seconds, *(after[k] - before[k] for k in _COUNTERS))

    def feed(self, ids: Sequence[int], pick=None) -> list[Step]:
        """Runs ``ids`` at the next positions: prefill executions of up to
        the program's prompt length, a decode for a last single token.
        Returns the steps; the last one's token is the next token."""
        pick = pick or _greedy
        steps, ids = [], list(ids)
        while ids:
            chunk = ids[: self.max_prompt_len] if len(ids) >= 2 else ids
            method, kind = (self.prefill_method, PREFILL) if len(chunk) >= 2 else (self.decode_method, DECODE)
            steps.append(self._run(method, kind, chunk, pick))
            ids = ids[len(chunk) :]
        return steps

    def generate(
        self,
        prompt: Sequence[int],
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        top_k: int | None = None,
        seed: int | None = None,
        eos_token_id: int | None = None,
    ) -> Generation:
        """Continues the sequence with ``prompt``, then generates up to
        ``max_new_tokens`` tokens: greedy at ``temperature=0``, else sampled
        from the softmax of logits / temperature (the ``top_k`` most likely
        only, when given) with a ``torch.Generator`` seeded by ``seed``.
        A program that picks on the device is greedy only."""
        if not prompt:
            raise ValueError("et_copy.llm: the prompt must hold at least one token")
        if max_new_tokens < 0:
            raise ValueError(f"et_copy.llm: max_new_tokens must be >= 0, got {max_new_tokens}")
        if temperature and self.picks_on_device:
            raise ValueError(
                "et_copy.llm: this program picks the token on the device (greedy); sampling needs the logits "
                "(export_llm(..., pick='host'))"
            )
        needed = self.position + len(prompt) + max(0, max_new_tokens - 1)  # the last token is not fed back
        if needed > self.max_seq_len:
            raise ValueError(
                f"et_copy.llm: the sequence would reach {needed} tokens; the program holds {self.max_seq_len} "
                "(export_llm's max_seq_len)"
            )
        pick = _greedy if not temperature else _sampler(temperature, top_k, seed)
        result = Generation(list(prompt))
        result.steps = self.feed(prompt, pick)
        while len(result.tokens) < max_new_tokens:
            token = result.steps[-1].token
            result.tokens.append(token)
            if token == eos_token_id or len(result.tokens) == max_new_tokens:
                break
            result.steps.append(self._run(self.decode_method, DECODE, [token], pick))
        return result


def _greedy(logits: torch.Tensor) -> int:
    return int(logits.argmax())


def _sampler(temperature: float, top_k: int | None, seed: int | None):
    if temperature < 0:
        raise ValueError(f"et_copy.llm: temperature must be >= 0, got {temperature}")
    generator = torch.Generator()
    if seed is not None:
        generator.manual_seed(seed)

    def pick(logits: torch.Tensor) -> int:
        scores = logits.float() / temperature
        if top_k is not None:
            kth = torch.topk(scores, min(top_k, scores.numel())).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        return int(torch.multinomial(scores.softmax(-1), 1, generator=generator))

    return pick


def eager_generate(model: torch.nn.Module, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
    """transformers' own greedy ``generate()``, the reference: ``max_new_tokens``
    tokens through the end-of-sequence token, as :meth:`Session.generate`
    without ``eos_token_id``. (``min_new_tokens`` would instead forbid that
    token, which a greedy pick does not: tiny Gemma 2, whose end token is 1,
    picks it.)"""
    with torch.no_grad():
        out = model.generate(
            torch.tensor([list(prompt)]), max_new_tokens=max_new_tokens, eos_token_id=None, do_sample=False
        )
    return out[0, len(prompt) :].tolist()
