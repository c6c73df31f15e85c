"""GGUF checkpoints (et_copy.llm.load_gguf): small files written here from
tiny seeded transformers models with the gguf package's own writer and
quantizers (nothing downloaded). Q8_0, Q4_0 and Q4_1 weights keep the
file's integers and scales bit for bit; the model's logits equal
transformers' own dequantized run of the same file; every refusal names the
tensor; the compiled backend generates the same tokens."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # transformers' own GGUF loading, the reference, needs it

import et_copy  # noqa: E402
from et_copy import llm  # noqa: E402

Q = gguf.GGMLQuantizationType
KEPT = ("Q8_0", "Q4_0", "Q4_1")
PROMPT = [5, 17, 3, 9, 42]
TOKENS = 8


def _qwen3():
    # transformers' qwen3 GGUF config sets no head_dim: its default (128) is the one a file can carry.
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=256, hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=128,
        intermediate_size=128, num_hidden_layers=2, max_position_embeddings=256, tie_word_embeddings=False,
    )  # fmt: skip
    return llm.prepare(Qwen3ForCausalLM(config))


def _llama(tied: bool):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    config = LlamaConfig(
        vocab_size=256, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, num_hidden_layers=2, max_position_embeddings=256, tie_word_embeddings=tied,
    )  # fmt: skip
    return llm.prepare(LlamaForCausalLM(config))


MODELS = {"llama": lambda: _llama(False), "llama_tied": lambda: _llama(True), "qwen3": _qwen3}


def _llama_permute(weights: np.ndarray, n_head: int, n_kv: int) -> np.ndarray:
    # llama.cpp's convert_hf_to_gguf.py reorders the llama family's q/k rows; transformers undoes it.
    n_head = n_kv if n_kv != n_head else n_head
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def write_gguf(
    model, path, qtype: str, *, types: dict[str, str] | None = None, drop=(), config_overrides=None, vocab=False
):
    """``model`` as llama.cpp writes it: 2-d and 3-d weights (experts) in
    ``qtype`` (``types`` overrides by GGUF name), the rest F32. Returns
    {gguf name: (type, bytes)}."""
    config = model.config
    arch = {"qwen3_moe": "qwen3moe"}.get(config.model_type, config.model_type)
    writer = gguf.GGUFWriter(str(path), arch)
    c = {
        "context_length": config.max_position_embeddings, "embedding_length": config.hidden_size,
        "block_count": config.num_hidden_layers, "feed_forward_length": config.intermediate_size,
        "head_count": config.num_attention_heads, "head_count_kv": config.num_key_value_heads,
        **(config_overrides or {}),
    }  # fmt: skip
    writer.add_context_length(c["context_length"])
    writer.add_embedding_length(c["embedding_length"])
    writer.add_block_count(c["block_count"])
    writer.add_feed_forward_length(c["feed_forward_length"])
    writer.add_head_count(c["head_count"])
    writer.add_head_count_kv(c["head_count_kv"])
    if arch == "llama":
        writer.add_rope_dimension_count(config.head_dim)
    writer.add_key_length(config.head_dim)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_vocab_size(config.vocab_size)
    writer.add_bool(f"{arch}.et_copy_test_flag", True)  # a 1-byte value the header walk must step over
    if arch == "qwen3moe":
        writer.add_expert_count(config.num_experts)
        writer.add_expert_used_count(config.num_experts_per_tok)
        writer.add_expert_feed_forward_length(config.moe_intermediate_size)
    if vocab:  # a byte-level BPE vocabulary of 256 tokens: the bytes, the last one traded for the merge "hi"
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("default")
        writer.add_token_list([*list(bytes_to_unicode().values())[:255], "hi"])
        writer.add_token_merges(["h i"])
        writer.add_token_scores([0.0] * 256)
        writer.add_token_types([1] * 256)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
    arch_id = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch)
    names = gguf.get_tensor_name_map(arch_id, config.num_hidden_layers)
    written = {}
    for name, array in _gguf_tensors(model, names):
        if name in drop:
            continue
        if arch == "llama" and ".attn_q." in name:
            array = _llama_permute(array, config.num_attention_heads, config.num_attention_heads)
        if arch == "llama" and ".attn_k." in name:
            array = _llama_permute(array, config.num_attention_heads, config.num_key_value_heads)
        kind = (types or {}).get(name, qtype if array.ndim >= 2 and "gate_inp" not in name else "F32")
        data = gguf.quants.quantize(array, Q[kind])
        writer.add_tensor(name, data, raw_dtype=Q[kind])
        written[name] = (kind, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return written


def _gguf_tensors(model, names):
    """(GGUF name, float32 array) of each weight, as llama.cpp names and splits them."""
    config = model.config
    for key, value in model.state_dict().items():
        if config.tie_word_embeddings and key == "lm_head.weight":
            continue  # llama.cpp writes output.weight only when it is not the embedding
        array = value.numpy().astype(np.float32)
        block = key.split(".")[2] if key.startswith("model.layers.") else None
        if key.endswith("experts.gate_up_proj"):  # transformers' fused [E, 2I, H]: gate first
            half = array.shape[1] // 2
            yield f"blk.{block}.ffn_gate_exps.weight", np.ascontiguousarray(array[:, :half])
            yield f"blk.{block}.ffn_up_exps.weight", np.ascontiguousarray(array[:, half:])
        elif key.endswith("experts.down_proj"):
            yield f"blk.{block}.ffn_down_exps.weight", array
        else:
            base, suffix = key.rsplit(".", 1)
            yield f"{names.get_name(base)}.{suffix}", array


def transformers_gguf(path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32
    )  # fmt: skip
    return llm.prepare(model)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{(model, qtype): (path, written)} for every model and kept type."""
    root = tmp_path_factory.mktemp("gguf")
    out = {}
    for name, build in MODELS.items():
        model = build()
        for qtype in KEPT:
            path = root / f"{name}-{qtype}.gguf"
            out[name, qtype] = (str(path), write_gguf(model, path, qtype))
    return out


