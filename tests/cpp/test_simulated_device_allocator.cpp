// SimulatedDeviceAllocator on its own instances; nothing is registered with
// ExecuTorch in this executable.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <et_copy/log_capture.h>
#include <et_copy/simulated_device_allocator.h>

namespace {

using et_copy::as_counting_allocator;
using et_copy::DeviceAllocatorStats;
using et_copy::SimulatedDeviceAllocator;
using executorch::runtime::DeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::Result;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

void* must_allocate(SimulatedDeviceAllocator& a, size_t n, DeviceIndex i = 0,
                    size_t align = DeviceAllocator::kDefaultAlignment) {
  Result<void*> r = a.allocate(n, i, align);
  EXPECT_TRUE(r.ok()) << "allocate(" << n << ", " << int(i) << ") failed";
  return r.ok() ? r.get() : nullptr;
}

// Device byte `i` of `p`, read as a debugger reads a GPU: through the host
// alias, so the tests hold in either mode.
uint8_t peek(const SimulatedDeviceAllocator& a, const void* p, size_t i, DeviceIndex index = 0) {
  Result<void*> alias = a.host_alias(static_cast<const uint8_t*>(p) + i, 1, index);
  EXPECT_TRUE(alias.ok()) << "host_alias of byte " << i;
  return alias.ok() ? *static_cast<const uint8_t*>(alias.get()) : 0;
}

TEST(SimulatedDeviceAllocator, ServesCudaWithOneDeviceByDefault) {
  SimulatedDeviceAllocator a;
  EXPECT_EQ(a.device_type(), DeviceType::CUDA);
  ASSERT_TRUE(a.device_count().ok());
  EXPECT_EQ(a.device_count().get(), 1);
  EXPECT_STREQ(a.name(), "simulated");
}

// A default-constructed snapshot is "nothing counted", so a caller may use
// one as the baseline of a difference; a fresh allocator reports exactly that.
TEST(SimulatedDeviceAllocator, AFreshAllocatorsStatsEqualADefaultSnapshot) {
  const DeviceAllocatorStats zero;
  const DeviceAllocatorStats s = SimulatedDeviceAllocator().stats();
  const auto fields = [](const DeviceAllocatorStats& x) {
    return std::vector<uint64_t>{
        x.allocations, x.deallocations, x.live_allocations, x.bytes_outstanding, x.peak_bytes_outstanding,
        x.h2d_copies,  x.h2d_bytes,     x.d2h_copies,       x.d2h_bytes,         x.d2d_copies,
        x.d2d_bytes,   x.failed_calls};
  };
  EXPECT_EQ(fields(zero), std::vector<uint64_t>(12, 0));
  EXPECT_EQ(fields(s), fields(zero));
}

// The constructor cannot fail: a count outside 1..127 is taken to the nearest end.
TEST(SimulatedDeviceAllocator, ConstructedWithACountOutsideTheRangeServesTheNearestEnd) {
  for (int n : {0, -1, -300}) {
    SimulatedDeviceAllocator a(n);
    ASSERT_TRUE(a.device_count().ok());
    EXPECT_EQ(a.device_count().get(), 1) << n;
  }
  EXPECT_EQ(SimulatedDeviceAllocator(2).device_count().get(), 2);
  EXPECT_EQ(SimulatedDeviceAllocator(127).device_count().get(), 127);
  EXPECT_EQ(SimulatedDeviceAllocator(128).device_count().get(), 127);
}

TEST(SimulatedDeviceAllocator, FreshAllocationIsFilledWithFreshByte) {
  SimulatedDeviceAllocator a;
  auto* p = static_cast<uint8_t*>(must_allocate(a, 100));
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < 100; ++i) {
    ASSERT_EQ(peek(a, p, i), SimulatedDeviceAllocator::kFreshByte) << "byte " << i;
  }
  a.deallocate(p, 0);
}

TEST(SimulatedDeviceAllocator, HonoursRequestedAlignment) {
  SimulatedDeviceAllocator a;
  for (size_t align : {size_t(1), size_t(16), size_t(64), size_t(256), SimulatedDeviceAllocator::kMaxAlignment}) {
    void* p = must_allocate(a, 24, 0, align);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << "alignment " << align;
    a.deallocate(p, 0);
  }
}

TEST(SimulatedDeviceAllocator, RejectsAlignmentThatIsNotAPowerOfTwo) {
  SimulatedDeviceAllocator a;
  EXPECT_EQ(a.allocate(16, 0, 0).error(), Error::InvalidArgument);
  EXPECT_EQ(a.allocate(16, 0, 3).error(), Error::InvalidArgument);
  EXPECT_EQ(a.allocate(16, 0, 48).error(), Error::InvalidArgument);
  EXPECT_EQ(a.stats().failed_calls, 3u);
  EXPECT_EQ(a.stats().allocations, 0u);
}

TEST(SimulatedDeviceAllocator, RejectsAlignmentAboveMaximumAsNotSupported) {
  SimulatedDeviceAllocator a;
  EXPECT_EQ(a.allocate(16, 0, SimulatedDeviceAllocator::kMaxAlignment * 2).error(), Error::NotSupported);
  EXPECT_EQ(a.stats().failed_calls, 1u);
}

