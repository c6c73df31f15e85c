// Test helpers: ExecuTorch tensors over buffers the test owns, with the
// metadata (device, dynamism, dim order, strides) spelled out per test.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <et_copy/tensor_layout.h>

#include "any_rank_tensor_view.h"
#include <executorch/runtime/core/exec_aten/exec_aten.h>

namespace et_copy_test {

using executorch::aten::DimOrderType;
using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::aten::Tensor;
using executorch::runtime::TensorShapeDynamism;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

/// A tensor over a buffer the test owns, built by et_copy::TensorImplView
/// (et_copy/tensor_layout.h), so tests see the layouts everything else
/// builds; beyond ExecuTorch's dims, by AnyRankTensorView. Data is borrowed. Aborts the test binary on metadata the
/// view refuses: a test that means to build one has a bug.
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

  TestTensor(ScalarType dtype, std::vector<SizesType> sizes, void* data, Options opts) {
    AnyRankTensorView::Spec spec;
    spec.dtype = dtype;
    spec.sizes = {sizes.data(), sizes.size()};
    spec.dim_order = {opts.dim_order.data(), opts.dim_order.size()};
    spec.strides = {opts.strides.data(), opts.strides.size()};
    spec.data = data;
    spec.dynamism = opts.dynamism;
    spec.device_type = opts.device;
    spec.device_index = opts.index;
    const executorch::runtime::Error err = view_.reset(spec);
    if (err != executorch::runtime::Error::Ok) {
      std::fprintf(stderr, "TestTensor: TensorImplView refused the metadata (error 0x%x)\n",
                   static_cast<unsigned>(err));
      std::abort();
    }
  }
  TestTensor(const TestTensor&) = delete;
  TestTensor& operator=(const TestTensor&) = delete;

  Tensor& t() {
    return view_.tensor();
  }

  /// The tensor's current sizes (they change when a kernel resizes it).
  std::vector<SizesType> sizes() const {
    return std::vector<SizesType>(view_.tensor().sizes().begin(), view_.tensor().sizes().end());
  }

  std::vector<StridesType> strides() const {
    return std::vector<StridesType>(view_.tensor().strides().begin(), view_.tensor().strides().end());
  }

 private:
  AnyRankTensorView view_;
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
