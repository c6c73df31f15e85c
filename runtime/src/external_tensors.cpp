#include "external_tensors.h"

#include <set>

#include <et_copy/limits.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include "program_reader.h"

namespace et_copy::internal {

using executorch::runtime::Error;
using executorch::runtime::Result;

Result<std::vector<ExternalTensor>> external_tensors(const uint8_t* pte, size_t size) {
  Reader r(pte, size);
  std::vector<ExternalTensor> out;
  std::set<std::string> seen;
  const auto [plans, plans_at] = r.plans();
  for (uint32_t p = 0; p < plans && !r.failed(); ++p) {
    const size_t plan = r.table_at(plans_at, p);
    const auto [values, values_at] = r.vector(plan, slot::kPlanValues);
    for (uint32_t v = 0; v < values && !r.failed(); ++v) {
      const size_t value = r.table_at(values_at, v);
      if (r.union_type(value) != tag::kTensor) {
        continue;
      }
      const size_t tensor = r.follow(r.field(value, slot::kUnionValue));
      const size_t extra = tensor == 0 ? 0 : r.follow(r.field(tensor, slot::kTensorExtraInfo));
      if (extra == 0 || r.field(tensor, slot::kTensorAllocationInfo) != 0) {
        continue;
      }
      if (r.scalar<uint8_t>(extra, slot::kExtraLocation) != kExternalLocation) {
        continue;
      }
      ExternalTensor t;
      t.fqn = r.whole_string(extra, slot::kExtraFullyQualifiedName);
      t.scalar_type = static_cast<executorch::aten::ScalarType>(r.scalar<int8_t>(tensor, slot::kTensorScalarType));
      const auto [dims, at] = r.vector(tensor, slot::kTensorSizes);
      for (uint32_t d = 0; d < dims && !r.failed(); ++d) {
        t.sizes.push_back(r.read<int32_t>(at + 4 * static_cast<size_t>(d)));
      }
      const auto [order, order_at] = r.vector(tensor, slot::kTensorDimOrder);
      for (uint32_t d = 0; d < order && !r.failed(); ++d) {
        t.dim_order.push_back(r.read<uint8_t>(order_at + d));
      }
      // elementSize aborts on an unknown type, and a layout is sized from
      // these before ExecuTorch's own checks run: refuse the program instead.
      if (!executorch::runtime::isValid(t.scalar_type) || t.sizes.size() > kMaxTensorDims) {
        return Error::InvalidProgram;
      }
      for (const int32_t s : t.sizes) {
        if (s < 0) {
          return Error::InvalidProgram;
        }
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
