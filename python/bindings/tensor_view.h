// An ExecuTorch TensorImpl over memory that Python owns (a torch tensor or a
// DeviceTensor), built from plain metadata: no copy, no libtorch.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>
#include <executorch/runtime/core/exec_aten/util/tensor_dimension_limit.h>

namespace et_copy::bindings {

/// What Python passes for one tensor. `capacity` is the shape the buffer was
/// sized for (dynamic-bound tensors); empty means "same as sizes".
struct TensorSpec {
  uintptr_t data = 0;
  int dtype = 0; ///< ExecuTorch ScalarType code
  std::vector<int64_t> sizes;
  std::vector<int64_t> dim_order;
  std::vector<int64_t> strides; ///< in elements
  int dynamism = 0;             ///< TensorShapeDynamism
  int device_type = 0;
  int device_index = 0;
  std::optional<std::vector<int64_t>> capacity;
};

/// Owns the metadata arrays a TensorImpl points at. They live inline (no
/// heap allocation per view): this sits on every et_copy.h2d_copy call.
class TensorView {
 public:
  /// Throws Failure(InvalidArgument) for metadata a TensorImpl cannot hold
  /// (negative sizes, values out of the int32/uint8 ranges, > 16 dims).
  explicit TensorView(const TensorSpec& spec);
  TensorView(const TensorView&) = delete;
  TensorView& operator=(const TensorView&) = delete;

  executorch::aten::Tensor& tensor() {
    return tensor_;
  }
  /// Current sizes and strides (a kernel may have resized the tensor).
  std::vector<int64_t> sizes() const;
  std::vector<int64_t> strides() const;

 private:
  static constexpr size_t kMaxDims = executorch::runtime::kTensorDimensionLimit;
  size_t rank_ = 0;
  std::array<executorch::aten::SizesType, kMaxDims> sizes_{};
  std::array<executorch::aten::DimOrderType, kMaxDims> dim_order_{};
  std::array<executorch::aten::StridesType, kMaxDims> strides_{};
  std::optional<executorch::runtime::etensor::TensorImpl> impl_;
  executorch::aten::Tensor tensor_{nullptr};
};

} // namespace et_copy::bindings
