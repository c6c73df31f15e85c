// SHA-256 (FIPS 180-4): the digest a delegate record carries of its payload,
// and the content keys of weights, checked before the bytes are trusted
// (docs/runtime.md, "Untrusted programs"). Streaming, so that weights are
// hashed chunk by chunk as they are copied to the device, in one pass.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace et_copy {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  /// Adds `n` bytes at `data` (any n, including 0).
  void update(const void* data, size_t n);
  /// The digest of everything added; the object is spent afterwards.
  Digest finish();

  /// The digest of `n` bytes at `data`.
  static Digest of(const void* data, size_t n);
  /// `d` as 64 lowercase hex digits.
  static std::string hex(const Digest& d);

 private:
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_ = 0; // bytes added
};

/// SHA-256's compression of `count` 64-byte blocks at `p` into the state
/// `h` (8 words): with the CPU's SHA extensions where it has them (x86-64),
/// else (or with `portable`) in plain C++. Both give the same state.
void sha256_compress(uint32_t* h, const uint8_t* p, size_t count, bool portable = false);
/// Whether sha256_compress uses the CPU's SHA extensions here.
bool sha256_has_sha_ni();

/// Whether `text` is exactly `digits` lowercase hex digits.
bool is_lower_hex(const std::string& text, size_t digits);

} // namespace et_copy
