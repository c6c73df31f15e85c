"""``python -m et_copy generate``: an LLM on the (simulated) device, beside
the same model with its state on the host under executorch.runtime, and
eager transformers.

Four steps, each its own function: :func:`_parser` reads the command line,
:func:`_inputs` builds the model and checks the prompt, :func:`_measure`
exports, loads, generates and runs the baselines, and :func:`_render`
prints what was measured."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .._quiet import wrap_log_hooks
from ..backends import BACKENDS, DEFAULT_BACKEND
from ._progress import progress_lines

AUTO = "auto"  # --backend's default: chosen by the model's size
AUTO_LARGE = "aoti"  # the compiled backend, for a model of AUTO_BYTES or more
AUTO_BYTES = 64 << 20


def _parser() -> argparse.ArgumentParser:
    from et_copy.llm import ARCHITECTURES  # the one list (this imports transformers, as the command does)

    p = argparse.ArgumentParser(
        prog="python -m et_copy generate",
        description="Generate tokens with an LLM whose KV caches and recurrent states stay on the device, beside "
        "the same model on executorch.runtime with its state on the host, and eager transformers.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--arch", default="qwen3_moe", help="a tiny seeded model (default qwen3_moe): %(choices)s",
                     choices=ARCHITECTURES)  # fmt: skip
    src.add_argument("--config", help="a transformers config.json (random weights, seed 0)")
    src.add_argument("--checkpoint", help="a local checkpoint directory (config, safetensors, tokenizer.json), or a "
                     "GGUF file (llama.cpp's: its Q8_0, Q4_0 and Q4_1 weights kept in their own bits, its tokenizer "
                     "from its own vocabulary)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="weights of the tiny model, and sampling (default 0)")
    p.add_argument("--prompt", type=int, nargs="+", default=[5, 17, 3, 9], help="prompt token ids")
    p.add_argument("--text", help="a prompt as text (needs --checkpoint with tokenizer.json, or a GGUF with a "
                   "vocabulary)")  # fmt: skip
    p.add_argument("--chat", metavar="TEXT",
                   help="a user message, in the checkpoint's own chat template (its tokenizer_config.json's, or "
                   "the GGUF's), generation stopping at the end of the model's turn (needs --checkpoint)")  # fmt: skip
    p.add_argument("--dequantize", action="store_true",
                   help="with a GGUF --checkpoint, expand tensor types other than F32, F16, BF16, Q8_0, Q4_0 and "
                   "Q4_1 (Q6_K, ...) to float32 with the gguf package's own dequantization, instead of "
                   "refusing")  # fmt: skip
    p.add_argument("--tokens", type=int, default=16, help="tokens to generate (default 16)")
    p.add_argument("--max-seq-len", type=int, default=64, help="the cache length the program holds (default 64)")
    p.add_argument("--pick", choices=("host", "device"), default="device",
                   help="where the next token is picked: 'device' returns 8 bytes, not the logits")  # fmt: skip
    words = "; ".join(f"'{b.word}': {b.summary}" for b in BACKENDS.values())
    p.add_argument("--backend", choices=[*sorted(BACKENDS), AUTO], default=AUTO,
                   help=f"the device backend that computes: {words}; '{AUTO}' (default): '{AUTO_LARGE}' for a model "
                   f"of {AUTO_BYTES >> 20} MiB of weights or more, where its compile (minutes, once: the code is "
                   f"cached) pays back at once (the simulated backend's portable kernels decoded a 322 MiB model "
                   f"29x slower than transformers eager), else '{DEFAULT_BACKEND}', which needs no compile; with "
                   "--program, the backend the program was exported for")  # fmt: skip
    p.add_argument(
        "--quantize",
        choices=("int8", "int4"),
        default=None,
        help="quantize the model first: the linears and lm_head in int8 per row or int4 in groups of "
        "32, the embeddings in int8 (et_copy.llm.quantize); fastest on a CPU with a bf16 model",
    )
    p.add_argument("--temperature", type=float, default=0.0,
                   help="0 is greedy (default); with --pick device the sampling runs on the device too")  # fmt: skip
    p.add_argument("--top-k", type=int, default=None, help="sample from the k most likely tokens")
    p.add_argument("--program", help="run this .pte of export_llm instead of exporting the model (the model "
                   "arguments then give the baselines and the prompt's bounds: pass the model it was exported from, "
                   "and the default --backend auto runs it on the backend it was exported for)")  # fmt: skip
    p.add_argument("--data", help="the .pte's weights file, for a program exported with external_weights=True "
                   "(default: --program's path with the suffix .ptd, when that file exists); mmapped")  # fmt: skip
    p.add_argument("--trust-code", action="store_true",
                   help="run --program's compiled code though this machine did not compile it (its code runs in "
                   "this process: only for a program from a source you trust; docs/runtime.md)")  # fmt: skip
    p.add_argument(
        "--verify-data",
        action="store_true",
        help="check every weight against the SHA-256 it was stored under as it is copied to the device",
    )
    p.add_argument("--ignore-eos", action="store_true",
                   help="with --checkpoint, go on past the model's end-of-sequence token (by default generation "
                   "stops there, as transformers' generate() does)")  # fmt: skip
    p.add_argument("--no-baseline", action="store_true", help="skip executorch.runtime and eager")
    p.add_argument("--no-cache", action="store_true",
                   help="export again, and store nothing: by default a program exported for the same model, weights, "
                   "settings and versions is reused from $XDG_CACHE_HOME/et_copy/llm (or ~/.cache/...)")  # fmt: skip
    p.add_argument("-v", "--verbose", action="store_true", help="show third-party warnings and log lines")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress lines on stderr (export, compile, load, each baseline; off anyway without a "
                   "terminal)")  # fmt: skip
    return p


@dataclass
class _Inputs:
    model: Any
    name: str
    prompt: list[int]
    decode: Callable[[list[int]], str]  # token ids as text (the tokenizer's, or the ids)
    eos: list[int]  # generation stops after one of these (a checkpoint's end-of-sequence tokens)


class _UsageError(Exception):
    """A command line the command cannot run: its message goes to stderr, exit 2."""


def _inputs(args: argparse.Namespace) -> _Inputs:
    from et_copy import llm

    tokenizer = None
    gguf = bool(args.checkpoint) and os.path.isfile(args.checkpoint)
    if args.dequantize and not gguf:
        raise _UsageError("--dequantize goes with --checkpoint FILE.gguf")
    if gguf:
        try:
            model = llm.load_gguf(args.checkpoint, dequantize=args.dequantize)
        except llm.GGUFError as e:
            raise _UsageError(str(e)) from e
        tokenizer, name = llm.tokenizer_for(args.checkpoint), args.checkpoint
    elif args.checkpoint:
        model, tokenizer = llm.load_model(args.checkpoint), llm.tokenizer_for(args.checkpoint)
        name = args.checkpoint
    elif args.config:
        model, name = llm.load_model(args.config), args.config
    else:
        model, name = llm.tiny_model(args.arch, seed=args.seed), f"tiny {args.arch} (seed {args.seed})"
    if args.quantize is not None:
        # The eager baseline and the program run the same quantized weights, so their tokens compare.
        model, name = llm.quantize(model, args.quantize), f"{name}, {args.quantize} weights"
    stops: list[int] = []
    if args.text is not None and args.chat is not None:
        raise _UsageError("pass --text or --chat, not both")
    if args.text is not None:
        if tokenizer is None:
            raise _UsageError("--text needs --checkpoint with a tokenizer.json (or a GGUF with a vocabulary)")
        prompt = tokenizer.encode(args.text).ids
    elif args.chat is not None:
        if not args.checkpoint:
            raise _UsageError("--chat needs --checkpoint (its chat template and tokenizer)")
        prompt, stops = _chat_prompt(args.checkpoint, args.chat)
    else:
        prompt = args.prompt
    vocab = model.config.get_text_config().vocab_size
    if not prompt or any(not 0 <= t < vocab for t in prompt):
        raise _UsageError(f"prompt ids must be in 0..{vocab - 1}")
    if args.data is not None and args.program is None:
        raise _UsageError("--data goes with --program (the .pte whose weights it holds)")
    if args.program is not None and not os.path.isfile(args.program):
        raise _UsageError(f"--program: no file {args.program!r}")
    if args.data is not None and not os.path.isfile(args.data):
        raise _UsageError(f"--data: no file {args.data!r}")
    if len(prompt) + args.tokens > args.max_seq_len:
        raise _UsageError(f"prompt + tokens must be at most --max-seq-len ({args.max_seq_len})")
    decode = (lambda ids: tokenizer.decode(ids)) if tokenizer else (lambda ids: " ".join(map(str, ids)))
    eos = _eos_ids(model) + [t for t in stops if t not in _eos_ids(model)] if args.checkpoint else []
    return _Inputs(model, name, list(prompt), decode, [] if args.ignore_eos else eos)


def _chat_prompt(checkpoint: str, text: str) -> tuple[list[int], list[int]]:
    """The token ids of ``text`` as a user's turn in the checkpoint's own
    chat template, the assistant's turn opened (transformers'
    ``apply_chat_template``), and the ids that end a turn (the tokenizer's
    end-of-sequence token). A usage error when the checkpoint has no chat
    template."""
    from transformers import AutoTokenizer

    if os.path.isfile(checkpoint):  # a GGUF: transformers reads its vocabulary and its template
        folder, name = os.path.split(os.path.abspath(checkpoint))
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    else:
        tokenizer = AutoTokenizer.from_pretrained(checkpoint, local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise _UsageError(f"--chat: {checkpoint} has no chat template (tokenizer_config.json's chat_template)")
    turn = [{"role": "user", "content": text}]
    ids: Any = tokenizer.apply_chat_template(turn, add_generation_prompt=True, tokenize=True, return_dict=False)
    eos: Any = tokenizer.eos_token_id
    stops = [] if eos is None else [int(eos)]
    return [int(i) for i in ids], stops


def _chosen_backend(word: str, model) -> str:
    """``word``, or for ``auto`` the backend a model of this size wants (:data:`AUTO_BYTES`)."""
    if word != AUTO:
        return word
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    return AUTO_LARGE if nbytes >= AUTO_BYTES else DEFAULT_BACKEND


def _eos_ids(model) -> list[int]:
    """The model's end-of-sequence ids: its generation config's, else its config's (an id, a list, or none)."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if ids is None:
        ids = getattr(model.config, "eos_token_id", None)
    return [] if ids is None else [int(i) for i in (ids if isinstance(ids, (list, tuple)) else [ids])]


