"""GGUF checkpoints (llama.cpp's files) as transformers causal LMs whose
Q8_0, Q4_0 and Q4_1 weights keep the file's own integers and scales.

transformers supplies the config, the tensor names and its conversions (the
llama family's Q/K row order); the quantized blocks never pass through it,
as its own loader would dequantize them. Each block-quantized weight becomes
torchao's ``IntxUnpackedToInt8Tensor`` (what ``IntxWeightOnlyConfig(...,
granularity=PerGroup(32))`` puts on a Linear), the form the compiled
backend's rewrite multiplies by its packed bytes."""

from __future__ import annotations

import mmap
import os
import re
import struct
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from ._models import prepare

if TYPE_CHECKING:
    from transformers import PreTrainedModel

_OP = "et_copy.llm.load_gguf"
_BLOCK = 32  # the one block length of Q8_0, Q4_0 and Q4_1

# ggml type ids (ggml.h); gguf.GGMLQuantizationType names them all.
_F32, _F16, _Q4_0, _Q4_1, _Q8_0, _BF16 = 0, 1, 2, 3, 8, 30
_FLOAT_TYPES = {_F32: torch.float32, _F16: torch.float16, _BF16: torch.bfloat16}
# type id -> (bytes per block, torchao target dtype). Q4_1's minimum rides beside the weight (_Q41Linear).
_INT4: torch.dtype = getattr(torch, "int4")  # torch's stubs do not name it
_KEPT = {_Q8_0: (34, torch.int8), _Q4_0: (18, _INT4), _Q4_1: (20, _INT4)}
KEPT_TYPES = ("Q8_0", "Q4_0", "Q4_1")

# GGUF metadata value types with a fixed width (the spec's gguf_type); 8 is a string, 9 an array.
_VALUE_WIDTH = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class GGUFError(ValueError):
    """A GGUF file :func:`load_gguf` refuses: truncated, a tensor type it does
    not keep (and ``dequantize`` was not asked), an unknown type, or tensors
    that disagree with the file's own metadata. ``tensor`` is the file's name
    of the tensor at fault (None when the fault is not one tensor's);
    ``ggml_type`` its type's name, where that is the fault."""

    def __init__(self, message: str, *, tensor: str | None = None, ggml_type: str | None = None):
        super().__init__(f"{_OP}: {message}")
        self.tensor = tensor
        self.ggml_type = ggml_type


class _TensorInfo:
    __slots__ = ("name", "shape", "type_id", "start", "nbytes")

    def __init__(self, name: str, shape: tuple[int, ...], type_id: int, start: int, nbytes: int):
        self.name, self.shape, self.type_id, self.start, self.nbytes = name, shape, type_id, start, nbytes


def _type_name(type_id: int) -> str:
    from gguf import GGMLQuantizationType

    try:
        return GGMLQuantizationType(type_id).name
    except ValueError:
        return f"unknown ggml type {type_id}"


def _scan(path: str) -> tuple[dict[str, Any], list[_TensorInfo]]:
    """The metadata (scalars and strings; an array as None) and the tensor
    table, each tensor's type known and its bytes inside the file: checked
    before any tensor is read."""
    size = os.path.getsize(path)
    if size < 4:
        raise GGUFError(f"{path} is not a GGUF file ({size} bytes)")
    with open(path, "rb") as f:
        # Mapped, not read: the walk touches only the header's pages (a vocabulary's, at most).
        blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _walk(path, blob, size)
    finally:
        blob.close()


