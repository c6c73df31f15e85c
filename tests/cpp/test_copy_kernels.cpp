// The copy kernels (direct, kernel-API and boxed forms) against the
// process-wide simulated allocator, registered for CUDA by each test's
// fixture. No kernel is registered with ExecuTorch in this executable.
#include <gtest/gtest.h>

#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_allocator.h>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_dimension_limit.h>

#include "device_copy.h"
#include "test_tensors.h"

namespace {

using et_copy::CopyDiagnostic;
using et_copy::DeviceAllocatorStats;
using et_copy::SimulatedDeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Span;
using namespace et_copy_test;

constexpr DeviceType kCuda = DeviceType::CUDA;
constexpr DeviceType kCpu = DeviceType::CPU;

/// A buffer from the simulated device, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t nbytes, DeviceIndex index = 0) : nbytes_(nbytes), index_(index) {
    auto r = et_copy::simulated_device_allocator().allocate(nbytes, index);
    EXPECT_TRUE(r.ok());
    data_ = r.ok() ? static_cast<uint8_t*>(r.get()) : nullptr;
  }
  ~DeviceBuffer() {
    et_copy::simulated_device_allocator().deallocate(data_, index_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  uint8_t* data() {
    return data_;
  }
  // A host read of device memory faults, as on a GPU: tests look at the
  // bytes through the allocator's inspection hook, as a debugger would.
  // Empty (and a test failure) when the buffer has no alias.
  std::vector<uint8_t> contents() const {
    auto alias = et_copy::simulated_device_allocator().host_alias(data_, nbytes_, index_);
    if (!alias.ok()) {
      ADD_FAILURE() << "host_alias of a " << nbytes_ << "-byte device buffer failed";
      return {};
    }
    const auto* bytes = static_cast<const uint8_t*>(alias.get());
    return std::vector<uint8_t>(bytes, bytes + nbytes_);
  }

 private:
  size_t nbytes_;
  DeviceIndex index_;
  uint8_t* data_;
};

/// Where the host may read [p, p + n) of a test buffer: host memory is
/// itself; simulated device memory (any device) is reached through
/// host_alias, since a host read of it faults. nullptr, failing the test,
/// for a range that starts in a device allocation and leaves it.
const uint8_t* host_view(const void* p, size_t n) {
  auto& a = et_copy::simulated_device_allocator();
  const auto count = a.device_count();
  for (int d = 0; n > 0 && count.ok() && d < count.get(); ++d) {
    if (a.is_device_memory(p, 1, static_cast<DeviceIndex>(d))) {
      auto alias = a.host_alias(p, n, static_cast<DeviceIndex>(d));
      EXPECT_TRUE(alias.ok()) << n << " bytes at a device pointer of device " << d << " leave its allocation";
      return alias.ok() ? static_cast<const uint8_t*>(alias.get()) : nullptr;
    }
  }
  return static_cast<const uint8_t*>(p);
}

TestTensor::Options on(DeviceType device, DeviceIndex index = 0) {
  TestTensor::Options o;
  o.device = device;
  o.index = index;
  return o;
}

TestTensor::Options dynamic(DeviceType device, TensorShapeDynamism d) {
  TestTensor::Options o = on(device);
  o.dynamism = d;
  return o;
}

Error copy(bool h2d, const Tensor& self, Tensor& out, CopyDiagnostic* diag) {
  return h2d ? et_copy::h2d_copy(self, out, diag) : et_copy::d2h_copy(self, out, diag);
}

const char* op(bool h2d) {
  return h2d ? et_copy::kH2dCopyOutName : et_copy::kD2hCopyOutName;
}

// A diagnostic reads empty until a copy is refused, whatever its memory held
// before: its constructor sets only the first byte (zeroing all of it cost a
// sixth of a kernel call), and that byte is the one a reader stops at.
TEST(CopyDiagnosticWords, AFreshDiagnosticIsEmptyWhateverItsMemoryHeld) {
  alignas(CopyDiagnostic) unsigned char storage[sizeof(CopyDiagnostic)];
  std::memset(storage, 'x', sizeof storage);
  asm volatile("" : : "r"(storage) : "memory"); // keeps the fill: the constructor's start would let it be dropped
  const auto* d = new (storage) CopyDiagnostic();
  EXPECT_STREQ(d->message, "");
}

class CopyKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto r = et_copy::use_simulated_device();
    ASSERT_TRUE(r == et_copy::Registration::kRegistered || r == et_copy::Registration::kAlreadyOurs)
        << et_copy::registration_name(r);
    ASSERT_EQ(alloc().set_device_count(1), Error::Ok);
    before_ = alloc().stats();
  }

  static SimulatedDeviceAllocator& alloc() {
    return et_copy::simulated_device_allocator();
  }

  /// Copies the allocator made since SetUp, in the given direction.
  uint64_t copies_since_setup(bool h2d) const {
    const DeviceAllocatorStats now = alloc().stats();
    return h2d ? now.h2d_copies - before_.h2d_copies : now.d2h_copies - before_.d2h_copies;
  }

  /// Runs a copy expected to fail with `want`, and checks the promises a
  /// rejection makes: the diagnostic names the op and says `needle`, `out`
  /// keeps its bytes and shape, and no copy reached the allocator.
  void expect_rejected(bool h2d, const Tensor& self, Tensor& out, Error want, const std::string& needle) {
    const auto* out_bytes = static_cast<const uint8_t*>(out.const_data_ptr());
    // Read the bytes out's shape covers (nbytes() is safe only when the
    // sizes are non-negative, which every test but one keeps), through the
    // host alias when out is device memory.
    size_t n = 0;
    bool readable = out_bytes != nullptr;
    for (auto s : out.sizes()) {
      readable = readable && s >= 0;
    }
    if (readable) {
      n = out.nbytes();
      out_bytes = host_view(out_bytes, n);
      readable = out_bytes != nullptr;
    }
    const std::vector<uint8_t> bytes_before(readable ? out_bytes : nullptr, readable ? out_bytes + n : nullptr);
    const std::vector<SizesType> sizes_before(out.sizes().begin(), out.sizes().end());
    const std::vector<StridesType> strides_before(out.strides().begin(), out.strides().end());

    CopyDiagnostic diag;
    EXPECT_EQ(copy(h2d, self, out, &diag), want);
    const std::string msg = diag.message;
    EXPECT_NE(msg.find(op(h2d)), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "diagnostic \"" << msg << "\" does not say \"" << needle << "\"";
    EXPECT_EQ(std::vector<SizesType>(out.sizes().begin(), out.sizes().end()), sizes_before);
    EXPECT_EQ(std::vector<StridesType>(out.strides().begin(), out.strides().end()), strides_before);
    if (readable) {
      EXPECT_EQ(std::vector<uint8_t>(out_bytes, out_bytes + n), bytes_before);
    }
    EXPECT_EQ(copies_since_setup(true), 0u);
    EXPECT_EQ(copies_since_setup(false), 0u);
  }

  DeviceAllocatorStats before_;
};

// ---- rejections, in both directions --------------------------------------

class Rejections : public CopyKernels, public ::testing::WithParamInterface<bool> {
 protected:
  bool h2d() const {
    return GetParam();
  }
};

INSTANTIATE_TEST_SUITE_P(BothDirections, Rejections, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "h2d" : "d2h"; });

