"""LLMs with their state on the device (et_copy.llm): transformers' own
models from tiny seeded configs, exported with their KV caches and
linear-attention states as device mutable buffers, run on et_copy.runtime.
Tokens must equal transformers' generate(); per decode step only ids and
positions go in and logits (or the token) come out; sessions are isolated;
a reset reproduces the first run; state starts through counted h2d copies;
the weights stay on the device while the program lives."""

from __future__ import annotations

import gc
import re

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from compiled_programs import aoti_payloads  # noqa: E402
from et_copy import llm  # noqa: E402
from llm_eager import StaticCacheQuirk, wrapper_tokens  # noqa: E402
from llm_programs import exported as exported_program  # noqa: E402

PROMPT = [5, 17, 3, 9, 42]
TOKENS = 16
MAX_SEQ = 32

# (architecture, pick, backend): one MoE, one hybrid and one dense picking on
# the device (and decoding their own picks), and the dense one returning
# logits, on the simulated backend (ExecuTorch's CPU kernels over the device);
# the three that pick on the device again on the compiled backend
# (AOTInductor code, compiled for the CPU: the code path a GPU runs).
CASES = [
    ("qwen3_moe", "device", "simulated"),
    ("qwen3_5_moe", "device", "simulated"),
    ("qwen3", "device", "simulated"),
    ("qwen3", "host", "simulated"),
    ("qwen3_moe", "device", "aoti"),
    ("qwen3_5_moe", "device", "aoti"),
    ("qwen3", "device", "aoti"),
]


@pytest.fixture(scope="module", params=CASES, ids=[f"{a}-{p}" + ("-aoti" if b == "aoti" else "") for a, p, b in CASES])
def exported(request):
    arch, pick, backend = request.param
    settings = {"backend": backend} if backend != "simulated" else {}  # the simulated programs' key as before
    model, buffer = exported_program(arch, max_seq_len=MAX_SEQ, pick=pick, **settings)
    if backend == "aoti":
        et_copy.use_aoti_backend()
    return model, buffer, pick


@pytest.fixture(scope="module")
def eager_tokens(exported):
    model, _, _ = exported
    return {tuple(p): llm.eager_generate(model, p, TOKENS) for p in (PROMPT, [7, 7, 1])}


def _stats():
    return et_copy.allocator_stats()


def test_tokens_equal_transformers_generate_and_decode_moves_only_the_pick(exported, eager_tokens):
    model, buffer, pick = exported
    et_copy.use_simulated_device()
    session = llm.DeviceLLM(buffer).new_session()
    run = session.generate(PROMPT, TOKENS)
    assert run.tokens == eager_tokens[tuple(PROMPT)]
    assert len(run.tokens) == TOKENS
    prefill = [s for s in run.steps if s.kind == llm.PREFILL]
    assert len(prefill) == 1 and prefill[0].tokens_in == len(PROMPT)  # the prompt in one execution
    out_bytes = 8 if pick == "device" else model.config.vocab_size * 4
    assert (prefill[0].h2d_bytes, prefill[0].d2h_bytes) == (16 * len(PROMPT), out_bytes)
    decodes = [s for s in run.steps if s.kind == llm.DECODE]
    assert len(decodes) == TOKENS - 1
    # A device pick is fed back on the device (decode_next): nothing goes in and the
    # 8-byte token comes out. Logits go out, and an int64 id and position in. The state never crosses.
    in_bytes = 0 if pick == "device" else 16
    for step in decodes:
        assert (step.h2d_bytes, step.d2h_bytes) == (in_bytes, out_bytes), step


def test_state_starts_through_one_counted_h2d_copy_and_a_session_costs_its_state(exported):
    _, buffer, _ = exported
    et_copy.use_simulated_device()
    device = llm.DeviceLLM(buffer)
    first = device.new_session()  # loads the scratch and the first state
    before = _stats()
    second = device.new_session()
    after = _stats()
    assert second.state_nbytes == first.state_nbytes > 0
    # The zero state reached the device through the allocator's h2d path, in one copy.
    assert after["h2d_copies"] - before["h2d_copies"] == 1
    assert after["h2d_bytes"] - before["h2d_bytes"] == second.state_nbytes
    # The second session allocated its state and nothing else: weights and scratch are shared.
    assert after["bytes_outstanding"] - before["bytes_outstanding"] == second.state_nbytes
    del first, second, device
    gc.collect()


