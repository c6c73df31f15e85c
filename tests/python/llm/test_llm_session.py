"""et_copy.llm's Session and DeviceLLM rules on an eager stand-in for the
runtime (seconds, no export): each method runs StatefulCausalLM eagerly, so
what is checked is Session's own logic, edge by edge: how a prompt is cut
into prefills and decodes, the sequence's bound on both sides, which
sampling settings are refused or sent and when, eos, and what DeviceLLM
requires of a program. test_llm.py runs the same rules on exported programs."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

import et_copy  # noqa: E402
from et_copy import llm  # noqa: E402

PROMPT = [5, 17, 3, 9]


@pytest.fixture(autouse=True)
def _counted():
    et_copy.use_simulated_device()  # Session counts each step's copies on the device's allocator


class _Meta:
    def __init__(self, dtype):
        self.dtype = dtype

    def output_tensor_meta(self, i):
        if i != 0:
            raise IndexError(f"output {i} of a method with one output")
        return self

    def torch_dtype(self):
        return self.dtype


class _Method:
    def __init__(self, name, run, dtype, calls):
        self.name, self.run, self.calls = name, run, calls
        self.metadata = _Meta(dtype)

    def execute(self, inputs):
        self.calls.append((self.name, [t.tolist() for t in inputs]))
        with torch.no_grad():
            return [self.run(*inputs)]


class _EagerSession:
    """What Session needs of et_copy.runtime's Session, run on the wrapper eagerly."""

    def __init__(self, wrapper: llm.StatefulCausalLM) -> None:
        self.wrapper = wrapper
        self.calls: list = []
        out = torch.int64 if wrapper.pick == "device" else torch.float32
        self.methods = {
            llm.PREFILL: (wrapper, out),
            llm.DECODE: (wrapper, out),
            llm.DECODE_NEXT: (wrapper.decode_next, out),
            llm.SET_SAMPLING: (wrapper.set_sampling, torch.int64),
        }
        self.state_nbytes = sum(getattr(wrapper, n).nbytes for n in wrapper.state_names)

    def load_method(self, name):
        run, dtype = self.methods[name]
        return _Method(name, run, dtype, self.calls)

    def reset(self):
        self.calls.append(("reset", []))
        self.wrapper.reset()


def _session(pick="host", max_seq_len=16, max_prompt_len=8, *, set_sampling=True, arch="qwen3"):
    wrapper = llm.StatefulCausalLM(llm.tiny_model(arch), max_seq_len, pick=pick)
    methods = {llm.PREFILL, llm.DECODE}
    if pick == "device":
        methods |= {llm.DECODE_NEXT} | ({llm.SET_SAMPLING} if set_sampling else set())
    runtime = _EagerSession(wrapper)
    max_top_k = wrapper.max_top_k if pick == "device" else None
    return llm.Session(runtime, max_seq_len, max_prompt_len, max_top_k, frozenset(methods)), runtime


def _ran(runtime):
    """(method, token count, first position) of each execution since the last look."""
    out = [(name, len(inputs[1]) if len(inputs) == 2 else 0, inputs[1][0] if len(inputs) == 2 else None)
           for name, inputs in runtime.calls]  # fmt: skip
    runtime.calls.clear()
    return out


def test_a_prompt_runs_as_prefills_of_up_to_the_bound_and_a_last_single_token_as_a_decode():
    session, runtime = _session(max_prompt_len=2)
    P, D = llm.PREFILL, llm.DECODE
    cases = [
        (5, [(P, 2, 0), (P, 2, 2), (D, 1, 4)]),
        (4, [(P, 2, 0), (P, 2, 2)]),
        (2, [(P, 2, 0)]),
        (1, [(D, 1, 0)]),
    ]
    for n, expected in cases:
        session.reset()
        _ran(runtime)
        steps = session.feed(list(range(3, 3 + n)))
        assert _ran(runtime) == expected, n
        assert [(s.kind, s.tokens_in) for s in steps] == [(k, c) for k, c, _ in expected]
        assert session.position == n
    session, runtime = _session(max_prompt_len=3)
    session.feed([3, 4, 5])
    assert _ran(runtime) == [(P, 3, 0)]  # a prompt of exactly the bound: one prefill


