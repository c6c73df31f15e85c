// Test support, not installed: a TensorImplView that also takes more dims
// than ExecuTorch supports. ExecuTorch's runtime never makes such a tensor,
// but TensorImpl holds one and the kernels must refuse it, so the C++ tests
// and the fuzz target build them here; the installed et_copy::TensorImplView
// refuses them.
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include <et_copy/limits.h>
#include <et_copy/tensor_layout.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

namespace et_copy_test {

class AnyRankTensorView {
 public:
  using Spec = et_copy::TensorImplView::Spec;

  AnyRankTensorView() = default;
  AnyRankTensorView(const AnyRankTensorView&) = delete;
  AnyRankTensorView& operator=(const AnyRankTensorView&) = delete;

  /// et_copy::TensorImplView::reset up to kMaxTensorDims dims. Beyond, the
  /// strides must be given (the dense rule stops there), current_sizes (if
  /// any) must be the sizes, and the metadata goes on the heap as it is.
  executorch::runtime::Error reset(const Spec& spec) {
    using executorch::runtime::Error;
    impl_.reset();
    tensor_ = executorch::aten::Tensor(nullptr);
    const size_t rank = spec.sizes.size();
    if (rank <= et_copy::kMaxTensorDims) {
      return small_.reset(spec);
    }
    if (!executorch::runtime::isValid(spec.dtype) || spec.strides.size() != rank ||
        (!spec.dim_order.empty() && spec.dim_order.size() != rank) ||
        // No resize beyond 16 dims: the tensor holds the sizes it is given.
        (!spec.current_sizes.empty() &&
         !std::equal(spec.current_sizes.begin(), spec.current_sizes.end(), spec.sizes.begin(), spec.sizes.end())) ||
        std::any_of(spec.sizes.begin(), spec.sizes.end(), [](auto s) { return s < 0; })) {
      return Error::InvalidArgument;
    }
    sizes_.assign(spec.sizes.begin(), spec.sizes.end());
    strides_.assign(spec.strides.begin(), spec.strides.end());
    dim_order_.resize(rank);
    for (size_t i = 0; i < rank; ++i) {
      dim_order_[i] = spec.dim_order.empty() ? static_cast<executorch::aten::DimOrderType>(i) : spec.dim_order[i];
    }
    impl_.emplace(spec.dtype, static_cast<ssize_t>(rank), sizes_.data(), spec.data, dim_order_.data(), strides_.data(),
                  spec.dynamism, spec.device_type, spec.device_index);
    tensor_ = executorch::aten::Tensor(&*impl_);
    return Error::Ok;
  }

  bool ok() const {
    return impl_.has_value() || small_.ok();
  }
  executorch::aten::Tensor& tensor() {
    return impl_.has_value() ? tensor_ : small_.tensor();
  }
  const executorch::aten::Tensor& tensor() const {
    return impl_.has_value() ? tensor_ : small_.tensor();
  }

 private:
  et_copy::TensorImplView small_;
  std::vector<executorch::aten::SizesType> sizes_;
  std::vector<executorch::aten::DimOrderType> dim_order_;
  std::vector<executorch::aten::StridesType> strides_;
  std::optional<executorch::runtime::etensor::TensorImpl> impl_;
  executorch::aten::Tensor tensor_{nullptr};
};

} // namespace et_copy_test
