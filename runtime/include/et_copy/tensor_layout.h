// Dense tensor layout and ExecuTorch tensors over memory someone else owns:
// the one place et-copy writes these rules. The Python bindings, the example
// executor, the C++ tests and the fuzz target all build their tensors here
// (the tests' and fuzz target's tensors of more dims than ExecuTorch allows
// come from tests/cpp/any_rank_tensor_view.h, which is not installed).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/exec_aten/util/tensor_dimension_limit.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>
#include <executorch/runtime/core/span.h>

#include <et_copy/limits.h>

namespace et_copy {

static_assert(kMaxTensorDims == executorch::runtime::kTensorDimensionLimit,
              "et_copy/limits.h: kMaxTensorDims is ExecuTorch's kTensorDimensionLimit");

/**
 * The dense-strides rule: writes to `strides[0, rank)` the element strides
 * of a dense tensor with `sizes`, laid out in `dim_order` (outermost dim
 * first). The innermost dim has stride 1; each other dim's stride is the
 * next inner dim's stride times that dim's size, where a size of 0 counts
 * as 1. That is ExecuTorch's `dim_order_to_stride` (which resize_tensor
 * uses, so a resized tensor agrees) and torch's contiguous strides: a
 * [2, 0, 3] tensor gets [3, 3, 1], never [0, 3, 1]. A size-1 dim is an
 * ordinary factor. Rank 0 writes nothing.
 *
 * Integer types are the caller's: ExecuTorch's (int32 sizes and strides,
 * uint8 dim order) or wider ones; a stride that does not fit `Stride` is an
 * error, not a wrap.
 *
 * Returns Error::Ok, or Error::InvalidArgument with `strides` unspecified
 * when rank exceeds kMaxTensorDims, `dim_order` is not a permutation of
 * [0, rank), a size is negative, or a stride does not fit `Stride`.
 * Pure: callable from any thread.
 */
template <typename Size, typename Order, typename Stride>
ET_NODISCARD executorch::runtime::Error dense_strides(const Size* sizes, const Order* dim_order, size_t rank,
                                                      Stride* strides) {
  static_assert(std::is_integral_v<Size> && std::is_integral_v<Order> && std::is_integral_v<Stride>,
                "dense_strides takes integer sizes, dim order and strides");
  using executorch::runtime::Error;
  if (rank > kMaxTensorDims) {
    return Error::InvalidArgument;
  }
  uint32_t seen = 0;
  for (size_t i = 0; i < rank; ++i) {
    const Order d = dim_order[i];
    if constexpr (std::is_signed_v<Order>) {
      if (d < 0) {
        return Error::InvalidArgument;
      }
    }
    if (static_cast<uint64_t>(d) >= rank || (seen >> d & 1u) != 0) {
      return Error::InvalidArgument;
    }
    seen |= 1u << d;
    if constexpr (std::is_signed_v<Size>) {
      if (sizes[i] < 0) {
        return Error::InvalidArgument;
      }
    }
  }
  int64_t step = 1; // the stride of the next dim outward, once it exists
  for (size_t i = rank; i-- > 0;) {
    const size_t d = static_cast<size_t>(dim_order[i]);
    if (step > static_cast<int64_t>(std::numeric_limits<Stride>::max())) {
      return Error::InvalidArgument;
    }
    strides[d] = static_cast<Stride>(step);
    const int64_t size = sizes[d] == 0 ? 1 : static_cast<int64_t>(sizes[d]);
    if (i > 0 && __builtin_mul_overflow(step, size, &step)) {
      return Error::InvalidArgument; // the next dim's stride would not fit
    }
  }
  return Error::Ok;
}

/**
 * An ExecuTorch tensor (a TensorImpl and the Tensor over it) on memory the
 * caller owns, of at most kMaxTensorDims dims, as ExecuTorch's runtime
 * makes them. The metadata arrays are held inline: no heap allocation.
 * Not copyable or movable (the TensorImpl points into the view); build it
 * in place, then call reset(). Use one view from one thread at a time.
 */
class TensorImplView {
 public:
  /// What the tensor is. The spans are read during reset() only.
  struct Spec {
    executorch::aten::ScalarType dtype = executorch::aten::ScalarType::Float;
    /// The sizes the memory was laid out for: for a dynamic tensor, its
    /// capacity.
    executorch::runtime::Span<const executorch::aten::SizesType> sizes;
    /// Empty: contiguous, [0, 1, ..., rank).
    executorch::runtime::Span<const executorch::aten::DimOrderType> dim_order;
    /// Empty: dense in dim_order (dense_strides). Given: taken as they are,
    /// and then dim_order need not be a permutation: the bindings hand the
    /// kernels a torch tensor's own strides this way, and the tests and the
    /// fuzz target malformed layouts, for the kernels to refuse.
    executorch::runtime::Span<const executorch::aten::StridesType> strides;
    /// Empty: the same as sizes. Otherwise the shape the tensor holds now,
    /// set through ExecuTorch's resize_tensor within the capacity `sizes`.
    executorch::runtime::Span<const executorch::aten::SizesType> current_sizes;
    void* data = nullptr;
    executorch::runtime::TensorShapeDynamism dynamism = executorch::runtime::TensorShapeDynamism::STATIC;
    executorch::runtime::etensor::DeviceType device_type = executorch::runtime::etensor::DeviceType::CPU;
    executorch::runtime::etensor::DeviceIndex device_index = 0;
  };

  TensorImplView() = default;
  TensorImplView(const TensorImplView&) = delete;
  TensorImplView& operator=(const TensorImplView&) = delete;

  /**
   * Makes tensor() the tensor `spec` describes, replacing any earlier one.
   *
   * Returns Error::Ok, or Error::InvalidArgument, leaving the view empty
   * (tensor() unusable), for metadata ExecuTorch's TensorImpl would abort
   * on or mis-describe: more than kMaxTensorDims dims, a dtype ExecuTorch
   * does not know, a negative size, a dim_order, strides or current_sizes
   * span whose length is not the rank, or, when strides are derived, what
   * dense_strides refuses (a dim order that is no permutation, a stride
   * beyond int32); or resize_tensor's error when current_sizes do not fit
   * the capacity or the dynamism forbids the resize.
   */
  ET_NODISCARD executorch::runtime::Error reset(const Spec& spec);

  /// Whether reset() last succeeded.
  bool ok() const {
    return impl_.has_value();
  }

  /// The tensor; only after a successful reset().
  executorch::aten::Tensor& tensor() {
    return tensor_;
  }
  const executorch::aten::Tensor& tensor() const {
    return tensor_;
  }

 private:
  std::array<executorch::aten::SizesType, kMaxTensorDims> sizes_{};
  std::array<executorch::aten::DimOrderType, kMaxTensorDims> dim_order_{};
  std::array<executorch::aten::StridesType, kMaxTensorDims> strides_{};
  std::optional<executorch::runtime::etensor::TensorImpl> impl_;
  executorch::aten::Tensor tensor_{nullptr};
};

} // namespace et_copy
