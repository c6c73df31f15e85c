"""et_copy.llm's rules that need no exported program: the tiny models, the
wrapper run eagerly against transformers, the settings export_llm,
StatefulCausalLM and the generate command refuse before exporting. Seconds,
not minutes: tools/mutation/mutant_targets.py runs these first for llm/'s mutants,
before the tests that export (test_llm.py)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

from et_copy import llm  # noqa: E402
from llm_eager import StaticCacheQuirk, wrapper_tokens  # noqa: E402

PROMPT = [5, 17, 3, 9]


@pytest.mark.parametrize("arch", llm.ARCHITECTURES)
def test_every_tiny_architecture_run_through_the_wrapper_gives_transformers_tokens(arch):
    model = llm.tiny_model(arch)
    wrapper = llm.StatefulCausalLM(model, 16).eval()
    expected = llm.eager_generate(model, PROMPT, 6)
    assert wrapper_tokens(wrapper, PROMPT, 6) == expected
    # A second sequence after reset() starts from the zero state again.
    assert wrapper_tokens(wrapper, PROMPT, 6) == expected


def test_a_device_picking_wrapper_feeds_back_its_own_picks_and_decodes_with_no_input():
    model = llm.tiny_model("qwen3_5_moe")  # linear-attention states beside a KV cache
    wrapper = llm.StatefulCausalLM(model, 16, pick="device").eval()
    expected = llm.eager_generate(model, PROMPT, 5)
    with torch.no_grad():
        first = wrapper(torch.tensor([PROMPT]), torch.arange(len(PROMPT)))
        assert first.dtype == torch.int64 and first.shape == (1,)
        tokens = [int(first[0])] + [int(wrapper.decode_next()[0]) for _ in range(4)]
    assert tokens == expected
    assert int(wrapper.next_position[0]) == len(PROMPT) + 4  # the position after the last pick


def test_the_wrapper_refuses_settings_it_cannot_honour_and_takes_the_smallest_it_can():
    model = llm.tiny_model("qwen3")
    with pytest.raises(ValueError, match="pick must be one of"):
        llm.StatefulCausalLM(model, 16, pick="cpu")
    with pytest.raises(ValueError, match="max_seq_len must be at least 2, got 1"):
        llm.StatefulCausalLM(model, 1)
    assert llm.StatefulCausalLM(model, 2).max_seq_len == 2
    with pytest.raises(ValueError, match="max_top_k must be at least 1, got 0"):
        llm.StatefulCausalLM(model, 16, pick="device", max_top_k=0)
    assert llm.StatefulCausalLM(model, 16, pick="device", max_top_k=1).max_top_k == 1


def test_a_device_pick_keeps_64_top_k_by_default_and_never_more_than_the_vocabulary():
    model = llm.tiny_model("qwen3")  # vocabulary 256
    assert llm.StatefulCausalLM(model, 16, pick="device").max_top_k == 64
    assert llm.StatefulCausalLM(model, 16, pick="device", max_top_k=256).max_top_k == 256
    assert llm.StatefulCausalLM(model, 16, pick="device", max_top_k=257).max_top_k == 256


def test_export_llm_refuses_a_prompt_bound_outside_2_to_max_seq_len_before_exporting():
    model = llm.tiny_model("qwen3")
    for bad in (1, 17):
        with pytest.raises(ValueError, match=f"max_prompt_len must be in 2..max_seq_len \\(16\\), got {bad}"):
            llm.export_llm(model, max_seq_len=16, max_prompt_len=bad)


MOE = ("qwen3_moe", "qwen3_5_moe", "gpt_oss", "mixtral", "qwen2_moe", "olmoe", "deepseek_v3", "qwen3_next")


@pytest.mark.parametrize("arch", MOE)
def test_a_tiny_moe_routes_by_its_input_and_keeps_the_rest_of_its_classs_initialisation(arch):
    # A zero router ties every expert: the choice would follow a sort's order, not the input.
    model = llm.tiny_model(arch)
    routers = [(n, p) for n, p in model.named_parameters() if n.endswith(("mlp.gate.weight", "router.weight"))]
    assert routers, arch
    for name, p in routers:
        assert bool(p.ne(0).any()), name
    # Only a zero router is drawn again: every other weight is the class's own,
    # so a norm's weight keeps its constant start (ones, or zeros for 1 + w norms).
    norms = [(n, p.detach()) for n, p in model.named_parameters() if n.endswith("norm.weight")]
    assert norms, arch
    for name, p in norms:
        assert bool((p == p.reshape(-1)[0]).all()) and float(p.reshape(-1)[0]) in (0.0, 1.0), name


# The families whose real models run a shared expert beside the routed ones
# (export_llm refuses deepseek_v32, and its tiny model keeps that refusal tested).
SHARED_EXPERTS = ("qwen2_moe", "qwen3_5_moe", "qwen3_next", "deepseek_v3", "deepseek_v32")


@pytest.mark.parametrize("arch", SHARED_EXPERTS)
def test_a_tiny_model_of_a_family_with_shared_experts_has_a_shared_expert_with_weights(arch):
    model = llm.tiny_model(arch)
    shared = [(n, m) for n, m in model.named_modules() if n.endswith(("mlp.shared_expert", "mlp.shared_experts"))]
    assert shared, arch
    for name, module in shared:
        weights = list(module.parameters())
        assert weights and all(p.numel() > 0 for p in weights), name


def test_tiny_model_weights_are_a_function_of_the_seed():
    def weights(model):
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    a, b, c = llm.tiny_model("qwen3_moe"), llm.tiny_model("qwen3_moe"), llm.tiny_model("qwen3_moe", seed=1)
    assert torch.equal(weights(a), weights(b))
    assert not torch.equal(weights(a), weights(c))


def test_a_generations_rates_and_bytes_per_token_count_each_kind_of_step_apart():
    steps = [
        llm.Step(llm.SET_SAMPLING, 0, -1, 0.5, 12, 8),
        llm.Step(llm.PREFILL, 3, 4, 0.25, 48, 1024),
        llm.Step(llm.DECODE, 1, 5, 0.5, 16, 1024),
        llm.Step(llm.DECODE, 1, 6, 1.5, 0, 8),
    ]
    run = llm.Generation([1, 2, 3], tokens=[4, 5, 6], steps=steps)
    assert run.prefill_tokens_per_second == 3 / 0.25  # prompt tokens over the prefills' time
    assert run.decode_tokens_per_second == 2 / 2.0  # one token per decode step
    assert run.decode_bytes_per_token() == (8.0, 516.0)  # the decode steps' mean, nothing else's
    nothing = llm.Generation([1])
    assert nothing.decode_bytes_per_token() == (0.0, 0.0)
    assert nothing.prefill_tokens_per_second != nothing.prefill_tokens_per_second  # NaN: no time measured


class _Exported(Exception):
    """Raised in place of exporting: the command got past its argument checks."""


def _command(monkeypatch, capsys, *argv):
    """`python -m et_copy generate` in this process, up to the export: its
    exit code and stderr, or "exported" when it went on to export."""
    from et_copy.tools import generate as _cli

    def export(*args, **kwargs):
        raise _Exported

    monkeypatch.setattr(llm, "export_llm_cached", export)
    try:
        code = _cli.main(["--arch", "qwen3", *argv])
    except _Exported:
        return "exported"
    return code, capsys.readouterr().err


def test_the_command_takes_prompt_ids_within_the_vocabulary_only(monkeypatch, capsys):
    assert _command(monkeypatch, capsys, "--prompt", "0", "255") == "exported"  # tiny qwen3: 256 ids
    assert _command(monkeypatch, capsys, "--prompt", "3", "256") == (
        2,
        "et_copy generate: prompt ids must be in 0..255\n",
    )
    assert _command(monkeypatch, capsys, "--prompt", "-1")[0] == 2


def test_the_command_generates_16_tokens_by_default_and_needs_room_for_them(monkeypatch, capsys):
    # The default prompt holds 4 ids: 4 + 16 tokens fit 20 positions, not 19.
    assert _command(monkeypatch, capsys, "--max-seq-len", "20") == "exported"
    code, err = _command(monkeypatch, capsys, "--max-seq-len", "19")
    assert code == 2 and "prompt + tokens must be at most --max-seq-len (19)" in err
    assert _command(monkeypatch, capsys, "--max-seq-len", "19", "--tokens", "15") == "exported"


def test_the_refusal_names_the_layer_at_fault_when_the_decoder_does_not_call_its_layers_layers():
    # Not every architecture's decoder has a `layers` list (GPT-2's is `h`):
    # the layer list is then the one with as many entries as the config has layers.
    model = llm.tiny_model("llama")
    model.model.layers[1] = StaticCacheQuirk(model.model.layers[1])
    model.get_decoder = lambda: model  # the causal LM itself: no `layers` attribute
    with pytest.raises(llm.UnsupportedModelError, match="the first decoder layer whose output differs is layer 1"):
        llm.export_llm(model, max_seq_len=16)


def test_a_model_that_leaves_its_cache_unfilled_is_refused_naming_the_transformers_it_needs(monkeypatch):
    # transformers 5.17 (a GPU machine's) did this: its forward did not fill
    # the cache it was given, and the wrapper failed on a None state.
    model = llm.tiny_model("qwen3")
    monkeypatch.setattr(model, "forward", lambda *args, **kwargs: None)
    with pytest.raises(
        llm.UnsupportedModelError,
        match=r"left 4 cache tensors unset \(key_cache_0, value_cache_0, key_cache_1, \.\.\.\)",
    ) as e:
        llm.StatefulCausalLM(model, 16)
    assert "needs transformers 5.24.0" in str(e.value) and e.value.architecture == "Qwen3ForCausalLM (model_type qwen3)"


def test_the_transformers_the_wrapper_names_is_the_llm_extras_pin():
    from pathlib import Path

    import tomllib
    from et_copy.llm._state import SUPPORTED_TRANSFORMERS

    extras = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert [d for d in extras["llm"] if d.startswith("transformers")] == [f"transformers=={SUPPORTED_TRANSFORMERS}"]


def test_a_checkpoints_tokenizer_is_its_tokenizer_json_file_and_none_without_one(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    assert llm.tokenizer_for(tmp_path) is None  # no tokenizer.json
    (tmp_path / "tokenizer.json").mkdir()
    assert llm.tokenizer_for(str(tmp_path)) is None  # a folder of that name is not the file
    (tmp_path / "tokenizer.json").rmdir()
    words = Tokenizer(models.WordLevel({"[UNK]": 0, "one": 1, "two": 2}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.save(str(tmp_path / "tokenizer.json"))
    for path in (tmp_path, str(tmp_path)):  # a PathLike or a str
        tokenizer = llm.tokenizer_for(path)
        assert tokenizer is not None and tokenizer.encode("two one three").ids == [2, 1, 0]


def test_load_model_reads_a_checkpoint_folder_and_builds_a_config_file_from_seed_0(tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    def weights(model):
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    saved = llm.tiny_model("qwen3")
    saved.save_pretrained(tmp_path / "checkpoint")
    for path in (tmp_path / "checkpoint", str(tmp_path / "checkpoint")):  # a PathLike or a str
        loaded = llm.load_model(path)
        assert type(loaded) is type(saved) and not loaded.training
        assert torch.equal(weights(loaded), weights(saved))  # the checkpoint's weights, not new ones
    config = tmp_path / "tiny.json"
    saved.config.to_json_file(str(config))
    caller_rng = torch.random.get_rng_state()
    built = llm.load_model(config)
    assert torch.equal(torch.random.get_rng_state(), caller_rng)  # the caller's RNG is left alone
    assert type(built) is type(saved) and not built.training
    with torch.random.fork_rng():
        for seed in (0, 1):
            torch.manual_seed(seed)
            drawn = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(config)))
            assert torch.equal(weights(built), weights(drawn)) == (seed == 0), seed


def _chat_checkpoint(folder):
    """A tiny qwen3 checkpoint with a word-level tokenizer and a chat template whose turn ends at w2."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers

    llm.tiny_model("qwen3").save_pretrained(folder)
    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(256)}, unk_token="w0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.save(str(folder / "tokenizer.json"))
    template = "{% for m in messages %}w7 {{ m['content'] }} w2 {% endfor %}{% if add_generation_prompt %}w8{% endif %}"
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "w2", "chat_template": template}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def test_chat_puts_the_message_in_the_checkpoints_template_and_stops_at_its_end_of_turn(tmp_path):
    from et_copy.tools import generate as _cli

    _chat_checkpoint(tmp_path)
    args = _cli._parser().parse_args(["--checkpoint", str(tmp_path), "--chat", "w5 w17", "--max-seq-len", "32"])
    inputs = _cli._inputs(args)
    assert inputs.prompt == [7, 5, 17, 2, 8]  # the user's turn, closed, and the assistant's opened
    assert 2 in inputs.eos  # the template's end of turn
    ignored = _cli._parser().parse_args(
        ["--checkpoint", str(tmp_path), "--chat", "w5", "--max-seq-len", "32", "--ignore-eos"]
    )
    assert _cli._inputs(ignored).eos == []


