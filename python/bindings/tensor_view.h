// An ExecuTorch TensorImpl over memory that Python owns (a torch tensor or a
// DeviceTensor), built from a TensorSpec: no copy, no libtorch. The view
// itself is the runtime's et_copy::TensorImplView (et_copy/tensor_layout.h);
// this adds the bindings' checks and their messages.
#pragma once

#include <et_copy/tensor_layout.h>

#include "tensor_spec.h"

namespace et_copy::bindings {

/// The metadata arrays live inline (no heap allocation per view): this sits
/// on every et_copy.h2d_copy call.
class TensorView {
 public:
  /// Throws Failure(InvalidArgument) for metadata a TensorImpl cannot hold
  /// (sizes or strides beyond int32, a dtype et-copy does not move).
  explicit TensorView(const TensorSpec& spec);
  TensorView(const TensorView&) = delete;
  TensorView& operator=(const TensorView&) = delete;

  executorch::aten::Tensor& tensor() {
    return view_.tensor();
  }
  /// Writes the tensor's current sizes and strides (a kernel may have
  /// resized it) into `spec`.
  void current_shape(TensorSpec& spec) const;

 private:
  size_t rank_ = 0;
  et_copy::TensorImplView view_;
};

} // namespace et_copy::bindings