def _blocks_of(kind: str, data: np.ndarray):
    """(q as stored, d, m) from the file's bytes, block by block, as ggml.h lays them out."""
    block = {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20}[kind]
    b = data.reshape(data.shape[0], -1, block)
    d = torch.from_numpy(b[..., :2].copy()).view(torch.float16).squeeze(-1)
    if kind == "Q8_0":
        return torch.from_numpy(b[..., 2:].copy()).view(torch.int8).reshape(data.shape[0], -1), d, None
    first = 4 if kind == "Q4_1" else 2
    m = torch.from_numpy(b[..., 2:4].copy()).view(torch.float16).squeeze(-1) if kind == "Q4_1" else None
    qs = b[..., first:].astype(np.int16)
    q = np.concatenate([qs & 15, qs >> 4], axis=-1).reshape(data.shape[0], -1)
    return torch.from_numpy(q.astype(np.int8)), d, m


@pytest.mark.parametrize("qtype", KEPT)
def test_the_weights_are_the_files_integers_and_scales_bit_for_bit(files, qtype):
    from torchao.quantization import IntxUnpackedToInt8Tensor

    path, written = files["qwen3", qtype]
    model = llm.load_gguf(path)
    weight = model.model.layers[1].mlp.down_proj.weight
    assert isinstance(weight, IntxUnpackedToInt8Tensor)
    assert weight.block_size == (1, 32)
    assert weight.target_dtype == (torch.int8 if qtype == "Q8_0" else torch.int4)
    kind, data = written["blk.1.ffn_down.weight"]
    q, d, m = _blocks_of(kind, data)
    offset = 0 if qtype == "Q8_0" else 8
    assert torch.equal(weight.qdata, q - offset)
    assert torch.equal(weight.scale.to(torch.float16).view(torch.int16), d.view(torch.int16))
    assert torch.equal(weight.scale, d.float())  # the fp16 scale, widened: no rounding
    assert torch.equal(weight.zero_point, torch.full_like(weight.zero_point, -8 if qtype == "Q4_1" else 0))
    if qtype == "Q4_1":
        module = model.model.layers[1].mlp.down_proj
        assert torch.equal(module.group_min, m.float())
    # and the values are exactly gguf's own dequantization, element for element
    expected = torch.from_numpy(gguf.quants.dequantize(data, Q[kind]))
    values = weight.dequantize()
    if qtype == "Q4_1":
        values = values + model.model.layers[1].mlp.down_proj.group_min.repeat_interleave(32, dim=-1)
    assert torch.equal(values, expected)


