"""``python -m et_copy generate``: an LLM on the (simulated) device, beside
the same model with its state on the host under executorch.runtime, and
eager transformers."""

from __future__ import annotations

import argparse
import sys
import time

# et_copy.llm.ARCHITECTURES, spelled here so that --help need not import
# transformers; a test checks that the two agree.
ARCHITECTURES = (
    "qwen3", "qwen3_moe", "qwen3_5_moe", "llama", "mistral", "gemma2", "gemma3", "gpt_oss", "qwen2", "phi3",
    "olmo2", "smollm3", "mixtral", "qwen2_moe", "olmoe", "deepseek_v3", "qwen3_next", "lfm2",
)  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m et_copy generate",
        description="Generate tokens with an LLM whose KV caches and recurrent states stay on the device, beside "
        "the same model on executorch.runtime with its state on the host, and eager transformers.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--arch", default="qwen3_moe", help="a tiny seeded model (default qwen3_moe): %(choices)s",
                     choices=ARCHITECTURES)  # fmt: skip
    src.add_argument("--config", help="a transformers config.json (random weights, seed 0)")
    src.add_argument("--checkpoint", help="a local checkpoint directory (config, safetensors, tokenizer.json)")
    p.add_argument("--seed", type=int, default=0, help="weights of the tiny model, and sampling (default 0)")
    p.add_argument("--prompt", type=int, nargs="+", default=[5, 17, 3, 9], help="prompt token ids")
    p.add_argument("--text", help="a prompt as text (needs --checkpoint with tokenizer.json)")
    p.add_argument("--tokens", type=int, default=16, help="tokens to generate (default 16)")
    p.add_argument("--max-seq-len", type=int, default=64, help="the cache length the program holds (default 64)")
    p.add_argument("--pick", choices=("host", "device"), default="device",
                   help="where the next token is picked: 'device' returns 8 bytes, not the logits")  # fmt: skip
    p.add_argument("--temperature", type=float, default=0.0,
                   help="0 is greedy (default); with --pick device the sampling runs on the device too")  # fmt: skip
    p.add_argument("--top-k", type=int, default=None, help="sample from the k most likely tokens")
    p.add_argument("--no-baseline", action="store_true", help="skip executorch.runtime and eager")
    p.add_argument("--no-cache", action="store_true",
                   help="export again, and store nothing: by default a program exported for the same model, weights, "
                   "settings and versions is reused from $XDG_CACHE_HOME/et_copy/llm (or ~/.cache/...)")  # fmt: skip
    p.add_argument("-v", "--verbose", action="store_true", help="show third-party warnings and log lines")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    import et_copy
    from et_copy import llm

    tokenizer = None
    if args.checkpoint:
        model, tokenizer = llm.load_model(args.checkpoint), llm.tokenizer_for(args.checkpoint)
        name = args.checkpoint
    elif args.config:
        model, name = llm.load_model(args.config), args.config
    else:
        model, name = llm.tiny_model(args.arch, seed=args.seed), f"tiny {args.arch} (seed {args.seed})"
    if args.text is not None:
        if tokenizer is None:
            print("et_copy generate: --text needs --checkpoint with a tokenizer.json", file=sys.stderr)
            return 2
        prompt = tokenizer.encode(args.text).ids
    else:
        prompt = args.prompt
    vocab = model.config.get_text_config().vocab_size
    if not prompt or any(not 0 <= t < vocab for t in prompt):
        print(f"et_copy generate: prompt ids must be in 0..{vocab - 1}", file=sys.stderr)
        return 2
    if len(prompt) + args.tokens > args.max_seq_len:
        print(f"et_copy generate: prompt + tokens must be at most --max-seq-len ({args.max_seq_len})", file=sys.stderr)
        return 2

    start = time.perf_counter()
    program = llm.export_llm_cached(model, use_cache=not args.no_cache, max_seq_len=args.max_seq_len, pick=args.pick)
    how = f"reused the program exported before ({program.path})" if program.hit else "exported it"
    print(f"model: {name}; {how} in {time.perf_counter() - start:.1f} s ({len(program.buffer)} B)")
    et_copy.use_simulated_device()
    with et_copy.counting() as loading:
        start = time.perf_counter()
        device = llm.DeviceLLM(program.buffer)
        session = device.new_session()
        load_ms = (time.perf_counter() - start) * 1e3
    uploaded = loading.h2d_bytes
    with et_copy.counting() as held:
        for _ in range(2):  # the first run warms up; the second is reported
            session.reset()
            run = session.generate(prompt, args.tokens, temperature=args.temperature, top_k=args.top_k, seed=args.seed)
        other = device.new_session()
        other.generate(prompt[:1], 1)
    extra = held.bytes_outstanding

    decode = lambda ids: tokenizer.decode(ids) if tokenizer else " ".join(map(str, ids))  # noqa: E731
    print(f"prompt ({len(prompt)} tokens): {decode(prompt)}")
    print(f"generated ({len(run.tokens)} tokens): {decode(run.tokens)}")
    rows = [("et_copy.runtime, device state", run)]
    eager_tokens = None
    if not args.no_baseline:
        rows.append(("executorch.runtime, host state", _baseline(model, prompt, args)))
        eager_tokens, eager_row = _eager(model, prompt, args.tokens)
        rows.append(("eager transformers", eager_row))
    print(
        f"\n{'run':<32} {'prefill tok/s':>13} {'decode tok/s':>12} {'h2d B/tok':>10} {'d2h B/tok':>10} {'= eager':>8}"
    )
    for label, r in rows:
        h2d, d2h = r.decode_bytes_per_token() if hasattr(r, "decode_bytes_per_token") else (float("nan"),) * 2
        same = "-" if eager_tokens is None or args.temperature else str(r.tokens == eager_tokens)
        print(
            f"{label:<32} {r.prefill_tokens_per_second:>13.0f} {r.decode_tokens_per_second:>12.0f} "
            f"{h2d:>10.0f} {d2h:>10.0f} {same:>8}"
        )
    if len(rows) > 1:
        base = rows[1][1]
        moved, base_moved = sum(run.decode_bytes_per_token()), sum(base.decode_bytes_per_token())
        ms, base_ms = 1e3 / run.decode_tokens_per_second, 1e3 / base.decode_tokens_per_second
        print(
            f"decode ms/token, device state / host state: {ms:.2f} / {base_ms:.2f} = {ms / base_ms:.2f}x; "
            f"bytes per token {base_moved / moved:.0f}x fewer"
        )
    print(
        f"load: {load_ms:.1f} ms on et_copy.runtime, {uploaded} B uploaded (the weights, "
        f"{uploaded - session.state_nbytes} B, once per program, and the first session's state)"
    )
    print(
        f"device memory: {session.state_nbytes} B of state per session; a second session added {extra} B "
        f"(the scratch, {device.program.device_scratch_nbytes} B, and the weights are shared)"
    )
    ok = eager_tokens is None or args.temperature or all(r.tokens == eager_tokens for _, r in rows)
    return 0 if ok else 1


def _baseline(model, prompt, args):
    """The same model with its state on the host, on executorch.runtime: the
    prompt goes in one token at a time (its decode is the only method)."""
    import torch
    from executorch.runtime import Runtime

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


def _eager(model, prompt, n):
    import torch

    from et_copy import llm

    ids = torch.tensor([list(prompt)])
    with torch.no_grad():
        start = time.perf_counter()
        model(ids)
        prefill = time.perf_counter() - start
    start = time.perf_counter()
    tokens = llm.eager_generate(model, prompt, n)
    total = time.perf_counter() - start
    return tokens, _EagerRow(tokens, len(prompt) / prefill, n / max(total - prefill, 1e-9))