TEST(SimulatedDeviceAllocator, CountsAllocationsBytesAndPeak) {
  SimulatedDeviceAllocator a;
  void* p = must_allocate(a, 100);
  void* q = must_allocate(a, 28);
  DeviceAllocatorStats s = a.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.live_allocations, 2u);
  EXPECT_EQ(s.bytes_outstanding, 128u);
  EXPECT_EQ(s.peak_bytes_outstanding, 128u);
  a.deallocate(p, 0);
  s = a.stats();
  EXPECT_EQ(s.deallocations, 1u);
  EXPECT_EQ(s.live_allocations, 1u);
  EXPECT_EQ(s.bytes_outstanding, 28u);
  EXPECT_EQ(s.peak_bytes_outstanding, 128u);
  a.deallocate(q, 0);
  s = a.stats();
  EXPECT_EQ(s.bytes_outstanding, 0u);
  EXPECT_EQ(s.live_allocations, 0u);
  EXPECT_EQ(s.failed_calls, 0u);
}

// A scope in which nothing happened, and one that is not open, read zero in
// every field (ScopeStats' own defaults), whatever the process did before.
TEST(SimulatedDeviceAllocator, AScopeWithNothingInItAndAnUnknownScopeReadZeroInEveryField) {
  SimulatedDeviceAllocator a;
  void* before = must_allocate(a, 64);
  const uint64_t id = a.open_scope();
  for (const et_copy::ScopeStats& s : {a.scope_stats(id), a.scope_stats(id + 1), a.close_scope(id)}) {
    EXPECT_EQ(s.allocations, 0u);
    EXPECT_EQ(s.deallocations, 0u);
    EXPECT_EQ(s.live_allocations, 0u);
    EXPECT_EQ(s.bytes_outstanding, 0u);
    EXPECT_EQ(s.peak_bytes_outstanding, 0u);
  }
  a.deallocate(before, 0);
}

TEST(SimulatedDeviceAllocator, AScopeCountsOnlyAllocationsMadeSinceItOpened) {
  SimulatedDeviceAllocator a;
  void* older = must_allocate(a, 64);
  const uint64_t outer = a.open_scope();
  void* p = must_allocate(a, 7);
  const uint64_t inner = a.open_scope();
  a.deallocate(older, 0); // born before both scopes: neither counts it
  a.deallocate(p, 0);     // born in the outer scope only
  void* q = must_allocate(a, 3);
  et_copy::ScopeStats in = a.scope_stats(inner);
  EXPECT_EQ(in.allocations, 1u);
  EXPECT_EQ(in.deallocations, 0u);
  EXPECT_EQ(in.live_allocations, 1u);
  EXPECT_EQ(in.bytes_outstanding, 3u);
  EXPECT_EQ(in.peak_bytes_outstanding, 3u);
  in = a.close_scope(inner);
  EXPECT_EQ(in.allocations, 1u);
  EXPECT_EQ(a.scope_stats(inner).allocations, 0u) << "a closed scope reads as zero";
  EXPECT_EQ(a.close_scope(inner).allocations, 0u) << "closing twice is harmless";
  a.deallocate(q, 0);
  const et_copy::ScopeStats out = a.close_scope(outer);
  EXPECT_EQ(out.allocations, 2u);
  EXPECT_EQ(out.deallocations, 2u);
  EXPECT_EQ(out.live_allocations, 0u);
  EXPECT_EQ(out.bytes_outstanding, 0u);
  EXPECT_EQ(out.peak_bytes_outstanding, 7u);
  EXPECT_EQ(a.stats().deallocations, 3u) << "the process-wide counters count everything";
}

TEST(SimulatedDeviceAllocator, MemoryAllocatedWhileNoScopeWasOpenNeverCountsInALaterOne) {
  SimulatedDeviceAllocator a;
  const uint64_t first = a.open_scope();
  void* kept = must_allocate(a, 5); // born in `first`, still live when it closes
  a.close_scope(first);
  void* between = must_allocate(a, 9);
  const uint64_t second = a.open_scope();
  EXPECT_NE(second, first);
  a.deallocate(kept, 0);
  a.deallocate(between, 0);
  const et_copy::ScopeStats s = a.close_scope(second);
  EXPECT_EQ(s.deallocations, 0u);
  EXPECT_EQ(s.bytes_outstanding, 0u);
}

TEST(SimulatedDeviceAllocator, ScopeIdsStartAtOneAndAreNeverReused) {
  SimulatedDeviceAllocator a;
  const uint64_t first = a.open_scope();
  EXPECT_EQ(first, 1u) << "0 is never an id, so a fresh allocator's first scope is 1";
  a.close_scope(first);
  const uint64_t second = a.open_scope();
  EXPECT_EQ(second, 2u) << "a closed scope's id is not handed out again";
  void* p = must_allocate(a, 1);
  EXPECT_EQ(a.scope_stats(second).allocations, 1u);
  EXPECT_EQ(a.scope_stats(first).allocations, 0u) << "the closed id reads as zero";
  a.deallocate(p, 0);
  a.close_scope(second);
}

TEST(SimulatedDeviceAllocator, ZeroByteAllocationsAreDistinctAndFreeable) {
  SimulatedDeviceAllocator a;
  void* p = must_allocate(a, 0);
  void* q = must_allocate(a, 0);
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p, q);
  a.deallocate(p, 0);
  a.deallocate(q, 0);
  EXPECT_EQ(a.stats().deallocations, 2u);
  EXPECT_EQ(a.stats().failed_calls, 0u);
}