TEST_P(Rejections, SelfOnTheWrongSideIsInvalidArgument) {
  GuardedBuffer a(24), b(24);
  DeviceBuffer dev(24);
  // h2d wants self on CPU: give it a CUDA self. d2h wants a device self:
  // give it a CPU self. out is on its correct side in both.
  TestTensor self(ScalarType::Float, {6}, h2d() ? dev.data() : a.data(), on(h2d() ? kCuda : kCpu));
  DeviceBuffer dev_out(24);
  TestTensor out(ScalarType::Float, {6}, h2d() ? dev_out.data() : b.data(), on(h2d() ? kCuda : kCpu));
  expect_rejected(h2d(), self.t(), out.t(), Error::InvalidArgument,
                  h2d() ? "self must be a host (CPU) tensor" : "self must be a device tensor");
}

TEST_P(Rejections, OutOnTheWrongSideIsInvalidArgument) {
  GuardedBuffer host_self(24), host_out(24, 7);
  DeviceBuffer dev_self(24), dev_out(24);
  // Both tensors on the same side as self should be.
  TestTensor self(ScalarType::Float, {6}, h2d() ? host_self.data() : dev_self.data(), on(h2d() ? kCpu : kCuda));
  TestTensor out(ScalarType::Float, {6}, h2d() ? host_out.data() : dev_out.data(), on(h2d() ? kCpu : kCuda));
  expect_rejected(h2d(), self.t(), out.t(), Error::InvalidArgument,
                  h2d() ? "out must be a device tensor" : "out must be a host (CPU) tensor");
}

// TensorImpl's defaults leave a tensor with no dim order or no strides. In
// self or in out, either is refused by name before anything is read through
// it (the one-pass shortcut gives up, the named checks answer), and out
// keeps its bytes.
// Builds without NDEBUG abort earlier, in ExecuTorch's accessors (an
// ArrayRef of a null array and a length), so only release builds get here.
TEST_P(Rejections, NoDimOrderOrNoStridesInSelfOrOutIsRefusedNotRead) {
#ifndef NDEBUG
  GTEST_SKIP() << "ExecuTorch's ArrayRef asserts on a null dim order or null strides in builds without NDEBUG";
#endif
  using executorch::runtime::etensor::TensorImpl;
  for (int which = 0; which < 4; ++which) {
    const bool in_self = which % 2 == 0, dim_order = which < 2;
    SCOPED_TRACE(std::string(in_self ? "self" : "out") + (dim_order ? " without a dim order" : " without strides"));
    GuardedBuffer host(24, 0x10);
    DeviceBuffer dev(24);
    SizesType self_sizes[] = {2, 3}, out_sizes[] = {2, 3};
    DimOrderType self_order[] = {0, 1}, out_order[] = {0, 1};
    StridesType self_strides[] = {3, 1}, out_strides[] = {3, 1};
    TensorImpl self_impl(ScalarType::Float, 2, self_sizes, h2d() ? host.data() : dev.data(),
                         in_self && dim_order ? nullptr : self_order, in_self && !dim_order ? nullptr : self_strides,
                         TensorShapeDynamism::STATIC, h2d() ? kCpu : kCuda);
    TensorImpl out_impl(ScalarType::Float, 2, out_sizes, h2d() ? dev.data() : host.data(),
                        !in_self && dim_order ? nullptr : out_order, !in_self && !dim_order ? nullptr : out_strides,
                        TensorShapeDynamism::STATIC, h2d() ? kCuda : kCpu);
    Tensor self(&self_impl), out(&out_impl);
    CopyDiagnostic diag;
    EXPECT_EQ(copy(h2d(), self, out, &diag), Error::InvalidArgument);
    const std::string want =
        std::string(in_self ? "self" : "out") +
        (dim_order ? " has a dim order that is not a permutation of its 2 dims" : " is not dense in its dim order");
    const std::string message = diag.message;
    EXPECT_NE(message.find(want), std::string::npos) << message;
    EXPECT_EQ(host.contents(), std::vector<uint8_t>(24, 0x10));
    EXPECT_EQ(dev.contents(), std::vector<uint8_t>(24, SimulatedDeviceAllocator::kFreshByte));
    EXPECT_EQ(copies_since_setup(true), 0u);
    EXPECT_EQ(copies_since_setup(false), 0u);
  }
}

// Builds self and out on the correct sides for the direction, over the
// given buffers and options.
struct Sides {
  Sides(bool h2d, ScalarType self_dtype, std::vector<SizesType> self_sizes, void* host, void* device,
        ScalarType out_dtype, std::vector<SizesType> out_sizes, TestTensor::Options self_opts = {},
        TestTensor::Options out_opts = {})
      : self(self_dtype, std::move(self_sizes), h2d ? host : device, with_device(self_opts, h2d ? kCpu : kCuda)),
        out(out_dtype, std::move(out_sizes), h2d ? device : host, with_device(out_opts, h2d ? kCuda : kCpu)) {}

  static TestTensor::Options with_device(TestTensor::Options o, DeviceType d) {
    o.device = d;
    return o;
  }

  TestTensor self;
  TestTensor out;
};

TEST_P(Rejections, DtypeMismatchIsRejectedBeforeAnyByteMoves) {
  // docs/design.md, sharp edge 3: float64[4] into float32[4] would write 32 bytes into 16.
  GuardedBuffer host(32, 9);
  host.fill_pattern();
  DeviceBuffer dev(32);
  Sides s(h2d(), ScalarType::Double, {4}, host.data(), dev.data(), ScalarType::Float, {4});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "dtype mismatch");
  EXPECT_TRUE(host.guards_intact());
}

TEST_P(Rejections, RankMismatchIsInvalidArgument) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  Sides s(h2d(), ScalarType::Float, {2, 3}, host.data(), dev.data(), ScalarType::Float, {6});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "rank mismatch");
}

TEST_P(Rejections, DimOrderMismatchIsInvalidArgument) {
  GuardedBuffer host(96);
  DeviceBuffer dev(96);
  TestTensor::Options last;
  last.dim_order = {0, 2, 1};
  Sides s(h2d(), ScalarType::Float, {2, 3, 4}, host.data(), dev.data(), ScalarType::Float, {2, 3, 4}, last, {});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "dim order mismatch");
}

TEST_P(Rejections, DimOrderThatIsNotAPermutationIsInvalidArgument) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  TestTensor::Options bad;
  bad.dim_order = {0, 0};
  bad.strides = {3, 1};
  Sides s(h2d(), ScalarType::Float, {2, 3}, host.data(), dev.data(), ScalarType::Float, {2, 3}, bad, {});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "not a permutation");
}

TEST_P(Rejections, StridesWithGapsAreInvalidArgument) {
  GuardedBuffer host(32);
  DeviceBuffer dev(32);
  TestTensor::Options gappy;
  gappy.strides = {4, 1}; // rows padded to 4 elements
  Sides s(h2d(), ScalarType::Float, {2, 3}, host.data(), dev.data(), ScalarType::Float, {2, 3}, gappy, {});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "self is not dense");
}

TEST_P(Rejections, OutWithOverlappingStridesIsInvalidArgument) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  TestTensor::Options overlapping;
  overlapping.strides = {1, 1};
  Sides s(h2d(), ScalarType::Float, {2, 3}, host.data(), dev.data(), ScalarType::Float, {2, 3}, {}, overlapping);
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "out is not dense");
}

TEST_P(Rejections, NullSelfDataIsInvalidArgument) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  Sides s(h2d(), ScalarType::Float, {6}, h2d() ? nullptr : host.data(), h2d() ? dev.data() : nullptr, ScalarType::Float,
          {6});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "self has no data");
}

