// Registration in a process where nothing has registered et_copy kernels or a
// CUDA allocator: the global environment below observes that fresh state and
// makes the first registrations before any test runs, so the tests hold in
// any order.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_allocator.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include "test_tensors.h"

namespace {

using et_copy::KernelRegistration;
using et_copy::Registration;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Span;
using namespace et_copy_test;

struct FreshState {
  Registration h2d_owner = Registration::kFailed;
  Registration d2h_owner = Registration::kFailed;
  Error copy_without_allocator = Error::Ok;
  std::string copy_diagnostic;
  bool out_untouched = false;
  std::array<KernelRegistration, 2> first_kernels{};
  Registration first_allocator = Registration::kFailed;
};

FreshState& fresh() {
  static FreshState state;
  return state;
}

class FreshProcess : public ::testing::Environment {
 public:
  void SetUp() override {
    FreshState& s = fresh();
    s.h2d_owner = et_copy::kernel_owner(et_copy::kH2dCopyOutName);
    s.d2h_owner = et_copy::kernel_owner(et_copy::kD2hCopyOutName);

    // With no allocator for CUDA a copy has nowhere to go.
    GuardedBuffer host(8), device(8, 0x3C);
    host.fill_pattern();
    TestTensor self(ScalarType::Float, {2}, host.data());
    TestTensor::Options cuda;
    cuda.device = DeviceType::CUDA;
    TestTensor out(ScalarType::Float, {2}, device.data(), cuda);
    et_copy::CopyDiagnostic diag;
    s.copy_without_allocator = et_copy::h2d_copy(self.t(), out.t(), &diag);
    s.copy_diagnostic = diag.message;
    s.out_untouched = device.contents() == std::vector<uint8_t>(8, 0x3C);

    s.first_kernels = et_copy::register_kernels();
    s.first_allocator = et_copy::use_simulated_device();
  }
};

const ::testing::Environment* const kFreshProcess = ::testing::AddGlobalTestEnvironment(new FreshProcess);

TEST(Registration, KernelsAreAbsentFromTheRuntimeAlone) {
  // libexecutorch.so carries no et_copy kernels; only a kernel library or
  // register_kernels() adds them.
  EXPECT_EQ(fresh().h2d_owner, Registration::kAbsent);
  EXPECT_EQ(fresh().d2h_owner, Registration::kAbsent);
}

TEST(Registration, CopyWithNoAllocatorIsNotFoundAndLeavesOutUntouched) {
  EXPECT_EQ(fresh().copy_without_allocator, Error::NotFound);
  EXPECT_NE(fresh().copy_diagnostic.find("no DeviceAllocator is registered for CUDA"), std::string::npos)
      << fresh().copy_diagnostic;
  EXPECT_TRUE(fresh().out_untouched);
}

TEST(Registration, FirstRegisterKernelsCallRegistersBoth) {
  const auto& r = fresh().first_kernels;
  EXPECT_STREQ(r[0].op_name, et_copy::kH2dCopyOutName);
  EXPECT_STREQ(r[1].op_name, et_copy::kD2hCopyOutName);
  for (const auto& k : r) {
    EXPECT_EQ(k.outcome, Registration::kRegistered) << k.op_name;
    EXPECT_EQ(k.error, Error::Ok) << k.op_name;
  }
}

TEST(Registration, RegisterKernelsAgainReportsAlreadyOursAndRegistersNothing) {
  const size_t before = executorch::runtime::get_registered_kernels().size();
  for (int i = 0; i < 3; ++i) {
    for (const auto& k : et_copy::register_kernels()) {
      EXPECT_EQ(k.outcome, Registration::kAlreadyOurs) << k.op_name;
      EXPECT_EQ(k.error, Error::Ok);
    }
  }
  EXPECT_EQ(executorch::runtime::get_registered_kernels().size(), before);
  EXPECT_EQ(et_copy::kernel_owner(et_copy::kH2dCopyOutName), Registration::kAlreadyOurs);
  EXPECT_EQ(et_copy::kernel_owner(et_copy::kD2hCopyOutName), Registration::kAlreadyOurs);
}

TEST(Registration, KernelOwnerOfAnUnregisteredNameIsAbsent) {
  EXPECT_EQ(et_copy::kernel_owner("et_copy::_h2d_copy"), Registration::kAbsent);
  EXPECT_EQ(et_copy::kernel_owner("aten::add.out"), Registration::kAbsent);
}

TEST(Registration, TheRegistryRunsOurKernels) {
  auto fn = executorch::runtime::get_op_function_from_registry(et_copy::kH2dCopyOutName);
  ASSERT_TRUE(fn.ok());
  auto& alloc = et_copy::simulated_device_allocator();
  auto dev = alloc.allocate(12, 0);
  ASSERT_TRUE(dev.ok());
  GuardedBuffer host(12);
  host.fill_pattern();
  TestTensor self(ScalarType::Int, {3}, host.data());
  TestTensor::Options cuda;
  cuda.device = DeviceType::CUDA;
  TestTensor out(ScalarType::Int, {3}, dev.get(), cuda);
  EValue vals[3] = {EValue(self.t()), EValue(out.t()), EValue()};
  EValue* stack[3] = {&vals[0], &vals[1], &vals[2]};
  const auto copies = alloc.stats().h2d_copies;
  KernelRuntimeContext ctx;
  (*fn)(ctx, Span<EValue*>(stack, 3));
  EXPECT_EQ(ctx.failure_state(), Error::Ok);
  EXPECT_EQ(alloc.stats().h2d_copies, copies + 1);
  // Device memory faults on a host read, as a GPU's does: look through the
  // allocator's inspection hook.
  auto alias = alloc.host_alias(dev.get(), 12, 0);
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(std::memcmp(alias.get(), host.data(), 12), 0);
  alloc.deallocate(dev.get(), 0);
}

TEST(Registration, FirstAllocatorRegistrationInstallsTheSimulatedDevice) {
  EXPECT_EQ(fresh().first_allocator, Registration::kRegistered);
  EXPECT_EQ(executorch::runtime::get_device_allocator(DeviceType::CUDA), &et_copy::simulated_device_allocator());
}

TEST(Registration, RegisteringTheSimulatedDeviceAgainReportsAlreadyOurs) {
  EXPECT_EQ(et_copy::use_simulated_device(), Registration::kAlreadyOurs);
  EXPECT_EQ(et_copy::register_allocator(&et_copy::simulated_device_allocator()), Registration::kAlreadyOurs);
}

TEST(Registration, ADeviceCountOutsideOneTo127FailsWithTheErrorAndKeepsTheCount) {
  for (int bad : {0, 128, -1}) {
    Error err = Error::Ok;
    EXPECT_EQ(et_copy::use_simulated_device(bad, &err), Registration::kFailed) << bad;
    EXPECT_EQ(err, Error::InvalidArgument) << bad;
    EXPECT_EQ(et_copy::simulated_device_allocator().device_count().get(), 1) << bad;
  }
  Error err = Error::Internal;
  EXPECT_EQ(et_copy::use_simulated_device(127, &err), Registration::kAlreadyOurs);
  EXPECT_EQ(err, Error::Ok);
  EXPECT_EQ(et_copy::simulated_device_allocator().device_count().get(), 127);
  EXPECT_EQ(et_copy::use_simulated_device(1, &err), Registration::kAlreadyOurs);
}

TEST(Registration, AnotherAllocatorForTheSameTypeIsReportedAndNotRegistered) {
  // A second registration for CUDA would abort the process; the call must
  // notice the slot is taken and leave it alone.
  static et_copy::SimulatedDeviceAllocator other;
  EXPECT_EQ(et_copy::register_allocator(&other), Registration::kAlreadyOther);
  EXPECT_EQ(executorch::runtime::get_device_allocator(DeviceType::CUDA), &et_copy::simulated_device_allocator());
}

TEST(Registration, NullAllocatorFails) {
  EXPECT_EQ(et_copy::register_allocator(nullptr), Registration::kFailed);
}

TEST(Registration, OutcomesHaveStableNames) {
  EXPECT_STREQ(et_copy::registration_name(Registration::kRegistered), "registered");
  EXPECT_STREQ(et_copy::registration_name(Registration::kAlreadyOurs), "already et_copy");
  EXPECT_STREQ(et_copy::registration_name(Registration::kAlreadyOther), "already other");
  EXPECT_STREQ(et_copy::registration_name(Registration::kFailed), "failed");
  EXPECT_STREQ(et_copy::registration_name(Registration::kAbsent), "absent");
}

} // namespace
