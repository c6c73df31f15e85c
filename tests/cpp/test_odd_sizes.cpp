// Every size and alignment computation of et-copy's allocators against odd
// sizes (0, 1, 3, 7, a page - 1, a page, a page + 1) and alignments (each
// power of two up to kMaxAlignment, and one past), in both simulated modes;
// and the device count every copy asks for, when counting fails or finds
// none. Its own allocator instances; nothing is registered with ExecuTorch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <et_copy/log_capture.h>
#include <et_copy/simulated_device_allocator.h>

namespace {

using et_copy::CopyKind;
using et_copy::CountingDeviceAllocator;
using et_copy::SimulatedDeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::Result;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

// The host-unreadable mode's unit: a page, and at least kMaxAlignment.
size_t page() {
  return std::max(static_cast<size_t>(sysconf(_SC_PAGESIZE)), SimulatedDeviceAllocator::kMaxAlignment);
}

std::vector<size_t> odd_sizes() {
  const size_t g = page();
  return {0, 1, 3, 7, g - 1, g, g + 1, 2 * g - 1, 2 * g, 2 * g + 1};
}

// A copy of exactly the allocation's bytes fits; one byte more, at either
// end, is refused and writes nothing.
void expect_exact_bounds(SimulatedDeviceAllocator& a, uint8_t* p, size_t n) {
  std::vector<uint8_t> host(n + 1, 0x3C);
  EXPECT_EQ(a.copy_host_to_device(p, host.data(), n, 0), Error::Ok) << n;
  EXPECT_EQ(a.copy_host_to_device(p, host.data(), n + 1, 0), Error::InvalidArgument) << n;
  EXPECT_EQ(a.copy_device_to_host(host.data(), p, n + 1, 0), Error::InvalidArgument) << n;
  if (n > 0) {
    EXPECT_EQ(a.copy_host_to_device(p + n - 1, host.data(), 1, 0), Error::Ok) << n;
    // Two bytes from the last: past its end, even where the next allocation starts right there.
    EXPECT_EQ(a.copy_host_to_device(p + n - 1, host.data(), 2, 0), Error::InvalidArgument) << n;
  }
  std::vector<uint8_t> back(n, 0);
  EXPECT_EQ(a.copy_device_to_host(back.data(), p, n, 0), Error::Ok) << n;
  EXPECT_EQ(back, std::vector<uint8_t>(n, 0x3C)) << n;
}

// First fit at page granularity: a fresh allocator hands out each request
// right after the previous one's whole pages, so each takes exactly the
// pages its bytes need (one for zero bytes, which still get an address).
TEST(OddSizes, UnreadableMemoryTakesTheWholePagesItsBytesNeedAndNoMore) {
  SimulatedDeviceAllocator a;
  ASSERT_FALSE(a.host_readable());
  const size_t g = page();
  std::vector<std::pair<uint8_t*, size_t>> made;
  for (size_t n : odd_sizes()) {
    Result<void*> p = a.allocate(n, 0);
    ASSERT_TRUE(p.ok()) << n;
    made.emplace_back(static_cast<uint8_t*>(*p), n);
  }
  for (size_t i = 1; i < made.size(); ++i) {
    const size_t n = made[i - 1].second;
    const size_t pages = n == 0 ? 1 : (n + g - 1) / g;
    EXPECT_EQ(made[i].first - made[i - 1].first, static_cast<ptrdiff_t>(pages * g)) << "after " << n << " bytes";
  }
  for (auto [p, n] : made) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % SimulatedDeviceAllocator::kMaxAlignment, 0u) << n;
    expect_exact_bounds(a, p, n);
  }
  const auto stats = a.stats();
  size_t total = 0;
  for (size_t n : odd_sizes()) {
    total += n;
  }
  EXPECT_EQ(stats.bytes_outstanding, total); // the bytes asked for, not the pages
  for (auto [p, n] : made) {
    a.deallocate(p, 0);
  }
  EXPECT_EQ(a.stats().bytes_outstanding, 0u);
  EXPECT_EQ(a.stats().failed_calls, stats.failed_calls);
  // Freed pages are found again, first fit: the same sizes land where they did.
  for (auto [p, n] : made) {
    Result<void*> again = a.allocate(n, 0);
    ASSERT_TRUE(again.ok()) << n;
    EXPECT_EQ(*again, p) << n;
  }
  for (auto [p, n] : made) {
    a.deallocate(p, 0);
  }
}

