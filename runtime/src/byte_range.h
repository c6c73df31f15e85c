// Whether a run of bytes lies inside a buffer, in one overflow-free form: the
// reader's bounds on program bytes, a session's check that its state lies in
// its arena, and the simulated device's lookup of a live allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace et_copy::internal {

// The `n` bytes at offset `at` of a buffer of `size` bytes lie inside it
// (the end may be the buffer's end; `at + n` is never formed, so no value
// wraps).
constexpr bool range_within(size_t at, size_t n, size_t size) {
  return at <= size && n <= size - at;
}

// The `n` bytes at `p` lie inside the `size` bytes at `base`.
inline bool bytes_within(const void* p, size_t n, const void* base, size_t size) {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base);
  return a >= b && range_within(a - b, n, size);
}

} // namespace et_copy::internal