def _walk(path: str, blob: mmap.mmap, size: int) -> tuple[dict[str, Any], list[_TensorInfo]]:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    if blob[:4] != b"GGUF":
        raise GGUFError(f"{path} is not a GGUF file (no GGUF magic bytes)")
    pos = 4  # past the magic bytes
    where = "its header"

    def take(fmt: str) -> tuple:
        nonlocal pos
        n = struct.calcsize(fmt)
        if pos + n > len(blob):
            raise GGUFError(f"{path} is truncated in {where} (byte {pos} of {size})", tensor=None)
        values = struct.unpack_from(fmt, blob, pos)
        pos += n
        return values

    def string() -> str:
        nonlocal pos
        (n,) = take("<Q")
        if pos + n > len(blob):
            raise GGUFError(f"{path} is truncated in {where} (byte {pos} of {size})")
        s = blob[pos : pos + n].decode("utf-8", errors="replace")
        pos += n
        return s

    def skip_value(value_type: int) -> Any:
        nonlocal pos
        if value_type in _VALUE_WIDTH:
            fmt = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[_VALUE_WIDTH[value_type]]
            return take(fmt)[0]
        if value_type == 8:
            return string()
        if value_type == 9:
            element_type, count = take("<IQ")
            for _ in range(count):
                skip_value(element_type)
            return None
        raise GGUFError(f"{path} has a metadata value of unknown type {value_type} in {where}")

    version, tensor_count, kv_count = take("<IQQ")
    if version not in (2, 3):
        raise GGUFError(f"{path} is GGUF version {version}; the gguf package reads versions 2 and 3")
    metadata: dict[str, Any] = {}
    for i in range(kv_count):
        where = f"metadata entry {i}"
        key = string()
        (value_type,) = take("<I")
        metadata[key] = skip_value(value_type)
    tables: list[tuple[str, tuple[int, ...], int, int]] = []
    for i in range(tensor_count):
        where = f"the description of tensor {i}"
        name = string()
        where = f"the description of tensor {name!r}"
        (n_dims,) = take("<I")
        dims = take(f"<{n_dims}Q")
        type_id, offset = take("<IQ")
        tables.append((name, tuple(reversed(dims)), type_id, offset))  # torch order: ggml's ne[0] is the last
    alignment = metadata.get("general.alignment", 32)
    data_start = (pos + alignment - 1) // alignment * alignment
    tensors = []
    for name, shape, type_id, offset in tables:
        try:
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]
        except (ValueError, KeyError):
            raise GGUFError(
                f"tensor {name!r} has ggml type {type_id}, which no version of the gguf package here knows",
                tensor=name, ggml_type=str(type_id),
            ) from None  # fmt: skip
        inner = shape[-1] if shape else 1
        if inner % block:
            raise GGUFError(
                f"tensor {name!r} ({_type_name(type_id)}) has rows of {inner} values, not whole blocks of {block}",
                tensor=name, ggml_type=_type_name(type_id),
            )  # fmt: skip
        nbytes = int(np.prod(shape, dtype=np.int64)) // block * type_size
        if data_start + offset + nbytes > size:
            raise GGUFError(
                f"{path} is truncated: tensor {name!r} ({_type_name(type_id)}, shape {list(shape)}) needs bytes "
                f"{data_start + offset}..{data_start + offset + nbytes} of a file of {size}",
                tensor=name,
            )  # fmt: skip
        tensors.append(_TensorInfo(name, shape, type_id, data_start + offset, nbytes))
    architecture = metadata.get("general.architecture")
    if not isinstance(architecture, str):
        raise GGUFError(f"{path} names no general.architecture in its metadata")
    return metadata, tensors