TEST_P(Rejections, NullOutDataIsInvalidArgument) {
  GuardedBuffer host(24);
  host.fill_pattern();
  DeviceBuffer dev(24);
  Sides s(h2d(), ScalarType::Float, {6}, h2d() ? host.data() : nullptr, h2d() ? nullptr : dev.data(), ScalarType::Float,
          {6});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "out has no data");
}

TEST_P(Rejections, StaticOutWithAnotherShapeIsInvalidArgument) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  Sides s(h2d(), ScalarType::Float, {2, 3}, host.data(), dev.data(), ScalarType::Float, {3, 2});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument,
                  "out has static shape [3, 2] but self has shape [2, 3]");
}

TEST_P(Rejections, SelfBeyondDynamicOutCapacityIsInvalidArgument) {
  GuardedBuffer host(36);
  DeviceBuffer dev(36);
  Sides s(h2d(), ScalarType::Float, {3, 3}, host.data(), dev.data(), ScalarType::Float, {2, 2}, {},
          dynamic(kCpu, TensorShapeDynamism::DYNAMIC_BOUND));
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "beyond the capacity of out");
}

TEST_P(Rejections, SelfBeyondUnboundOutCapacityIsInvalidArgument) {
  // ExecuTorch has no memory to grow an unbound tensor into: its capacity
  // is what it was planned with, and a copy past it must be refused.
  GuardedBuffer host(36);
  DeviceBuffer dev(36);
  Sides s(h2d(), ScalarType::Float, {3, 3}, host.data(), dev.data(), ScalarType::Float, {2, 2}, {},
          dynamic(kCpu, TensorShapeDynamism::DYNAMIC_UNBOUND));
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "beyond the capacity of out");
}

TEST_P(Rejections, DeviceIndexBeyondDeviceCountIsInvalidArgument) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  TestTensor::Options dev1;
  dev1.index = 1;
  Sides s(h2d(), ScalarType::Float, {6}, host.data(), dev.data(), ScalarType::Float, {6},
          h2d() ? TestTensor::Options{} : dev1, h2d() ? dev1 : TestTensor::Options{});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument,
                  "CUDA device 1, but the simulated allocator has 1 device(s)");
}

TEST_P(Rejections, NegativeDeviceIndexOtherThanMinusOneIsInvalidArgument) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  TestTensor::Options bad;
  bad.index = -2;
  Sides s(h2d(), ScalarType::Float, {6}, host.data(), dev.data(), ScalarType::Float, {6},
          h2d() ? TestTensor::Options{} : bad, h2d() ? bad : TestTensor::Options{});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "device -2");
}

TEST_P(Rejections, UnknownDeviceTypeIsInvalidArgument) {
  GuardedBuffer host(24), other(24);
  TestTensor::Options unknown;
  unknown.device = static_cast<DeviceType>(7);
  TestTensor self(ScalarType::Float, {6}, h2d() ? host.data() : other.data(), h2d() ? on(kCpu) : unknown);
  TestTensor out(ScalarType::Float, {6}, h2d() ? other.data() : host.data(), h2d() ? unknown : on(kCpu));
  expect_rejected(h2d(), self.t(), out.t(), Error::InvalidArgument, "unknown device type 7");
}

TEST_P(Rejections, DeviceMemoryTheAllocatorDoesNotOwnIsRejectedByIt) {
  // A "device" tensor over plain host memory: the simulated allocator
  // refuses the copy, and the kernel reports the allocator's error.
  GuardedBuffer host(24, 1), fake_device(24, 2);
  Sides s(h2d(), ScalarType::Float, {6}, host.data(), fake_device.data(), ScalarType::Float, {6});
  CopyDiagnostic diag;
  const std::vector<uint8_t> before = (h2d() ? fake_device : host).contents();
  EXPECT_EQ(copy(h2d(), s.self.t(), s.out.t(), &diag), Error::InvalidArgument);
  EXPECT_NE(std::string(diag.message).find("device allocator failed the 24-byte copy"), std::string::npos)
      << diag.message;
  EXPECT_EQ((h2d() ? fake_device : host).contents(), before);
  EXPECT_TRUE(host.guards_intact());
  EXPECT_TRUE(fake_device.guards_intact());
}

TEST_P(Rejections, FailedCopyRestoresTheShapeOfAResizedOut) {
  // out would be resized from [4] to [2]; the allocator then refuses the
  // copy, and out must come back with shape [4].
  GuardedBuffer host(16, 3), fake_device(16, 4);
  Sides s(h2d(), ScalarType::Float, {2}, host.data(), fake_device.data(), ScalarType::Float, {4}, {},
          dynamic(kCpu, TensorShapeDynamism::DYNAMIC_BOUND));
  const std::vector<uint8_t> before = (h2d() ? fake_device : host).contents();
  CopyDiagnostic diag;
  EXPECT_EQ(copy(h2d(), s.self.t(), s.out.t(), &diag), Error::InvalidArgument);
  EXPECT_EQ(s.out.sizes(), std::vector<SizesType>{4});
  EXPECT_EQ((h2d() ? fake_device : host).contents(), before);
}

TEST_P(Rejections, MoreDimsThanExecuTorchSupportsIsInvalidArgument) {
  const std::vector<SizesType> ones(executorch::runtime::kTensorDimensionLimit + 1, 1);
  TestTensor::Options beyond; // the dense rule stops at 16 dims: strides given
  beyond.strides.assign(ones.size(), 1);
  GuardedBuffer host(4);
  DeviceBuffer dev(4);
  Sides s(h2d(), ScalarType::Float, ones, host.data(), dev.data(), ScalarType::Float, ones, beyond, beyond);
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "self has 17 dims; at most 16 are supported");
}

TEST_P(Rejections, NegativeSizeInAMalformedTensorIsInvalidArgument) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  Sides s(h2d(), ScalarType::Float, {2, 3}, host.data(), dev.data(), ScalarType::Float, {2, 3});
  // TensorImpl refuses negative sizes at construction; a corrupt program
  // can still produce one, so poke it into self's sizes afterwards.
  const_cast<SizesType*>(s.self.t().sizes().data())[0] = -2;
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "self has a negative size");
}

// ---- edges of each rule, both sides ---------------------------------------
// A tensor that passes its own checks must pass them on both of the kernel's
// paths (the one-pass common case and the named checks that run when the
// pair differs): each test pairs an unusual but valid tensor with an `out`
// of another dtype, so the kernel must get past the tensor to the mismatch.

TEST_P(Rejections, SixteenDimsAreWithinTheLimitOnEveryPath) {
  const std::vector<SizesType> ones(executorch::runtime::kTensorDimensionLimit, 1);
  GuardedBuffer host(8);
  DeviceBuffer dev(8);
  Sides s(h2d(), ScalarType::Float, ones, host.data(), dev.data(), ScalarType::Int, ones);
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "dtype mismatch: self has Float, out has Int");
}

TEST_P(Rejections, AnEmptyTensorsStridesDoNotMatter) {
  // No byte of an empty tensor is addressed, so any strides describe it.
  GuardedBuffer host(4);
  DeviceBuffer dev(4);
  TestTensor::Options odd;
  odd.strides = {7, 7};
  Sides s(h2d(), ScalarType::Float, {0, 3}, host.data(), dev.data(), ScalarType::Int, {0, 3}, odd);
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "dtype mismatch");
}

TEST_P(Rejections, ASizeOneDimsStrideDoesNotMatterOnEveryPath) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  TestTensor::Options odd;
  odd.strides = {3, 99, 1};
  Sides s(h2d(), ScalarType::Float, {2, 1, 3}, host.data(), dev.data(), ScalarType::Int, {2, 1, 3}, odd);
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "dtype mismatch");
}

