// Registration in a process where another library got there first: before
// any test runs, the environment below registers a foreign kernel under
// et_copy::_h2d_copy.out (as ExecuTorch's kernel library does) and a foreign
// CUDA allocator, then calls et-copy's registration functions once.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_allocator.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include "test_tensors.h"

namespace {

using et_copy::KernelRegistration;
using et_copy::Registration;
using executorch::runtime::DeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Result;
using executorch::runtime::Span;
using namespace et_copy_test;

std::atomic<int> foreign_kernel_calls{0};

void foreign_h2d(KernelRuntimeContext&, Span<EValue*>) {
  foreign_kernel_calls++;
}

/// Some other library's CUDA allocator: host memory, no bounds checks, and
/// not one of et-copy's CountingDeviceAllocators. Fails copies on device 7.
class ForeignAllocator final : public DeviceAllocator {
 public:
  Result<void*> allocate(size_t, DeviceIndex, size_t) override {
    return Error::NotSupported;
  }
  void deallocate(void*, DeviceIndex) override {}
  Error copy_host_to_device(void* dst, const void* src, size_t n, DeviceIndex i) override {
    return copy(dst, src, n, i);
  }
  Error copy_device_to_host(void* dst, const void* src, size_t n, DeviceIndex i) override {
    return copy(dst, src, n, i);
  }
  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }

  std::atomic<int> copies{0};
  std::atomic<int> last_index{-100};

 private:
  Error copy(void* dst, const void* src, size_t n, DeviceIndex i) {
    last_index = i;
    if (i == 7) {
      return Error::Internal;
    }
    std::memcpy(dst, src, n);
    copies++;
    return Error::Ok;
  }
};

ForeignAllocator& foreign_allocator() {
  static ForeignAllocator a;
  return a;
}

struct Observed {
  Registration h2d_owner = Registration::kFailed;
  Registration d2h_owner = Registration::kFailed;
  std::array<KernelRegistration, 2> first_kernels{};
  Registration first_allocator = Registration::kFailed;
};

Observed& observed() {
  static Observed o;
  return o;
}

class ForeignFirst : public ::testing::Environment {
 public:
  void SetUp() override {
    static const executorch::runtime::Kernel kForeign(et_copy::kH2dCopyOutName, &foreign_h2d);
    ASSERT_EQ(executorch::runtime::register_kernels({&kForeign, 1}), Error::Ok);
    executorch::runtime::register_device_allocator(&foreign_allocator());

    Observed& o = observed();
    o.h2d_owner = et_copy::kernel_owner(et_copy::kH2dCopyOutName);
    o.d2h_owner = et_copy::kernel_owner(et_copy::kD2hCopyOutName);
    o.first_kernels = et_copy::register_kernels();
    o.first_allocator = et_copy::use_simulated_device();
  }
};

const ::testing::Environment* const kForeignFirst = ::testing::AddGlobalTestEnvironment(new ForeignFirst);

TEST(ForeignRegistration, KernelOwnerReportsTheForeignKernelAsOther) {
  EXPECT_EQ(observed().h2d_owner, Registration::kAlreadyOther);
  EXPECT_EQ(observed().d2h_owner, Registration::kAbsent);
  EXPECT_EQ(et_copy::kernel_owner(et_copy::kH2dCopyOutName), Registration::kAlreadyOther);
}

TEST(ForeignRegistration, RegisterKernelsRegistersOnlyTheMissingKernel) {
  const auto& r = observed().first_kernels;
  EXPECT_EQ(r[0].outcome, Registration::kAlreadyOther);
  EXPECT_EQ(r[1].outcome, Registration::kRegistered);
  EXPECT_EQ(et_copy::kernel_owner(et_copy::kD2hCopyOutName), Registration::kAlreadyOurs);
  const auto again = et_copy::register_kernels();
  EXPECT_EQ(again[0].outcome, Registration::kAlreadyOther);
  EXPECT_EQ(again[1].outcome, Registration::kAlreadyOurs);
}

TEST(ForeignRegistration, TheForeignKernelStaysTheOneTheRegistryRuns) {
  auto fn = executorch::runtime::get_op_function_from_registry(et_copy::kH2dCopyOutName);
  ASSERT_TRUE(fn.ok());
  const int calls = foreign_kernel_calls;
  KernelRuntimeContext ctx;
  (*fn)(ctx, Span<EValue*>());
  EXPECT_EQ(foreign_kernel_calls, calls + 1);
}

TEST(ForeignRegistration, SimulatedDeviceIsNotRegisteredOverAForeignAllocator) {
  EXPECT_EQ(observed().first_allocator, Registration::kAlreadyOther);
  EXPECT_EQ(et_copy::use_simulated_device(), Registration::kAlreadyOther);
  EXPECT_EQ(executorch::runtime::get_device_allocator(DeviceType::CUDA), &foreign_allocator());
}

TEST(ForeignRegistration, KernelsCopyThroughAForeignAllocatorWithTheTensorsIndex) {
  // A foreign allocator cannot say how many devices it has, so the kernel
  // passes the tensor's device index through and lets the allocator judge.
  GuardedBuffer host(16), device(16);
  host.fill_pattern();
  TestTensor self(ScalarType::Float, {4}, host.data());
  TestTensor::Options cuda3;
  cuda3.device = DeviceType::CUDA;
  cuda3.index = 3;
  TestTensor out(ScalarType::Float, {4}, device.data(), cuda3);
  const int copies = foreign_allocator().copies;
  ASSERT_EQ(et_copy::h2d_copy(self.t(), out.t()), Error::Ok);
  EXPECT_EQ(foreign_allocator().copies, copies + 1);
  EXPECT_EQ(foreign_allocator().last_index, 3);
  EXPECT_EQ(device.contents(), host.contents());
}

TEST(ForeignRegistration, AnAllocatorErrorIsReturnedAndOutKeepsItsShape) {
  GuardedBuffer host(8, 1), device(16, 2);
  TestTensor self(ScalarType::Float, {2}, host.data());
  TestTensor::Options cuda7;
  cuda7.device = DeviceType::CUDA;
  cuda7.index = 7;
  cuda7.dynamism = TensorShapeDynamism::DYNAMIC_BOUND;
  TestTensor out(ScalarType::Float, {4}, device.data(), cuda7);
  et_copy::CopyDiagnostic diag;
  EXPECT_EQ(et_copy::h2d_copy(self.t(), out.t(), &diag), Error::Internal);
  EXPECT_EQ(out.sizes(), std::vector<SizesType>{4});
  EXPECT_EQ(device.contents(), std::vector<uint8_t>(16, 2));
  EXPECT_NE(std::string(diag.message).find("device allocator failed"), std::string::npos) << diag.message;
}

} // namespace