def _blocks(
    raw: np.ndarray, type_id: int, shape: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(q int8 [N, K], d fp16 [N, K/32], m fp16 [N, K/32] or None) of a
    Q8_0, Q4_0 or Q4_1 tensor, read from its blocks as stored (q in 0..15
    for the 4-bit types)."""
    rows, k = int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]
    block_bytes, _ = _KEPT[type_id]
    blocks = torch.from_numpy(np.array(raw, copy=True).reshape(rows, k // _BLOCK, block_bytes))
    d = blocks[..., 0:2].contiguous().view(torch.float16).squeeze(-1)
    if type_id == _Q8_0:
        return blocks[..., 2:].contiguous().view(torch.int8).reshape(rows, k), d, None
    first = 4 if type_id == _Q4_1 else 2
    m = blocks[..., 2:4].contiguous().view(torch.float16).squeeze(-1) if type_id == _Q4_1 else None
    packed = blocks[..., first:]  # element j in the low nibble of byte j, j + 16 in the high
    q = torch.cat([packed & 0x0F, packed >> 4], dim=-1).view(torch.int8).reshape(rows, k)  # 0..15
    return q, d, m


class _Q41Linear(nn.Linear):
    """A Linear over a Q4_1 weight: ``weight`` holds d·q exactly (qdata q−8
    in −8..7, scale d, zero point −8) and ``group_min`` [N, K/32] each block's
    minimum m, so that the weight is d·q + m, the file's own formula: the
    minimum's term is the sum of each block of 32 inputs times m."""

    group_min: torch.Tensor

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        sums = input.unflatten(-1, (-1, _BLOCK)).sum(-1)
        return nn.functional.linear(input, self.weight, self.bias) + nn.functional.linear(sums, self.group_min)


class _Q41Embedding(nn.Embedding):
    """An Embedding over a Q4_1 table: a row is d·q (``weight``) plus each
    block's minimum (``group_min``), added in float32 as ggml does."""

    group_min: torch.Tensor

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        rows = super().forward(input)
        return rows + nn.functional.embedding(input, self.group_min).repeat_interleave(_BLOCK, dim=-1)


def _quantized_weight(q: torch.Tensor, d: torch.Tensor, m: torch.Tensor | None, type_id: int) -> torch.Tensor:
    from torchao.quantization import IntxUnpackedToInt8Tensor

    _, target = _KEPT[type_id]
    if type_id == _Q8_0:
        qdata, zero = q, torch.zeros(d.shape, dtype=torch.int8)
    else:
        # Q4_0's q−8 is the value's own integer; Q4_1's d·q is (q−8 − (−8))·d, its minimum added beside.
        qdata = q - 8
        zero = torch.full(d.shape, -8 if type_id == _Q4_1 else 0, dtype=torch.int8)
    # fp16 → fp32 is exact: the scale is the file's d, in the model's float type.
    return IntxUnpackedToInt8Tensor(
        qdata, d.float(), zero, target_dtype=target, block_size=(1, _BLOCK), dtype=torch.float32,
        activation_quantization=None,
    )  # fmt: skip


def _row_order(processor: Any, name: str, shape: tuple[int, ...]) -> tuple[bool, torch.Tensor | None]:
    """Whether packed blocks can follow transformers' conversion of tensor
    ``name``, and the row order it gives (None: as stored). Learned by
    converting row numbers: a conversion that only reorders whole rows (the
    llama family's Q/K) is followed; one that rebuilds, transposes, reshapes
    or changes the values is not."""
    if len(shape) != 2:
        return False, None
    probe = np.arange(shape[0] * 2, dtype=np.int64).reshape(shape[0], 2)
    try:
        out = processor.process(weights=probe.copy(), name=name)
    except Exception:  # a conversion that needs the real values or shape: not a reordering of rows
        return False, None
    converted = np.asarray(out.weights)
    if out.name != name or converted.shape != probe.shape:
        return False, None
    rows = converted[:, 0] // 2
    if not np.array_equal(converted, np.stack([2 * rows, 2 * rows + 1], axis=1)):
        return False, None
    if not np.array_equal(np.sort(rows), np.arange(shape[0])):
        return False, None
    return True, None if np.array_equal(rows, np.arange(shape[0])) else torch.from_numpy(rows.copy())


def _config_and_processor(path: str, architecture: str):
    from transformers import AutoConfig
    from transformers.integrations.gguf import GGUF_ARCHS
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES, TENSOR_PROCESSORS

    if architecture in GGUF_ARCHS:
        raise GGUFError(
            f"architecture {architecture!r}: transformers reads it through its packed-block GGUF loader, whose "
            f"conversions et-copy does not follow yet; supported: transformers' GGUF architectures other than "
            f"{sorted(GGUF_ARCHS)}"
        )
    if architecture not in GGUF_SUPPORTED_ARCHITECTURES and architecture.replace("moe", "_moe") not in (
        GGUF_SUPPORTED_ARCHITECTURES
    ):
        raise GGUFError(f"architecture {architecture!r} has no GGUF support in transformers")
    try:
        config = AutoConfig.from_pretrained(
            os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path), local_files_only=True
        )
    except (ValueError, KeyError, OSError) as e:
        raise GGUFError(f"transformers cannot build a config from {path}'s metadata: {e}") from e
    processor_class = TENSOR_PROCESSORS.get(architecture)
    if processor_class is None:
        from transformers.modeling_gguf_pytorch_utils import TensorProcessor

        processor_class = TensorProcessor
    return config, processor_class(config=config.to_dict())