TEST_P(Rejections, ARepeatedDimInADimOrderIsNotAPermutation) {
  GuardedBuffer host(24);
  DeviceBuffer dev(24);
  TestTensor::Options repeated;
  repeated.dim_order = {0, 0};
  repeated.strides = {3, 1};
  Sides s(h2d(), ScalarType::Float, {2, 3}, host.data(), dev.data(), ScalarType::Float, {2, 3}, repeated, repeated);
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument,
                  "self has a dim order that is not a permutation");
}

TEST_P(Rejections, ARepeatedSizeOneDimIsNotAPermutationAtEitherEndForSelfOrOut) {
  // A size-1 dim needs no stride check, so only the dim order's membership
  // check refuses it repeated: the walk meets the repeat last (first
  // position) or first (last position), in self and out alike, or in out alone.
  struct Case {
    std::vector<SizesType> sizes;
    std::vector<DimOrderType> repeated;
  };
  const Case cases[] = {{{1, 3}, {0, 0}}, {{3, 1}, {1, 1}}, {{1, 2, 3}, {0, 1, 0}}, {{3, 2, 1}, {2, 1, 2}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.repeated));
    GuardedBuffer host(24, 3);
    host.fill_pattern();
    DeviceBuffer dev(24);
    TestTensor::Options bad;
    bad.dim_order = c.repeated;
    bad.strides.assign(c.sizes.size(), 1);
    Sides both(h2d(), ScalarType::Float, c.sizes, host.data(), dev.data(), ScalarType::Float, c.sizes, bad, bad);
    expect_rejected(h2d(), both.self.t(), both.out.t(), Error::InvalidArgument,
                    "self has a dim order that is not a permutation");
    Sides out_only(h2d(), ScalarType::Float, c.sizes, host.data(), dev.data(), ScalarType::Float, c.sizes, {}, bad);
    expect_rejected(h2d(), out_only.self.t(), out_only.out.t(), Error::InvalidArgument,
                    "out has a dim order that is not a permutation");
    EXPECT_TRUE(host.guards_intact());
  }
}

TEST_P(Rejections, DimOrdersMustMatchEvenWhereSizeOneDimsMakeTheBytesAgree) {
  // [1, 3] in dim order {0, 1} and in {1, 0} hold the same bytes, but the
  // rule is that dim orders match: no path may skip it.
  GuardedBuffer host(12, 2);
  DeviceBuffer dev(12);
  TestTensor::Options transposed;
  transposed.dim_order = {1, 0};
  Sides s(h2d(), ScalarType::Float, {1, 3}, host.data(), dev.data(), ScalarType::Float, {1, 3}, {}, transposed);
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "dim order mismatch between self and out");
}

TEST_P(Rejections, ANegativeSizeIsRefusedForOneByteElementsToo) {
  // With 1-byte elements a negative size read as unsigned does not overflow
  // the byte count: only the sign check catches it.
  GuardedBuffer host(6);
  DeviceBuffer dev(6);
  Sides s(h2d(), ScalarType::Byte, {6}, host.data(), dev.data(), ScalarType::Byte, {6});
  const_cast<SizesType*>(s.self.t().sizes().data())[0] = -1;
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument, "self has a negative size");
}

TEST_P(Rejections, DeviceIndexEqualToTheDeviceCountIsRefusedByTheKernel) {
  // Index 1 with one device: the kernel refuses it by name before the
  // allocator is asked (no failed call counted).
  GuardedBuffer host(24, 5);
  DeviceBuffer dev(24);
  TestTensor::Options dev1;
  dev1.index = 1;
  Sides s(h2d(), ScalarType::Float, {6}, host.data(), dev.data(), ScalarType::Float, {6},
          h2d() ? TestTensor::Options{} : dev1, h2d() ? dev1 : TestTensor::Options{});
  expect_rejected(h2d(), s.self.t(), s.out.t(), Error::InvalidArgument,
                  h2d() ? "out is on CUDA device 1, but" : "self is on CUDA device 1, but");
  EXPECT_EQ(alloc().stats().failed_calls, before_.failed_calls);
}

TEST_P(Rejections, OneByteWithNoDataIsRefusedOnEitherSide) {
  GuardedBuffer host(1, 6);
  DeviceBuffer dev(1);
  Sides no_self(h2d(), ScalarType::Byte, {1}, h2d() ? nullptr : host.data(), h2d() ? dev.data() : nullptr,
                ScalarType::Byte, {1});
  expect_rejected(h2d(), no_self.self.t(), no_self.out.t(), Error::InvalidArgument, "self has no data");
  Sides no_out(h2d(), ScalarType::Byte, {1}, h2d() ? host.data() : nullptr, h2d() ? nullptr : dev.data(),
               ScalarType::Byte, {1});
  expect_rejected(h2d(), no_out.self.t(), no_out.out.t(), Error::InvalidArgument, "out has no data");
  EXPECT_EQ(alloc().stats().failed_calls, before_.failed_calls);
}

TEST_P(Rejections, AFailedCopyRestoresEveryDimOfALargeResizedOut) {
  // Sizes above 255 and more than one dim: the whole shape comes back.
  GuardedBuffer host(300 * 2 * 4, 3), fake_device(300 * 2 * 4, 4);
  Sides s(h2d(), ScalarType::Float, {299, 2}, host.data(), fake_device.data(), ScalarType::Float, {300, 2}, {},
          dynamic(kCpu, TensorShapeDynamism::DYNAMIC_BOUND));
  CopyDiagnostic diag;
  EXPECT_EQ(copy(h2d(), s.self.t(), s.out.t(), &diag), Error::InvalidArgument);
  EXPECT_EQ(s.out.sizes(), (std::vector<SizesType>{300, 2}));
  EXPECT_EQ(s.out.strides(), (std::vector<StridesType>{2, 1}));
}

// ---- successful copies ---------------------------------------------------

TEST_F(CopyKernels, RoundTripPreservesBytesForEveryDtype) {
  const ScalarType dtypes[] = {
      ScalarType::Byte, ScalarType::Char,     ScalarType::Short,  ScalarType::Int,          ScalarType::Long,
      ScalarType::Half, ScalarType::Float,    ScalarType::Double, ScalarType::ComplexFloat, ScalarType::ComplexDouble,
      ScalarType::Bool, ScalarType::BFloat16, ScalarType::UInt16, ScalarType::UInt32,       ScalarType::UInt64};
  for (ScalarType dtype : dtypes) {
    SCOPED_TRACE(executorch::runtime::toString(dtype));
    const size_t n = 15 * executorch::runtime::elementSize(dtype);
    GuardedBuffer src(n), dst(n);
    if (dtype == ScalarType::Bool) {
      for (size_t i = 0; i < n; ++i) {
        src.data()[i] = i % 3 == 0;
      }
    } else {
      src.fill_pattern(static_cast<uint8_t>(dtype));
    }
    DeviceBuffer dev(n);
    TestTensor host_self(dtype, {3, 5}, src.data());
    TestTensor device(dtype, {3, 5}, dev.data(), on(kCuda));
    TestTensor host_out(dtype, {3, 5}, dst.data());
    const auto stats0 = alloc().stats();
    ASSERT_EQ(et_copy::h2d_copy(host_self.t(), device.t()), Error::Ok);
    EXPECT_EQ(dev.contents(), src.contents());
    ASSERT_EQ(et_copy::d2h_copy(device.t(), host_out.t()), Error::Ok);
    EXPECT_EQ(dst.contents(), src.contents());
    EXPECT_TRUE(dst.guards_intact());
    const auto stats1 = alloc().stats();
    EXPECT_EQ(stats1.h2d_copies - stats0.h2d_copies, 1u);
    EXPECT_EQ(stats1.h2d_bytes - stats0.h2d_bytes, n);
    EXPECT_EQ(stats1.d2h_copies - stats0.d2h_copies, 1u);
    EXPECT_EQ(stats1.d2h_bytes - stats0.d2h_bytes, n);
  }
}