@pytest.mark.parametrize("qtype", KEPT)
def test_the_llama_q_and_k_rows_are_put_back_in_transformers_order(files, qtype):
    # llama.cpp reorders q/k rows; the packed rows (and their scales) follow transformers' reverse permutation.
    path, _ = files["llama", qtype]
    ours, theirs = llm.load_gguf(path), transformers_gguf(path)
    for proj in ("q_proj", "k_proj"):
        mine = getattr(ours.model.layers[0].self_attn, proj)
        values = mine.weight.dequantize()
        if qtype == "Q4_1":
            values = values + mine.group_min.repeat_interleave(32, dim=-1)
        assert torch.equal(values, getattr(theirs.model.layers[0].self_attn, proj).weight)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("qtype", KEPT)
def test_logits_and_greedy_tokens_equal_transformers_dequantized_run(files, name, qtype):
    path, _ = files[name, qtype]
    ours, theirs = llm.load_gguf(path), transformers_gguf(path)
    assert ours.training is False
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        a, b = ours(ids).logits, theirs(ids).logits
    # Q8_0 and Q4_0 dequantize to the same floats; Q4_1's block minimum is summed apart (float order only).
    torch.testing.assert_close(a, b, rtol=0, atol=1e-5 * float(b.abs().max()))
    assert llm.eager_generate(ours, PROMPT, TOKENS) == llm.eager_generate(theirs, PROMPT, TOKENS)


def test_a_tied_embedding_stays_tied_and_quantized(files):
    model = llm.load_gguf(files["llama_tied", "Q4_1"][0])
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert model.lm_head.group_min is model.model.embed_tokens.group_min
    model = llm.load_gguf(files["llama_tied", "Q8_0"][0])
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert type(model.model.embed_tokens.weight).__name__ == "IntxUnpackedToInt8Tensor"


def test_float_tensors_load_as_float32(tmp_path):
    model = _llama(False)
    path = tmp_path / "f16.gguf"
    write_gguf(model, path, "F16", types={"blk.0.ffn_up.weight": "BF16", "blk.1.ffn_up.weight": "F32"})
    ours, theirs = llm.load_gguf(path), transformers_gguf(str(path))
    assert ours.model.layers[0].mlp.up_proj.weight.dtype == torch.float32
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).logits, theirs(ids).logits, rtol=0, atol=1e-6)


def test_another_tensor_type_is_refused_by_name_or_dequantized_on_request(tmp_path):
    model = _llama(False)
    path = tmp_path / "k.gguf"
    write_gguf(model, path, "Q8_0", types={"blk.1.ffn_gate.weight": "Q5_0"})
    with pytest.raises(llm.GGUFError, match=r"et_copy.llm.load_gguf: tensor 'blk.1.ffn_gate.weight' is Q5_0") as e:
        llm.load_gguf(path)
    assert (e.value.tensor, e.value.ggml_type) == ("blk.1.ffn_gate.weight", "Q5_0")
    ours, theirs = llm.load_gguf(path, dequantize=True), transformers_gguf(str(path))
    assert ours.model.layers[1].mlp.gate_proj.weight.dtype == torch.float32  # expanded by gguf's dequantize
    assert torch.equal(ours.model.layers[1].mlp.gate_proj.weight, theirs.model.layers[1].mlp.gate_proj.weight)
    assert type(ours.model.layers[1].mlp.up_proj.weight).__name__ == "IntxUnpackedToInt8Tensor"


def test_a_truncated_file_is_refused_naming_the_tensor_cut(files, tmp_path):
    path, _ = files["llama", "Q8_0"]
    blob = Path(path).read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(blob[: len(blob) - 100])
    with pytest.raises(llm.GGUFError, match=r"is truncated: tensor 'output.weight'") as e:
        llm.load_gguf(cut)
    assert e.value.tensor == "output.weight"
    cut.write_bytes(blob[:200])  # inside the metadata
    with pytest.raises(llm.GGUFError, match="is truncated in metadata entry"):
        llm.load_gguf(cut)


def test_an_unknown_tensor_type_is_refused_by_name(files, tmp_path):
    path, _ = files["llama", "Q8_0"]
    blob = bytearray(Path(path).read_bytes())
    name = b"blk.0.ffn_up.weight"
    at = blob.find(len(name).to_bytes(8, "little") + name)  # its entry in the tensor table: name, dims, type
    type_at = at + 8 + len(name) + 4 + 8 * 2
    assert int.from_bytes(blob[type_at : type_at + 4], "little") == Q.Q8_0
    blob[type_at : type_at + 4] = (250).to_bytes(4, "little")
    bad = tmp_path / "unknown.gguf"
    bad.write_bytes(bytes(blob))
    with pytest.raises(llm.GGUFError, match=r"tensor 'blk.0.ffn_up.weight' has ggml type 250") as e:
        llm.load_gguf(bad, dequantize=True)
    assert e.value.tensor == "blk.0.ffn_up.weight"


