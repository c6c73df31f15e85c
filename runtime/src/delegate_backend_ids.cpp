// The backends a program's delegates name (delegate_backend_ids,
// program_check.h), read from its bytes before anything is registered.
#include <et_copy/program_check.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "program_reader.h"

namespace et_copy {

namespace slot = internal::slot;

std::vector<std::string> delegate_backend_ids(const void* data, size_t size) {
  if (data == nullptr) {
    return {};
  }
  internal::Reader r(data, size);
  std::vector<std::string> ids;
  const auto [plans, plans_at] = r.plans();
  for (uint32_t p = 0; p < plans; ++p) {
    const auto [n, at] = r.vector(r.table_at(plans_at, p), slot::kPlanDelegates);
    for (uint32_t d = 0; d < n; ++d) {
      std::string id = r.string(r.table_at(at, d), slot::kDelegateId);
      if (!id.empty() && std::find(ids.begin(), ids.end(), id) == ids.end()) {
        ids.push_back(std::move(id));
      }
    }
  }
  // A read outside the bytes read as zeros on the way: trust nothing found.
  return r.failed() ? std::vector<std::string>() : ids;
}

} // namespace et_copy
