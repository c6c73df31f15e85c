"""What et_copy.llm's constants drive, asserted as behaviour (no export,
seconds): the sampler's noise (known answers: a program exported by one
version and a host pick by another must agree), the check's plan at the
edge of the cache, the refusal's wording when the model's own cache has
fewer layers, the tiny models' routing and rotary settings (and a newer
model's settings shared with its family's older one), and what
importing et_copy.llm loads."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

from et_copy import llm  # noqa: E402
from et_copy.llm import _check  # noqa: E402
from et_copy.llm._sampling import gumbel_noise, noise_bits, pick_token  # noqa: E402

# noise_bits(seed, position, 6) and gumbel_noise(seed, position, 6) as et_copy
# computes them: an exported program's sampler and the host's must keep
# giving these, or a cached program's device picks and a newer host's picks
# part ways. The bits are integer arithmetic, exact on every machine; the
# noise goes through the kernels' vectorised log, which differs by an ULP
# between CPUs (AVX2 and AVX-512 builds of the same torch), so it is pinned
# within a few ULP.
KNOWN_BITS = {
    (0, 0): [5113588, 3954936, 3748822, 7544381, 5221794, 3744766],
    (1, 0): [1172734, 3785647, 4038819, 5661730, 3705685, 4685996],
    (0, 1): [7793129, 4943854, 2070192, 5222983, 1617466, 3579776],
    (2**63 - 1, 2**31): [6024401, 7115907, 7184089, 7431238, 7350785, 5285977],
}
KNOWN_NOISE = {
    (0, 0): [0.7032517194747925, 0.2851386070251465, 0.21637551486492157, 2.2436420917510986, 0.7464773654937744,
             0.21503236889839172],
    (1, 0): [-0.6767822504043579, 0.22858628630638123, 0.31344830989837646, 0.9335767030715942, 0.20210841298103333,
             0.5407763719558716],
    (0, 1): [2.6086745262145996, 0.63727867603302, -0.3359242081642151, 0.7469577789306641, -0.49835631251335144,
             0.16066859662532806],
    (2**63 - 1, 2**31): [1.105466365814209, 1.8045904636383057, 1.8642926216125488, 2.1104612350463867,
                         2.024442672729492, 0.7725865244865417],
}  # fmt: skip
NOISE_ULPS = 4  # what vectorised float32 log may differ by, twice over


def _ulps(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """How many float32 steps apart (at ``want``'s magnitude) ``got`` is."""
    return (got.double() - want.double()).abs() / torch.finfo(torch.float32).eps / want.double().abs().clamp(min=1e-3)


@pytest.mark.parametrize("seed, position", list(KNOWN_BITS))
def test_the_noise_bits_of_a_seed_and_position_are_the_known_answer_exactly(seed, position):
    got = noise_bits(torch.tensor([seed]), torch.tensor([position]), 6)
    assert got.dtype == torch.int64 and got.shape == (1, 6)
    assert got.reshape(-1).tolist() == KNOWN_BITS[(seed, position)]


@pytest.mark.parametrize("seed, position", list(KNOWN_NOISE))
def test_the_noise_of_a_seed_and_position_is_the_known_answer_within_a_few_ulp(seed, position):
    got = gumbel_noise(torch.tensor([seed]), torch.tensor([position]), 6)
    assert got.dtype == torch.float32 and got.shape == (1, 6)
    want = torch.tensor(KNOWN_NOISE[(seed, position)], dtype=torch.float32).reshape(1, 6)
    assert float(_ulps(got, want).max()) <= NOISE_ULPS, (got.tolist(), want.tolist())
    # And from the bits: -log(-log(u)) of the centred 23 bits, in float64, rounded.
    u = (torch.tensor(KNOWN_BITS[(seed, position)], dtype=torch.float64) + 0.5) * 2.0**-23
    exact = (-torch.log(-torch.log(u))).to(torch.float32).reshape(1, 6)
    assert float(_ulps(got, exact).max()) <= NOISE_ULPS, (got.tolist(), exact.tolist())


def test_a_noise_off_by_more_than_the_tolerance_is_told_apart():
    # The tolerance is a few steps, not a loose bound: ten steps away fails it, one passes.
    want = torch.tensor([0.9335767030715942])
    assert float(_ulps(torch.nextafter(want, torch.tensor([2.0])), want)) <= 1
    assert float(_ulps(want * (1 + 10 * torch.finfo(torch.float32).eps), want)) > NOISE_ULPS


def test_sampled_picks_of_known_seeds_are_the_known_answer_and_top_k_edges_hold():
    logits = torch.linspace(-1, 1, 32).reshape(1, 32)  # the largest last

    def pick(seed, temperature=1.0, top_k=0, max_top_k=64):
        return int(
            pick_token(logits, torch.tensor([temperature]), torch.tensor([top_k]), torch.tensor([seed]),
                       torch.tensor([7]), max_top_k)
        )  # fmt: skip

    assert [pick(s) for s in range(8)] == [28, 30, 15, 31, 24, 24, 29, 6]
    for s in range(8):
        assert pick(s, temperature=0.0) == 31  # greedy: the argmax, whatever the seed
        assert pick(s, top_k=1) == 31  # top-1 keeps only the largest
        assert pick(s, top_k=32) == pick(s)  # the whole vocabulary is no limit
        assert pick(s, top_k=3) in (29, 30, 31)  # the 3 largest, and only those
        assert pick(s, top_k=5, max_top_k=4) == pick(s, top_k=4, max_top_k=4)  # clamped to the bound


def _wrapper(max_seq_len):
    return llm.StatefulCausalLM(llm.tiny_model("mistral"), max_seq_len)  # sliding windows of 8 (SLIDING_WINDOW)


def test_the_check_crosses_a_sliding_window_only_where_its_decodes_fit_in_the_cache():
    steps = _check.DECODE_STEPS
    window = 8
    decodes = [1] * steps
    # The prompt ending just before the window (window - 1 tokens), then the
    # decodes crossing it, fit exactly: the plan runs it.
    fits = _wrapper(window - 1 + steps)
    assert {getattr(layer, "sliding_window", None) for layer in fits.cache.layers} == {window}
    assert _check.check_plan(fits, 4) == [[4] + decodes, [4, 3] + decodes]
    # One position less: that sequence does not fit, and only the first prompt runs.
    assert _check.check_plan(_wrapper(window - 2 + steps), 4) == [[4] + decodes]
    # A prompt bound as large as the window's prompt: one chunk; the first prompt fills what decodes leave.
    assert _check.check_plan(fits, 7) == [[7] + decodes]
    # A prompt is cut into chunks of the prompt bound, a last token alone as a decode.
    assert _check.check_plan(fits, 2) == [[2] + decodes, [2, 2, 2, 1] + decodes]


def test_the_check_crosses_windows_of_two_tokens_and_more_but_not_of_one():
    # A window of w is crossed by a prompt of w - 1 tokens: at least one, so w >= 2.
    plans = {}
    for window in (1, 2, 3):
        model = llm.tiny_model("mistral")
        model.config.sliding_window = window
        plans[window] = _check.check_plan(llm.StatefulCausalLM(model, 10), 4)
    decodes = [1] * _check.DECODE_STEPS
    assert plans[1] == [[4] + decodes]
    assert plans[2] == [[4] + decodes, [1] + decodes]
    assert plans[3] == [[4] + decodes, [2] + decodes]


def test_the_check_feeds_each_decode_the_previous_greedy_pick_and_draws_every_prompt():
    # A window of 2 makes a second sequence whose prompt is one token: drawn
    # like any prompt (there is no pick yet), while every decode after a step
    # takes that step's greedy pick, as generate() would.
    model = llm.tiny_model("mistral")
    model.config.sliding_window = 2
    wrapper = llm.StatefulCausalLM(model, 10)
    steps = []
    wrapper.register_forward_hook(lambda _, args, logits: steps.append((args[0].clone(), args[1][0].item(), logits)))
    _check.check_wrapper(wrapper, 4)
    shapes = [(tuple(ids.shape), start) for ids, start, _ in steps]
    assert shapes == [((1, 4), 0)] + [((1, 1), start) for start in (4, 5, 6, 0, 1, 2, 3)]
    for (_, _, before), (ids, start, _) in zip(steps, steps[1:]):
        if start > 0:
            assert ids.item() == int(before.argmax())
    vocab = model.config.vocab_size
    # The single-token prompt is the check's own draw (seeded by its sequence's length), not the last pick.
    assert steps[4][0].item() == torch.randint(vocab, (1, 1), generator=torch.Generator().manual_seed(4)).item()


def test_the_refusal_names_the_models_own_cache_layer_only_where_it_has_one():
    model = llm.tiny_model("qwen3")
    wrapper = llm.StatefulCausalLM(model, 16)
    same, other = torch.zeros(2, 3), torch.ones(2, 3)
    theirs_cache = SimpleNamespace(layers=[SimpleNamespace()])  # the model's cache holds layer 0 only

    def refusal(first_bad_layer):
        ours = [same, same]
        theirs = [same, same]
        theirs[first_bad_layer] = other
        with pytest.raises(llm.UnsupportedModelError) as e:
            _check._refuse(wrapper, theirs_cache, ours, theirs, 0, 4, 1.0, 0.001)
        return str(e.value)

    last = refusal(1)  # its index equals the number of layers the model's cache holds
    assert "the first decoder layer whose output differs is layer 1" in last
    assert "the model's own cache" not in last
    first = refusal(0)
    assert "is layer 0" in first and "the model's own cache as SimpleNamespace" in first


def test_the_tiny_gpt_oss_yarn_factor_is_the_ratio_of_its_two_context_lengths():
    config = llm.tiny_model("gpt_oss").config
    rope = config.rope_parameters
    assert rope["rope_type"] == "yarn"
    assert rope["factor"] * rope["original_max_position_embeddings"] == config.max_position_embeddings


@pytest.mark.parametrize("arch", ["deepseek_v3", "deepseek_v32"])
def test_a_tiny_deepseek_routes_each_token_within_its_top_groups_by_its_input(arch):
    model = llm.tiny_model(arch)
    gates = [m for n, m in model.named_modules() if n.endswith("mlp.gate") and hasattr(m, "num_group")]
    assert gates, arch
    torch.manual_seed(0)
    for gate in gates:
        assert 1 <= gate.topk_group < gate.num_group  # the group limit bites and leaves a group to pick
        per_group = gate.num_experts // gate.num_group
        hidden = torch.randn(64, gate.hidden_dim)
        with torch.no_grad():
            _, weights, experts = gate(hidden)
        groups = experts // per_group
        assert all(len(set(row.tolist())) <= gate.topk_group for row in groups)
        assert bool((weights > 0).all())
        # The input decides: tokens pick different experts, from every group.
        assert len({tuple(sorted(row.tolist())) for row in experts}) > 1
        assert set(groups.reshape(-1).tolist()) == set(range(gate.num_group))


def test_the_tiny_deepseek_v32_indexer_drops_keys_past_its_top_k_and_sums_every_heads_scores():
    # The lightning indexer is what V3.2 adds to V3 (and what export refuses):
    # the tiny one must drop keys within a short sequence, and weigh more than one head.
    model = llm.tiny_model("deepseek_v32")
    indexers = [m for m in model.modules() if type(m).__name__ == "DeepseekV32Indexer"]
    assert len(indexers) == model.config.num_hidden_layers
    topk = model.config.index_topk
    ids = torch.randint(model.config.vocab_size, (1, topk + 4), generator=torch.Generator().manual_seed(0))

    def logits(n, keep):
        for m in indexers:
            m.index_topk = keep
        try:
            with torch.no_grad():
                return model(ids[:, :n]).logits
        finally:
            for m in indexers:
                m.index_topk = topk

    # Up to top-k keys the indexer keeps them all; one more and it drops one.
    assert torch.equal(logits(topk, topk), logits(topk, 10 * topk))
    assert not torch.equal(logits(topk + 1, topk), logits(topk + 1, 10 * topk))
    picks: list[torch.Tensor] = []
    indexers[0].register_forward_hook(lambda _, args, out: picks.append(out.clone()))

    def first_layer_picks():
        picks.clear()
        with torch.no_grad():
            model(ids)
        return picks[0]

    chosen = first_layer_picks()
    heads = indexers[0].weights_proj.weight
    assert heads.shape[0] >= 2  # a sum over heads, as in the real indexer's 64
    for head in range(heads.shape[0]):  # each head, first to last, moves the keys picked
        saved = heads[head].clone()
        with torch.no_grad():
            heads[head].zero_()
        try:
            assert not torch.equal(first_layer_picks(), chosen), head
        finally:
            with torch.no_grad():
                heads[head].copy_(saved)


@pytest.mark.parametrize("arch", llm.ARCHITECTURES + llm.REFUSED_ARCHITECTURES)
def test_a_tiny_models_special_tokens_are_distinct_ids_inside_its_vocabulary(arch):
    # Several configs default to the real vocabulary's ids, which a 256-row embedding cannot hold;
    # and an end token equal to the start or pad token would end a generation where none ended.
    config = llm.tiny_model(arch).config
    ids = [config.bos_token_id, config.eos_token_id, config.pad_token_id]
    given = [i for i in ids if i is not None]
    assert all(0 <= i < config.vocab_size for i in given), ids
    assert len(set(given)) == len(given), ids


# Each tiny model's parameter count (the weights the device receives, 4 B
# each), the mean magnitude of its logits over the docs' prompt, and its
# first 8 greedy tokens after that prompt, under the pinned
# transformers and torch: tiny_model(name) builds the same model in every
# et_copy version, so the docs' table and a cached program (keyed by the
# weights) stay valid. A changed config setting, seed or router draw shows here.
PROMPT = [5, 17, 3, 9, 42]
KNOWN_TINY_MODELS = {
    "qwen3": (106880, 0.12526388949379452, [18, 53, 42, 153, 84, 128, 55, 102]),
    "qwen3_moe": (157056, 0.12975666657730756, [220, 53, 241, 239, 199, 220, 24, 58]),
    "qwen3_5_moe": (178680, 0.12965977389799263, [60, 101, 47, 17, 156, 51, 168, 68]),
    "llama": (106816, 0.12918768431934496, [18, 0, 149, 92, 73, 179, 169, 22]),
    "mistral": (106816, 0.12918768431934496, [18, 0, 149, 92, 73, 179, 169, 22]),
    "gemma2": (90688, 0.12800132342523513, [114, 29, 142, 18, 189, 189, 43, 43]),
    "gemma3": (127904, 0.12735538766239074, [102, 102, 102, 102, 84, 84, 84, 105]),
    "gpt_oss": (108752, 0.12776720828721863, [181, 134, 15, 48, 208, 73, 202, 211]),
    "qwen2": (107072, 0.2539073511075706, [188, 141, 115, 190, 219, 114, 29, 132]),
    "phi3": (106816, 0.12766214295172632, [128, 16, 77, 230, 10, 230, 230, 230]),
    "olmo2": (107008, 0.2602753018107705, [187, 115, 127, 245, 109, 72, 72, 224]),
    "smollm3": (106816, 0.12916441555264555, [18, 0, 167, 57, 73, 179, 228, 203]),
    "mixtral": (107328, 0.1297684742959177, [175, 130, 86, 185, 52, 33, 30, 89]),
    "qwen2_moe": (169664, 0.255674482191489, [54, 95, 95, 85, 171, 95, 127, 115]),
    "olmoe": (157184, 0.1296691417865759, [220, 53, 241, 239, 220, 24, 110, 104]),
    "deepseek_v3": (139168, 0.1306248078254157, [141, 93, 153, 183, 93, 153, 183, 93]),
    "qwen3_next": (178680, 0.129540821258729, [60, 241, 132, 167, 220, 119, 163, 60]),
    "lfm2": (111136, 0.1269998525283654, [144, 122, 45, 245, 96, 229, 143, 240]),
    "falcon_h1": (136984, 0.12524824335944232, [111, 118, 203, 50, 75, 136, 155, 177]),
    "deepseek_v32": (143584, 0.13431547581527353, [204, 123, 72, 212, 234, 18, 183, 170]),
}


def test_every_tiny_model_is_the_known_size_and_gives_the_known_greedy_tokens():
    from et_copy.llm._generate import eager_generate

    assert list(KNOWN_TINY_MODELS) == list(llm.ARCHITECTURES + llm.REFUSED_ARCHITECTURES)
    got = {}
    for arch in KNOWN_TINY_MODELS:
        model = llm.tiny_model(arch)
        with torch.no_grad():
            logits = model(torch.tensor([PROMPT])).logits
        size = sum(p.numel() for p in model.parameters())
        got[arch] = (
            size,
            pytest.approx(float(logits.double().abs().mean()), rel=1e-6),
            eager_generate(model, PROMPT, 8),
        )
    assert got == KNOWN_TINY_MODELS


# A newer model kept beside its family's older one: DeepSeek-V3.2 is V3's latent
# attention plus the lightning indexer, Qwen 3.5 MoE is Qwen3-Next's hybrid MoE.
SIBLINGS = [("deepseek_v3", "deepseek_v32"), ("qwen3_next", "qwen3_5_moe")]


@pytest.mark.parametrize("older, newer", SIBLINGS, ids=[n for _, n in SIBLINGS])
def test_a_tiny_model_kept_beside_its_familys_older_one_shares_every_setting_both_have(older, newer):
    # So the docs' rows for the two (and DeepSeek-V3.2's refusal, which V3 exports) differ by
    # what the newer architecture adds alone: the settings only one config has.
    a = llm.tiny_model(older).config.to_dict()
    b = llm.tiny_model(newer).config.to_dict()
    differing = {k: (a[k], b[k]) for k in sorted(a.keys() & b.keys()) if a[k] != b[k] and k != "model_type"}
    assert differing == {}


def test_importing_et_copy_llm_loads_no_transformers_model_code():
    # The modules name transformers' model classes for type checkers only:
    # the model code (~1 s to import) loads when a model is built.
    code = "import sys, et_copy.llm; print('transformers.modeling_utils' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