def test_metadata_that_disagrees_with_a_tensor_is_refused_by_name(tmp_path):
    model = _llama(False)
    path = tmp_path / "wide.gguf"
    write_gguf(model, path, "Q4_0", config_overrides={"feed_forward_length": 96})
    with pytest.raises(llm.GGUFError, match=r"tensor 'blk.0.ffn_gate.weight' has shape \[128, 64\]") as e:
        llm.load_gguf(path)
    assert e.value.tensor == "blk.0.ffn_gate.weight"
    path = tmp_path / "short.gguf"
    write_gguf(model, path, "Q8_0", drop=("blk.1.ffn_down.weight",))
    with pytest.raises(llm.GGUFError, match=r"holds no tensor for model.layers.1.mlp.down_proj.weight"):
        llm.load_gguf(path)


@pytest.mark.slow  # an AOTInductor compile: minutes on 2 cores
@pytest.mark.parametrize("name, qtype", [("llama", "Q4_0"), ("llama_tied", "Q4_1")])
def test_a_gguf_model_exports_and_generates_its_eager_tokens_on_the_compiled_backend(files, name, qtype):
    # Q4_0 with its embedding quantized; Q4_1's minimums beside the weights, its lm_head tied to the embedding.
    model = llm.load_gguf(files[name, qtype][0])
    expected = llm.eager_generate(model, PROMPT, TOKENS)
    program = llm.export_llm(model, max_seq_len=32, pick="device", backend="aoti")
    et_copy.use_aoti_backend()
    et_copy.use_simulated_device()
    with et_copy.counting() as loading:
        session = llm.DeviceLLM(program.buffer).new_session()
    run = session.generate(PROMPT, TOKENS)
    assert run.tokens == expected
    # The weights travel as the file's integers and scales (and minimums), never as float32:
    # int8 per value (int4 unpacked, until the compiled backend packs it) and a 4-byte scale per 32.
    values = sum(p.numel() for p in model.parameters())
    assert loading.h2d_bytes - session.state_nbytes < 1.5 * values < 4 * values / 2


def test_the_export_cache_key_covers_the_files_integers(files):
    from et_copy.llm._cache import cache_key

    model = llm.load_gguf(files["llama", "Q4_0"][0])
    key = cache_key(model, {})
    assert cache_key(llm.load_gguf(files["llama", "Q4_0"][0]), {}) == key
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.qdata[0, 0] += 1
    assert cache_key(model, {}) != key


class _Exported(Exception):
    """Raised in place of exporting: the command got past its inputs."""


def _command(monkeypatch, capsys, *argv):
    """`python -m et_copy generate` in this process up to the export: (exit code, stderr), or the model and the
    prompt it would export and run."""
    from et_copy.tools import generate as cli

    seen = {}

    def export(model, **kwargs):
        seen["model"] = model
        raise _Exported

    monkeypatch.setattr(llm, "export_llm_cached", export)
    monkeypatch.setattr(cli, "_inputs", _recording(cli._inputs, seen))
    try:
        code = cli.main(list(argv))
    except _Exported:
        return seen["model"], seen["inputs"].prompt
    return code, capsys.readouterr().err


def _recording(inputs, seen):
    def record(args):
        seen["inputs"] = inputs(args)
        return seen["inputs"]

    return record


def test_the_command_takes_a_gguf_checkpoint_and_its_own_vocabulary(monkeypatch, capsys, tmp_path):
    path = tmp_path / "v.gguf"
    write_gguf(_llama(False), path, "Q4_1", vocab=True)
    model, prompt = _command(monkeypatch, capsys, "--checkpoint", str(path), "--text", "hi there", "--tokens", "4")
    assert type(model.model.layers[0].mlp.up_proj.weight).__name__ == "IntxUnpackedToInt8Tensor"
    assert prompt == [255, 220, 83, 71, 68, 81, 68]  # "hi" is its one merge; the rest are the bytes
    assert llm.tokenizer_for(path).decode(prompt) == "hi there"


