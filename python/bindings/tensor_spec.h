// One tensor at the Python boundary, as the kernels will see it: plain
// data, no ExecuTorch, torch or Python types, so both the torch reader
// (torch's headers) and the ExecuTorch side (ExecuTorch's) include it.
#pragma once

#include <cstddef>
#include <cstdint>

#include <et_copy/limits.h>

namespace et_copy::bindings {

struct TensorSpec {
  uintptr_t data = 0;
  int dtype = 0; ///< ExecuTorch ScalarType code
  size_t rank = 0;
  int64_t sizes[kMaxTensorDims] = {};
  int64_t strides[kMaxTensorDims] = {}; ///< in elements
  int64_t dim_order[kMaxTensorDims] = {};
  /// The shape the memory was sized for (dynamic-bound tensors); when
  /// false, the same as sizes.
  bool has_capacity = false;
  int64_t capacity[kMaxTensorDims] = {};
  int dynamism = 0; ///< TensorShapeDynamism
  int device_type = 0;
  int device_index = 0;
};

/// Fills spec.strides with the dense strides of spec.sizes laid out in
/// spec.dim_order: et_copy::dense_strides (et_copy/tensor_layout.h, where
/// the rule is written; defined in tensor_view.cpp, which may include
/// ExecuTorch's headers). False when dim_order is not a permutation, a size
/// is negative or a stride overflows int64.
bool dense_strides(TensorSpec& spec);

/// Fills spec.dim_order from spec.strides: dims by stride, outermost first,
/// ties in natural order (torch's layouts, ExecuTorch's dim order). The one
/// place this rule is written.
void dim_order_from_strides(TensorSpec& spec);

} // namespace et_copy::bindings
