// Generating tokens from an LLM program of et_copy.llm.export_llm with its
// state on the device: the C++ side of docs/llm.md. Each prompt gets its
// own session (et_copy/sessions.h) on one loaded program; the sessions'
// steps are interleaved to show that their states are apart. Every step
// runs through et_copy::LoadedMethod::execute, as the executor's single run
// and et_copy.runtime do.
#pragma once

#include <cstdint>
#include <vector>

#include <et_copy/counting_device_allocator.h>
#include <et_copy/loaded_program.h>

/// For each prompt, a session that runs the prompt through `prefill` (one
/// execution; `decode` for a single token) and then `tokens` - 1 `decode`
/// steps, greedily: the next token is the argmax of the logits, or the
/// token the program picked on the device. Prints a line per step (session,
/// kind, token, time, bytes each way) and each session's tokens. Returns 0,
/// or 2 with a message on stderr. The sessions are gone when it returns;
/// the scratch they shared stays with `program`'s pool.
int generate_tokens(et_copy::LoadedProgram& program, et_copy::CountingDeviceAllocator& alloc,
                    const std::vector<std::vector<int64_t>>& prompts, int tokens);