def test_the_command_refuses_a_file_load_gguf_refuses_and_dequantize_without_one(monkeypatch, capsys, tmp_path):
    path = tmp_path / "k.gguf"
    write_gguf(_llama(False), path, "Q8_0", types={"blk.0.ffn_up.weight": "Q5_1"})
    code, err = _command(monkeypatch, capsys, "--checkpoint", str(path))
    assert code == 2 and "et_copy.llm.load_gguf: tensor 'blk.0.ffn_up.weight' is Q5_1" in err and "--dequantize" in err
    model, _ = _command(monkeypatch, capsys, "--checkpoint", str(path), "--dequantize")
    assert model.model.layers[0].mlp.up_proj.weight.dtype == torch.float32
    code, err = _command(monkeypatch, capsys, "--arch", "qwen3", "--dequantize")
    assert code == 2 and "--dequantize goes with --checkpoint FILE.gguf" in err


def test_moe_experts_load_in_float_and_in_the_files_own_bits_and_q4_1_ones_are_refused_or_dequantized(tmp_path):
    # transformers' qwen3moe GGUF config has no expert width: its default (768) is the one a file can carry.
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(2)
    config = Qwen3MoeConfig(
        vocab_size=256, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, moe_intermediate_size=768, num_hidden_layers=2, num_experts=4, num_experts_per_tok=2,
        max_position_embeddings=256, tie_word_embeddings=False, norm_topk_prob=True,
    )  # fmt: skip
    model = llm.prepare(Qwen3MoeForCausalLM(config))
    ids = torch.tensor([PROMPT])
    path = tmp_path / "moe-f16.gguf"
    write_gguf(model, path, "F16", types={"blk.0.attn_q.weight": "Q4_0"})
    ours, theirs = llm.load_gguf(path), transformers_gguf(str(path))
    assert type(ours.model.layers[0].self_attn.q_proj.weight).__name__ == "IntxUnpackedToInt8Tensor"
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).logits, theirs(ids).logits, rtol=0, atol=1e-6)
    for qtype, bits in (("Q8_0", "int8"), ("Q4_0", "int4")):
        # The experts in the file's own integers and scales: gate's rows then up's, as transformers joins them.
        path = tmp_path / f"moe-{qtype}.gguf"
        written = write_gguf(model, path, qtype)
        ours, theirs = llm.load_gguf(path), transformers_gguf(str(path))
        experts = ours.model.layers[1].mlp.experts
        assert llm.quantized_weights(ours)["model.layers.1.mlp.experts.gate_up_proj"] == bits
        assert "gate_up_proj" not in dict(experts.named_parameters())
        assert torch.equal(experts.gate_up_proj, theirs.model.layers[1].mlp.experts.gate_up_proj)
        assert torch.equal(experts.down_proj, theirs.model.layers[1].mlp.experts.down_proj)
        d = _blocks_of(qtype, written["blk.1.ffn_down_exps.weight"][1])[1]  # the file's fp16 scales
        torch.testing.assert_close(experts.down_proj_scale, d.float().reshape(-1), rtol=0, atol=0)
        with torch.no_grad():
            torch.testing.assert_close(ours(ids).logits, theirs(ids).logits, rtol=0, atol=1e-6)
    # Q4_1's minimums have no place in the experts' storage: a layer with one is refused by name, or expanded
    # on request; the other layers keep their bits.
    path = tmp_path / "moe-q41.gguf"
    write_gguf(model, path, "Q8_0", types={"blk.0.ffn_down_exps.weight": "Q4_1"})
    with pytest.raises(llm.GGUFError, match=r"tensor 'blk.0.ffn_gate_exps.weight' is Q8_0.*dequantize=True"):
        llm.load_gguf(path)
    ours, theirs = llm.load_gguf(path, dequantize=True), transformers_gguf(str(path))
    names = llm.quantized_weights(ours)
    assert "model.layers.0.mlp.experts.gate_up_proj" not in names and "model.layers.1.mlp.experts.down_proj" in names
    for layer in (0, 1):
        for weight in ("gate_up_proj", "down_proj"):
            mine, want = (getattr(m.model.layers[layer].mlp.experts, weight) for m in (ours, theirs))
            assert torch.equal(mine, want)


def test_experts_kept_in_their_bits_only_where_transformers_lays_them_out_as_a_gguf_does():
    # Gate and up concatenated, [E, out, in], no biases (Qwen3-MoE); GPT-OSS's are transposed, interleaved, biased.
    from et_copy.llm import _gguf

    assert _gguf._experts_module(llm.tiny_model("qwen3_moe"), 1) is not None
    assert _gguf._experts_module(llm.tiny_model("gpt_oss"), 0) is None
    assert _gguf._experts_module(llm.tiny_model("qwen3"), 0) is None  # a dense layer has none