TEST_F(CopyKernels, SuccessClearsTheDiagnostic) {
  GuardedBuffer src(8);
  DeviceBuffer dev(8);
  TestTensor self(ScalarType::Float, {2}, src.data());
  TestTensor out(ScalarType::Float, {2}, dev.data(), on(kCuda));
  CopyDiagnostic diag;
  std::strcpy(diag.message, "stale");
  EXPECT_EQ(et_copy::h2d_copy(self.t(), out.t(), &diag), Error::Ok);
  EXPECT_STREQ(diag.message, "");
}

TEST_F(CopyKernels, ZeroDimTensorCopiesOneElement) {
  GuardedBuffer src(8), dst(8);
  src.fill_pattern();
  DeviceBuffer dev(8);
  TestTensor self(ScalarType::Double, {}, src.data());
  TestTensor device(ScalarType::Double, {}, dev.data(), on(kCuda));
  TestTensor out(ScalarType::Double, {}, dst.data());
  ASSERT_EQ(et_copy::h2d_copy(self.t(), device.t()), Error::Ok);
  ASSERT_EQ(et_copy::d2h_copy(device.t(), out.t()), Error::Ok);
  EXPECT_EQ(dst.contents(), src.contents());
  EXPECT_EQ(alloc().stats().h2d_bytes - before_.h2d_bytes, 8u);
}

// The smallest copy that moves anything, one byte (a Byte[1] and a 0-dim
// Bool), goes through the allocator each way, as any larger one does.
TEST_F(CopyKernels, OneByteTensorsAreCopiedEachWay) {
  for (const auto& [dtype, sizes] : {std::pair<ScalarType, std::vector<SizesType>>{ScalarType::Byte, {1}},
                                     std::pair<ScalarType, std::vector<SizesType>>{ScalarType::Bool, {}}}) {
    SCOPED_TRACE(executorch::runtime::toString(dtype));
    GuardedBuffer src(1, 0x01), dst(1, 0xEE);
    DeviceBuffer dev(1);
    TestTensor self(dtype, sizes, src.data());
    TestTensor device(dtype, sizes, dev.data(), on(kCuda));
    TestTensor out(dtype, sizes, dst.data());
    const auto before = alloc().stats();
    ASSERT_EQ(et_copy::h2d_copy(self.t(), device.t()), Error::Ok);
    EXPECT_EQ(dev.contents(), std::vector<uint8_t>{0x01});
    ASSERT_EQ(et_copy::d2h_copy(device.t(), out.t()), Error::Ok);
    EXPECT_EQ(dst.contents(), std::vector<uint8_t>{0x01});
    EXPECT_TRUE(dst.guards_intact());
    const auto after = alloc().stats();
    EXPECT_EQ(after.h2d_copies - before.h2d_copies, 1u);
    EXPECT_EQ(after.d2h_copies - before.d2h_copies, 1u);
    EXPECT_EQ(after.d2h_bytes - before.d2h_bytes, 1u);
  }
}

// [2, 0]: empty in its innermost dim, so the one-pass shortcut leaves it to
// the named checks, which compare dim orders and sizes one by one.
TEST_F(CopyKernels, AnEmptyTensorTheShortcutLeavesKeepsOrTakesSelfsShape) {
  for (const bool h2d : {true, false}) {
    SCOPED_TRACE(h2d ? "h2d" : "d2h");
    GuardedBuffer host(16, 0x5A);
    DeviceBuffer dev(16);
    Sides same(h2d, ScalarType::Float, {2, 0}, host.data(), dev.data(), ScalarType::Float, {2, 0});
    uint64_t n = 0;
    bool same_shape = false;
    ASSERT_FALSE(et_copy::internal::common_case(same.self.t(), same.out.t(), &n, &same_shape));
    EXPECT_EQ(copy(h2d, same.self.t(), same.out.t(), nullptr), Error::Ok) << "a static out of self's shape";
    Sides fixed(h2d, ScalarType::Float, {2, 0}, host.data(), dev.data(), ScalarType::Float, {3, 0});
    CopyDiagnostic diag;
    EXPECT_EQ(copy(h2d, fixed.self.t(), fixed.out.t(), &diag), Error::InvalidArgument);
    EXPECT_NE(std::string(diag.message).find("out has static shape [3, 0] but self has shape [2, 0]"),
              std::string::npos)
        << diag.message;
    Sides bound(h2d, ScalarType::Float, {2, 0}, host.data(), dev.data(), ScalarType::Float, {3, 0}, {},
                dynamic(kCpu, TensorShapeDynamism::DYNAMIC_BOUND));
    EXPECT_EQ(copy(h2d, bound.self.t(), bound.out.t(), nullptr), Error::Ok);
    EXPECT_EQ(std::vector<SizesType>(bound.out.t().sizes().begin(), bound.out.t().sizes().end()),
              (std::vector<SizesType>{2, 0}));
    EXPECT_EQ(copies_since_setup(true), 0u);
    EXPECT_EQ(copies_since_setup(false), 0u);
    EXPECT_EQ(host.contents(), std::vector<uint8_t>(16, 0x5A));
  }
}

TEST_F(CopyKernels, EmptyTensorSucceedsWithoutCallingTheAllocator) {
  GuardedBuffer dst(16, 0x5A);
  // Empty tensors may carry null data, as planned zero-size buffers do.
  TestTensor self(ScalarType::Float, {0, 4}, nullptr);
  TestTensor device(ScalarType::Float, {0, 4}, nullptr, on(kCuda));
  TestTensor out(ScalarType::Float, {0, 4}, dst.data());
  EXPECT_EQ(et_copy::h2d_copy(self.t(), device.t()), Error::Ok);
  EXPECT_EQ(et_copy::d2h_copy(device.t(), out.t()), Error::Ok);
  EXPECT_EQ(copies_since_setup(true), 0u);
  EXPECT_EQ(copies_since_setup(false), 0u);
  EXPECT_EQ(dst.contents(), std::vector<uint8_t>(16, 0x5A));
}

TEST_F(CopyKernels, EmptySelfResizesDynamicOutToEmpty) {
  GuardedBuffer dst(16, 0x5A);
  DeviceBuffer dev(16);
  TestTensor self(ScalarType::Float, {0}, nullptr);
  TestTensor device(ScalarType::Float, {4}, dev.data(), dynamic(kCuda, TensorShapeDynamism::DYNAMIC_BOUND));
  ASSERT_EQ(et_copy::h2d_copy(self.t(), device.t()), Error::Ok);
  EXPECT_EQ(device.sizes(), std::vector<SizesType>{0});
  EXPECT_EQ(copies_since_setup(true), 0u);
}

