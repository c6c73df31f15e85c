// Threading contract: many threads copying through one allocator at once.
// 8 threads each run 10,000 host->device->host round trips of mixed sizes
// and dtypes through et_copy's kernels and the process-wide simulated
// allocator, allocating and freeing device memory as they go, with some
// rejected calls mixed in. Every byte must arrive and the allocator's
// counters must be exact.
//
// Registry state: this executable registers the simulated allocator for
// CUDA and nothing else.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_allocator.h>

#include "test_tensors.h"

namespace {

using et_copy_test::GuardedBuffer;
using et_copy_test::ScalarType;
using et_copy_test::SizesType;
using et_copy_test::TestTensor;
using executorch::runtime::Error;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

constexpr int kThreads = 8;
constexpr int kCopiesPerThread = 10000;

struct Dtype {
  ScalarType type;
  size_t itemsize;
};
constexpr Dtype kDtypes[] = {
    {ScalarType::Byte, 1},
    {ScalarType::Short, 2},
    {ScalarType::Float, 4},
    {ScalarType::Double, 8},
};
// Element counts from empty to 16 KiB of doubles.
constexpr SizesType kCounts[] = {0, 1, 3, 17, 64, 255, 1000, 2048};

struct ThreadTally {
  uint64_t copies = 0;
  uint64_t bytes = 0;
  uint64_t rejected = 0;
  std::vector<std::string> problems;
};

void run_worker(int id, ThreadTally& tally) {
  auto& sim = et_copy::simulated_device_allocator();
  std::mt19937 rng(1234u + static_cast<unsigned>(id));
  const DeviceIndex index = static_cast<DeviceIndex>(id % 2);
  for (int i = 0; i < kCopiesPerThread; ++i) {
    const Dtype dtype = kDtypes[rng() % std::size(kDtypes)];
    const SizesType count = kCounts[rng() % std::size(kCounts)];
    const SizesType rows = (count % 2 == 0 && count > 0) ? 2 : 1;
    const std::vector<SizesType> shape = {rows, count / rows};
    const size_t nbytes = static_cast<size_t>(count) * dtype.itemsize;

    auto device = sim.allocate(nbytes, index);
    if (!device.ok()) {
      tally.problems.push_back("allocate failed");
      return;
    }
    GuardedBuffer src(nbytes);
    src.fill_pattern(static_cast<uint8_t>(id * 31 + i));
    GuardedBuffer dst(nbytes, 0xEE);
    TestTensor host_in(dtype.type, shape, src.data());
    TestTensor on_device(dtype.type, shape, *device, {DeviceType::CUDA, index});
    TestTensor host_out(dtype.type, shape, dst.data());

    if (et_copy::h2d_copy(host_in.t(), on_device.t()) != Error::Ok ||
        et_copy::d2h_copy(on_device.t(), host_out.t()) != Error::Ok) {
      tally.problems.push_back("a valid copy failed");
    }
    if (dst.contents() != src.contents() || !dst.guards_intact()) {
      tally.problems.push_back("round trip changed bytes or guards");
    }
    if (nbytes > 0) {
      tally.copies += 1;
      tally.bytes += nbytes;
    }
    if (i % 97 == 0) {
      // A rejected call (dtype mismatch: no test dtype is Int) racing with
      // the others: no copy, no counter, out untouched.
      TestTensor wrong(ScalarType::Int, shape, dst.data());
      const auto before = dst.contents();
      if (et_copy::d2h_copy(on_device.t(), wrong.t()) == Error::Ok) {
        tally.problems.push_back("dtype mismatch accepted");
      }
      if (dst.contents() != before || !dst.guards_intact()) {
        tally.problems.push_back("rejected copy wrote out");
      }
      tally.rejected += 1;
    }
    sim.deallocate(*device, index);
  }
}

TEST(Threads, EightThreadsOfMixedCopiesThroughOneAllocatorMoveEveryByteAndCountExactly) {
  auto& sim = et_copy::simulated_device_allocator();
  const auto reg = et_copy::use_simulated_device();
  ASSERT_TRUE(reg == et_copy::Registration::kRegistered || reg == et_copy::Registration::kAlreadyOurs);
  ASSERT_EQ(sim.set_device_count(2), Error::Ok);
  const auto before = sim.stats();

  std::vector<ThreadTally> tallies(kThreads);
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back(run_worker, id, std::ref(tallies[id]));
  }
  for (auto& t : threads) {
    t.join();
  }

  uint64_t copies = 0, bytes = 0, rejected = 0;
  for (const auto& tally : tallies) {
    for (const auto& p : tally.problems) {
      ADD_FAILURE() << p;
    }
    copies += tally.copies;
    bytes += tally.bytes;
    rejected += tally.rejected;
  }
  const auto after = sim.stats();
  EXPECT_EQ(after.allocations - before.allocations, uint64_t{kThreads} * kCopiesPerThread);
  EXPECT_EQ(after.deallocations - before.deallocations, uint64_t{kThreads} * kCopiesPerThread);
  EXPECT_EQ(after.bytes_outstanding, before.bytes_outstanding);
  EXPECT_EQ(after.h2d_copies - before.h2d_copies, copies);
  EXPECT_EQ(after.d2h_copies - before.d2h_copies, copies);
  EXPECT_EQ(after.h2d_bytes - before.h2d_bytes, bytes);
  EXPECT_EQ(after.d2h_bytes - before.d2h_bytes, bytes);
  EXPECT_EQ(after.failed_calls, before.failed_calls);
  EXPECT_GT(copies, uint64_t{kThreads} * kCopiesPerThread / 2);
  EXPECT_GE(after.peak_bytes_outstanding, before.peak_bytes_outstanding);
  EXPECT_GT(rejected, 0u);
}

} // namespace
