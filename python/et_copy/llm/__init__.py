"""LLMs on the device tensor pipeline.

transformers' causal LMs (dense, MoE, sliding-window, and hybrid models
with linear-attention or convolution layers; :data:`ARCHITECTURES` lists
the ones tested) exported with their KV caches and recurrent states as
device-resident mutable buffers, and generated from on et_copy.runtime with
one session per sequence::

    model = et_copy.llm.tiny_model("qwen3_moe")
    program = et_copy.llm.export_llm(model, max_seq_len=64)
    et_copy.use_simulated_device()
    llm = et_copy.llm.DeviceLLM(program.buffer)
    session = llm.new_session()
    print(session.generate([1, 2, 3], max_new_tokens=16).tokens)

export_llm checks its wrapper against the model's own forward and cache
first, and raises UnsupportedModelError rather than export a model it would
run differently. docs/llm.md has the measured table and what each
architecture needs. :func:`load_gguf` builds a model from a GGUF file, its
Q8_0, Q4_0 and Q4_1 weights kept in the file's own integers and scales.
Importing this module imports transformers and executorch's AOT stack.
"""

from ._cache import CachedProgram, default_cache_dir, export_llm_cached
from ._export import DECODE, DECODE_NEXT, MAX_PROMPT_LEN, MAX_SEQ_LEN, MAX_TOP_K, PREFILL, SET_SAMPLING, export_llm
from ._generate import DeviceLLM, Generation, Session, Step, eager_generate
from ._gguf import GGUFError, load_gguf
from ._models import (
    ARCHITECTURES,
    REFUSED_ARCHITECTURES,
    SLIDING_WINDOW,
    load_model,
    prepare,
    tiny_model,
    tokenizer_for,
)
from ._quantize import SCHEMES, quantize, quantized_weights
from ._sampling import gumbel_noise, pick_token
from ._state import HostStateStep, StatefulCausalLM, UnsupportedModelError

__all__ = [
    "ARCHITECTURES",
    "CachedProgram",
    "DECODE",
    "DECODE_NEXT",
    "DeviceLLM",
    "GGUFError",
    "Generation",
    "HostStateStep",
    "MAX_PROMPT_LEN",
    "MAX_SEQ_LEN",
    "MAX_TOP_K",
    "PREFILL",
    "REFUSED_ARCHITECTURES",
    "SCHEMES",
    "SET_SAMPLING",
    "SLIDING_WINDOW",
    "Session",
    "StatefulCausalLM",
    "Step",
    "UnsupportedModelError",
    "default_cache_dir",
    "eager_generate",
    "export_llm",
    "export_llm_cached",
    "gumbel_noise",
    "load_gguf",
    "load_model",
    "pick_token",
    "prepare",
    "quantize",
    "quantized_weights",
    "tiny_model",
    "tokenizer_for",
]
