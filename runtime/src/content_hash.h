// FNV-1a (64-bit) over bytes: the simulated backend's key for a nested
// program's shared scratch (a collision only costs a scratch; the bytes are
// compared too), and half of the AOTI backend's key for a loaded model.
#pragma once

#include <cstddef>
#include <cstdint>

namespace et_copy::internal {

inline uint64_t fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = 14695981039346656037ull; // the offset basis
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ p[i]) * 1099511628211ull; // the 64-bit FNV prime
  }
  return h;
}

} // namespace et_copy::internal