def load_gguf(path: str | os.PathLike, *, dequantize: bool = False) -> PreTrainedModel:
    """A transformers causal LM built from a GGUF file, in eval mode and
    float32, ready to export (:func:`prepare`). Nothing is downloaded.

    Weights of type Q8_0, Q4_0 and Q4_1 (blocks of 32) keep the file's own
    integers and fp16 scales, as torchao's ``IntxUnpackedToInt8Tensor``
    (int8, or int4 in −8..7, groups of 32) on the Linear or Embedding
    holding them: Q8_0 is ``d·q``, Q4_0 ``d·(q−8)``; Q4_1 (``d·q + m``) holds
    ``d·q`` that way (zero point −8) and its fp16 block minimums ``m`` beside
    it, as a zero point cannot hold ``m`` without rounding it (docs/llm.md,
    "GGUF checkpoints"). F32, F16 and BF16 tensors become float32.
    Any other type is refused with the tensor named, unless ``dequantize``,
    which expands it to float32 with the gguf package's own dequantization
    (as it does a kept type where transformers' conversion rebuilds the
    tensor, as it does MoE experts).

    Raises :class:`GGUFError` (a ValueError) naming the tensor for a
    truncated file, an unknown or refused tensor type, or a tensor whose
    shape disagrees with the config the file's metadata gives, or a model
    weight no tensor fills."""
    from gguf import GGUFReader
    from gguf.quants import dequantize as gguf_dequantize
    from transformers import AutoModelForCausalLM
    from transformers.initialization import no_init_weights
    from transformers.modeling_gguf_pytorch_utils import get_gguf_hf_weights_map

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise GGUFError(f"no such file: {path}")
    metadata, infos = _scan(path)
    architecture = metadata["general.architecture"]
    if not dequantize:
        for info in infos:
            if info.type_id not in _FLOAT_TYPES and info.type_id not in _KEPT:
                name = _type_name(info.type_id)
                raise GGUFError(
                    f"tensor {info.name!r} is {name}: et-copy keeps {', '.join(KEPT_TYPES)} in their own bits and "
                    f"reads F32, F16 and BF16; pass dequantize=True (generate --dequantize) to expand {name} to "
                    f"float32",
                    tensor=info.name, ggml_type=name,
                )  # fmt: skip
    config, processor = _config_and_processor(path, architecture)

    generator_state = torch.random.get_rng_state()
    try:
        # Every weight is overwritten or refused below: left uninitialised (as transformers' own
        # from_pretrained leaves them), the float weights a quantized one replaces are never written,
        # so the float model never occupies memory. The rotary buffers are computed as built.
        with no_init_weights():
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    finally:
        torch.random.set_rng_state(generator_state)  # a library leaves the caller's RNG alone
    model.eval()
    names = get_gguf_hf_weights_map(model, processor)
    params = dict(model.named_parameters(remove_duplicate=False))
    try:
        reader = GGUFReader(path)
    except ValueError as e:  # what the walk above does not check (a tensor named twice)
        raise GGUFError(f"the gguf package refuses {path}: {e}") from e
    by_name = {t.name: t for t in reader.tensors}
    filled: set[str] = set()
    parsed: dict[str, Any] = {"tensors": {}}

    def check_shape(info: _TensorInfo, target: str, shape: tuple[int, ...]) -> nn.Parameter:
        param = params[target]
        if tuple(param.shape) != tuple(shape):
            raise GGUFError(
                f"tensor {info.name!r} has shape {list(shape)}, but the config the file's metadata gives "
                f"({type(model).__name__}) wants {list(param.shape)} for {target}",
                tensor=info.name,
            )  # fmt: skip
        return param

    experts: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]] = {}  # (layer, gate|up|down) -> (q, d)
    kept_experts = _kept_experts(model, infos)
    for info in infos:
        raw = by_name[info.name].data
        kept = info.type_id in _KEPT
        part = kept_experts.get(info.name)
        if part is not None:
            q, d, _ = _blocks(raw, info.type_id, info.shape)
            ints = q.reshape(info.shape) - (8 if info.type_id == _Q4_0 else 0)  # Q4_0: d·(q−8)
            experts[part] = (ints, d.reshape(*info.shape[:-1], -1))
            continue
        if kept:
            target = names.get(info.name)
            followable, rows = _row_order(processor, info.name, info.shape)
            if target is None and followable:
                continue  # a tensor transformers does not load either
            owner = _owner(model, target) if target is not None else None
            if followable and owner is not None:
                check_shape(info, target, info.shape)
                q, d, m = _blocks(raw, info.type_id, info.shape)
                if rows is not None:
                    q, d = q[rows], d[rows]
                    m = m[rows] if m is not None else None
                _set_quantized(model, *owner, _quantized_weight(q, d, m, info.type_id), m)
                filled.add(target)
                continue
            if not dequantize:
                if target is not None and owner is None:
                    why = f"it fills {target}, not a Linear's or an Embedding's weight"
                else:
                    why = "transformers' conversion of it does more than rename it or reorder its rows"
                raise GGUFError(
                    f"tensor {info.name!r} is {_type_name(info.type_id)}, and {why}: its blocks cannot follow "
                    f"(MoE experts are kept in Q8_0 and Q4_0); pass dequantize=True (generate --dequantize) "
                    f"to expand it to float32",
                    tensor=info.name, ggml_type=_type_name(info.type_id),
                )  # fmt: skip
        if info.type_id in _FLOAT_TYPES:
            stored = torch.from_numpy(np.array(raw, copy=True).view(np.uint8)).view(_FLOAT_TYPES[info.type_id])
            values = stored.float().reshape(info.shape).numpy()
        else:
            values = gguf_dequantize(np.ascontiguousarray(raw), by_name[info.name].tensor_type).reshape(info.shape)
        try:
            out = processor.process(weights=values, name=info.name, tensor_key_mapping=names, parsed_parameters=parsed)
        except (RuntimeError, ValueError, KeyError) as e:
            raise GGUFError(f"transformers' conversion of tensor {info.name!r} failed: {e}", tensor=info.name) from e
        if out.name is None or out.name not in names:
            continue  # rebuilt into parsed["tensors"] (experts), or a tensor transformers drops
        target = names[out.name]
        param = check_shape(info, target, tuple(out.weights.shape))
        with torch.no_grad():
            param.copy_(torch.from_numpy(np.ascontiguousarray(out.weights)))
        filled.add(target)
    filled.update(_store_experts(model, experts))
    for target, tensor in parsed["tensors"].items():
        if target not in params:
            continue
        param = params[target]
        if tuple(param.shape) != tuple(tensor.shape):
            raise GGUFError(
                f"the tensors converted into {target} have shape {list(tensor.shape)}, but the config wants "
                f"{list(param.shape)}",
                tensor=target,
            )  # fmt: skip
        with torch.no_grad():
            param.copy_(tensor)
        filled.add(target)
    _tie(model, filled)
    missing = [name for name in params if name not in filled]
    if missing:
        raise GGUFError(
            f"{path} holds no tensor for {missing[0]} (of {len(missing)} weights unfilled), which the config its "
            f"metadata gives has",
            tensor=missing[0],
        )  # fmt: skip
    return prepare(model)


