// An ExecuTorch TensorImpl over memory that Python owns (a torch tensor or a
// DeviceTensor), built from a TensorSpec: no copy, no libtorch.
#pragma once

#include <array>
#include <optional>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/exec_aten/util/tensor_dimension_limit.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>

#include "tensor_spec.h"

namespace et_copy::bindings {

static_assert(kMaxDims == executorch::runtime::kTensorDimensionLimit, "TensorSpec holds ExecuTorch's dims");

/// Owns the metadata arrays a TensorImpl points at. They live inline (no
/// heap allocation per view): this sits on every et_copy.h2d_copy call.
class TensorView {
 public:
  /// Throws Failure(InvalidArgument) for metadata a TensorImpl cannot hold
  /// (sizes or strides beyond int32, a dtype et-copy does not move).
  explicit TensorView(const TensorSpec& spec);
  TensorView(const TensorView&) = delete;
  TensorView& operator=(const TensorView&) = delete;

  executorch::aten::Tensor& tensor() {
    return tensor_;
  }
  /// Writes the tensor's current sizes and strides (a kernel may have
  /// resized it) into `spec`.
  void current_shape(TensorSpec& spec) const;

 private:
  size_t rank_ = 0;
  std::array<executorch::aten::SizesType, kMaxDims> sizes_{};
  std::array<executorch::aten::DimOrderType, kMaxDims> dim_order_{};
  std::array<executorch::aten::StridesType, kMaxDims> strides_{};
  std::optional<executorch::runtime::etensor::TensorImpl> impl_;
  executorch::aten::Tensor tensor_{nullptr};
};

} // namespace et_copy::bindings