// Host-readable memory: every power-of-two alignment up to kMaxAlignment,
// against sizes around it; the pointer is aligned and holds exactly n bytes.
TEST(OddSizes, ReadableMemoryIsAlignedToEachPowerOfTwoAndHoldsExactlyItsBytes) {
  SimulatedDeviceAllocator a;
  a.set_host_readable(true);
  for (size_t align = 1; align <= SimulatedDeviceAllocator::kMaxAlignment; align *= 2) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, align - 1, align, align + 1}) {
      Result<void*> p = a.allocate(n, 0, align);
      ASSERT_TRUE(p.ok()) << n << " at " << align;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % align, 0u) << n << " at " << align;
      expect_exact_bounds(a, static_cast<uint8_t*>(*p), n);
      a.deallocate(*p, 0);
    }
  }
}

TEST(OddSizes, AnAlignmentThatIsNoPowerOfTwoOrAboveTheLargestIsRefusedInEitherMode) {
  for (bool readable : {false, true}) {
    SimulatedDeviceAllocator a;
    a.set_host_readable(readable);
    const size_t max = SimulatedDeviceAllocator::kMaxAlignment;
    for (size_t align : {size_t{0}, size_t{3}, size_t{7}, max - 1, max + 1}) {
      EXPECT_EQ(a.allocate(16, 0, align).error(), Error::InvalidArgument) << align << (readable ? " readable" : "");
    }
    EXPECT_EQ(a.allocate(16, 0, 2 * max).error(), Error::NotSupported);
    Result<void*> p = a.allocate(16, 0, max);
    ASSERT_TRUE(p.ok());
    a.deallocate(*p, 0);
    EXPECT_EQ(a.stats().allocations, 1u);
    EXPECT_EQ(a.stats().failed_calls, 6u);
  }
}

TEST(OddSizes, ARequestWhosePagesOverflowASizeIsRefused) {
  SimulatedDeviceAllocator a;
  for (size_t n : {SIZE_MAX, SIZE_MAX - page() + 1, SIZE_MAX / 2 + 1}) {
    EXPECT_EQ(a.allocate(n, 0).error(), Error::MemoryAllocationFailed) << n;
  }
  // The most whole pages a size holds is no overflow: that request is
  // refused by the reservation, which says so; a page more overflows.
  const size_t most = SIZE_MAX / page() * page();
  {
    et_copy::LogCapture log;
    EXPECT_EQ(a.allocate(most, 0).error(), Error::MemoryAllocationFailed);
    ASSERT_EQ(log.lines().size(), 1u);
    EXPECT_NE(log.lines()[0].find("no room for " + std::to_string(most) + " bytes"), std::string::npos)
        << log.lines()[0];
  }
  {
    et_copy::LogCapture log;
    EXPECT_EQ(a.allocate(most + 1, 0).error(), Error::MemoryAllocationFailed);
    for (const std::string& line : log.lines()) {
      EXPECT_EQ(line.find("no room"), std::string::npos) << "an overflowing request reached the reservation: " << line;
    }
  }
  a.set_host_readable(true);
  EXPECT_EQ(a.allocate(SIZE_MAX, 0, 64).error(), Error::MemoryAllocationFailed);
}

// One answer of count_devices(): a failure, or a count (when error is Ok).
struct Answer {
  Error error;
  int count;
};

// A counting allocator whose count_devices() answers from a script.
class ScriptedCount final : public CountingDeviceAllocator {
 public:
  explicit ScriptedCount(std::vector<Answer> answers) : answers_(std::move(answers)) {}
  mutable size_t asked = 0;
  const char* name() const override {
    return "scripted";
  }
  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }

 private:
  Result<int> count_devices() const override {
    const size_t i = std::min(asked, answers_.size() - 1);
    ++asked;
    if (answers_[i].error != Error::Ok) {
      return answers_[i].error;
    }
    return answers_[i].count;
  }
  Result<void*> allocate_bytes(size_t, DeviceIndex, size_t) override {
    return Error::NotSupported;
  }
  Released release_bytes(void*, DeviceIndex) override {
    return {};
  }
  Error move_bytes(CopyKind, void*, const void*, size_t, DeviceIndex) override {
    return Error::NotSupported;
  }
  std::vector<Answer> answers_;
};

// device_count() gives a failure back as it came and asks again next time;
// it remembers only a count of at least one device.
TEST(OddSizes, TheDeviceCountIsRememberedOnlyOnceItIsAPositiveCount) {
  ScriptedCount a({{Error::NotFound, 0}, {Error::Internal, 0}, {Error::Ok, 0}, {Error::Ok, 3}, {Error::Ok, 5}});
  EXPECT_EQ(a.device_count().error(), Error::NotFound);
  EXPECT_EQ(a.device_count().error(), Error::Internal);
  Result<int> none = a.device_count();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
  EXPECT_EQ(a.asked, 3u);
  for (int i = 0; i < 3; ++i) {
    Result<int> n = a.device_count();
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 3); // counted once, then remembered
  }
  EXPECT_EQ(a.asked, 4u);
}

} // namespace