_EXPERTS_NAME = re.compile(r"blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight")


def _experts_module(model: nn.Module, layer: int) -> Any:
    """Layer ``layer``'s experts module where its weights are transformers'
    usual ones (gate and up concatenated, [E, out, in], no biases); else None."""
    from ._quantized_experts import is_experts

    try:
        m: Any = model.get_submodule(f"model.layers.{layer}.mlp.experts")
    except AttributeError:  # a dense layer
        return None
    usual = is_experts(m) and m.has_gate and m.is_concatenated and not m.is_transposed and not m.has_bias
    return m if usual else None


def _kept_experts(model: nn.Module, infos: list[_TensorInfo]) -> dict[str, tuple[int, str]]:
    """File name -> (layer, gate|up|down) of the expert tensors kept in their
    own bits: a layer's three, each Q8_0 or Q4_0, for an experts module that
    stores them (:func:`_store_experts`). A layer with any other type goes the
    way of any other tensor: refused by name, or dequantized on request."""
    parts: dict[int, dict[str, str]] = {}
    for info in infos:
        match = _EXPERTS_NAME.fullmatch(info.name)
        if match is not None and info.type_id in (_Q8_0, _Q4_0) and len(info.shape) == 3:
            parts.setdefault(int(match.group(1)), {})[match.group(2)] = info.name
    return {
        name: (layer, kind)
        for layer, names in parts.items()
        if len(names) == 3 and _experts_module(model, layer) is not None
        for kind, name in names.items()
    }


