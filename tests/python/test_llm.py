"""LLMs with their state on the device (et_copy.llm): transformers' own
models from tiny seeded configs, exported with their KV caches and
linear-attention states as device mutable buffers, run on et_copy.runtime.
Tokens must equal transformers' generate(); per decode step only ids and
positions go in and logits (or the token) come out; sessions are isolated;
a reset reproduces the first run; state starts through counted h2d copies."""

from __future__ import annotations

import gc

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from et_copy import llm  # noqa: E402

PROMPT = [5, 17, 3, 9, 42]
TOKENS = 16
MAX_SEQ = 32

# (architecture, pick): one dense, one MoE, one hybrid; the MoE picks on the device.
CASES = [("qwen3_moe", "device"), ("qwen3_5_moe", "host"), ("qwen3", "host")]


@pytest.fixture(scope="module", params=CASES, ids=[f"{a}-{p}" for a, p in CASES])
def exported(request):
    arch, pick = request.param
    model = llm.tiny_model(arch)
    program = llm.export_llm(model, max_seq_len=MAX_SEQ, pick=pick)
    return model, program.buffer, pick


@pytest.fixture(scope="module")
def eager_tokens(exported):
    model, _, _ = exported
    return {tuple(p): llm.eager_generate(model, p, TOKENS) for p in (PROMPT, [7, 7, 1])}


def _stats():
    return et_copy.allocator_stats()


def test_tokens_equal_transformers_generate_and_decode_moves_only_ids_positions_and_the_pick(exported, eager_tokens):
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
    for step in decodes:  # an int64 id and position in; the logits or the token out; the state never crosses
        assert (step.h2d_bytes, step.d2h_bytes) == (16, out_bytes), step


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


def test_sampling_is_seeded_and_device_pick_refuses_it(exported):
    _, buffer, pick = exported
    et_copy.use_simulated_device()
    session = llm.DeviceLLM(buffer).new_session()
    if pick == "device":
        with pytest.raises(ValueError, match="picks the token on the device"):
            session.generate(PROMPT, 4, temperature=0.8)
        return
    runs = []
    for seed in (3, 3):
        session.reset()
        runs.append(session.generate(PROMPT, 8, temperature=0.9, top_k=20, seed=seed).tokens)
    assert runs[0] == runs[1]


def test_a_sequence_longer_than_the_program_holds_is_refused_before_running(exported):
    _, buffer, _ = exported
    et_copy.use_simulated_device()
    session = llm.DeviceLLM(buffer).new_session()
    with pytest.raises(ValueError, match=f"holds {MAX_SEQ}"):
        session.generate(list(range(1, MAX_SEQ)), 4)
    assert session.position == 0


def test_a_program_without_prefill_and_decode_is_refused():
    from et_copy.export import export_device_program
    from et_copy.models import RoundTrip

    program = export_device_program(RoundTrip(), RoundTrip.example_inputs(), insert_copies=False)
    with pytest.raises(ValueError, match="must have methods 'prefill' and 'decode'"):
        llm.DeviceLLM(program.buffer)


def test_tiny_model_rejects_an_unknown_architecture_and_leaves_the_rng_alone():
    state = torch.random.get_rng_state()
    llm.tiny_model("llama")
    assert torch.equal(torch.random.get_rng_state(), state)
    with pytest.raises(ValueError, match="architecture must be one of"):
        llm.tiny_model("gpt5")


def test_generate_command_prints_device_state_beside_host_state_and_eager_all_equal():
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "et_copy", "generate", "--tokens", "8", "--max-seq-len", "32"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = {line[:32].strip(): line[32:].split() for line in proc.stdout.splitlines() if "state" in line[:32]}
    device, host = rows["et_copy.runtime, device state"], rows["executorch.runtime, host state"]
    assert device[2:] == ["16", "8", "True"], proc.stdout  # id + position in, the token out, = eager
    assert host[-1] == "True" and int(host[2]) > 100 * 16, proc.stdout  # the whole state crosses, same tokens
    assert "Failed to load" not in proc.stderr and "cpuinfo" not in proc.stderr, proc.stderr  # quiet by default


def test_generate_command_takes_a_local_checkpoint_and_its_tokenizer(tmp_path):
    import subprocess
    import sys

    from tokenizers import Tokenizer, models, pre_tokenizers

    model = llm.tiny_model("qwen3")
    model.save_pretrained(tmp_path)
    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(256)}, unk_token="w0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.save(str(tmp_path / "tokenizer.json"))
    proc = subprocess.run(
        [sys.executable, "-m", "et_copy", "generate", "--checkpoint", str(tmp_path), "--text", "w5 w17 w3",
         "--tokens", "4", "--max-seq-len", "16", "--no-baseline"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    expected = " ".join(f"w{t}" for t in llm.eager_generate(model, [5, 17, 3], 4))
    assert f"generated (4 tokens): {expected}" in proc.stdout, proc.stdout


def _weight_bytes(buffer: bytes) -> int:
    """The bytes of the distinct weights the program's device delegates read,
    from their records (docs/design.md, "The delegate record")."""
    sizes = {}
    start = buffer.find(b"et_copy.delegate 1\n")
    while start >= 0:
        header = bytes(buffer[start : buffer.index(b"\nprogram\t", start)]).decode()
        for line in header.split("\n"):
            if line.startswith("weight\t"):
                _, _, key, nbytes = line.split("\t")
                sizes[key] = int(nbytes)
        start = buffer.find(b"et_copy.delegate 1\n", start + 1)
    return sum(sizes.values())


def test_the_weights_reach_the_device_once_when_the_program_loads_and_every_method_and_session_shares_them(exported):
    _, buffer, _ = exported
    et_copy.use_simulated_device()
    weights = _weight_bytes(buffer)
    assert weights > 0
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