TEST(SimulatedDeviceAllocator, IndexMinusOneMeansDeviceZero) {
  SimulatedDeviceAllocator a;
  void* p = must_allocate(a, 8, -1);
  ASSERT_NE(p, nullptr);
  uint8_t host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  // Allocated as "current device", usable as device 0 explicitly.
  EXPECT_EQ(a.copy_host_to_device(p, host, 8, 0), Error::Ok);
  a.deallocate(p, 0);
  EXPECT_EQ(a.stats().failed_calls, 0u);
}

// Freeing as -1 is freeing as device 0, silently; freeing as another device
// still frees (the pointer says whose it is) but says so, naming both.
TEST(SimulatedDeviceAllocator, FreeingAsMinusOneIsDeviceZeroAndAsAnotherDeviceIsLoggedAndStillFrees) {
  SimulatedDeviceAllocator a;
  ASSERT_EQ(a.set_device_count(2), Error::Ok);
  void* p = must_allocate(a, 8, 0);
  void* q = must_allocate(a, 8, 0);
  {
    et_copy::LogCapture capture;
    a.deallocate(p, -1);
    EXPECT_TRUE(capture.lines().empty()) << capture.lines().front();
  }
  et_copy::LogCapture capture;
  a.deallocate(q, 1);
  ASSERT_EQ(capture.lines().size(), 1u);
  EXPECT_NE(capture.lines()[0].find("belongs to device 0, freed as device 1"), std::string::npos) << capture.lines()[0];
  EXPECT_EQ(a.stats().deallocations, 2u);
  EXPECT_EQ(a.stats().live_allocations, 0u);
  EXPECT_EQ(a.stats().failed_calls, 0u);
}

TEST(SimulatedDeviceAllocator, RejectsDeviceIndexOutsideDeviceCount) {
  SimulatedDeviceAllocator a;
  EXPECT_EQ(a.allocate(8, 1).error(), Error::InvalidArgument);
  EXPECT_EQ(a.allocate(8, -2).error(), Error::InvalidArgument);
  EXPECT_EQ(a.stats().failed_calls, 2u);
  ASSERT_EQ(a.set_device_count(2), Error::Ok);
  void* p = must_allocate(a, 8, 1);
  a.deallocate(p, 1);
}

TEST(SimulatedDeviceAllocator, SetDeviceCountRejectsOutOfRange) {
  SimulatedDeviceAllocator a;
  EXPECT_EQ(a.set_device_count(0), Error::InvalidArgument);
  EXPECT_EQ(a.set_device_count(128), Error::InvalidArgument);
  EXPECT_EQ(a.device_count().get(), 1);
  EXPECT_EQ(a.set_device_count(127), Error::Ok);
  EXPECT_EQ(a.device_count().get(), 127);
}

TEST(SimulatedDeviceAllocator, CopiesRoundTripAndCountBytes) {
  SimulatedDeviceAllocator a;
  auto* dev = static_cast<uint8_t*>(must_allocate(a, 64));
  std::vector<uint8_t> src(64), dst(64, 0);
  for (size_t i = 0; i < 64; ++i) {
    src[i] = static_cast<uint8_t>(i * 7 + 3);
  }
  ASSERT_EQ(a.copy_host_to_device(dev, src.data(), 64, 0), Error::Ok);
  ASSERT_EQ(a.copy_device_to_host(dst.data(), dev, 64, 0), Error::Ok);
  EXPECT_EQ(src, dst);
  DeviceAllocatorStats s = a.stats();
  EXPECT_EQ(s.h2d_copies, 1u);
  EXPECT_EQ(s.h2d_bytes, 64u);
  EXPECT_EQ(s.d2h_copies, 1u);
  EXPECT_EQ(s.d2h_bytes, 64u);
  a.deallocate(dev, 0);
}

TEST(SimulatedDeviceAllocator, CopiesInsideAnAllocationAtAnOffset) {
  SimulatedDeviceAllocator a;
  auto* dev = static_cast<uint8_t*>(must_allocate(a, 64));
  uint8_t src[16];
  std::memset(src, 0x11, sizeof(src));
  ASSERT_EQ(a.copy_host_to_device(dev + 48, src, 16, 0), Error::Ok);
  EXPECT_EQ(peek(a, dev, 47), SimulatedDeviceAllocator::kFreshByte);
  EXPECT_EQ(peek(a, dev, 48), 0x11);
  EXPECT_EQ(peek(a, dev, 63), 0x11);
  a.deallocate(dev, 0);
}

