#include "tensor_spec.h"

#include <algorithm>

namespace et_copy::bindings {

bool dense_strides(TensorSpec& spec) {
  bool seen[kMaxDims] = {};
  int64_t step = 1;
  for (size_t i = spec.rank; i-- > 0;) {
    const int64_t d = spec.dim_order[i];
    if (d < 0 || static_cast<size_t>(d) >= spec.rank || seen[d]) {
      return false;
    }
    seen[d] = true;
    spec.strides[d] = step;
    step *= std::max<int64_t>(spec.sizes[d], 1);
  }
  return true;
}

void dim_order_from_strides(TensorSpec& spec) {
  int64_t* order = spec.dim_order;
  for (size_t i = 0; i < spec.rank; ++i) {
    order[i] = static_cast<int64_t>(i);
  }
  // Insertion sort: stable, and at most 16 dims.
  for (size_t i = 1; i < spec.rank; ++i) {
    const int64_t d = order[i];
    size_t j = i;
    for (; j > 0 && spec.strides[order[j - 1]] < spec.strides[d]; --j) {
      order[j] = order[j - 1];
    }
    order[j] = d;
  }
}

} // namespace et_copy::bindings