def test_interleaved_sessions_each_equal_their_own_eager_run(exported, eager_tokens):
    _, buffer, _ = exported
    et_copy.use_simulated_device()
    device = llm.DeviceLLM(buffer)
    a, b = device.new_session(), device.new_session()
    other = [7, 7, 1]
    steps_a, steps_b = a.feed(PROMPT), b.feed(other)
    tokens = {"a": [steps_a[-1].token], "b": [steps_b[-1].token]}
    for _ in range(TOKENS - 1):  # one step of each in turn
        tokens["a"].append(a.feed([tokens["a"][-1]])[-1].token)
        tokens["b"].append(b.feed([tokens["b"][-1]])[-1].token)
    assert tokens["a"] == eager_tokens[tuple(PROMPT)]
    assert tokens["b"] == eager_tokens[tuple(other)]


def test_reset_reproduces_the_first_run_and_is_counted(exported, eager_tokens):
    _, buffer, _ = exported
    et_copy.use_simulated_device()
    session = llm.DeviceLLM(buffer).new_session()
    first = session.generate(PROMPT, TOKENS).tokens
    continued = session.generate([first[-1]], 2).tokens  # the state carries on without a reset
    before = _stats()
    session.reset()
    after = _stats()
    assert after["h2d_bytes"] - before["h2d_bytes"] >= session.state_nbytes
    assert session.position == 0
    assert session.generate(PROMPT, TOKENS).tokens == first == eager_tokens[tuple(PROMPT)]
    assert len(continued) == 2


def _eager_sampled(model, prompt, n, temperature, top_k, seed) -> list[int]:
    """The reference: the exported wrapper itself, eagerly, sampling as the device does."""
    wrapper = llm.StatefulCausalLM(model, MAX_SEQ, pick="device").eval()
    with torch.no_grad():
        wrapper.set_sampling(torch.tensor([temperature]), torch.tensor([top_k]), torch.tensor([seed]))
        tokens = [int(wrapper(torch.tensor([prompt]), torch.arange(len(prompt)))[0])]
        while len(tokens) < n:
            tokens.append(int(wrapper.decode_next()[0]))
    return tokens


def test_sampling_is_seeded_and_equals_the_eager_sampler_and_a_device_pick_costs_its_8_bytes(exported):
    model, buffer, pick = exported
    et_copy.use_simulated_device()
    session = llm.DeviceLLM(buffer).new_session()
    runs = {}
    for seed in (3, 3, 4):
        session.reset()
        run = session.generate(PROMPT, 8, temperature=0.9, top_k=20, seed=seed)
        runs.setdefault(seed, []).append(run.tokens)
        if pick == "device":
            # The settings go in once (20 B: a float32 and two int64); every decode then moves only its token.
            (settings,) = [s for s in run.steps if s.kind == llm.SET_SAMPLING]
            assert (settings.h2d_bytes, run.steps[0].kind) == (20, llm.SET_SAMPLING)
            assert all((s.h2d_bytes, s.d2h_bytes) == (0, 8) for s in run.steps if s.kind == llm.DECODE)
    assert runs[3][0] == runs[3][1]
    assert runs[3][0] != runs[4][0]  # a seed is not ignored
    # Host or device, a program picks what the wrapper picks eagerly with the same noise.
    assert runs[3][0] == _eager_sampled(model, PROMPT, 8, 0.9, 20, 3)
    # Settings persist until they change: a second sampled run with the same settings sets nothing.
    again = session.generate([runs[4][0][-1]], 2, temperature=0.9, top_k=20, seed=4)  # the last run's
    assert not [s for s in again.steps if s.kind == llm.SET_SAMPLING]


def test_bad_sampling_settings_are_refused_before_anything_runs(exported):
    _, buffer, pick = exported
    et_copy.use_simulated_device()
    device = llm.DeviceLLM(buffer)
    session = device.new_session()
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        session.generate(PROMPT, 2, temperature=-0.5)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        session.generate(PROMPT, 2, temperature=float("nan"))
    with pytest.raises(ValueError, match="seed must be in 0..2\\*\\*63-1"):
        session.generate(PROMPT, 2, temperature=1.0, seed=-1)
    with pytest.raises(ValueError, match="seed must be in 0..2\\*\\*63-1, got 9223372036854775808"):
        session.generate(PROMPT, 2, temperature=1.0, seed=2**63)
    with pytest.raises(ValueError, match="top_k must be in"):
        session.generate(PROMPT, 2, temperature=1.0, top_k=0)
    if pick == "device":
        assert device.max_top_k == 64
        with pytest.raises(ValueError, match="top_k must be in 1..64 \\(export_llm's max_top_k\\)"):
            session.generate(PROMPT, 2, temperature=1.0, top_k=65)
    assert session.position == 0
    # The seed's bound is int64's: the largest one samples.
    assert len(session.generate(PROMPT, 2, temperature=1.0, seed=2**63 - 1).tokens) == 2