TEST(SimulatedDeviceAllocator, RejectsCopyRunningPastTheAllocationAndWritesNothing) {
  SimulatedDeviceAllocator a;
  auto* dev = static_cast<uint8_t*>(must_allocate(a, 64));
  uint8_t src[32];
  std::memset(src, 0x22, sizeof(src));
  EXPECT_EQ(a.copy_host_to_device(dev + 48, src, 17, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_host_to_device(dev, src, 32, 0), Error::Ok);
  // The rejected copy wrote nothing past offset 32 (the accepted one stops there).
  for (size_t i = 32; i < 64; ++i) {
    ASSERT_EQ(peek(a, dev, i), SimulatedDeviceAllocator::kFreshByte) << "byte " << i;
  }
  uint8_t host[32];
  std::memset(host, 0, sizeof(host));
  EXPECT_EQ(a.copy_device_to_host(host, dev + 40, 32, 0), Error::InvalidArgument);
  for (uint8_t b : host) {
    ASSERT_EQ(b, 0);
  }
  DeviceAllocatorStats s = a.stats();
  EXPECT_EQ(s.failed_calls, 2u);
  EXPECT_EQ(s.h2d_copies, 1u);
  EXPECT_EQ(s.d2h_copies, 0u);
  a.deallocate(dev, 0);
}

TEST(SimulatedDeviceAllocator, RejectsCopiesToMemoryItDidNotAllocate) {
  SimulatedDeviceAllocator a;
  std::vector<uint8_t> not_device(16, 0), host(16, 0x33);
  EXPECT_EQ(a.copy_host_to_device(not_device.data(), host.data(), 16, 0), Error::InvalidArgument);
  EXPECT_EQ(not_device, std::vector<uint8_t>(16, 0));
  EXPECT_EQ(a.copy_device_to_host(host.data(), not_device.data(), 16, 0), Error::InvalidArgument);
  EXPECT_EQ(host, std::vector<uint8_t>(16, 0x33));
  EXPECT_EQ(a.stats().failed_calls, 2u);
}

TEST(SimulatedDeviceAllocator, RejectsCopiesIntoFreedMemory) {
  SimulatedDeviceAllocator a;
  void* dev = must_allocate(a, 16);
  a.deallocate(dev, 0);
  uint8_t host[16] = {};
  EXPECT_EQ(a.copy_host_to_device(dev, host, 16, 0), Error::InvalidArgument);
}

TEST(SimulatedDeviceAllocator, RejectsCopyNamingAnotherDevice) {
  SimulatedDeviceAllocator a(2);
  void* dev0 = must_allocate(a, 16, 0);
  uint8_t host[16] = {};
  EXPECT_EQ(a.copy_host_to_device(dev0, host, 16, 1), Error::InvalidArgument);
  EXPECT_EQ(a.copy_host_to_device(dev0, host, 16, 2), Error::InvalidArgument);
  EXPECT_EQ(a.copy_host_to_device(dev0, host, 16, 0), Error::Ok);
  a.deallocate(dev0, 0);
}

TEST(SimulatedDeviceAllocator, RejectsNullPointersInNonEmptyCopies) {
  SimulatedDeviceAllocator a;
  void* dev = must_allocate(a, 16);
  uint8_t host[16] = {};
  EXPECT_EQ(a.copy_host_to_device(dev, nullptr, 16, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_host(nullptr, dev, 16, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_host_to_device(nullptr, host, 16, 0), Error::InvalidArgument);
  // One byte is already a copy: null is refused, and a real one lands.
  EXPECT_EQ(a.copy_host_to_device(dev, nullptr, 1, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_host(nullptr, dev, 1, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_device(nullptr, dev, 1, 0), Error::InvalidArgument);
  const uint8_t seven = 7;
  uint8_t back = 0;
  EXPECT_EQ(a.copy_host_to_device(static_cast<uint8_t*>(dev) + 15, &seven, 1, 0), Error::Ok);
  EXPECT_EQ(a.copy_device_to_host(&back, static_cast<uint8_t*>(dev) + 15, 1, 0), Error::Ok);
  EXPECT_EQ(back, 7);
  EXPECT_EQ(a.stats().h2d_bytes, 1u);
  EXPECT_EQ(a.stats().d2h_bytes, 1u);
  a.deallocate(dev, 0);
}

TEST(SimulatedDeviceAllocator, ZeroByteCopiesSucceedWithoutTouchingMemory) {
  SimulatedDeviceAllocator a;
  EXPECT_EQ(a.copy_host_to_device(nullptr, nullptr, 0, 0), Error::Ok);
  EXPECT_EQ(a.copy_device_to_host(nullptr, nullptr, 0, 0), Error::Ok);
  EXPECT_EQ(a.stats().h2d_bytes, 0u);
  EXPECT_EQ(a.stats().failed_calls, 0u);
}

TEST(SimulatedDeviceAllocator, DeviceToDeviceCopyHandlesOverlap) {
  SimulatedDeviceAllocator a;
  auto* dev = static_cast<uint8_t*>(must_allocate(a, 16));
  uint8_t src[16];
  for (int i = 0; i < 16; ++i) {
    src[i] = static_cast<uint8_t>(i);
  }
  ASSERT_EQ(a.copy_host_to_device(dev, src, 16, 0), Error::Ok);
  ASSERT_EQ(a.copy_device_to_device(dev + 4, dev, 8, 0), Error::Ok);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(peek(a, dev, 4 + i), i);
  }
  EXPECT_EQ(a.stats().d2d_copies, 1u);
  EXPECT_EQ(a.stats().d2d_bytes, 8u);
  a.deallocate(dev, 0);
}

TEST(SimulatedDeviceAllocator, DeviceToDeviceRejectsEitherSideOutsideAllocations) {
  SimulatedDeviceAllocator a;
  auto* dev = static_cast<uint8_t*>(must_allocate(a, 16));
  std::vector<uint8_t> host(16, 0x44);
  EXPECT_EQ(a.copy_device_to_device(dev, host.data(), 16, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_device(host.data(), dev, 16, 0), Error::InvalidArgument);
  EXPECT_EQ(host, std::vector<uint8_t>(16, 0x44));
  EXPECT_EQ(peek(a, dev, 0), SimulatedDeviceAllocator::kFreshByte);
  EXPECT_EQ(a.stats().d2d_copies, 0u);
  a.deallocate(dev, 0);
}

TEST(SimulatedDeviceAllocator, FreeOfUnknownPointerIsRefusedAndCounted) {
  SimulatedDeviceAllocator a;
  int not_ours = 0;
  a.deallocate(&not_ours, 0);
  EXPECT_EQ(a.stats().failed_calls, 1u);
  EXPECT_EQ(a.stats().deallocations, 0u);
  a.deallocate(nullptr, 0); // a no-op, like free(nullptr)
  EXPECT_EQ(a.stats().failed_calls, 1u);
}

TEST(SimulatedDeviceAllocator, DoubleFreeIsRefusedAndCounted) {
  SimulatedDeviceAllocator a;
  void* p = must_allocate(a, 32);
  a.deallocate(p, 0);
  a.deallocate(p, 0);
  EXPECT_EQ(a.stats().deallocations, 1u);
  EXPECT_EQ(a.stats().failed_calls, 1u);
  EXPECT_EQ(a.stats().bytes_outstanding, 0u);
}

TEST(SimulatedDeviceAllocator, IsACountingAllocator) {
  SimulatedDeviceAllocator a;
  EXPECT_EQ(as_counting_allocator(&a), &a);
  EXPECT_EQ(&et_copy::simulated_device_allocator(), &et_copy::simulated_device_allocator());
}

} // namespace

namespace {

// ---- arithmetic at its limits --------------------------------------------

TEST(SimulatedDeviceAllocator, SizesNearSizeMaxAreRefusedAndNothingIsAllocated) {
  // Padding SIZE_MAX - 254 up to 256 bytes overflows; SIZE_MAX - 255 pads to
  // itself and no host can give it. Each is a failed call, never a buffer
  // recorded with a size it does not have.
  SimulatedDeviceAllocator a;
  const size_t max = SIZE_MAX;
  for (size_t n : {max, max - 254, max - 255}) {
    Result<void*> r = a.allocate(n, 0, 256);
    EXPECT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.error(), Error::MemoryAllocationFailed) << n;
  }
  EXPECT_EQ(a.stats().allocations, 0u);
  EXPECT_EQ(a.stats().bytes_outstanding, 0u);
  EXPECT_EQ(a.stats().failed_calls, 3u);
}

// Host-readable memory comes from the heap padded up to the alignment, and
// no further: a size that is already a multiple of it is asked for as it is.
TEST(SimulatedDeviceAllocator, HostReadableSizesArePaddedUpToTheAlignmentAndNoFurther) {
  SimulatedDeviceAllocator a;
  a.set_host_readable(true);
  for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{512}}) {
    void* p = must_allocate(a, n, 0, 256);
    ASSERT_NE(p, nullptr) << n;
    const size_t usable = malloc_usable_size(p);
    EXPECT_GE(usable, n) << n;
    EXPECT_LT(usable, (n + 255) / 256 * 256 + 256) << n << ": padded beyond the next multiple of 256";
    a.deallocate(p, 0);
  }
}

TEST(SimulatedDeviceAllocator, HostReadableSizesTheHeapCannotGiveAreRefusedAndNothingIsAllocated) {
  // In host-readable mode the heap decides: padding SIZE_MAX or SIZE_MAX - 254
  // to 256 bytes overflows; SIZE_MAX - 255 and 2^62 bytes no heap gives.
  SimulatedDeviceAllocator a;
  a.set_host_readable(true);
  const size_t max = SIZE_MAX;
  for (size_t n : {max, max - 254, max - 255, size_t{1} << 62}) {
    Result<void*> r = a.allocate(n, 0, 256);
    EXPECT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.error(), Error::MemoryAllocationFailed) << n;
  }
  EXPECT_EQ(a.stats().allocations, 0u);
  EXPECT_EQ(a.stats().bytes_outstanding, 0u);
  EXPECT_EQ(a.stats().failed_calls, 4u);
  void* p = must_allocate(a, 256, 0, 256); // a size the heap gives still comes back
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(peek(a, p, 255), SimulatedDeviceAllocator::kFreshByte);
  a.deallocate(p, 0);
}

#ifdef __GLIBC__
// Under AddressSanitizer malloc is ASan's, which mallinfo2 does not count.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kGlibcServesMalloc = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kGlibcServesMalloc = false;
#else
constexpr bool kGlibcServesMalloc = true;
#endif
#else
constexpr bool kGlibcServesMalloc = true;
#endif

TEST(SimulatedDeviceAllocator, MemoryStillAllocatedWhenTheAllocatorGoesIsGivenBack) {
  // Host-readable memory is the heap's: an allocator destroyed with some
  // still allocated frees it (glibc serves 64 MiB by mmap, so mallinfo2
  // sees it go). Host-unreadable memory lies in the reservation, which is
  // unmapped with the allocator (mincore then says ENOMEM), and is never
  // passed to free().
  const size_t big = size_t{64} << 20;
  const size_t before = mallinfo2().hblkhd;
  void* unreadable = nullptr;
  {
    SimulatedDeviceAllocator a;
    a.set_host_readable(true);
    ASSERT_NE(must_allocate(a, big), nullptr);
    a.set_host_readable(false);
    unreadable = must_allocate(a, 100);
    ASSERT_NE(unreadable, nullptr);
    if (kGlibcServesMalloc) {
      ASSERT_GE(mallinfo2().hblkhd, before + big);
    }
    unsigned char resident = 0;
    ASSERT_EQ(mincore(unreadable, 1, &resident), 0) << "reserved while the allocator lives";
  }
  if (kGlibcServesMalloc) {
    EXPECT_LT(mallinfo2().hblkhd, before + big);
  }
  unsigned char resident = 0;
  EXPECT_EQ(mincore(unreadable, 1, &resident), -1) << "the reservation is unmapped";
  EXPECT_EQ(errno, ENOMEM);
}
#endif

TEST(SimulatedDeviceAllocator, AZeroByteCopyOnAMissingDeviceIsRefused) {
  // The device index is checked before the byte count: "copy nothing to
  // device 1" on a one-device allocator is still a wrong device.
  SimulatedDeviceAllocator a;
  EXPECT_EQ(a.copy_host_to_device(nullptr, nullptr, 0, 1), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_host(nullptr, nullptr, 0, -2), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_device(nullptr, nullptr, 0, 1), Error::InvalidArgument);
  EXPECT_EQ(a.stats().failed_calls, 3u);
  EXPECT_EQ(a.stats().h2d_copies + a.stats().d2h_copies + a.stats().d2d_copies, 0u);
  EXPECT_EQ(a.copy_host_to_device(nullptr, nullptr, 0, 0), Error::Ok);
}

TEST(SimulatedDeviceAllocator, TheLargestAlignmentIsHonouredAndTheNextIsNot) {
  SimulatedDeviceAllocator a;
  void* p = must_allocate(a, 1, 0, SimulatedDeviceAllocator::kMaxAlignment);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % SimulatedDeviceAllocator::kMaxAlignment, 0u);
  a.deallocate(p, 0);
  EXPECT_EQ(a.allocate(1, 0, 2 * SimulatedDeviceAllocator::kMaxAlignment).error(), Error::NotSupported);
}