def _until_eos(tokens: list[int], eos: list[int]) -> list[int]:
    """``tokens`` through the first of ``eos``, as generation that stops there gives them."""
    for i, token in enumerate(tokens):
        if token in eos:
            return tokens[: i + 1]
    return tokens


@dataclass
class _Measured:
    export_note: str  # how the program was had, and its size
    run: Any  # the device-state Generation
    rows: list[tuple[str, Any]] = field(default_factory=list)  # (label, Generation or _EagerRow), the run first
    eager_tokens: list[int] | None = None
    load_ms: float = 0.0
    uploaded: int = 0  # h2d bytes of the load: the weights and the first session's state
    state_nbytes: int = 0
    second_session_nbytes: int = 0
    scratch_nbytes: int = 0


def _measure(args: argparse.Namespace, inputs: _Inputs) -> _Measured:
    import et_copy
    from et_copy import llm

    say = progress_lines(args.quiet)
    start = time.perf_counter()
    path, data_path = _program(args)
    source: str | bytes
    if path is None:
        args.backend = _chosen_backend(args.backend, inputs.model)
        say(f"exporting the model (backend {args.backend}; a first compile takes minutes, later ones reuse it)")
        # The simulated backend's programs keep the cache key they always had.
        backend = {"backend": args.backend} if args.backend != DEFAULT_BACKEND else {}
        program = llm.export_llm_cached(
            inputs.model, use_cache=not args.no_cache, max_seq_len=args.max_seq_len, pick=args.pick, **backend
        )
        how = f"reused the program exported before ({program.path})" if program.hit else "exported it"
        export_note = f"{how} in {time.perf_counter() - start:.1f} s ({len(program.buffer)} B, backend {args.backend})"
        source = program.buffer
    else:
        source = path
        sizes = f"{os.path.getsize(source)} B" + (f", weights {os.path.getsize(data_path)} B" if data_path else "")
        export_note = f"loaded {source}" + (f" with {data_path}" if data_path else "") + f" ({sizes})"
    et_copy.use_simulated_device()
    # A program given as it is runs on whichever of the table's backends it was exported for.
    for word in sorted(BACKENDS) if args.backend == AUTO else [args.backend]:
        BACKENDS[word].register()
    say("loading the program on et_copy.runtime")
    with et_copy.counting() as loading:
        start = time.perf_counter()
        device = llm.DeviceLLM(source, data_path=data_path, verify_data=args.verify_data, trust_code=args.trust_code)
        session = device.new_session()
        load_ms = (time.perf_counter() - start) * 1e3
    sampling = dict(temperature=args.temperature, top_k=args.top_k, seed=args.seed)
    say(f"generating {args.tokens} tokens on the device")
    with et_copy.counting() as held:
        for _ in range(2):  # the first run warms up; the second is reported
            session.reset()
            run = session.generate(inputs.prompt, args.tokens, eos_token_id=inputs.eos, **sampling)
        other = device.new_session()
        other.generate(inputs.prompt[:1], 1)
    m = _Measured(
        export_note,
        run,
        rows=[("et_copy.runtime, device state", run)],
        load_ms=load_ms,
        uploaded=loading.h2d_bytes,
        state_nbytes=session.state_nbytes,
        second_session_nbytes=held.bytes_outstanding,
        scratch_nbytes=device.program.device_scratch_nbytes,
    )
    if not args.no_baseline:
        say("baseline: executorch.runtime with the state on the host (exported once, then reused)")
        host = _host_state_run(inputs.model, inputs.prompt, args)
        host.tokens = _until_eos(host.tokens, inputs.eos)
        m.rows.append(("executorch.runtime, host state", host))
        say("baseline: transformers eager")
        m.eager_tokens, eager_row = _eager(inputs.model, inputs.prompt, args.tokens)
        m.eager_tokens = eager_row.tokens = _until_eos(m.eager_tokens, inputs.eos)
        m.rows.append(("eager transformers", eager_row))
    return m


