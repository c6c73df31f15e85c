"""Generating tokens from an exported LLM on et_copy.runtime, one session
per sequence."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence, cast

import torch

from .._counting import counting
from ._export import DECODE, DECODE_NEXT, MAX_PROMPT_LEN, MAX_SEQ_LEN, MAX_TOP_K, PREFILL, SET_SAMPLING
from ._sampling import host_pick

if TYPE_CHECKING:
    from transformers import GenerationMixin, PreTrainedModel

_MAX_SEED = 2**63 - 1


@dataclass
class Step:
    """One execution: ``tokens_in`` ids went in (a ``decode_next`` feeds
    back its one token on the device), ``token`` came out."""

    kind: str  # "prefill", "decode" (either decode method) or "set_sampling"
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
    copy of the weights and scratch memory. ``program`` is a loaded
    :class:`et_copy.runtime.Program`, or a .pte's path or bytes to load,
    with ``data_path``, the .ptd of a program exported with
    ``external_weights=True``, and ``et_copy.runtime.load``'s
    ``verify_data`` and ``trust_code`` (docs/runtime.md, "Untrusted
    programs")."""

    def __init__(
        self,
        program: Any,
        *,
        data_path: str | os.PathLike | None = None,
        verify_data: bool = False,
        trust_code: bool = False,
    ) -> None:
        import et_copy.runtime

        if isinstance(program, (str, os.PathLike, bytes, bytearray, memoryview)):
            # A path is mmapped, and so is the .ptd of export_llm(external_weights=True): the weights
            # go from the file to the device.
            program = et_copy.runtime.load(program, data_path=data_path, verify_data=verify_data, trust_code=trust_code)
        elif data_path is not None or verify_data or trust_code:
            raise ValueError(
                "et_copy.llm.DeviceLLM: data_path, verify_data and trust_code go with a program to load "
                "(a path or bytes), not with a loaded Program (pass them to et_copy.runtime.load)"
            )
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
        # A program that picks on the device: its bound on top_k (None: it returns logits).
        self.max_top_k = int(program.load_method(MAX_TOP_K).execute([])[0]) if MAX_TOP_K in names else None
        self._names = frozenset(names)

    def new_session(self) -> Session:
        """A new sequence with its own state on the device."""
        return Session(self.program.new_session(), self.max_seq_len, self.max_prompt_len, self.max_top_k, self._names)


@dataclass(frozen=True)
class _Sampling:
    temperature: float = 0.0
    top_k: int = 0  # 0: every token
    seed: int = 0


_GREEDY = _Sampling()  # what a fresh or reset device state holds