@pytest.mark.parametrize("arch", sorted({a for a, _, b in CASES if b == "aoti"}))
def test_the_compiled_code_reads_each_weight_in_place_once_per_step(arch):
    # No kernel of the compiled prefill or decode writes a buffer as large as a weight it reads
    # (the edge dialect's permute_copy of every Linear's weight did, every call): each weight
    # is read where the backend bound it, by the matmul, the embedding or the norm that uses it.
    from et_copy.backends.aoti import _compile_cache
    from et_copy.backends.aoti._constant_reads import weight_copies_in_code

    _, buffer = exported_program(arch, max_seq_len=MAX_SEQ, pick="device", backend="aoti")
    payloads = aoti_payloads(buffer)
    assert len(payloads) >= 2  # prefill and decode at least
    for payload, state in payloads:
        source = _compile_cache.source_of(payload)
        assert source is not None, "compiled on this machine, so its source is in the cache"
        assert weight_copies_in_code(source, state) == []
    # The check sees the state it is told to leave out: a step reads the KV cache to write its next value.
    assert any(weight_copies_in_code(_compile_cache.source_of(p) or "") for p, _ in payloads)


def test_a_sequence_longer_than_the_program_holds_is_refused_before_running(exported):
    _, buffer, _ = exported
    et_copy.use_simulated_device()
    session = llm.DeviceLLM(buffer).new_session()
    with pytest.raises(ValueError, match=f"holds {MAX_SEQ}"):
        session.generate(list(range(1, MAX_SEQ)), 4)
    assert session.position == 0


def test_a_prompt_bound_of_2_exports_a_static_prefill_and_gives_transformers_tokens():
    # torch.export's Dim refuses min == max (export_llm failed with its
    # AssertionError): the bound's one length is exported as a static prefill.
    model, buffer = exported_program("qwen3", max_seq_len=12, max_prompt_len=2)
    et_copy.use_simulated_device()
    session = llm.DeviceLLM(buffer).new_session()
    assert (session.max_prompt_len, session.max_seq_len) == (2, 12)
    run = session.generate(PROMPT, 6)
    assert run.tokens == llm.eager_generate(model, PROMPT, 6)
    assert [(s.kind, s.tokens_in) for s in run.steps[:3]] == [(llm.PREFILL, 2), (llm.PREFILL, 2), (llm.DECODE, 1)]


def test_a_program_without_prefill_and_decode_is_refused():
    from et_copy.export import export_device_program
    from et_copy.tools.models import RoundTrip

    program = export_device_program(RoundTrip(), RoundTrip.example_inputs(), insert_copies=False)
    with pytest.raises(ValueError, match="must have methods 'prefill' and 'decode'"):
        llm.DeviceLLM(program.buffer)


def test_tiny_model_rejects_an_unknown_architecture_and_leaves_the_rng_alone():
    state = torch.random.get_rng_state()
    llm.tiny_model("llama")
    assert torch.equal(torch.random.get_rng_state(), state)
    with pytest.raises(ValueError, match="architecture must be one of"):
        llm.tiny_model("gpt5")


def _command_env(cache_home) -> dict:
    """The environment for a `python -m et_copy generate` child: its program
    cache under the test's tmp dir, never the user's."""
    import os

    return {**os.environ, "XDG_CACHE_HOME": str(cache_home)}


def test_generate_command_prints_device_state_beside_host_state_and_eager_all_equal(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "et_copy", "generate", "--tokens", "8", "--max-seq-len", "32"],
        capture_output=True,
        text=True,
        timeout=600,
        env=_command_env(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = {line[:32].strip(): line[32:].split() for line in proc.stdout.splitlines() if "state" in line[:32]}
    device, host = rows["et_copy.runtime, device state"], rows["executorch.runtime, host state"]
    assert device[2:] == ["0", "8", "True"], proc.stdout  # nothing in (decode_next), the token out, = eager
    assert host[-1] == "True" and int(host[2]) > 100 * 16, proc.stdout  # the whole state crosses, same tokens
    assert "Failed to load" not in proc.stderr and "cpuinfo" not in proc.stderr, proc.stderr  # quiet by default
    # The load is timed, and what it uploaded is the weights and one session's state.
    (load,) = [line for line in proc.stdout.splitlines() if line.startswith("load: ")]
    state = int(re.search(r"(\d+) B of state per session", proc.stdout)[1])
    uploaded, weights = map(int, re.search(r"(\d+) B uploaded \(the weights, (\d+) B", load).groups())
    params = sum(p.numel() * p.element_size() for p in llm.tiny_model("qwen3_moe").parameters())
    assert uploaded - weights == state and abs(weights - params) <= params // 100, (
        load,
        params,
    )  # once, not per method