TEST_F(CopyKernels, DynamicBoundOutIsResizedToSelfShape) {
  GuardedBuffer src(24), dst(64, 0x77);
  src.fill_pattern();
  DeviceBuffer dev(64);
  TestTensor self(ScalarType::Float, {2, 3}, src.data());
  TestTensor device(ScalarType::Float, {4, 4}, dev.data(), dynamic(kCuda, TensorShapeDynamism::DYNAMIC_BOUND));
  TestTensor out(ScalarType::Float, {4, 4}, dst.data(), dynamic(kCpu, TensorShapeDynamism::DYNAMIC_BOUND));
  ASSERT_EQ(et_copy::h2d_copy(self.t(), device.t()), Error::Ok);
  EXPECT_EQ(device.sizes(), (std::vector<SizesType>{2, 3}));
  EXPECT_EQ(device.strides(), (std::vector<StridesType>{3, 1}));
  ASSERT_EQ(et_copy::d2h_copy(device.t(), out.t()), Error::Ok);
  EXPECT_EQ(out.sizes(), (std::vector<SizesType>{2, 3}));
  const auto got = dst.contents();
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + 24), src.contents());
  // Past self's 24 bytes, out's buffer is untouched.
  EXPECT_EQ(std::vector<uint8_t>(got.begin() + 24, got.end()), std::vector<uint8_t>(40, 0x77));
  EXPECT_EQ(dev.contents().at(24), SimulatedDeviceAllocator::kFreshByte);
  EXPECT_EQ(alloc().stats().h2d_bytes - before_.h2d_bytes, 24u);
}

TEST_F(CopyKernels, DynamicOutGrowsBackUpToItsCapacity) {
  GuardedBuffer small(8), full(64);
  full.fill_pattern(9);
  DeviceBuffer dev(64);
  TestTensor s1(ScalarType::Float, {1, 2}, small.data());
  TestTensor s2(ScalarType::Float, {4, 4}, full.data());
  TestTensor device(ScalarType::Float, {4, 4}, dev.data(), dynamic(kCuda, TensorShapeDynamism::DYNAMIC_BOUND));
  ASSERT_EQ(et_copy::h2d_copy(s1.t(), device.t()), Error::Ok);
  EXPECT_EQ(device.sizes(), (std::vector<SizesType>{1, 2}));
  ASSERT_EQ(et_copy::h2d_copy(s2.t(), device.t()), Error::Ok);
  EXPECT_EQ(device.sizes(), (std::vector<SizesType>{4, 4}));
  EXPECT_EQ(dev.contents(), full.contents());
}

TEST_F(CopyKernels, DynamicUnboundOutIsResizedWithinItsCapacity) {
  GuardedBuffer src(12), dst(48, 0x66);
  src.fill_pattern();
  DeviceBuffer dev(48);
  TestTensor self(ScalarType::Int, {3}, src.data());
  TestTensor device(ScalarType::Int, {12}, dev.data(), dynamic(kCuda, TensorShapeDynamism::DYNAMIC_UNBOUND));
  TestTensor out(ScalarType::Int, {12}, dst.data(), dynamic(kCpu, TensorShapeDynamism::DYNAMIC_UNBOUND));
  ASSERT_EQ(et_copy::h2d_copy(self.t(), device.t()), Error::Ok);
  ASSERT_EQ(et_copy::d2h_copy(device.t(), out.t()), Error::Ok);
  EXPECT_EQ(out.sizes(), std::vector<SizesType>{3});
  const auto got = dst.contents();
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + 12), src.contents());
  EXPECT_EQ(got[12], 0x66);
}

TEST_F(CopyKernels, MatchingNonContiguousDimOrderCopiesBytesVerbatim) {
  GuardedBuffer src(96), dst(96);
  src.fill_pattern();
  DeviceBuffer dev(96);
  TestTensor::Options last_cpu, last_cuda = on(kCuda);
  last_cpu.dim_order = {0, 2, 1};
  last_cuda.dim_order = {0, 2, 1};
  TestTensor self(ScalarType::Float, {2, 3, 4}, src.data(), last_cpu);
  TestTensor device(ScalarType::Float, {2, 3, 4}, dev.data(), last_cuda);
  TestTensor out(ScalarType::Float, {2, 3, 4}, dst.data(), last_cpu);
  ASSERT_EQ(et_copy::h2d_copy(self.t(), device.t()), Error::Ok);
  ASSERT_EQ(et_copy::d2h_copy(device.t(), out.t()), Error::Ok);
  EXPECT_EQ(dst.contents(), src.contents());
}

TEST_F(CopyKernels, StridesOfSizeOneDimsDoNotMatter) {
  GuardedBuffer src(12), dst(12);
  src.fill_pattern();
  DeviceBuffer dev(12);
  TestTensor::Options odd;
  odd.strides = {99, 1};
  TestTensor self(ScalarType::Float, {1, 3}, src.data(), odd);
  TestTensor device(ScalarType::Float, {1, 3}, dev.data(), on(kCuda));
  ASSERT_EQ(et_copy::h2d_copy(self.t(), device.t()), Error::Ok);
  EXPECT_EQ(dev.contents(), src.contents());
}

TEST_F(CopyKernels, DeviceIndexMinusOneMeansTheCurrentDevice) {
  GuardedBuffer src(8);
  src.fill_pattern();
  DeviceBuffer dev(8);
  TestTensor self(ScalarType::Float, {2}, src.data());
  TestTensor device(ScalarType::Float, {2}, dev.data(), on(kCuda, -1));
  ASSERT_EQ(et_copy::h2d_copy(self.t(), device.t()), Error::Ok);
  EXPECT_EQ(dev.contents(), src.contents());
}

TEST_F(CopyKernels, CopiesToTheDeviceNamedByTheTensor) {
  ASSERT_EQ(alloc().set_device_count(2), Error::Ok);
  GuardedBuffer src(8);
  src.fill_pattern();
  DeviceBuffer dev1(8, 1);
  TestTensor self(ScalarType::Float, {2}, src.data());
  TestTensor on1(ScalarType::Float, {2}, dev1.data(), on(kCuda, 1));
  TestTensor on0(ScalarType::Float, {2}, dev1.data(), on(kCuda, 0));
  EXPECT_EQ(et_copy::h2d_copy(self.t(), on1.t()), Error::Ok);
  EXPECT_EQ(dev1.contents(), src.contents());
  // The same memory named as device 0 is not device 0's: refused.
  CopyDiagnostic diag;
  EXPECT_EQ(et_copy::h2d_copy(self.t(), on0.t(), &diag), Error::InvalidArgument);
  ASSERT_EQ(alloc().set_device_count(1), Error::Ok);
}

// ---- kernel-API and boxed forms ------------------------------------------

TEST_F(CopyKernels, KernelFormFailsTheContextAndReturnsOut) {
  GuardedBuffer host(32);
  DeviceBuffer dev(16);
  TestTensor self(ScalarType::Double, {4}, host.data());
  TestTensor out(ScalarType::Float, {4}, dev.data(), on(kCuda));
  KernelRuntimeContext ctx;
  Tensor& r = et_copy::h2d_copy_out(ctx, self.t(), out.t());
  EXPECT_EQ(&r, &out.t());
  EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument);
  EXPECT_EQ(dev.contents(), std::vector<uint8_t>(16, SimulatedDeviceAllocator::kFreshByte));

  KernelRuntimeContext ctx2;
  TestTensor dev_self(ScalarType::Float, {4}, dev.data(), on(kCuda));
  TestTensor host_out(ScalarType::Float, {4}, host.data());
  et_copy::d2h_copy_out(ctx2, dev_self.t(), host_out.t());
  EXPECT_EQ(ctx2.failure_state(), Error::Ok);
}

TEST_F(CopyKernels, KernelFormReportsNotFoundStyleErrorsThroughContext) {
  GuardedBuffer host(8);
  DeviceBuffer dev(8);
  TestTensor self(ScalarType::Float, {2}, dev.data(), on(kCuda, 5));
  TestTensor out(ScalarType::Float, {2}, host.data());
  KernelRuntimeContext ctx;
  et_copy::d2h_copy_out(ctx, self.t(), out.t());
  EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument);
}

