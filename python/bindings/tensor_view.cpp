#include "tensor_view.h"

#include <array>
#include <limits>
#include <string>

#include <executorch/runtime/core/exec_aten/util/tensor_util.h>

#include "failure.h"

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;
using executorch::runtime::kTensorDimensionLimit;
namespace et = executorch::runtime::etensor;

// Copies `values` (at most kTensorDimensionLimit, checked by the caller)
// into `out`, each checked to fit T.
template <typename T, size_t N>
void narrow(const std::vector<int64_t>& values, std::array<T, N>& out, const char* what) {
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t v = values[i];
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        v > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      throw Failure(Error::InvalidArgument,
                    std::string(what) + " value " + std::to_string(v) + " does not fit ExecuTorch's tensor metadata");
    }
    out[i] = static_cast<T>(v);
  }
}

// The dtypes et-copy moves: every ScalarType ExecuTorch 1.5.1 has (0..29)
// but the five quantized ones, as et_copy._dtypes.SCALAR_TYPE_CODES lists
// them (TensorImpl aborts on codes it lacks).
bool supported_dtype(int code) {
  switch (code) {
    case 12: // QInt8
    case 13: // QUInt8
    case 14: // QInt32
    case 16: // QUInt4x2
    case 17: // QUInt2x4
      return false;
    default:
      return code >= 0 && code <= 29;
  }
}

} // namespace

TensorView::TensorView(const TensorSpec& spec) {
  const size_t rank = spec.sizes.size();
  if (rank > kTensorDimensionLimit) {
    throw Failure(Error::InvalidArgument,
                  "tensor has " + std::to_string(rank) + " dims; ExecuTorch supports at most 16");
  }
  if (spec.dim_order.size() != rank || spec.strides.size() != rank ||
      (spec.capacity && spec.capacity->size() != rank)) {
    throw Failure(Error::InvalidArgument, "sizes, dim_order, strides and capacity must have one entry per dim");
  }
  const auto& initial = spec.capacity ? *spec.capacity : spec.sizes;
  for (int64_t s : initial) {
    if (s < 0) {
      throw Failure(Error::InvalidArgument, "negative size " + std::to_string(s));
    }
  }
  if (!supported_dtype(spec.dtype)) {
    throw Failure(Error::InvalidArgument, "unsupported dtype code " + std::to_string(spec.dtype));
  }
  if (spec.dynamism < 0 || spec.dynamism > 2) {
    throw Failure(Error::InvalidArgument, "shape dynamism " + std::to_string(spec.dynamism) + " is not 0, 1 or 2");
  }
  if (spec.device_type < 0 || spec.device_type > 127 || spec.device_index < -128 || spec.device_index > 127) {
    throw Failure(Error::InvalidArgument, "device type or index out of range");
  }
  rank_ = rank;
  narrow(initial, sizes_, "size");
  narrow(spec.dim_order, dim_order_, "dim_order");
  narrow(spec.strides, strides_, "stride");
  std::array<executorch::aten::SizesType, kMaxDims> current{};
  narrow(spec.sizes, current, "size");

  impl_.emplace(static_cast<executorch::aten::ScalarType>(spec.dtype), static_cast<ssize_t>(rank), sizes_.data(),
                reinterpret_cast<void*>(spec.data), dim_order_.data(), strides_.data(),
                static_cast<executorch::runtime::TensorShapeDynamism>(spec.dynamism),
                static_cast<et::DeviceType>(spec.device_type), static_cast<et::DeviceIndex>(spec.device_index));
  tensor_ = executorch::aten::Tensor(&*impl_);
  if (spec.capacity && current != sizes_) {
    // A dynamic-bound tensor currently holding fewer elements than it can.
    const Error err = executorch::runtime::resize_tensor(tensor_, {current.data(), rank});
    if (err != Error::Ok) {
      throw Failure(err, "shape does not fit the tensor's capacity");
    }
  }
}

std::vector<int64_t> TensorView::sizes() const {
  return {sizes_.begin(), sizes_.begin() + rank_};
}

std::vector<int64_t> TensorView::strides() const {
  return {strides_.begin(), strides_.begin() + rank_};
}

} // namespace et_copy::bindings