def test_generate_command_runs_the_compiled_backend_and_gives_transformers_tokens(tmp_path):
    import subprocess
    import sys

    from et_copy.backends.aoti import _compile_cache

    env = _command_env(tmp_path / "cache")  # the program cache in tmp; the compiled code is shared
    env[_compile_cache.CACHE_ENV] = str(_compile_cache.cache_dir())
    proc = subprocess.run(
        [sys.executable, "-m", "et_copy", "generate", "--backend", "aoti", "--tokens", "8", "--max-seq-len", "32",
         "--no-baseline"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "backend aoti" in proc.stdout, proc.stdout
    generated = re.search(r"generated \(8 tokens\): ([\d ]+)", proc.stdout)[1].split()
    assert [int(t) for t in generated] == llm.eager_generate(llm.tiny_model("qwen3_moe"), [5, 17, 3, 9], 8)
    row = next(line for line in proc.stdout.splitlines() if line.startswith("et_copy.runtime, device state"))
    assert row[32:].split()[2:4] == ["0", "8"], proc.stdout  # nothing in, the token out, per decoded token


def test_generate_command_takes_a_local_checkpoint_and_its_tokenizer(tmp_path):
    import subprocess
    import sys

    from tokenizers import Tokenizer, models, pre_tokenizers

    model = llm.tiny_model("qwen3")
    tokens = llm.eager_generate(model, [5, 17, 3], 4)
    # The checkpoint's end-of-sequence token is the second one generated (and an id it never picks).
    model.generation_config.eos_token_id = [255, tokens[1]]
    model.save_pretrained(tmp_path)
    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(256)}, unk_token="w0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.save(str(tmp_path / "tokenizer.json"))
    command = [sys.executable, "-m", "et_copy", "generate", "--checkpoint", str(tmp_path), "--text", "w5 w17 w3",
               "--tokens", "4", "--max-seq-len", "16", "--pick", "host"]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=_command_env(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]  # 0: the baselines stopped there too
    expected = " ".join(f"w{t}" for t in tokens[:2])
    assert f"generated (2 tokens, stopped at the end-of-sequence token (--ignore-eos goes on)): {expected}" in (
        proc.stdout
    ), proc.stdout
    proc = subprocess.run(
        [*command, "--ignore-eos", "--no-baseline"],
        capture_output=True, text=True, timeout=600, env=_command_env(tmp_path / "cache"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    expected = " ".join(f"w{t}" for t in tokens)
    assert f"generated (4 tokens): {expected}" in proc.stdout, proc.stdout


def _weight_bytes(buffer: bytes) -> int:
    """The bytes of the distinct weights the program's device delegates read,
    from their records (docs/design.md, "The delegate record")."""
    sizes = {}
    start = buffer.find(b"et_copy.delegate 2\n")
    while start >= 0:
        header = bytes(buffer[start : buffer.index(b"\npayload\t", start)]).decode()
        for line in header.split("\n"):
            if line.startswith("weight\t"):
                _, _, key, nbytes = line.split("\t")
                sizes[key] = int(nbytes)
        start = buffer.find(b"et_copy.delegate 2\n", start + 1)
    return sum(sizes.values())


def test_the_weights_reach_the_device_once_when_the_program_loads_and_every_method_and_session_shares_them(exported):
    _, buffer, _ = exported
    et_copy.use_simulated_device()
    weights = _weight_bytes(buffer)
    assert weights > 0
    gc.collect()  # earlier tests' programs hold the weights while they live
    before = _stats()
    device = llm.DeviceLLM(buffer)
    first = device.new_session()  # loads prefill, then decode: one upload of each weight
    loaded = _stats()
    assert loaded["h2d_bytes"] - before["h2d_bytes"] == weights + first.state_nbytes
    second = device.new_session()
    other = llm.DeviceLLM(buffer).new_session()  # another load of the same bytes: the weights are resident
    after = _stats()
    assert after["h2d_bytes"] - loaded["h2d_bytes"] == second.state_nbytes + other.state_nbytes
    assert first.generate(PROMPT, 2).tokens == other.generate(PROMPT, 2).tokens
    del first, second, other, device
    gc.collect()
    assert _stats()["bytes_outstanding"] == before["bytes_outstanding"]  # freed with the last user


def test_a_session_dropped_and_a_new_one_made_upload_only_the_state_until_the_program_goes(exported):
    _, buffer, _ = exported
    et_copy.use_simulated_device()
    weights = _weight_bytes(buffer)
    gc.collect()  # earlier tests' programs hold the weights while they live
    before = _stats()
    device = llm.DeviceLLM(buffer)
    first = device.new_session()
    tokens = first.generate(PROMPT, 2).tokens
    del first
    gc.collect()
    with et_copy.counting() as load:
        second = device.new_session()
    assert load.h2d_bytes == second.state_nbytes > 0  # the zero state; no weight crossed again
    assert second.generate(PROMPT, 2).tokens == tokens
    del second
    gc.collect()
    assert _stats()["bytes_outstanding"] - before["bytes_outstanding"] >= weights  # the program keeps them
    del device
    gc.collect()
    assert _stats()["bytes_outstanding"] == before["bytes_outstanding"]  # and they go with it


# Sliding-window attention: a window of llm.SLIDING_WINDOW (8) tokens, and
# sequences that stay within it (3 + 4), cross it while decoding (3 + 16) and
# cross it within one prefill (10 + 16).
SLIDING = ["mistral", "gemma2", "gemma3", "gpt_oss"]
WINDOW_RUNS = [([5, 17, 3], 4), ([5, 17, 3], TOKENS), ([5, 17, 3, 9, 42, 7, 8, 11, 12, 13], TOKENS)]


def _mistral_default_window():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)  # the weights only; tiny_model's configs use the same sizes
    config = MistralConfig(
        vocab_size=256, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, num_hidden_layers=2, max_position_embeddings=256,
    )  # fmt: skip
    assert config.sliding_window == 4096  # the default the issue met: a window wider than the cache
    return llm.prepare(MistralForCausalLM(config))


@pytest.mark.parametrize("arch", SLIDING + ["mistral-default-window"])
def test_the_wrapper_run_eagerly_gives_transformers_tokens_within_and_past_the_sliding_window(arch):
    model = _mistral_default_window() if arch == "mistral-default-window" else llm.tiny_model(arch)
    wrapper = llm.StatefulCausalLM(model, MAX_SEQ).eval()
    assert wrapper.cache.is_sliding.count(True) >= 1
    for prompt, n in WINDOW_RUNS:
        assert wrapper_tokens(wrapper, prompt, n) == llm.eager_generate(model, prompt, n), (prompt, n)


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(("gemma3", "device"), id="gemma3-device"),  # sliding and full layers mixed
        pytest.param(("mistral", "host"), id="mistral-host", marks=pytest.mark.slow),
        pytest.param(("gemma2", "host"), id="gemma2-host", marks=pytest.mark.slow),
        pytest.param(("gpt_oss", "device"), id="gpt_oss-device", marks=pytest.mark.slow),
    ],
)
def sliding_program(request):
    arch, pick = request.param
    return exported_program(arch, max_seq_len=MAX_SEQ, pick=pick)


