#include "external_tensors.h"

#include <cstring>
#include <set>

namespace et_copy::internal {

using executorch::runtime::Error;
using executorch::runtime::Result;

namespace {

// Field slots of executorch's schema/program.fbs (a union takes two slots).
constexpr int kProgramPlans = 1, kPlanValues = 2;
constexpr int kEValueType = 0, kEValueValue = 1;
constexpr uint8_t kTensorTag = 5; // KernelTypes.Tensor (a union's tag 0 is NONE)
constexpr int kTensorScalarType = 0, kTensorSizes = 2, kTensorDimOrder = 3, kTensorAllocationInfo = 6,
              kTensorExtraInfo = 9;
constexpr int kExtraFqn = 1, kExtraLocation = 2;
constexpr uint8_t kLocationExternal = 1;

// Reads flatbuffer tables with every offset checked: a bad one marks the
// reader failed and reads as zero.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool failed() const {
    return failed_;
  }
  template <typename T>
  T read(size_t at) {
    T v{};
    if (at > n_ || sizeof(T) > n_ - at) {
      failed_ = true;
      return v;
    }
    std::memcpy(&v, p_ + at, sizeof(T));
    return v;
  }
  // Where field `f` of the table at `table` is, or 0 when absent.
  size_t field(size_t table, int f) {
    const int64_t vt = static_cast<int64_t>(table) - read<int32_t>(table);
    if (failed_ || vt < 0) {
      failed_ = true;
      return 0;
    }
    const uint16_t vsize = read<uint16_t>(static_cast<size_t>(vt));
    const size_t entry = 4 + 2 * static_cast<size_t>(f);
    if (failed_ || entry + 2 > vsize) {
      return 0;
    }
    const uint16_t off = read<uint16_t>(static_cast<size_t>(vt) + entry);
    return off == 0 ? 0 : table + off;
  }
  size_t follow(size_t at) {
    return at == 0 ? 0 : at + read<uint32_t>(at);
  }
  // A vector field: its length, and where its elements start (0 when absent).
  uint32_t vector(size_t table, int f, size_t* elements) {
    const size_t v = follow(field(table, f));
    *elements = v == 0 ? 0 : v + 4;
    const uint32_t count = v == 0 ? 0 : read<uint32_t>(v);
    if (count > n_) {
      failed_ = true;
      return 0;
    }
    return count;
  }
  std::string string(size_t table, int f) {
    const size_t s = follow(field(table, f));
    if (s == 0) {
      return {};
    }
    const uint32_t length = read<uint32_t>(s);
    if (failed_ || length > n_ - (s + 4)) {
      failed_ = true;
      return {};
    }
    return std::string(reinterpret_cast<const char*>(p_ + s + 4), length);
  }

 private:
  const uint8_t* p_;
  size_t n_;
  bool failed_ = false;
};

} // namespace

Result<std::vector<ExternalTensor>> external_tensors(const uint8_t* pte, size_t size) {
  Reader r(pte, size);
  std::vector<ExternalTensor> out;
  std::set<std::string> seen;
  const size_t program = r.read<uint32_t>(0); // the root table's offset
  size_t plans_at = 0;
  const uint32_t plans = r.failed() ? 0 : r.vector(program, kProgramPlans, &plans_at);
  for (uint32_t p = 0; p < plans && !r.failed(); ++p) {
    const size_t plan = r.follow(plans_at + 4 * static_cast<size_t>(p));
    size_t values_at = 0;
    const uint32_t values = r.vector(plan, kPlanValues, &values_at);
    for (uint32_t v = 0; v < values && !r.failed(); ++v) {
      const size_t value = r.follow(values_at + 4 * static_cast<size_t>(v));
      const size_t type_at = r.field(value, kEValueType);
      if (type_at == 0 || r.read<uint8_t>(type_at) != kTensorTag) {
        continue;
      }
      const size_t tensor = r.follow(r.field(value, kEValueValue));
      const size_t extra = tensor == 0 ? 0 : r.follow(r.field(tensor, kTensorExtraInfo));
      if (extra == 0 || r.field(tensor, kTensorAllocationInfo) != 0) {
        continue;
      }
      const size_t location = r.field(extra, kExtraLocation);
      if (location == 0 || r.read<uint8_t>(location) != kLocationExternal) {
        continue;
      }
      ExternalTensor t;
      t.fqn = r.string(extra, kExtraFqn);
      const size_t st = r.field(tensor, kTensorScalarType);
      t.scalar_type = static_cast<executorch::aten::ScalarType>(st == 0 ? 0 : r.read<int8_t>(st));
      size_t at = 0;
      const uint32_t dims = r.vector(tensor, kTensorSizes, &at);
      for (uint32_t d = 0; d < dims && !r.failed(); ++d) {
        t.sizes.push_back(r.read<int32_t>(at + 4 * static_cast<size_t>(d)));
      }
      const uint32_t order = r.vector(tensor, kTensorDimOrder, &at);
      for (uint32_t d = 0; d < order && !r.failed(); ++d) {
        t.dim_order.push_back(r.read<uint8_t>(at + d));
      }
      if (!r.failed() && seen.insert(t.fqn).second) {
        out.push_back(std::move(t));
      }
    }
  }
  if (r.failed() || size < 8) {
    return Error::InvalidProgram;
  }
  return out;
}

} // namespace et_copy::internal