TEST(SimulatedDeviceAllocator, ACopyEndingExactlyAtTheAllocationsEndIsInsideIt) {
  SimulatedDeviceAllocator a;
  auto* dev = static_cast<uint8_t*>(must_allocate(a, 16));
  uint8_t host[16] = {};
  EXPECT_EQ(a.copy_host_to_device(dev + 8, host, 8, 0), Error::Ok);
  EXPECT_EQ(a.copy_host_to_device(dev + 8, host, 9, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_device(dev, dev + 8, 8, 0), Error::Ok);
  EXPECT_EQ(a.copy_device_to_device(dev, dev + 9, 8, 0), Error::InvalidArgument);
  a.deallocate(dev, 0);
}

// ---- host-unreadable memory and the host alias ----------------------------

// An allocator whose allocations fault on a host access, as a GPU's do.
#define UNREADABLE_ALLOCATOR(a) \
  SimulatedDeviceAllocator a;   \
  a.set_host_readable(false)

TEST(SimulatedDeviceAllocator, StartsInTheDefaultMode) {
  SimulatedDeviceAllocator a;
  EXPECT_EQ(a.host_readable(), SimulatedDeviceAllocator::kDefaultHostReadable);
}

TEST(SimulatedDeviceAllocatorDeathTest, AHostReadOfUnreadableMemoryDiesBySignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  UNREADABLE_ALLOCATOR(a);
  auto* p = static_cast<volatile uint8_t*>(must_allocate(a, 64));
  ASSERT_NE(p, nullptr);
  EXPECT_DEATH({ [[maybe_unused]] uint8_t b = p[0]; }, "");
  EXPECT_DEATH({ p[63] = 1; }, "");
  a.deallocate(const_cast<uint8_t*>(p), 0);
}

TEST(SimulatedDeviceAllocator, UnreadableMemoryIsFilledWithFreshByteThroughItsAlias) {
  UNREADABLE_ALLOCATOR(a);
  void* p = must_allocate(a, 100);
  Result<void*> alias = a.host_alias(p, 100, 0);
  ASSERT_TRUE(alias.ok());
  EXPECT_NE(alias.get(), p);
  for (size_t i = 0; i < 100; ++i) {
    ASSERT_EQ(static_cast<uint8_t*>(alias.get())[i], SimulatedDeviceAllocator::kFreshByte) << "byte " << i;
  }
  a.deallocate(p, 0);
}

TEST(SimulatedDeviceAllocator, HostAliasOfReadableMemoryIsTheAddressItself) {
  SimulatedDeviceAllocator a;
  a.set_host_readable(true);
  auto* p = static_cast<uint8_t*>(must_allocate(a, 32));
  Result<void*> alias = a.host_alias(p + 8, 8, 0);
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(alias.get(), p + 8);
  EXPECT_EQ(p[0], SimulatedDeviceAllocator::kFreshByte); // host memory: readable by design
  a.deallocate(p, 0);
}

TEST(SimulatedDeviceAllocator, HostAliasAcceptsOnlyRangesInsideOneLiveAllocationOfTheDevice) {
  for (bool readable : {false, true}) {
    SCOPED_TRACE(readable ? "host-readable" : "host-unreadable");
    SimulatedDeviceAllocator a(2);
    a.set_host_readable(readable);
    auto* p = static_cast<uint8_t*>(must_allocate(a, 64, 0));
    auto* q = static_cast<uint8_t*>(must_allocate(a, 64, 1));
    Result<void*> whole = a.host_alias(p, 64, 0);
    ASSERT_TRUE(whole.ok());
    auto* base = static_cast<uint8_t*>(whole.get());
    // Inside, at an offset, ending exactly at the end, empty at the end; -1 is device 0.
    EXPECT_EQ(a.host_alias(p + 8, 8, 0).get(), base + 8);
    EXPECT_EQ(a.host_alias(p + 60, 4, -1).get(), base + 60);
    EXPECT_EQ(a.host_alias(p + 64, 0, 0).get(), base + 64);
    // Straddling the end, starting before it, on another device, on no device.
    EXPECT_EQ(a.host_alias(p + 60, 5, 0).error(), Error::InvalidArgument);
    EXPECT_EQ(a.host_alias(p - 1, 2, 0).error(), Error::InvalidArgument);
    EXPECT_EQ(a.host_alias(p, 8, 1).error(), Error::InvalidArgument);
    EXPECT_EQ(a.host_alias(q, 8, 0).error(), Error::InvalidArgument);
    EXPECT_TRUE(a.host_alias(q, 8, 1).ok());
    EXPECT_EQ(a.host_alias(p, 8, 2).error(), Error::InvalidArgument);
    EXPECT_EQ(a.host_alias(p, 8, -2).error(), Error::InvalidArgument);
    // Null: nothing for nothing, refused for something.
    Result<void*> none = a.host_alias(nullptr, 0, 0);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none.get(), nullptr);
    EXPECT_EQ(a.host_alias(nullptr, 1, 0).error(), Error::InvalidArgument);
    // Host memory is no device memory.
    uint8_t host[8] = {};
    EXPECT_EQ(a.host_alias(host, 8, 0).error(), Error::InvalidArgument);
    a.deallocate(p, 0);
    EXPECT_EQ(a.host_alias(p, 8, 0).error(), Error::InvalidArgument); // after free
    a.deallocate(q, 1);
    // Looking is not a call the counters see.
    EXPECT_EQ(a.stats().failed_calls, 0u);
    EXPECT_EQ(a.stats().h2d_copies + a.stats().d2h_copies, 0u);
  }
}

