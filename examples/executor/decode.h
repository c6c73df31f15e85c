// Greedy decoding with a KV cache that stays on the device: the C++ side of
// et_copy.decoding (docs/decoding.md), on a method exported with
// et_copy.decoding.export_resident.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <et_copy/counting_device_allocator.h>
#include <executorch/extension/module/module.h>

/// Runs `method` of `module` (inputs: token int64[1], position int64[1],
/// k_cache, v_cache on the device; outputs: logits on the host, the two
/// caches on the device) over `prompt`, then `steps` generated tokens,
/// writing each step's caches into the other of two device pairs. Prints a
/// line per step (token, time, bytes each way, device bytes outstanding)
/// and the tokens. Returns 0, or 2 with a message on stderr.
int decode(executorch::extension::Module& module, const std::string& method, et_copy::CountingDeviceAllocator& alloc,
           const std::vector<int64_t>& prompt, int steps);