def _program(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The .pte to run and its .ptd (--program, --data or the .ptd beside
    it), both mapped at load; (None, None) to export the model."""
    if args.program is None:
        return None, None
    beside = os.path.splitext(args.program)[0] + ".ptd"
    return args.program, args.data if args.data is not None else (beside if os.path.isfile(beside) else None)


def _render(m: _Measured, inputs: _Inputs, args: argparse.Namespace) -> None:
    print(f"prompt ({len(inputs.prompt)} tokens): {inputs.decode(inputs.prompt)}")
    tokens = m.run.tokens
    ended = inputs.eos and tokens and tokens[-1] in inputs.eos and len(tokens) < args.tokens
    stop = ", stopped at the end-of-sequence token (--ignore-eos goes on)" if ended else ""
    print(f"generated ({len(tokens)} tokens{stop}): {inputs.decode(tokens)}")
    print(
        f"\n{'run':<32} {'prefill tok/s':>13} {'decode tok/s':>12} {'h2d B/tok':>10} {'d2h B/tok':>10} {'= eager':>8}"
    )
    for label, r in m.rows:
        h2d, d2h = r.decode_bytes_per_token() if hasattr(r, "decode_bytes_per_token") else (float("nan"),) * 2
        same = "-" if m.eager_tokens is None or args.temperature else str(r.tokens == m.eager_tokens)
        print(
            f"{label:<32} {r.prefill_tokens_per_second:>13.0f} {r.decode_tokens_per_second:>12.0f} "
            f"{h2d:>10.0f} {d2h:>10.0f} {same:>8}"
        )
    if len(m.rows) > 1:
        base = m.rows[1][1]
        moved, base_moved = sum(m.run.decode_bytes_per_token()), sum(base.decode_bytes_per_token())
        ms, base_ms = 1e3 / m.run.decode_tokens_per_second, 1e3 / base.decode_tokens_per_second
        print(
            f"decode ms/token, device state / host state: {ms:.2f} / {base_ms:.2f} = {ms / base_ms:.2f}x; "
            f"bytes per token {base_moved / moved:.0f}x fewer"
        )
    print(
        f"load: {m.load_ms:.1f} ms on et_copy.runtime, {m.uploaded} B uploaded (the weights, "
        f"{m.uploaded - m.state_nbytes} B, once per program, and the first session's state)"
    )
    print(
        f"device memory: {m.state_nbytes} B of state per session; a second session added "
        f"{m.second_session_nbytes} B (the scratch, {m.scratch_nbytes} B, and the weights are shared)"
    )


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        inputs = _inputs(args)
    except _UsageError as e:
        print(f"et_copy generate: {e}", file=sys.stderr)
        return 2
    m = _measure(args, inputs)
    print(f"model: {inputs.name}; {m.export_note}")
    _render(m, inputs, args)
    same = m.eager_tokens is None or args.temperature or all(r.tokens == m.eager_tokens for _, r in m.rows)
    return 0 if same else 1


def _host_state_run(model, prompt: list[int], args: argparse.Namespace):
    """The same model with its state on the host, on executorch.runtime: the
    prompt goes in one token at a time (its decode is the only method)."""
    import torch
    from executorch.runtime import Runtime

    wrap_log_hooks()  # its pybindings, first loaded here, hook the log too

    import et_copy
    from et_copy import llm

    program = llm.export_llm_cached(
        model, use_cache=not args.no_cache, max_seq_len=args.max_seq_len, pick=args.pick, state_on_device=False
    )
    method = Runtime.get().load_program(program.buffer).load_method(llm.DECODE)
    state = llm.HostStateStep(llm.StatefulCausalLM(model, args.max_seq_len)).initial_state()
    result = llm.Generation(list(prompt))
    token = None
    for pos in range(len(prompt) + args.tokens - 1):
        tok = prompt[pos] if pos < len(prompt) else token
        with et_copy.counting() as moved:
            start = time.perf_counter()
            out, *state = method.execute([torch.tensor([[tok]]), torch.tensor([pos]), *state])
            seconds = time.perf_counter() - start
        token = int(out[0]) if out.dtype == torch.int64 else int(out[0].argmax())
        kind = llm.PREFILL if pos < len(prompt) - 1 else llm.DECODE
        result.steps.append(llm.Step(kind, 1, token, seconds, moved.h2d_bytes, moved.d2h_bytes))
        if pos >= len(prompt) - 1:
            result.tokens.append(token)
    return result


class _EagerRow:
    def __init__(self, tokens, prefill_tps, decode_tps):
        self.tokens, self.prefill_tokens_per_second, self.decode_tokens_per_second = tokens, prefill_tps, decode_tps


def _eager(model, prompt: list[int], n: int):
    import torch

    from et_copy import llm

    ids = torch.tensor([list(prompt)])
    with torch.no_grad():
        model(ids)  # untimed: a first call's one-off work (torchao's quantized weights: tens of ms)
        start = time.perf_counter()
        model(ids)
        prefill = time.perf_counter() - start
    start = time.perf_counter()
    tokens = llm.eager_generate(model, prompt, n)
    total = time.perf_counter() - start
    return tokens, _EagerRow(tokens, len(prompt) / prefill, n / max(total - prefill, 1e-9))
