// A small flatbuffer writer for tests that build programs (or parts of
// them) byte by byte: tables go after their vtables and children after
// their parents, so every offset points forward as the format wants.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace et_copy_test {

class FlatWriter {
 public:
  FlatWriter() : b_(4, 0) {}

  // A table with `slots` field slots, each 4 bytes wide; returns where it is.
  size_t table(int slots) {
    const size_t vt = b_.size();
    const uint16_t vsize = static_cast<uint16_t>(4 + 2 * slots);
    grow(vsize + (vsize % 4 == 0 ? 0 : 2)); // keep the table 4-aligned
    const size_t t = b_.size();
    grow(4 + 4 * static_cast<size_t>(slots));
    put16(vt, vsize);
    put16(vt + 2, static_cast<uint16_t>(4 + 4 * slots));
    put32(t, static_cast<uint32_t>(t - vt));
    vtables_[t] = vt;
    return t;
  }
  // Marks `slot` of `table` present and returns where its 4 bytes are.
  size_t field(size_t table, int slot) {
    put16(vtables_.at(table) + 4 + 2 * slot, static_cast<uint16_t>(4 + 4 * slot));
    return table + 4 + 4 * static_cast<size_t>(slot);
  }
  void scalar(size_t table, int slot, int32_t v) {
    const size_t at = field(table, slot);
    std::memcpy(b_.data() + at, &v, 4);
  }
  // A vector of n 4-byte (or 8-byte) elements; returns where its elements start.
  size_t vector(size_t table, int slot, uint32_t n, size_t width = 4) {
    const size_t at = field(table, slot);
    const size_t v = b_.size();
    grow(4 + n * width);
    put32(v, n);
    link(at, v);
    return v + 4;
  }
  // A string field: length, bytes, NUL, padding.
  void string(size_t table, int slot, const std::string& text) {
    const size_t at = field(table, slot);
    const size_t v = b_.size();
    grow(4 + (text.size() + 4) / 4 * 4);
    put32(v, static_cast<uint32_t>(text.size()));
    std::memcpy(b_.data() + v + 4, text.data(), text.size());
    link(at, v);
  }
  template <typename T>
  void values(size_t table, int slot, std::vector<T> items) {
    const size_t at = vector(table, slot, static_cast<uint32_t>(items.size()), sizeof(T));
    if (!items.empty()) { // memcpy from an empty vector's null data is undefined
      std::memcpy(b_.data() + at, items.data(), items.size() * sizeof(T));
    }
  }
  // Points the offset at `from` to `to`.
  void link(size_t from, size_t to) {
    put32(from, static_cast<uint32_t>(to - from));
  }
  void root(size_t table) {
    put32(0, static_cast<uint32_t>(table));
  }
  // Rewrites the element count of the vector whose elements start at `elements`.
  void count(size_t elements, uint32_t n) {
    put32(elements - 4, n);
  }
  const std::vector<uint8_t>& bytes() const {
    return b_;
  }

 private:
  void put16(size_t at, uint16_t v) {
    std::memcpy(b_.data() + at, &v, 2);
  }
  void put32(size_t at, uint32_t v) {
    std::memcpy(b_.data() + at, &v, 4);
  }
  void grow(size_t n) {
    b_.resize(b_.size() + n, 0);
  }
  std::vector<uint8_t> b_;
  std::map<size_t, size_t> vtables_;
};

} // namespace et_copy_test