def test_a_sliding_window_program_generates_transformers_tokens_within_and_past_the_window(sliding_program):
    model, buffer = sliding_program
    et_copy.use_simulated_device()
    device = llm.DeviceLLM(buffer)
    for prompt, n in WINDOW_RUNS:
        run = device.new_session().generate(prompt, n)
        assert run.tokens == llm.eager_generate(model, prompt, n), (prompt, n)
        # The state never crosses; a device pick does not either (decode_next).
        in_bytes = 0 if device.max_top_k is not None else 16
        assert all(s.h2d_bytes == in_bytes for s in run.steps if s.kind == llm.DECODE)


def test_export_llm_refuses_a_model_its_wrapper_computes_differently_naming_the_layer():
    model = llm.tiny_model("llama")
    model.model.layers[1] = StaticCacheQuirk(model.model.layers[1])
    with pytest.raises(llm.UnsupportedModelError, match=r"LlamaForCausalLM \(model_type llama\)") as info:
        llm.export_llm(model, max_seq_len=MAX_SEQ)
    error = info.value
    assert isinstance(error, ValueError)
    assert (error.architecture, error.layer) == ("LlamaForCausalLM (model_type llama)", 1)
    assert "the first decoder layer whose output differs is layer 1" in str(error)
    assert "layer 1 ('full_attention'; et_copy holds its cache as _IndexPutLayer" in str(error)
    assert error.cache_type == "full_attention" and "the model's own cache as DynamicLayer" in str(error)