TEST(SimulatedDeviceAllocator, IsDeviceMemoryIsTheSameRangeCheckInEitherMode) {
  for (bool readable : {false, true}) {
    SCOPED_TRACE(readable ? "host-readable" : "host-unreadable");
    SimulatedDeviceAllocator a(2);
    a.set_host_readable(readable);
    auto* p = static_cast<uint8_t*>(must_allocate(a, 16, 1));
    EXPECT_TRUE(a.is_device_memory(p, 16, 1));
    EXPECT_TRUE(a.is_device_memory(p + 4, 4, 1));
    EXPECT_FALSE(a.is_device_memory(p + 4, 13, 1));
    EXPECT_FALSE(a.is_device_memory(p, 16, 0));
    EXPECT_FALSE(a.is_device_memory(p, 16, 5));
    EXPECT_FALSE(a.is_device_memory(nullptr, 0, 1));
    uint8_t host[16] = {};
    EXPECT_FALSE(a.is_device_memory(host, 16, 1));
    a.deallocate(p, 1);
    EXPECT_FALSE(a.is_device_memory(p, 16, 1));
  }
}

TEST(SimulatedDeviceAllocator, EachAllocationKeepsTheModeItWasMadeIn) {
  SimulatedDeviceAllocator a;
  a.set_host_readable(true);
  void* readable = must_allocate(a, 8);
  a.set_host_readable(false);
  void* unreadable = must_allocate(a, 8);
  a.set_host_readable(true);
  EXPECT_EQ(a.host_alias(readable, 8, 0).get(), readable);
  EXPECT_NE(a.host_alias(unreadable, 8, 0).get(), unreadable);
  uint8_t host[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8] = {};
  ASSERT_EQ(a.copy_device_to_device(unreadable, readable, 8, 0), Error::Ok); // fresh bytes across modes
  ASSERT_EQ(a.copy_host_to_device(readable, host, 8, 0), Error::Ok);
  ASSERT_EQ(a.copy_device_to_device(unreadable, readable, 8, 0), Error::Ok);
  ASSERT_EQ(a.copy_device_to_host(back, unreadable, 8, 0), Error::Ok);
  EXPECT_EQ(std::memcmp(host, back, 8), 0);
  a.deallocate(readable, 0);
  a.deallocate(unreadable, 0);
  EXPECT_EQ(a.stats().live_allocations, 0u);
}

