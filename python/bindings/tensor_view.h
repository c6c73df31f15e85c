// An ExecuTorch TensorImpl over memory that Python owns (a torch tensor or a
// DeviceTensor), built from plain metadata: no copy, no libtorch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>

namespace et_copy::bindings {

/// What Python passes for one tensor. `capacity` is the shape the buffer was
/// sized for (dynamic-bound tensors); empty means "same as sizes".
struct TensorSpec {
  uintptr_t data = 0;
  int dtype = 0; ///< ExecuTorch ScalarType code
  std::vector<int64_t> sizes;
  std::vector<int64_t> dim_order;
  std::vector<int64_t> strides; ///< in elements
  int dynamism = 0; ///< TensorShapeDynamism
  int device_type = 0;
  int device_index = 0;
  std::optional<std::vector<int64_t>> capacity;
};

/// Owns the metadata arrays a TensorImpl points at.
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
  std::vector<executorch::aten::SizesType> sizes_;
  std::vector<executorch::aten::DimOrderType> dim_order_;
  std::vector<executorch::aten::StridesType> strides_;
  std::unique_ptr<executorch::runtime::etensor::TensorImpl> impl_;
  executorch::aten::Tensor tensor_{nullptr};
};

} // namespace et_copy::bindings
