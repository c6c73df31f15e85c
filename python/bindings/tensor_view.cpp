#include "tensor_view.h"

#include <array>
#include <limits>
#include <string>

#include "failure.h"
#include "torch_tensor.h"

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;
namespace et = executorch::runtime::etensor;

// Copies `n` values into `out`, each checked to fit T.
template <typename T>
void narrow(const int64_t* values, size_t n, std::array<T, kMaxTensorDims>& out, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = values[i];
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        v > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      throw Failure(Error::InvalidArgument,
                    std::string(what) + " value " + std::to_string(v) + " does not fit ExecuTorch's tensor metadata");
    }
    out[i] = static_cast<T>(v);
  }
}

bool movable(int code) {
  for (const int* c = movable_codes(); *c >= 0; ++c) {
    if (*c == code) {
      return true;
    }
  }
  return false;
}

} // namespace

TensorView::TensorView(const TensorSpec& spec) {
  const size_t rank = spec.rank;
  if (rank > kMaxTensorDims) {
    throw Failure(Error::InvalidArgument, "tensor has " + std::to_string(rank) + " dims; ExecuTorch supports at most " +
                                              std::to_string(kMaxTensorDims));
  }
  if (!movable(spec.dtype)) { // TensorImpl aborts on a code it lacks
    throw Failure(Error::InvalidArgument, "unsupported dtype code " + std::to_string(spec.dtype));
  }
  if (spec.device_type < 0 || spec.device_type > std::numeric_limits<int8_t>::max() ||
      spec.device_index < kMinDeviceIndex || spec.device_index > kMaxDeviceIndex) {
    throw Failure(Error::InvalidArgument, "device type or index out of range");
  }
  rank_ = rank;
  const int64_t* initial = spec.has_capacity ? spec.capacity : spec.sizes;
  for (size_t i = 0; i < rank; ++i) { // TensorImpl aborts on a negative size
    if (initial[i] < 0 || spec.sizes[i] < 0) {
      throw Failure(Error::InvalidArgument, // the readers refuse a negative size first
                    "negative size " + std::to_string(initial[i] < 0 ? initial[i] : spec.sizes[i]));
    }
  }
  std::array<executorch::aten::SizesType, kMaxTensorDims> sizes{};
  std::array<executorch::aten::DimOrderType, kMaxTensorDims> dim_order{};
  std::array<executorch::aten::StridesType, kMaxTensorDims> strides{};
  std::array<executorch::aten::SizesType, kMaxTensorDims> current{};
  narrow(initial, rank, sizes, "size");
  narrow(spec.dim_order, rank, dim_order, "dim_order");
  narrow(spec.strides, rank, strides, "stride");
  narrow(spec.sizes, rank, current, "size");

  et_copy::TensorImplView::Spec v;
  v.dtype = static_cast<executorch::aten::ScalarType>(spec.dtype);
  v.sizes = {sizes.data(), rank};
  v.dim_order = {dim_order.data(), rank};
  v.strides = {strides.data(), rank};
  if (spec.has_capacity) { // a dynamic-bound tensor may hold fewer elements than it can
    v.current_sizes = {current.data(), rank};
  }
  v.data = reinterpret_cast<void*>(spec.data);
  v.dynamism = static_cast<executorch::runtime::TensorShapeDynamism>(spec.dynamism);
  v.device_type = static_cast<et::DeviceType>(spec.device_type);
  v.device_index = static_cast<et::DeviceIndex>(spec.device_index);
  const Error err = view_.reset(v);
  if (err != Error::Ok) {
    // Everything else reset() refuses was checked above.
    throw Failure(err, "shape does not fit the tensor's capacity");
  }
}

void TensorView::current_shape(TensorSpec& spec) const {
  spec.rank = rank_;
  const auto sizes = view_.tensor().sizes();
  const auto strides = view_.tensor().strides();
  for (size_t i = 0; i < rank_; ++i) {
    spec.sizes[i] = sizes[i];
    spec.strides[i] = strides[i];
  }
}

bool dense_strides(TensorSpec& spec) {
  return et_copy::dense_strides(spec.sizes, spec.dim_order, spec.rank, spec.strides) == Error::Ok;
}

} // namespace et_copy::bindings
