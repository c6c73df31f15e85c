// A flatbuffer reader for tests that edit real programs byte by byte (a
// value's kind, a call's argument count), the way a flipped byte does.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace et_copy_test {

// Just enough of a flatbuffer reader to find a program's parts; the bytes
// are the committed programs, so no bounds checks.
struct Flat {
  std::vector<uint8_t>& b;
  uint32_t u32(size_t at) const {
    uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return v;
  }
  size_t field(size_t table, int f) const {
    int32_t back;
    std::memcpy(&back, b.data() + table, 4);
    const size_t vt = table - back;
    uint16_t vsize, off;
    std::memcpy(&vsize, b.data() + vt, 2);
    if (4 + 2 * f + 2 > vsize) {
      return 0;
    }
    std::memcpy(&off, b.data() + vt + 4 + 2 * f, 2);
    return off == 0 ? 0 : table + off;
  }
  size_t follow(size_t at) const {
    return at + u32(at);
  }
  size_t element(size_t vector, size_t i) const { // the i-th table of a vector of tables
    return follow(vector + 4 + 4 * i);
  }
  size_t plan() const {
    return element(follow(field(u32(0), 1)), 0);
  }
  // Where value v's union type byte is (its EValue's field 0).
  size_t value_type(size_t v) const {
    return field(element(follow(field(plan(), 2)), v), 0);
  }
  // Instruction i of chain 0's call table.
  size_t call(size_t i) const {
    const size_t chain = element(follow(field(plan(), 5)), 0);
    return follow(field(element(follow(field(chain, 2)), i), 1));
  }
  // The arguments vector of that call: its count's position.
  size_t arguments(size_t i) const {
    return follow(field(call(i), 1));
  }
  int32_t argument(size_t i, size_t a) const {
    return static_cast<int32_t>(u32(arguments(i) + 4 + 4 * a));
  }
};

// Value `v`'s first list item (an IntList's items are 8-byte value indices).
inline int64_t first_int_list_item(const Flat& f, size_t v) {
  const size_t list = f.follow(f.field(f.element(f.follow(f.field(f.plan(), 2)), v), 1));
  int64_t item;
  std::memcpy(&item, f.b.data() + f.follow(f.field(list, 0)) + 4, 8);
  return item;
}

} // namespace et_copy_test