class Session:
    """One sequence: an :class:`et_copy.runtime.Session` (its state on the
    device) with the LLM's methods loaded on it, its position, and
    :meth:`generate`. :meth:`reset` starts over."""

    def __init__(
        self,
        session: Any,
        max_seq_len: int,
        max_prompt_len: int,
        max_top_k: int | None = None,
        methods: frozenset[str] = frozenset(),
    ) -> None:
        self._session = session
        self.prefill_method = session.load_method(PREFILL)
        self.decode_method = session.load_method(DECODE)
        self.picks_on_device = self.decode_method.metadata.output_tensor_meta(0).torch_dtype() == torch.int64
        # Programs of export_llm(pick="device") decode their own last pick and sample on the device.
        self.decode_next_method = session.load_method(DECODE_NEXT) if DECODE_NEXT in methods else None
        self.set_sampling_method = session.load_method(SET_SAMPLING) if SET_SAMPLING in methods else None
        self.max_top_k = max_top_k
        self.max_prompt_len = max_prompt_len
        self.max_seq_len = max_seq_len
        self.position = 0
        self._sampling = _GREEDY  # what the device state holds

    @property
    def state_nbytes(self) -> int:
        return self._session.state_nbytes

    def reset(self) -> None:
        """Back to an empty sequence: the state's start, through counted h2d copies."""
        self._session.reset()
        self.position = 0
        self._sampling = _GREEDY

    def _run(self, method, kind: str, ids: Sequence[int], inputs: list, pick) -> Step:
        n = len(ids)
        if self.position + n > self.max_seq_len:
            raise ValueError(
                f"et_copy.llm: the sequence would reach {self.position + n} tokens; the program holds "
                f"{self.max_seq_len} (export_llm's max_seq_len)"
            )
        out, seconds, moved = _measured(method, inputs)
        self.position += n
        token = int(out[0]) if self.picks_on_device else pick(out[0], self.position - 1)
        return Step(kind, n, token, seconds, *moved)

    def _run_ids(self, method, kind: str, ids: Sequence[int], pick) -> Step:
        inputs = [torch.tensor([list(ids)]), torch.arange(self.position, self.position + len(ids))]
        return self._run(method, kind, ids, inputs, pick)

    def feed(self, ids: Sequence[int], pick=None) -> list[Step]:
        """Runs ``ids`` at the next positions: prefill executions of up to
        the program's prompt length, a decode for a last single token.
        Returns the steps; the last one's token is the next token (for a
        program that returns logits, ``pick(logits, position)`` picks it;
        greedy by default)."""
        pick = pick or _greedy
        steps, ids = [], list(ids)
        while ids:
            chunk = ids[: self.max_prompt_len]
            method, kind = (self.prefill_method, PREFILL) if len(chunk) >= 2 else (self.decode_method, DECODE)
            steps.append(self._run_ids(method, kind, chunk, pick))
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
        eos_token_id: int | Sequence[int] | None = None,
    ) -> Generation:
        """Continues the sequence with ``prompt``, then generates up to
        ``max_new_tokens`` tokens: greedy at ``temperature=0``, else sampled
        from the softmax of logits / temperature (the ``top_k`` most likely
        only, when given) by Gumbel-max with the noise of ``seed`` (random
        when None) at each position (:func:`~et_copy.llm.pick_token`).

        A program that picks on the device (``export_llm(pick="device")``)
        samples there too: the settings go in once (``set_sampling``, when
        they change), and each following token is decoded by
        ``decode_next`` with nothing going in and 8 bytes coming out. The
        same seed picks the same tokens from either kind of program.

        Generation stops after a token of ``eos_token_id`` (one id, or
        several: a model's ``generation_config.eos_token_id`` may list its
        end-of-turn tokens), which is kept as the last token."""
        if not prompt:
            raise ValueError("et_copy.llm: the prompt must hold at least one token")
        if max_new_tokens < 0:
            raise ValueError(f"et_copy.llm: max_new_tokens must be >= 0, got {max_new_tokens}")
        sampling = self._check_sampling(temperature, top_k, seed)
        needed = self.position + len(prompt) + max(0, max_new_tokens - 1)  # the last token is not fed back
        if needed > self.max_seq_len:
            raise ValueError(
                f"et_copy.llm: the sequence would reach {needed} tokens; the program holds {self.max_seq_len} "
                "(export_llm's max_seq_len)"
            )
        stop = {eos_token_id} if isinstance(eos_token_id, int) else set(eos_token_id or ())
        result = Generation(list(prompt))
        if self.picks_on_device and sampling != self._sampling:
            result.steps.append(self._set_sampling(sampling))
        pick = _greedy if not sampling.temperature else _host_sampler(sampling)
        result.steps += self.feed(prompt, pick)
        while len(result.tokens) < max_new_tokens:
            token = result.steps[-1].token
            result.tokens.append(token)
            if token in stop or len(result.tokens) == max_new_tokens:
                break
            if self.decode_next_method is not None:
                result.steps.append(self._run(self.decode_next_method, DECODE, [token], [], pick))
            else:
                result.steps.append(self._run_ids(self.decode_method, DECODE, [token], pick))
        return result

    def _check_sampling(self, temperature: float, top_k: int | None, seed: int | None) -> _Sampling:
        if not temperature >= 0:  # also refuses NaN
            raise ValueError(f"et_copy.llm: temperature must be >= 0, got {temperature}")
        if top_k is not None:
            bound = self.max_top_k
            if not 1 <= top_k or (bound is not None and top_k > bound):
                limit = f"1..{bound} (export_llm's max_top_k)" if bound is not None else ">= 1"
                raise ValueError(f"et_copy.llm: top_k must be in {limit}, got {top_k}")
        if seed is not None and not 0 <= seed <= _MAX_SEED:
            raise ValueError(f"et_copy.llm: seed must be in 0..2**63-1, got {seed}")
        if self.picks_on_device and temperature and self.set_sampling_method is None:
            raise ValueError(
                "et_copy.llm: this program picks greedily on the device and cannot sample (it has no "
                f"'{SET_SAMPLING}' method: export it again with this et_copy, or with pick='host')"
            )
        if not temperature:
            return _GREEDY  # top_k and seed do not change a greedy pick
        if seed is None:
            seed = int(torch.randint(0, 2**62, ()))
        return _Sampling(float(temperature), top_k or 0, seed)

    def _set_sampling(self, sampling: _Sampling) -> Step:
        inputs = [
            torch.tensor([sampling.temperature], dtype=torch.float32),
            torch.tensor([sampling.top_k]),
            torch.tensor([sampling.seed]),
        ]
        _, seconds, moved = _measured(self.set_sampling_method, inputs)
        self._sampling = sampling
        return Step(SET_SAMPLING, 0, -1, seconds, *moved)


def _measured(method, inputs: list):
    """``method.execute(inputs)``'s first output, its seconds, and the
    (h2d, d2h) bytes the allocator counted during it."""
    with counting() as moved:
        start = time.perf_counter()
        out = method.execute(inputs)[0]
        seconds = time.perf_counter() - start
    return out, seconds, (moved.h2d_bytes, moved.d2h_bytes)


def _greedy(logits: torch.Tensor, position: int = 0) -> int:
    return int(logits.argmax())


def _host_sampler(sampling: _Sampling):
    def pick(logits: torch.Tensor, position: int) -> int:
        bound = sampling.top_k or logits.numel()
        return host_pick(logits, sampling.temperature, sampling.top_k, sampling.seed, position, bound)

    return pick


def eager_generate(model: PreTrainedModel, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
    """transformers' own greedy ``generate()``, the reference: ``max_new_tokens``
    tokens through the end-of-sequence token, as :meth:`Session.generate`
    without ``eos_token_id``. (``min_new_tokens`` would instead forbid that
    token, which a greedy pick does not: tiny Gemma 2, whose end token is 1,
    picks it.)"""
    with torch.no_grad():
        out = cast("GenerationMixin", model).generate(
            torch.tensor([list(prompt)]), max_new_tokens=max_new_tokens, eos_token_id=None, do_sample=False
        )
    return out[0, len(prompt) :].tolist()