def test_a_cache_layer_kind_with_no_static_form_is_refused_by_name():
    from transformers import LlamaConfig, LlamaForCausalLM

    # Linear attention with attention beside it in one layer: transformers'
    # "hybrid" layer type, whose keys and values the wrapper does not hold.
    config = LlamaConfig(
        vocab_size=256, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, num_hidden_layers=2, layer_types=["full_attention", "hybrid"],
    )  # fmt: skip
    with pytest.raises(llm.UnsupportedModelError, match="cache layer 1 is 'hybrid'") as info:
        llm.export_llm(llm.prepare(LlamaForCausalLM(config)), max_seq_len=MAX_SEQ)
    assert (info.value.layer, info.value.cache_type) == (1, "hybrid")
    assert "LinearAttentionAndStaticFullAttentionLayer" in str(info.value)


def test_the_command_offers_every_tiny_architecture():
    from et_copy.tools import generate

    (arch,) = [a for a in generate._parser()._actions if a.dest == "arch"]
    assert tuple(arch.choices) == llm.ARCHITECTURES


def test_export_llm_cached_reuses_a_program_only_for_the_same_model_weights_and_settings(tmp_path):
    model = llm.tiny_model("qwen3")
    first = llm.export_llm_cached(model, cache_dir=tmp_path, max_seq_len=16)
    assert not first.hit and first.path.parent == tmp_path and first.path.read_bytes() == first.buffer
    again = llm.export_llm_cached(llm.tiny_model("qwen3"), cache_dir=tmp_path, max_seq_len=16)
    assert again.hit and again.path == first.path and again.buffer == first.buffer
    et_copy.use_simulated_device()
    tokens = llm.DeviceLLM(again.buffer).new_session().generate(PROMPT, 4).tokens
    assert tokens == llm.eager_generate(model, PROMPT, 4)
    # Any change of weights, config or settings is another program.
    from et_copy.llm._cache import cache_key

    key = cache_key(model, {"max_seq_len": 16})
    assert first.path.stem == key
    other_weights = llm.tiny_model("qwen3", seed=1)
    other_config = llm.tiny_model("qwen3")
    other_config.config.rms_norm_eps = 1e-5
    keys = {
        key,
        cache_key(other_weights, {"max_seq_len": 16}),
        cache_key(other_config, {"max_seq_len": 16}),
        cache_key(model, {"max_seq_len": 32}),
        cache_key(model, {"max_seq_len": 16, "pick": "device"}),
    }
    assert len(keys) == 5
    one_weight = llm.tiny_model("qwen3")
    with torch.no_grad():
        one_weight.lm_head.weight[0, 0] += 1e-3
    assert cache_key(one_weight, {"max_seq_len": 16}) != key


def test_the_program_cache_lives_under_xdg_cache_home_or_the_home_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert llm.default_cache_dir() == tmp_path / "et_copy" / "llm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert llm.default_cache_dir() == tmp_path / "home" / ".cache" / "et_copy" / "llm"


# costly: CI time (47 s, a second export); program reuse is also covered by test_export_llm_cached_reuses...
@pytest.mark.costly
def test_generate_command_reuses_its_programs_and_no_cache_exports_again(tmp_path):
    import subprocess
    import sys

    def generate(*extra):
        proc = subprocess.run(
            [sys.executable, "-m", "et_copy", "generate", "--arch", "qwen3", "--pick", "host", "--tokens", "4",
             "--max-seq-len", "16", "--no-baseline", *extra],
            capture_output=True, text=True, timeout=600, env=_command_env(tmp_path),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        lines = proc.stdout.splitlines()
        return lines[0], next(line for line in lines if line.startswith("generated"))

    cache = tmp_path / "et_copy" / "llm"
    first, tokens = generate()
    assert "exported it in" in first
    stored = sorted(cache.iterdir())
    assert len(stored) == 1  # the device-state program (--no-baseline: no host-state baseline to store)
    second, tokens_again = generate()
    assert "reused the program exported before" in second and tokens_again == tokens
    third, tokens_third = generate("--no-cache")
    assert "exported it in" in third and tokens_third == tokens
    assert sorted(cache.iterdir()) == stored  # --no-cache stores nothing