TEST(SimulatedDeviceAllocator, UnreadableCopiesMoveBytesThroughTheAliasAndCountThem) {
  UNREADABLE_ALLOCATOR(a);
  auto* dev = static_cast<uint8_t*>(must_allocate(a, 64));
  std::vector<uint8_t> src(64), dst(64, 0);
  for (size_t i = 0; i < 64; ++i) {
    src[i] = static_cast<uint8_t>(i * 7 + 3);
  }
  ASSERT_EQ(a.copy_host_to_device(dev, src.data(), 64, 0), Error::Ok);
  EXPECT_EQ(peek(a, dev, 10), src[10]);
  ASSERT_EQ(a.copy_device_to_device(dev + 4, dev, 8, 0), Error::Ok); // overlapping
  ASSERT_EQ(a.copy_device_to_host(dst.data(), dev, 64, 0), Error::Ok);
  for (size_t i = 0; i < 64; ++i) {
    const uint8_t want = i >= 4 && i < 12 ? src[i - 4] : src[i];
    ASSERT_EQ(dst[i], want) << "byte " << i;
  }
  // Outside the allocation: refused, nothing written, counted as failures.
  EXPECT_EQ(a.copy_host_to_device(dev + 60, src.data(), 5, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_host(dst.data(), dev + 1, 64, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_host_to_device(dev, src.data(), 8, 1), Error::InvalidArgument);
  EXPECT_EQ(peek(a, dev, 63), src[63]);
  DeviceAllocatorStats s = a.stats();
  EXPECT_EQ(s.h2d_copies, 1u);
  EXPECT_EQ(s.h2d_bytes, 64u);
  EXPECT_EQ(s.d2h_copies, 1u);
  EXPECT_EQ(s.d2h_bytes, 64u);
  EXPECT_EQ(s.d2d_copies, 1u);
  EXPECT_EQ(s.d2d_bytes, 8u);
  EXPECT_EQ(s.failed_calls, 3u);
  EXPECT_EQ(s.bytes_outstanding, 64u);
  a.deallocate(dev, 0);
  EXPECT_EQ(a.stats().bytes_outstanding, 0u);
}

TEST(SimulatedDeviceAllocator, UnreadableAllocationsAreAlignedDistinctAndReusedFresh) {
  UNREADABLE_ALLOCATOR(a);
  for (size_t align : {size_t(1), size_t(256), SimulatedDeviceAllocator::kMaxAlignment}) {
    void* p = must_allocate(a, 24, 0, align);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << "alignment " << align;
    a.deallocate(p, 0);
  }
  void* z1 = must_allocate(a, 0);
  void* z2 = must_allocate(a, 0);
  EXPECT_NE(z1, z2);
  a.deallocate(z1, 0);
  a.deallocate(z2, 0);
  // First fit: a freed range is handed out again, filled afresh.
  auto* p = static_cast<uint8_t*>(must_allocate(a, 10000));
  std::vector<uint8_t> zeros(10000, 0);
  ASSERT_EQ(a.copy_host_to_device(p, zeros.data(), zeros.size(), 0), Error::Ok);
  a.deallocate(p, 0);
  auto* q = static_cast<uint8_t*>(must_allocate(a, 9000));
  EXPECT_EQ(q, p);
  EXPECT_EQ(peek(a, q, 0), SimulatedDeviceAllocator::kFreshByte);
  EXPECT_EQ(peek(a, q, 8999), SimulatedDeviceAllocator::kFreshByte);
  a.deallocate(q, 0);
  EXPECT_EQ(a.stats().failed_calls, 0u);
}

TEST(SimulatedDeviceAllocator, UnreadableRequestsBeyondTheReservationAreRefused) {
  UNREADABLE_ALLOCATOR(a);
  const size_t max = SIZE_MAX;
  for (size_t n : {max, max - 254, max - 4096, SimulatedDeviceAllocator::kReservationBytes + 1}) {
    Result<void*> r = a.allocate(n, 0, 256);
    EXPECT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.error(), Error::MemoryAllocationFailed) << n;
  }
  EXPECT_EQ(a.stats().allocations, 0u);
  EXPECT_EQ(a.stats().failed_calls, 4u);
  void* p = must_allocate(a, 64); // the reservation still serves what fits
  a.deallocate(p, 0);
}

} // namespace

