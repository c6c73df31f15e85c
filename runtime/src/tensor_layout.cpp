#include <et_copy/tensor_layout.h>

#include <algorithm>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>

namespace et_copy {

using executorch::aten::DimOrderType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::runtime::Error;

Error TensorImplView::reset(const Spec& spec) {
  impl_.reset();
  tensor_ = executorch::aten::Tensor(nullptr);
  const size_t rank = spec.sizes.size();
  if (rank > kMaxTensorDims) { // ExecuTorch's runtime makes none; the inline arrays hold no more
    return Error::InvalidArgument;
  }
  if (!executorch::runtime::isValid(spec.dtype)) { // TensorImpl aborts on a dtype it lacks
    return Error::InvalidArgument;
  }
  if ((!spec.dim_order.empty() && spec.dim_order.size() != rank) ||
      (!spec.strides.empty() && spec.strides.size() != rank) ||
      (!spec.current_sizes.empty() && spec.current_sizes.size() != rank)) {
    return Error::InvalidArgument;
  }
  SizesType* sizes = sizes_.data();
  DimOrderType* dim_order = dim_order_.data();
  StridesType* strides = strides_.data();
  for (size_t i = 0; i < rank; ++i) {
    if (spec.sizes[i] < 0) { // TensorImpl aborts on a negative size
      return Error::InvalidArgument;
    }
    sizes[i] = spec.sizes[i];
    dim_order[i] = spec.dim_order.empty() ? static_cast<DimOrderType>(i) : spec.dim_order[i];
  }
  if (spec.strides.empty()) {
    const Error err = dense_strides(sizes, dim_order, rank, strides);
    if (err != Error::Ok) {
      return err;
    }
  } else {
    std::copy(spec.strides.begin(), spec.strides.end(), strides);
  }
  impl_.emplace(spec.dtype, static_cast<ssize_t>(rank), sizes, spec.data, dim_order, strides, spec.dynamism,
                spec.device_type, spec.device_index);
  tensor_ = executorch::aten::Tensor(&*impl_);
  if (!spec.current_sizes.empty()) {
    bool same = true;
    for (size_t i = 0; i < rank; ++i) {
      same = same && spec.current_sizes[i] == spec.sizes[i];
    }
    if (!same) {
      const Error err = executorch::runtime::resize_tensor(tensor_, {spec.current_sizes.data(), rank});
      if (err != Error::Ok) {
        impl_.reset();
        tensor_ = executorch::aten::Tensor(nullptr);
        return err;
      }
    }
  }
  return Error::Ok;
}

} // namespace et_copy