def test_chat_needs_a_checkpoint_with_a_template_and_excludes_text(monkeypatch, capsys, tmp_path):
    assert (
        _command(monkeypatch, capsys, "--chat", "hi")[1]
        == "et_copy generate: --chat needs --checkpoint (its chat template and tokenizer)\n"
    )
    llm.tiny_model("qwen3").save_pretrained(tmp_path)
    from et_copy.tools import generate as _cli

    code = _cli.main(["--checkpoint", str(tmp_path), "--chat", "hi", "--text", "hi"])
    assert code == 2 and "pass --text or --chat, not both" in capsys.readouterr().err


def test_the_default_backend_compiles_a_model_of_64_mib_or_more_only():
    from et_copy.tools import generate as _cli

    assert _cli._parser().parse_args([]).backend == "auto"
    assert _cli._chosen_backend("auto", llm.tiny_model("qwen3")) == "simulated"  # seconds to export, no compile
    big = torch.nn.Linear(4096, 4096, bias=False)  # 64 MiB of fp32
    assert _cli._chosen_backend("auto", big) == "aoti"
    smaller = torch.nn.Linear(4096, 4095, bias=False)
    assert _cli._chosen_backend("auto", smaller) == "simulated"
    assert _cli._chosen_backend("simulated", big) == "simulated"  # a word the user gave stays