namespace {

TEST(SimulatedDeviceAllocator, HostAliasCoversOnlyRangesInsideOneLiveAllocation) {
  SimulatedDeviceAllocator a(2);
  auto* p = static_cast<uint8_t*>(must_allocate(a, 64, 1));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(a.is_device_memory(p, 64, 1));
  EXPECT_TRUE(a.is_device_memory(p + 16, 48, 1));
  EXPECT_FALSE(a.is_device_memory(p, 65, 1)) << "past the end";
  EXPECT_FALSE(a.is_device_memory(p, 64, 0)) << "another device";
  EXPECT_FALSE(a.is_device_memory(p, 64, 5)) << "no such device";
  std::vector<uint8_t> host(64);
  EXPECT_FALSE(a.is_device_memory(host.data(), 64, 1));
  Result<void*> alias = a.host_alias(p + 8, 8, 1);
  ASSERT_TRUE(alias.ok());
  std::memset(alias.get(), 7, 8);
  uint8_t back[8];
  ASSERT_EQ(a.copy_device_to_host(back, p + 8, 8, 1), Error::Ok);
  EXPECT_EQ(back[0], 7);
  EXPECT_EQ(a.host_alias(p + 60, 8, 1).error(), Error::InvalidArgument);
  EXPECT_EQ(a.host_alias(host.data(), 8, 1).error(), Error::InvalidArgument);
  a.deallocate(p, 1);
  EXPECT_FALSE(a.is_device_memory(p, 1, 1)) << "freed";
}

} // namespace