TEST_F(CopyKernels, BoxedFormCopiesAndReturnsOutInTheResultSlot) {
  GuardedBuffer src(16), dst(16);
  src.fill_pattern();
  DeviceBuffer dev(16);
  TestTensor self(ScalarType::Float, {4}, src.data());
  TestTensor device(ScalarType::Float, {4}, dev.data(), on(kCuda));
  TestTensor out(ScalarType::Float, {4}, dst.data());

  EValue h2d_vals[3] = {EValue(self.t()), EValue(device.t()), EValue()};
  EValue* h2d_stack[3] = {&h2d_vals[0], &h2d_vals[1], &h2d_vals[2]};
  KernelRuntimeContext ctx;
  et_copy::h2d_copy_out_boxed(ctx, Span<EValue*>(h2d_stack, 3));
  ASSERT_EQ(ctx.failure_state(), Error::Ok);
  ASSERT_TRUE(h2d_vals[2].isTensor());
  EXPECT_EQ(h2d_vals[2].toTensor().const_data_ptr(), dev.data());

  EValue d2h_vals[3] = {EValue(device.t()), EValue(out.t()), EValue()};
  EValue* d2h_stack[3] = {&d2h_vals[0], &d2h_vals[1], &d2h_vals[2]};
  et_copy::d2h_copy_out_boxed(ctx, Span<EValue*>(d2h_stack, 3));
  ASSERT_EQ(ctx.failure_state(), Error::Ok);
  EXPECT_EQ(d2h_vals[2].toTensor().const_data_ptr(), dst.data());
  EXPECT_EQ(dst.contents(), src.contents());
}

TEST_F(CopyKernels, BoxedFormFailsTheContextWhenTheKernelRejects) {
  GuardedBuffer host(32);
  DeviceBuffer dev(16);
  TestTensor self(ScalarType::Double, {4}, host.data());
  TestTensor out(ScalarType::Float, {4}, dev.data(), on(kCuda));
  EValue vals[3] = {EValue(self.t()), EValue(out.t()), EValue()};
  EValue* stack[3] = {&vals[0], &vals[1], &vals[2]};
  KernelRuntimeContext ctx;
  et_copy::h2d_copy_out_boxed(ctx, Span<EValue*>(stack, 3));
  EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument);
  EXPECT_EQ(dev.contents(), std::vector<uint8_t>(16, SimulatedDeviceAllocator::kFreshByte));
}

class MalformedStacks : public CopyKernels, public ::testing::WithParamInterface<bool> {};

INSTANTIATE_TEST_SUITE_P(BothDirections, MalformedStacks, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "h2d" : "d2h"; });

TEST_P(MalformedStacks, FailWithInvalidProgramAndCopyNothing) {
  const bool h2d = GetParam();
  GuardedBuffer host(16, 0x10);
  DeviceBuffer dev(16);
  TestTensor host_t(ScalarType::Float, {4}, host.data());
  TestTensor dev_t(ScalarType::Float, {4}, dev.data(), on(kCuda));
  Tensor& self = h2d ? host_t.t() : dev_t.t();
  Tensor& out = h2d ? dev_t.t() : host_t.t();
  auto run = [&](std::vector<EValue*> stack) {
    KernelRuntimeContext ctx;
    if (h2d) {
      et_copy::h2d_copy_out_boxed(ctx, Span<EValue*>(stack.data(), stack.size()));
    } else {
      et_copy::d2h_copy_out_boxed(ctx, Span<EValue*>(stack.data(), stack.size()));
    }
    return ctx.failure_state();
  };
  EValue s(self), o(out), none, integer(int64_t{3}), extra;
  EXPECT_EQ(run({}), Error::InvalidProgram) << "empty stack";
  EXPECT_EQ(run({&s, &o}), Error::InvalidProgram) << "no result slot";
  EXPECT_EQ(run({&s, &o, &none, &extra}), Error::InvalidProgram) << "4 values";
  EXPECT_EQ(run({&s, nullptr, &none}), Error::InvalidProgram) << "null out";
  EXPECT_EQ(run({nullptr, &o, &none}), Error::InvalidProgram) << "null self";
  EXPECT_EQ(run({&s, &o, nullptr}), Error::InvalidProgram) << "null result";
  EXPECT_EQ(run({&integer, &o, &none}), Error::InvalidProgram) << "int self";
  EXPECT_EQ(run({&s, &none, &none}), Error::InvalidProgram) << "None out";
  EXPECT_TRUE(none.isNone());
  EXPECT_EQ(copies_since_setup(true), 0u);
  EXPECT_EQ(copies_since_setup(false), 0u);
  EXPECT_EQ(host.contents(), std::vector<uint8_t>(16, 0x10));
  EXPECT_EQ(dev.contents(), std::vector<uint8_t>(16, SimulatedDeviceAllocator::kFreshByte));
}

// ---- the common-case shortcut ---------------------------------------------
// device_copy checks a pair in one pass when it is the common case and only
// otherwise runs its checks one by one (a third of the kernel's cost): the
// shortcut must take every ordinary pair, with the right byte count and
// shape answer, and must give up at every doubt. No data is touched.

struct Pair {
  Pair(ScalarType sd, std::vector<SizesType> ss, TestTensor::Options so, ScalarType od, std::vector<SizesType> os,
       TestTensor::Options oo)
      : self(sd, std::move(ss), nullptr, so), out(od, std::move(os), nullptr, oo) {}
  TestTensor self;
  TestTensor out;
  bool common(uint64_t* nbytes, bool* same) {
    *nbytes = 12345;
    *same = false;
    return et_copy::internal::common_case(self.t(), out.t(), nbytes, same);
  }
};

TestTensor::Options laid(std::vector<DimOrderType> order, std::vector<StridesType> strides = {},
                         DeviceType device = kCpu) {
  TestTensor::Options o = dynamic(device, TensorShapeDynamism::DYNAMIC_BOUND);
  o.dim_order = std::move(order);
  o.strides = std::move(strides);
  return o;
}

TEST(CommonCase, TakesADenseMatchingPairWithItsByteCount) {
  uint64_t n = 0;
  bool same = false;
  Pair p(ScalarType::Float, {2, 3, 5}, laid({}), ScalarType::Float, {2, 3, 5}, laid({}, {}, kCuda));
  EXPECT_TRUE(p.common(&n, &same));
  EXPECT_EQ(n, 2u * 3u * 5u * 4u);
  EXPECT_TRUE(same);
  Pair one(ScalarType::Byte, {1}, laid({}), ScalarType::Byte, {1}, laid({}, {}, kCuda));
  EXPECT_TRUE(one.common(&n, &same)) << "rank 1, one byte";
  EXPECT_EQ(n, 1u);
  EXPECT_TRUE(same);
}

TEST(CommonCase, TakesAPermutedDimOrderAndSizeOneDimsWithAnyStride) {
  uint64_t n = 0;
  bool same = false;
  // Channels last, [2, 3, 4, 5] in dim order [0, 2, 3, 1]: strides [60, 1, 15, 3].
  Pair last(ScalarType::Short, {2, 3, 4, 5}, laid({0, 2, 3, 1}), ScalarType::Short, {2, 3, 4, 5},
            laid({0, 2, 3, 1}, {}, kCuda));
  EXPECT_TRUE(last.common(&n, &same));
  EXPECT_EQ(n, 2u * 3u * 4u * 5u * 2u);
  EXPECT_TRUE(same);
  Pair ones(ScalarType::Float, {1, 2, 1}, laid({}, {99, 1, 7}), ScalarType::Float, {1, 2, 1},
            laid({}, {5, 1, 3}, kCuda));
  EXPECT_TRUE(ones.common(&n, &same)) << "size-1 dims, first and last, with odd strides";
  EXPECT_EQ(n, 8u);
}

