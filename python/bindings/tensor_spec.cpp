#include "tensor_spec.h"

namespace et_copy::bindings {

void dim_order_from_strides(TensorSpec& spec) {
  int64_t* order = spec.dim_order;
  for (size_t i = 0; i < spec.rank; ++i) {
    order[i] = static_cast<int64_t>(i);
  }
  // Insertion sort: stable, and at most kMaxTensorDims dims.
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
