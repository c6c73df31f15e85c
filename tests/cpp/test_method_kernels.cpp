// et_copy::method_kernels() in a process where another library registered
// et_copy::_d2h_copy.out first (as ExecuTorch's kernel library does) and an
// unrelated operator: the list hands out et-copy's kernels for both et_copy
// names and keeps every other operator the registry holds.
#include <gtest/gtest.h>

#include <cstring>

#include <et_copy/copy_ops.h>
#include <et_copy/registration.h>
#include <executorch/runtime/kernel/operator_registry.h>

namespace {

using executorch::runtime::EValue;
using executorch::runtime::Kernel;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::OpFunction;
using executorch::runtime::Span;

void foreign_d2h(KernelRuntimeContext&, Span<EValue*>) {}
void other_op(KernelRuntimeContext&, Span<EValue*>) {}
void later_op(KernelRuntimeContext&, Span<EValue*>) {}

const Kernel kForeign[] = {Kernel(et_copy::kD2hCopyOutName, &foreign_d2h), Kernel("test::other.out", &other_op)};
const Kernel kLater[] = {Kernel("test::later.out", &later_op)};

class ForeignFirst : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(executorch::runtime::register_kernels({kForeign, 2}), executorch::runtime::Error::Ok);
  }
};
const auto* const env = ::testing::AddGlobalTestEnvironment(new ForeignFirst);

// The function the list gives for `name`, and how often the name appears.
OpFunction find(Span<const Kernel> list, const char* name, int* count) {
  OpFunction fn = nullptr;
  *count = 0;
  for (const Kernel& k : list) {
    if (k.name_ != nullptr && std::strcmp(k.name_, name) == 0) {
      fn = k.op_;
      ++*count;
    }
  }
  return fn;
}

TEST(MethodKernels, GivesEtCopysKernelsForBothNamesThoughAnotherLibraryRegisteredOne) {
  const auto list = et_copy::method_kernels();
  int n = 0;
  EXPECT_EQ(find(list, et_copy::kD2hCopyOutName, &n), &et_copy::d2h_copy_out_boxed);
  EXPECT_EQ(n, 1); // the foreign kernel is left out, not shadowed
  EXPECT_EQ(find(list, et_copy::kH2dCopyOutName, &n), &et_copy::h2d_copy_out_boxed);
  EXPECT_EQ(n, 1);
  // The global registry is untouched: the foreign kernel still owns the name there.
  EXPECT_EQ(et_copy::kernel_owner(et_copy::kD2hCopyOutName), et_copy::Registration::kAlreadyOther);
  EXPECT_EQ(et_copy::kernel_owner(et_copy::kH2dCopyOutName), et_copy::Registration::kAbsent);
}

TEST(MethodKernels, KeepsEveryOtherRegisteredOperatorSoTheMethodResolvesAllOfThemInTheList) {
  const auto list = et_copy::method_kernels();
  int n = 0;
  EXPECT_EQ(find(list, "test::other.out", &n), &other_op);
  EXPECT_EQ(list.size(), executorch::runtime::get_registered_kernels().size() + 1); // + our h2d
}

TEST(MethodKernels, ReusesItsSnapshotUntilTheRegistryGrowsAndKeepsOldSpansValid) {
  const auto first = et_copy::method_kernels();
  EXPECT_EQ(et_copy::method_kernels().data(), first.data());
  ASSERT_EQ(executorch::runtime::register_kernels({kLater, 1}), executorch::runtime::Error::Ok);
  const auto second = et_copy::method_kernels();
  int n = 0;
  EXPECT_EQ(find(second, "test::later.out", &n), &later_op);
  EXPECT_EQ(find(first, "test::later.out", &n), nullptr);
  // The older span still reads: a method loaded with it may hold it.
  EXPECT_EQ(find(first, et_copy::kD2hCopyOutName, &n), &et_copy::d2h_copy_out_boxed);
}

} // namespace