def _store_experts(model: nn.Module, parts: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]) -> set[str]:
    """Stores each layer's expert tensors in the file's own integers and
    scales (``gate_up_proj`` is gate's rows then up's, as transformers
    concatenates them); returns the weights filled. Raises GGUFError naming
    the tensor whose shape the config does not want."""
    from ._quantized_experts import store_experts

    filled = set()
    for layer in sorted({layer for layer, _ in parts}):
        module = _experts_module(model, layer)
        (gate_q, gate_d), (up_q, up_d), down = (parts[layer, kind] for kind in ("gate", "up", "down"))
        prefix = f"model.layers.{layer}.mlp.experts"
        for name, (q, d) in (("gate_up_proj", (torch.cat([gate_q, up_q], 1), torch.cat([gate_d, up_d], 1))),
                             ("down_proj", down)):  # fmt: skip
            want = tuple(getattr(module, name).shape)
            if tuple(q.shape) != want:
                raise GGUFError(
                    f"the experts of layer {layer} have shape {list(q.shape)} for {name}, but the config the "
                    f"file's metadata gives wants {list(want)}",
                    tensor=f"blk.{layer}.ffn_{'gate' if name == 'gate_up_proj' else 'down'}_exps.weight",
                )  # fmt: skip
            # fp16 -> fp32 is exact: the scale is the file's d.
            store_experts(module, name, q, d.float(), torch.float32)
            filled.add(f"{prefix}.{name}")
    return filled


def _owner(model: nn.Module, target: str) -> tuple[str, nn.Module] | None:
    """The Linear or Embedding whose ``weight`` is ``target``; None otherwise."""
    module_name, _, leaf = target.rpartition(".")
    if leaf != "weight":
        return None
    module = model.get_submodule(module_name)
    if type(module) in (nn.Linear, nn.Embedding):
        return module_name, module
    return None


def _set_quantized(
    model: nn.Module, module_name: str, module: nn.Module, weight: torch.Tensor, group_min: torch.Tensor | None
) -> None:
    if group_min is not None:
        replacement: nn.Module
        if isinstance(module, nn.Embedding):
            replacement = _Q41Embedding(module.num_embeddings, module.embedding_dim, module.padding_idx, device="meta")
        else:
            assert isinstance(module, nn.Linear)
            replacement = _Q41Linear(module.in_features, module.out_features, bias=False, device="meta")
            replacement.bias = module.bias
        replacement.register_buffer("group_min", group_min.float())
        model.set_submodule(module_name, replacement)
        module = replacement
    module.weight = nn.Parameter(weight, requires_grad=False)


def _tie(model: PreTrainedModel, filled: set[str]) -> None:
    """A tied lm_head takes the embedding's weight as loaded (quantized, and
    for Q4_1 its block minimums too)."""
    if not getattr(model.config, "tie_word_embeddings", False):
        return
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    if head is None:
        return
    head_name = next(name for name, m in model.named_modules() if m is head)
    if isinstance(embedding, _Q41Embedding):
        replacement = _Q41Linear(embedding.embedding_dim, embedding.num_embeddings, bias=False, device="meta")
        replacement.register_buffer("group_min", embedding.group_min)
        model.set_submodule(head_name, replacement)
        head = replacement
    head.weight = embedding.weight
    filled.add(f"{head_name}.weight")


def gguf_tokenizer(path: str | os.PathLike):
    """The ``tokenizers.Tokenizer`` of a GGUF file's own vocabulary, as
    transformers converts it (``AutoTokenizer.from_pretrained(...,
    gguf_file=...)``), or None when the file has none."""
    from transformers import AutoTokenizer

    path = os.fspath(path)
    metadata, _ = _scan(path)
    if "tokenizer.ggml.model" not in metadata:
        return None
    tokenizer = AutoTokenizer.from_pretrained(
        os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path), local_files_only=True
    )
    return tokenizer.backend_tokenizer