@pytest.mark.parametrize("pick", ["host", "device"])
def test_generate_gives_transformers_tokens_and_decodes_each_but_the_last(pick):
    session, runtime = _session(pick)
    expected = llm.eager_generate(session_model(runtime), PROMPT, 5)
    run = session.generate(PROMPT, 5)
    assert run.tokens == expected
    decode = llm.DECODE_NEXT if pick == "device" else llm.DECODE
    assert [name for name, _, _ in _ran(runtime)] == [llm.PREFILL] + [decode] * 4
    assert session.position == len(PROMPT) + 4
    assert [s.kind for s in run.steps] == [llm.PREFILL] + [llm.DECODE] * 4
    assert [s.token for s in run.steps] == expected
    # One token: the prefill's pick, nothing decoded; none: the prompt is still fed.
    session.reset()
    assert session.generate(PROMPT, 1).tokens == expected[:1] and session.position == len(PROMPT)
    session.reset()
    assert session.generate(PROMPT, 0).tokens == [] and session.position == len(PROMPT)


def session_model(runtime):
    return runtime.wrapper.model


def test_generate_stops_at_the_end_token_it_is_given():
    session, runtime = _session()
    expected = llm.eager_generate(session_model(runtime), PROMPT, 5)
    assert session.generate(PROMPT, 5, eos_token_id=expected[0]).tokens == expected[:1]
    session.reset()
    assert session.generate(PROMPT, 5, eos_token_id=expected[2]).tokens == expected[:3]
    session.reset()
    assert session.generate(PROMPT, 5, eos_token_id=-1).tokens == expected


def test_a_sequence_may_fill_the_program_and_not_one_token_more():
    # max_seq_len 8, a prompt of 4: 5 tokens need 8 positions (the last is not fed back), 6 need 9.
    session, runtime = _session(max_seq_len=8)
    assert len(session.generate(PROMPT, 5).tokens) == 5 and session.position == 8
    session.reset()
    with pytest.raises(ValueError, match="would reach 9 tokens; the program holds 8"):
        session.generate(PROMPT, 6)
    assert session.position == 0
    assert session.generate(list(range(1, 9)), 0).tokens == []  # a prompt of exactly 8
    session.reset()
    _ran(runtime)
    with pytest.raises(ValueError, match="would reach 9 tokens; the program holds 8"):
        session.generate(list(range(1, 10)), 0)
    # feed, which generate calls, checks each execution too: nothing runs past the end.
    session.feed(list(range(1, 8)))
    _ran(runtime)
    with pytest.raises(ValueError, match="would reach 9 tokens; the program holds 8"):
        session.feed([1, 2])
    assert _ran(runtime) == [] and session.position == 7
    session.feed([1])
    assert session.position == 8


@pytest.mark.parametrize("pick", ["host", "device"])
def test_sampling_settings_are_refused_outside_their_domains_and_taken_at_their_edges(pick):
    session, _ = _session(pick)
    bound = 64 if pick == "device" else None

    def takes(**settings):
        session.reset()
        return len(session.generate(PROMPT, 1, **settings).tokens) == 1

    for bad, match in [
        (dict(temperature=-0.5), "temperature must be >= 0, got -0.5"),
        (dict(temperature=math.nan), "temperature must be >= 0"),
        (dict(temperature=1.0, top_k=0), "top_k must be in .*, got 0"),
        (dict(temperature=1.0, seed=-1), r"seed must be in 0..2\*\*63-1, got -1"),
        (dict(temperature=1.0, seed=2**63), r"seed must be in 0..2\*\*63-1, got 9223372036854775808"),
        (dict(top_k=0), "top_k must be in .*, got 0"),  # refused greedy too: the settings are checked first
    ]:
        with pytest.raises(ValueError, match=match):
            session.generate(PROMPT, 1, **bad)
        assert session.position == 0
    assert takes(temperature=0.0) and takes(temperature=-0.0) and takes(temperature=1e-6)
    assert takes(temperature=1.0, top_k=1) and takes(temperature=1.0, seed=0) and takes(temperature=1.0, seed=2**63 - 1)
    if bound is None:
        assert takes(temperature=1.0, top_k=10_000)  # logits on the host: any top_k
    else:
        assert takes(temperature=1.0, top_k=bound)
        with pytest.raises(ValueError, match=r"top_k must be in 1..64 \(export_llm's max_top_k\), got 65"):
            session.generate(PROMPT, 1, temperature=1.0, top_k=bound + 1)


def test_a_device_program_without_set_sampling_refuses_to_sample_and_stays_greedy():
    session, runtime = _session("device", set_sampling=False)
    with pytest.raises(ValueError, match="picks greedily on the device and cannot sample"):
        session.generate(PROMPT, 2, temperature=0.5)
    assert session.position == 0
    expected = llm.eager_generate(session_model(runtime), PROMPT, 3)
    assert session.generate(PROMPT, 3, top_k=5, seed=1).tokens == expected  # greedy: top_k and seed change nothing


