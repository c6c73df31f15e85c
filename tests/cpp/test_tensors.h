// Test helpers: ExecuTorch tensors over buffers the test owns, with the
// metadata (device, dynamism, dim order, strides) spelled out per test.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>

namespace et_copy_test {

using executorch::aten::DimOrderType;
using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::runtime::TensorShapeDynamism;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

/// Everything a TensorImpl needs, owned in one place so the tensor stays
/// valid for the holder's lifetime. Data is borrowed.
class TestTensor {
 public:
  struct Options {
    DeviceType device = DeviceType::CPU;
    DeviceIndex index = 0;
    TensorShapeDynamism dynamism = TensorShapeDynamism::STATIC;
    std::vector<DimOrderType> dim_order; // empty: contiguous
    std::vector<StridesType> strides;    // empty: dense in dim_order
  };

  TestTensor(ScalarType dtype, std::vector<SizesType> sizes, void* data)
      : TestTensor(dtype, std::move(sizes), data, Options{}) {}

  TestTensor(ScalarType dtype, std::vector<SizesType> sizes, void* data, Options opts)
      : sizes_(std::move(sizes)), dim_order_(std::move(opts.dim_order)), strides_(std::move(opts.strides)) {
    const size_t rank = sizes_.size();
    if (dim_order_.empty()) {
      dim_order_.resize(rank);
      std::iota(dim_order_.begin(), dim_order_.end(), 0);
    }
    if (strides_.empty()) {
      strides_.resize(rank);
      StridesType s = 1;
      for (size_t i = rank; i-- > 0;) {
        const auto d = dim_order_[i];
        strides_[d] = s;
        s *= sizes_[d] > 0 ? sizes_[d] : 1;
      }
    }
    impl_ = std::make_unique<TensorImpl>(dtype, static_cast<ssize_t>(rank), sizes_.data(), data, dim_order_.data(),
                                         strides_.data(), opts.dynamism, opts.device, opts.index);
    tensor_ = Tensor(impl_.get());
  }

  Tensor& t() {
    return tensor_;
  }

  /// The tensor's current sizes (they change when a kernel resizes it).
  std::vector<SizesType> sizes() const {
    return std::vector<SizesType>(tensor_.sizes().begin(), tensor_.sizes().end());
  }

  std::vector<StridesType> strides() const {
    return std::vector<StridesType>(tensor_.strides().begin(), tensor_.strides().end());
  }

 private:
  std::vector<SizesType> sizes_;
  std::vector<DimOrderType> dim_order_;
  std::vector<StridesType> strides_;
  std::unique_ptr<TensorImpl> impl_;
  Tensor tensor_{nullptr};
};

/// A host buffer with guard bytes on both sides, so a write past either end
/// is detected instead of corrupting the heap.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr uint8_t kGuardByte = 0xCD;

  explicit GuardedBuffer(size_t nbytes, uint8_t fill = 0) : nbytes_(nbytes), bytes_(nbytes + 2 * kGuard, kGuardByte) {
    std::memset(data(), fill, nbytes);
  }

  uint8_t* data() {
    return bytes_.data() + kGuard;
  }
  size_t nbytes() const {
    return nbytes_;
  }
  std::vector<uint8_t> contents() const {
    return std::vector<uint8_t>(bytes_.begin() + kGuard, bytes_.begin() + kGuard + nbytes_);
  }
  bool guards_intact() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (bytes_[i] != kGuardByte || bytes_[kGuard + nbytes_ + i] != kGuardByte) {
        return false;
      }
    }
    return true;
  }
  /// Fills with 0, 1, 2, ... (mod 251, so no period divides a dtype size).
  void fill_pattern(uint8_t seed = 1) {
    for (size_t i = 0; i < nbytes_; ++i) {
      data()[i] = static_cast<uint8_t>((seed + i) % 251);
    }
  }

 private:
  size_t nbytes_;
  std::vector<uint8_t> bytes_;
};

} // namespace et_copy_test