TEST(CommonCase, SaysWhetherOutAlreadyHasSelfsSizesAtTheFirstAndLastDim) {
  uint64_t n = 0;
  bool same = true;
  Pair first(ScalarType::Int, {2, 3, 4}, laid({}), ScalarType::Int, {1, 3, 4}, laid({}, {}, kCuda));
  EXPECT_TRUE(first.common(&n, &same));
  EXPECT_FALSE(same);
  EXPECT_EQ(n, 2u * 3u * 4u * 4u) << "self's bytes, not out's";
  Pair last(ScalarType::Int, {2, 3, 4}, laid({}), ScalarType::Int, {2, 3, 5}, laid({}, {}, kCuda));
  EXPECT_TRUE(last.common(&n, &same));
  EXPECT_FALSE(same);
  EXPECT_EQ(n, 2u * 3u * 4u * 4u);
}

TEST(CommonCase, TakesSixteenDims) {
  uint64_t n = 0;
  bool same = false;
  std::vector<SizesType> sizes(executorch::runtime::kTensorDimensionLimit, 1);
  sizes.front() = 2;
  sizes.back() = 3;
  Pair p(ScalarType::Float, sizes, laid({}), ScalarType::Float, sizes, laid({}, {}, kCuda));
  EXPECT_TRUE(p.common(&n, &same));
  EXPECT_EQ(n, 24u);
  EXPECT_TRUE(same);
}

// A zero size in the outermost dim leaves every stride dense: the shortcut
// takes the pair, empty on either side. (An inner zero makes the strides
// outside it a matter of convention: the named checks answer.)
TEST(CommonCase, TakesATensorEmptyInItsOutermostDimOnEitherSide) {
  uint64_t n = 12345;
  bool same = false;
  Pair both(ScalarType::Float, {0, 4}, laid({}), ScalarType::Float, {0, 4}, laid({}, {}, kCuda));
  EXPECT_TRUE(both.common(&n, &same)) << "both empty";
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(same);
  Pair self_only(ScalarType::Float, {0, 4}, laid({}), ScalarType::Float, {3, 4}, laid({}, {}, kCuda));
  EXPECT_TRUE(self_only.common(&n, &same)) << "self empty, out not";
  EXPECT_EQ(n, 0u);
  EXPECT_FALSE(same);
  Pair out_only(ScalarType::Float, {3, 4}, laid({}), ScalarType::Float, {0, 4}, laid({}, {}, kCuda));
  EXPECT_TRUE(out_only.common(&n, &same)) << "out empty, self not";
  EXPECT_EQ(n, 48u);
  EXPECT_FALSE(same);
}

TEST(CommonCase, GivesUpOnAPairThatDiffers) {
  uint64_t n = 0;
  bool same = false;
  Pair dtype(ScalarType::Float, {2, 3}, laid({}), ScalarType::Int, {2, 3}, laid({}, {}, kCuda));
  EXPECT_FALSE(dtype.common(&n, &same)) << "dtype";
  Pair rank(ScalarType::Float, {6}, laid({}), ScalarType::Float, {6, 1}, laid({}, {}, kCuda));
  EXPECT_FALSE(rank.common(&n, &same)) << "rank";
  Pair order(ScalarType::Float, {2, 3}, laid({0, 1}), ScalarType::Float, {2, 3}, laid({1, 0}, {}, kCuda));
  EXPECT_FALSE(order.common(&n, &same)) << "dim order";
  Pair scalar(ScalarType::Float, {}, laid({}), ScalarType::Float, {}, laid({}, {}, kCuda));
  EXPECT_FALSE(scalar.common(&n, &same)) << "rank 0 is left to the named checks";
  EXPECT_EQ(n, 12345u) << "nothing is written when the shortcut gives up";
}

TEST(CommonCase, GivesUpOnStridesThatAreNotDenseInEitherTensorAtEitherEnd) {
  uint64_t n = 0;
  bool same = false;
  Pair self_outer(ScalarType::Float, {2, 3}, laid({}, {4, 1}), ScalarType::Float, {2, 3}, laid({}, {}, kCuda));
  EXPECT_FALSE(self_outer.common(&n, &same)) << "self's outermost stride";
  Pair self_inner(ScalarType::Float, {2, 3}, laid({}, {6, 2}), ScalarType::Float, {2, 3}, laid({}, {}, kCuda));
  EXPECT_FALSE(self_inner.common(&n, &same)) << "self's innermost stride";
  Pair out_outer(ScalarType::Float, {2, 3}, laid({}), ScalarType::Float, {2, 3}, laid({}, {4, 1}, kCuda));
  EXPECT_FALSE(out_outer.common(&n, &same)) << "out's outermost stride";
  Pair out_inner(ScalarType::Float, {2, 3}, laid({}), ScalarType::Float, {2, 3}, laid({}, {6, 2}, kCuda));
  EXPECT_FALSE(out_inner.common(&n, &same)) << "out's innermost stride";
  Pair overlap(ScalarType::Float, {2, 3}, laid({}, {0, 1}), ScalarType::Float, {2, 3}, laid({}, {}, kCuda));
  EXPECT_FALSE(overlap.common(&n, &same)) << "overlapping rows";
}

TEST(CommonCase, GivesUpOnANegativeSizeInEitherTensor) {
  uint64_t n = 0;
  bool same = false;
  Pair s(ScalarType::Float, {2, 3}, laid({}), ScalarType::Float, {2, 3}, laid({}, {}, kCuda));
  const_cast<SizesType*>(s.self.t().sizes().data())[1] = -3;
  EXPECT_FALSE(s.common(&n, &same)) << "self";
  Pair o(ScalarType::Float, {2, 3}, laid({}), ScalarType::Float, {2, 3}, laid({}, {}, kCuda));
  const_cast<SizesType*>(o.out.t().sizes().data())[0] = -2;
  EXPECT_FALSE(o.common(&n, &same)) << "out";
}

// Double [2^31 - 1, 2^31 - 1], dense (strides [2^31 - 1, 1]): about 2^65
// bytes, past 64 bits, with every size and stride a valid int32. The tensor
// is rewritten in place (a view refuses such metadata).
void make_overflowing(TestTensor& t) {
  constexpr SizesType kBig = 2147483647;
  auto* sizes = const_cast<SizesType*>(t.t().sizes().data());
  auto* strides = const_cast<StridesType*>(t.t().strides().data());
  sizes[0] = sizes[1] = kBig;
  strides[0] = kBig;
  strides[1] = 1;
}

TEST(CommonCase, GivesUpOnAByteCountPastSixtyFourBitsInEitherTensor) {
  uint64_t n = 12345;
  bool same = false;
  Pair s(ScalarType::Double, {2, 3}, laid({}), ScalarType::Double, {1, 1}, laid({}, {}, kCuda));
  make_overflowing(s.self);
  EXPECT_FALSE(s.common(&n, &same)) << "self";
  Pair o(ScalarType::Double, {1, 1}, laid({}), ScalarType::Double, {2, 3}, laid({}, {}, kCuda));
  make_overflowing(o.out);
  EXPECT_FALSE(o.common(&n, &same)) << "out";
  EXPECT_EQ(n, 12345u);
}

} // namespace