def test_settings_go_to_the_device_only_when_they_change_and_reset_means_greedy():
    session, runtime = _session("device")
    P, S, N = llm.PREFILL, llm.SET_SAMPLING, llm.DECODE_NEXT

    def run(prompt, n, **settings):
        steps = session.generate(prompt, n, **settings).steps
        return [s.kind for s in steps], [name for name, *_ in _ran(runtime)]

    assert run(PROMPT, 1) == ([P], [P])  # greedy from the start: nothing to set
    kinds, names = run([4], 2, temperature=0.9, top_k=20, seed=3)
    assert kinds[0] == S and names[:1] == [S]
    assert run([4], 1, temperature=0.9, top_k=20, seed=3)[1] == [llm.DECODE]  # the same settings: not sent again
    assert run([4], 1, temperature=0.9, top_k=20, seed=4)[1] == [S, llm.DECODE]  # another seed is a change
    assert run([4], 1, temperature=0.9, top_k=21, seed=4)[1] == [S, llm.DECODE]
    assert run([4], 1, temperature=0.8, top_k=21, seed=4)[1] == [S, llm.DECODE]
    assert run([4], 2)[1] == [S, llm.DECODE, N]  # back to greedy: sent
    session.reset()
    runtime.calls.clear()
    assert run(PROMPT, 1) == ([P], [P])  # reset: the device holds greedy again
    # The settings' inputs: temperature float32, top_k and seed int64, one item each (a float32 and two int64).
    step = session.generate([4], 1, temperature=0.5, top_k=2, seed=9).steps[0]
    assert (step.kind, step.tokens_in, step.token) == (S, 0, -1)  # no token goes in or comes out
    assert runtime.calls[0] == (S, [[0.5], [2], [9]])
    runtime.calls.clear()
    session.generate([4], 1)
    assert runtime.calls[0] == (S, [[0.0], [0], [0]])  # greedy is what reset leaves: zeros


def test_a_prompt_and_a_token_count_outside_their_domains_are_refused_before_running():
    session, runtime = _session()
    with pytest.raises(ValueError, match="the prompt must hold at least one token"):
        session.generate([], 1)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0, got -1"):
        session.generate(PROMPT, -1)
    assert runtime.calls == [] and session.position == 0


def test_a_seed_picks_the_tokens_and_none_draws_a_new_seed_each_run():
    session, _ = _session()

    def run(seed):
        session.reset()
        return session.generate(PROMPT, 8, temperature=5.0, seed=seed).tokens

    assert run(3) == run(3) != run(4)
    with torch.random.fork_rng():
        torch.manual_seed(0)  # the draws of this test only
        assert run(None) != run(None)


def test_a_sampled_run_picks_the_same_tokens_on_the_host_and_on_the_device():
    for settings in (
        dict(temperature=0.9, seed=3),
        dict(temperature=0.9, top_k=20, seed=3),
        dict(temperature=2.0, top_k=1, seed=5),
    ):
        runs = []
        for pick in ("host", "device"):
            session, _ = _session(pick)
            runs.append(session.generate(PROMPT, 6, **settings).tokens)
        assert runs[0] == runs[1], settings
    session, runtime = _session("host")
    greedy = llm.eager_generate(session_model(runtime), PROMPT, 6)
    assert session.generate(PROMPT, 6, temperature=2.0, top_k=1, seed=5).tokens == greedy  # top-1: greedy
    session.reset()
    assert session.generate(PROMPT, 6, temperature=2.0, seed=5).tokens != greedy


class _Program:
    def __init__(self, constants: dict[str, int], extra=()):
        self.constants = constants
        self.method_names = [llm.PREFILL, llm.DECODE, *constants, *extra]

    def load_method(self, name):
        value = self.constants[name]
        return _Method(name, lambda: torch.tensor([value]), torch.int64, [])


def test_a_program_needs_prefill_decode_and_its_two_length_constants():
    good = {llm.MAX_SEQ_LEN: 32, llm.MAX_PROMPT_LEN: 8}
    device = llm.DeviceLLM(_Program(good))
    assert (device.max_seq_len, device.max_prompt_len, device.max_top_k) == (32, 8, None)
    assert llm.DeviceLLM(_Program({**good, llm.MAX_TOP_K: 16})).max_top_k == 16
    for missing in good:
        with pytest.raises(ValueError, match=rf"lacks the constant methods \['{missing}'\]"):
            llm.DeviceLLM(_Program({k: v for k, v in good.items() if k != missing}))
    with pytest.raises(ValueError, match="lacks the constant methods"):
        llm.DeviceLLM(_Program({}))
    for kept in (llm.PREFILL, llm.DECODE):
        program = _Program(good)
        program.method_names = [n for n in program.method_names if n != kept]
        with pytest.raises(ValueError, match=f"must have methods '{llm.PREFILL}' and '{llm.DECODE}'"):
            llm.DeviceLLM(program)
