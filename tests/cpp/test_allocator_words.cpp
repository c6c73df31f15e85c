// A CountingDeviceAllocator of the caller's own, registered for CUDA: when it
// fails a copy, the copy kernels' diagnostic carries its error code and
// then its own words (failure_message()) after ": ", however short, and
// nothing after the code when it has none.
//
// Registry state: this process registers WordsAllocator for CUDA, and no
// kernels (the tests call h2d_copy and d2h_copy directly).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/counting_device_allocator.h>
#include <executorch/runtime/core/device_allocator.h>

#include "test_tensors.h"

namespace {

using et_copy::CopyKind;
using et_copy::CountingDeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::Result;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;
using namespace et_copy_test;

// Host memory standing for one device; fails every copy while `failing`,
// with `words` as what it says about the failure.
class WordsAllocator final : public CountingDeviceAllocator {
 public:
  bool failing = false;
  std::string words;

  const char* name() const override {
    return "words";
  }
  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }
  const char* failure_message() const override {
    return words.c_str();
  }

 private:
  Result<int> count_devices() const override {
    return 1;
  }
  Result<void*> allocate_bytes(size_t, DeviceIndex, size_t) override {
    return Error::NotSupported;
  }
  Released release_bytes(void*, DeviceIndex) override {
    return {};
  }
  Error move_bytes(CopyKind, void* dst, const void* src, size_t n, DeviceIndex) override {
    if (failing) {
      return Error::Internal;
    }
    std::memcpy(dst, src, n);
    return Error::Ok;
  }
};

WordsAllocator& allocator() {
  static WordsAllocator a;
  return a;
}

class Registered : public ::testing::Environment {
 public:
  void SetUp() override {
    executorch::runtime::register_device_allocator(&allocator());
    ASSERT_EQ(executorch::runtime::get_device_allocator(DeviceType::CUDA), &allocator());
  }
};
const auto* const env = ::testing::AddGlobalTestEnvironment(new Registered);

// The diagnostic of a failed 16-byte copy in direction `h2d`.
std::string failed_copy(bool h2d) {
  GuardedBuffer host(16, 1), device(16, 2);
  TestTensor::Options on_device;
  on_device.device = DeviceType::CUDA;
  TestTensor self(ScalarType::Float, {4}, h2d ? host.data() : device.data(), h2d ? TestTensor::Options{} : on_device);
  TestTensor out(ScalarType::Float, {4}, h2d ? device.data() : host.data(), h2d ? on_device : TestTensor::Options{});
  et_copy::CopyDiagnostic diag;
  const Error err = h2d ? et_copy::h2d_copy(self.t(), out.t(), &diag) : et_copy::d2h_copy(self.t(), out.t(), &diag);
  EXPECT_EQ(err, Error::Internal);
  EXPECT_EQ(h2d ? device.contents() : host.contents(), std::vector<uint8_t>(16, h2d ? 2 : 1));
  return diag.message;
}

TEST(AllocatorWords, AFailedCopyNamesTheCodeThenTheAllocatorsWordsAfterAColonHoweverShort) {
  allocator().failing = true;
  for (const bool h2d : {true, false}) {
    const std::string op = h2d ? "et_copy::_h2d_copy.out" : "et_copy::_d2h_copy.out";
    const std::string failed = op + ": the device allocator failed the 16-byte copy (error 0x1)";
    allocator().words = "";
    EXPECT_EQ(failed_copy(h2d), failed);
    allocator().words = "x";
    EXPECT_EQ(failed_copy(h2d), failed + ": x");
    allocator().words = "the device fell over";
    EXPECT_EQ(failed_copy(h2d), failed + ": the device fell over");
  }
  allocator().failing = false;
}

TEST(AllocatorWords, ACopyThatSucceedsMovesTheBytesWhateverTheWords) {
  allocator().words = "stale words from an earlier failure";
  GuardedBuffer host(16), device(16);
  host.fill_pattern();
  TestTensor::Options on_device;
  on_device.device = DeviceType::CUDA;
  TestTensor self(ScalarType::Float, {4}, host.data());
  TestTensor out(ScalarType::Float, {4}, device.data(), on_device);
  et_copy::CopyDiagnostic diag;
  ASSERT_EQ(et_copy::h2d_copy(self.t(), out.t(), &diag), Error::Ok);
  EXPECT_STREQ(diag.message, "");
  EXPECT_EQ(device.contents(), host.contents());
  EXPECT_EQ(allocator().stats().h2d_copies, 1u);
}

} // namespace
