// The lock that serialises et-copy's reads and writes of ExecuTorch's
// kernel and allocator registries, which have no locking of their own.
#pragma once

#include <mutex>

namespace et_copy::internal {

std::mutex& registry_mutex();

} // namespace et_copy::internal
