// The method names of an LLM program that et_copy.llm.export_llm writes and
// its runners read (et_copy.llm's DeviceLLM, examples/executor's --generate):
// owned here once, read by Python through _C (LLM_METHODS).
#pragma once

namespace et_copy::llm {

/// A prompt in one execution: ids [1, T] and positions [T], T >= 2.
inline constexpr const char* kPrefill = "prefill";
/// One token: id [1, 1] and position [1].
inline constexpr const char* kDecode = "decode";
/// pick="device": decodes the last pick at the position after it; no input.
inline constexpr const char* kDecodeNext = "decode_next";
/// pick="device": temperature, top_k and seed for the picks that follow.
inline constexpr const char* kSetSampling = "set_sampling";
/// Constant methods: the cache length (as executorch's LLM runner names
/// it), the prefill's bound, and the largest top_k set_sampling keeps.
inline constexpr const char* kMaxSeqLen = "get_max_seq_len";
inline constexpr const char* kMaxPromptLen = "get_max_prompt_len";
inline constexpr const char* kMaxTopK = "get_max_top_k";

} // namespace et_copy::llm
