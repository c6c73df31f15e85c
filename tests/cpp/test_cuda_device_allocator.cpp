// et_copy::CudaDeviceAllocator against the fake CUDA runtime in
// mock_cuda_runtime.cpp (2 devices by default), so its logic is tested on
// machines with no GPU: index handling and device restore, alignment, pointer
// checks, the staged double-buffered pipeline (the mock defers pinned copies
// like DMA), error mapping, exit-time frees, lanes under threads,
// registration, and copies on the caller's stream (the mock's streams are
// queues that run when synchronised). The NoDriver tests run in a second CTest entry with
// MOCK_CUDA_DEVICES=nodriver. Registry state: starts empty.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/cuda_device_allocator.h>
#include <et_copy/cuda_stream.h>
#include <et_copy/device_residency.h>
#include <et_copy/failure_report.h>
#include <et_copy/program_check.h>
#include <executorch/runtime/core/device_allocator.h>

#include "mock_cuda_runtime.h"
#include "named_blobs.h"
#include "test_tensors.h"

namespace {

using et_copy::CudaCopyConfig;
using et_copy::CudaDeviceAllocator;
using et_copy::PageableCopy;
using et_copy::Registration;
using executorch::runtime::Error;
using executorch::runtime::get_device_allocator;
using executorch::runtime::etensor::DeviceType;

bool no_driver_mode() {
  const char* v = std::getenv("MOCK_CUDA_DEVICES");
  return v != nullptr && std::string(v) == "nodriver";
}

class CudaAllocator : public ::testing::Test {
 protected:
  void SetUp() override {
    if (no_driver_mode()) {
      GTEST_SKIP() << "runs with devices";
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(a.set_copy_config(CudaCopyConfig{}), Error::Ok);
  }
  void TearDown() override {
    (void)a.set_copy_config(CudaCopyConfig{});
  }

  std::vector<unsigned char> pattern(size_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = static_cast<unsigned char>((i * 131 + seed * 17 + (i >> 11)) & 0xFF);
    }
    return v;
  }

  // H2D then D2H of n bytes from/to `host_in`/`host_out` buffers.
  void round_trip(unsigned char* host_in, unsigned char* host_out, size_t n, int device) {
    auto d = a.allocate(n, device);
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(a.copy_host_to_device(*d, host_in, n, device), Error::Ok);
    ASSERT_EQ(a.copy_device_to_host(host_out, *d, n, device), Error::Ok);
    EXPECT_EQ(std::memcmp(host_in, host_out, n), 0) << n << " bytes";
    a.deallocate(*d, device);
  }

  CudaDeviceAllocator& a = et_copy::cuda_device_allocator();
};

// The defaults docs/cuda.md states: direct (measured faster on the H200
// machine), and for staging when chosen, 1 MiB threshold and 8 MiB chunks.
TEST(CudaCopyConfigDefaults, AreTheDocumentedOnes) {
  const CudaCopyConfig c;
  EXPECT_EQ(c.pageable, PageableCopy::kDirect);
  EXPECT_EQ(c.staging_threshold, size_t{1} << 20);
  EXPECT_EQ(c.chunk_bytes, size_t{8} << 20);
}

TEST_F(CudaAllocator, CountsDevicesAndIsTheCudaAllocator) {
  auto count = a.device_count();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 2);
  EXPECT_EQ(a.device_type(), DeviceType::CUDA);
  EXPECT_STREQ(a.name(), "cuda");
  EXPECT_EQ(&a, &et_copy::cuda_device_allocator());
}

TEST_F(CudaAllocator, AlignmentUpTo256IsHonouredLargerIsNotSupported) {
  for (size_t alignment : {1, 2, 16, 64, 256}) {
    auto p = a.allocate(100, 0, alignment);
    ASSERT_TRUE(p.ok()) << alignment;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % alignment, 0u);
    a.deallocate(*p, 0);
  }
  auto big = a.allocate(100, 0, 512);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error(), Error::NotSupported);
  auto odd = a.allocate(100, 0, 48);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error(), Error::InvalidArgument);
}

TEST_F(CudaAllocator, ZeroBytesGivesAFreeablePointer) {
  const size_t live = mock_cuda::live_device_allocations();
  auto p = a.allocate(0, 0);
  ASSERT_TRUE(p.ok());
  EXPECT_NE(*p, nullptr);
  a.deallocate(*p, 0);
  EXPECT_EQ(mock_cuda::live_device_allocations(), live);
  EXPECT_EQ(a.copy_host_to_device(nullptr, nullptr, 0, 0), Error::Ok);
}

TEST_F(CudaAllocator, IndexOutOfRangeIsInvalidArgument) {
  for (int index : {2, 5, -2}) {
    auto p = a.allocate(16, static_cast<et_copy::DeviceIndex>(index));
    ASSERT_FALSE(p.ok()) << index;
    EXPECT_EQ(p.error(), Error::InvalidArgument);
  }
  char host[16] = {};
  auto d = a.allocate(16, 0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(a.copy_host_to_device(*d, host, 16, 2), Error::InvalidArgument);
  EXPECT_NE(std::string(CudaDeviceAllocator::last_error_message()).find("no device 2"), std::string::npos);
  a.deallocate(*d, 0);
}

TEST_F(CudaAllocator, MinusOneMeansTheCurrentDeviceAndTheCallersDeviceIsRestored) {
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  auto p = a.allocate(64, -1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(mock_cuda::last_malloc_device(), 1);
  auto q = a.allocate(4096, 0);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(mock_cuda::last_malloc_device(), 0);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 1);

  auto in = pattern(4096, 1);
  std::vector<unsigned char> out(4096);
  ASSERT_EQ(a.copy_host_to_device(*q, in.data(), in.size(), 0), Error::Ok);
  ASSERT_EQ(a.copy_device_to_host(out.data(), *q, out.size(), 0), Error::Ok);
  EXPECT_EQ(in, out);
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 1);
  a.deallocate(*p, -1);
  a.deallocate(*q, 0);
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 1);
}

TEST_F(CudaAllocator, NoDeviceSwitchWhenAlreadyOnTheDevice) {
  auto p = a.allocate(64, 0);
  ASSERT_TRUE(p.ok());
  const size_t before = mock_cuda::set_device_calls();
  char host[64] = {};
  ASSERT_EQ(a.copy_host_to_device(*p, host, 64, 0), Error::Ok);
  EXPECT_EQ(mock_cuda::set_device_calls(), before);
  a.deallocate(*p, 0);
}

TEST_F(CudaAllocator, MemoryOfAnotherDeviceIsRejected) {
  auto p = a.allocate(64, 1);
  ASSERT_TRUE(p.ok());
  char host[64] = {};
  EXPECT_EQ(a.copy_host_to_device(*p, host, 64, 0), Error::InvalidArgument);
  EXPECT_NE(std::string(CudaDeviceAllocator::last_error_message()).find("memory of device 1"), std::string::npos);
  EXPECT_EQ(a.copy_host_to_device(*p, host, 64, 1), Error::Ok);
  a.deallocate(*p, 1);
}

TEST_F(CudaAllocator, HostAndDevicePointersInTheWrongPlaceAreRejected) {
  auto d = a.allocate(64, 0);
  auto e = a.allocate(64, 0);
  ASSERT_TRUE(d.ok() && e.ok());
  std::vector<unsigned char> host(64, 1);
  EXPECT_EQ(a.copy_host_to_device(host.data(), host.data(), 64, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_host_to_device(*d, *e, 64, 0), Error::InvalidArgument); // device memory as the host side
  EXPECT_EQ(a.copy_device_to_host(host.data(), host.data(), 64, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_device(*d, host.data(), 64, 0), Error::InvalidArgument);
  EXPECT_EQ(a.copy_host_to_device(nullptr, host.data(), 64, 0), Error::InvalidArgument);
  // A range that runs past the end of its allocation is refused by the
  // allocator's own check, which names the argument, before any CUDA copy
  // (a real cudaMemcpy would write into whatever follows).
  EXPECT_EQ(a.copy_host_to_device(static_cast<char*>(*d) + 32, host.data(), 64, 0), Error::InvalidArgument);
  EXPECT_NE(std::string(CudaDeviceAllocator::last_error_message()).find("destination"), std::string::npos)
      << CudaDeviceAllocator::last_error_message();
  EXPECT_NE(std::string(CudaDeviceAllocator::last_error_message()).find("is not device memory"), std::string::npos)
      << CudaDeviceAllocator::last_error_message();
  EXPECT_EQ(a.copy_device_to_host(host.data(), static_cast<char*>(*e) + 1, 64, 0), Error::InvalidArgument);
  EXPECT_NE(std::string(CudaDeviceAllocator::last_error_message()).find("source"), std::string::npos)
      << CudaDeviceAllocator::last_error_message();
  a.deallocate(*d, 0);
  a.deallocate(*e, 0);
}

TEST_F(CudaAllocator, RoundTripsThroughEveryPathAtAwkwardSizes) {
  const size_t chunk = size_t{64} << 10;
  const std::vector<size_t> sizes = {1,         255,       4097,          chunk - 1,    chunk,
                                     chunk + 1, 2 * chunk, 5 * chunk + 3, (3 << 20) + 7};
  for (PageableCopy mode : {PageableCopy::kDirect, PageableCopy::kStaged}) {
    ASSERT_EQ(a.set_copy_config(CudaCopyConfig{mode, 0, chunk}), Error::Ok);
    for (size_t n : sizes) {
      auto in = pattern(n, static_cast<unsigned>(n));
      std::vector<unsigned char> out(n, 0);
      round_trip(in.data(), out.data(), n, 0);
    }
  }
  // Pinned host buffers take the direct path whatever the mode.
  void* pinned_in = nullptr;
  void* pinned_out = nullptr;
  const size_t n = (3 << 20) + 7;
  ASSERT_EQ(cudaHostAlloc(&pinned_in, n, 0), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(&pinned_out, n, 0), cudaSuccess);
  auto in = pattern(n, 9);
  std::memcpy(pinned_in, in.data(), n);
  round_trip(static_cast<unsigned char*>(pinned_in), static_cast<unsigned char*>(pinned_out), n, 1);
  cudaFreeHost(pinned_in);
  cudaFreeHost(pinned_out);
}

TEST_F(CudaAllocator, RegisteredHostMemoryRoundTripsAndCannotBeRegisteredTwice) {
  const size_t n = (1 << 20) + 3;
  auto in = pattern(n, 4);
  std::vector<unsigned char> out(n);
  ASSERT_EQ(a.register_host_memory(in.data(), n), Error::Ok);
  EXPECT_EQ(a.register_host_memory(in.data(), n), Error::InvalidArgument);
  round_trip(in.data(), out.data(), n, 0);
  EXPECT_EQ(a.unregister_host_memory(in.data()), Error::Ok);
  EXPECT_EQ(a.unregister_host_memory(in.data()), Error::InvalidArgument);
}

TEST_F(CudaAllocator, DeviceToDeviceCopiesWithinOneDevice) {
  const size_t n = 10000;
  auto in = pattern(n, 3);
  std::vector<unsigned char> out(n);
  auto s = a.allocate(n, 1);
  auto d = a.allocate(n, 1);
  ASSERT_TRUE(s.ok() && d.ok());
  const auto before = a.stats();
  ASSERT_EQ(a.copy_host_to_device(*s, in.data(), n, 1), Error::Ok);
  ASSERT_EQ(a.copy_device_to_device(*d, *s, n, 1), Error::Ok);
  ASSERT_EQ(a.copy_device_to_host(out.data(), *d, n, 1), Error::Ok);
  EXPECT_EQ(in, out);
  const auto after = a.stats();
  EXPECT_EQ(after.d2d_copies, before.d2d_copies + 1);
  EXPECT_EQ(after.d2d_bytes, before.d2d_bytes + n);
  EXPECT_EQ(after.h2d_bytes, before.h2d_bytes + n);
  EXPECT_EQ(after.d2h_bytes, before.d2h_bytes + n);
  a.deallocate(*s, 1);
  a.deallocate(*d, 1);
}

TEST_F(CudaAllocator, ACudaFailureMapsToAnErrorWithCudasWordsAndTheLaneSurvives) {
  ASSERT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, 0, size_t{64} << 10}), Error::Ok);
  const size_t n = 5 * (size_t{64} << 10);
  auto in = pattern(n, 5);
  std::vector<unsigned char> out(n);
  auto d = a.allocate(n, 0);
  ASSERT_TRUE(d.ok());
  const auto failed = a.stats().failed_calls;
  mock_cuda::fail_after("cudaMemcpyAsync", 2, cudaErrorIllegalAddress);
  EXPECT_EQ(a.copy_host_to_device(*d, in.data(), n, 0), Error::Internal);
  EXPECT_NE(std::string(CudaDeviceAllocator::last_error_message()).find("an illegal memory access was encountered"),
            std::string::npos);
  EXPECT_EQ(a.stats().failed_calls, failed + 1);
  mock_cuda::fail_after("cudaMalloc", 0, cudaErrorMemoryAllocation);
  auto oom = a.allocate(16, 0);
  ASSERT_FALSE(oom.ok());
  EXPECT_EQ(oom.error(), Error::MemoryAllocationFailed);
  // The next copy works.
  round_trip(in.data(), out.data(), n, 0);
  a.deallocate(*d, 0);
}

TEST_F(CudaAllocator, AFailedDeviceSwitchIsReportedAndNothingIsAllocated) {
  const size_t live = mock_cuda::live_device_allocations();
  mock_cuda::fail_after("cudaSetDevice", 0, cudaErrorInvalidDevice);
  auto p = a.allocate(16, 1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(), Error::InvalidArgument);
  EXPECT_EQ(mock_cuda::live_device_allocations(), live);
}

TEST_F(CudaAllocator, UnknownAndDoubleFreesAreRefusedAndCounted) {
  int not_ours = 0;
  const auto before = a.stats();
  a.deallocate(&not_ours, 0);
  auto p = a.allocate(8, 0);
  ASSERT_TRUE(p.ok());
  a.deallocate(*p, 0);
  a.deallocate(*p, 0);
  EXPECT_EQ(a.stats().failed_calls, before.failed_calls + 2);
  EXPECT_EQ(a.stats().live_allocations, before.live_allocations);
}

TEST_F(CudaAllocator, FreeingWhileTheRuntimeUnloadsOnlyDropsTheBookkeeping) {
  auto p = a.allocate(100, 0);
  ASSERT_TRUE(p.ok());
  const auto before = a.stats();
  mock_cuda::fail_after("cudaFree", 0, cudaErrorCudartUnloading);
  a.deallocate(*p, 0);
  const auto after = a.stats();
  EXPECT_EQ(after.failed_calls, before.failed_calls);
  EXPECT_EQ(after.bytes_outstanding, before.bytes_outstanding - 100);
  EXPECT_EQ(after.deallocations, before.deallocations + 1);
}

TEST_F(CudaAllocator, ConcurrentCopiesOnMoreThreadsThanLanesAreAllCorrect) {
  ASSERT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, 0, size_t{64} << 10}), Error::Ok);
  const auto before = a.stats();
  constexpr int kThreads = 8;
  constexpr int kIters = 20;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int device = t % 2;
      const size_t n = (size_t{200} << 10) + static_cast<size_t>(t) * 37;
      auto in = pattern(n, static_cast<unsigned>(t));
      std::vector<unsigned char> out(n);
      auto d = a.allocate(n, device);
      if (!d.ok()) {
        bad[t] = -1;
        return;
      }
      for (int i = 0; i < kIters; ++i) {
        in[i] ^= 0xFF;
        if (a.copy_host_to_device(*d, in.data(), n, device) != Error::Ok ||
            a.copy_device_to_host(out.data(), *d, n, device) != Error::Ok || in != out) {
          ++bad[t];
        }
      }
      a.deallocate(*d, device);
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(bad[t], 0) << "thread " << t;
  }
  const auto after = a.stats();
  EXPECT_EQ(after.h2d_copies - before.h2d_copies, uint64_t{kThreads * kIters});
  EXPECT_EQ(after.d2h_copies - before.d2h_copies, uint64_t{kThreads * kIters});
  EXPECT_EQ(after.live_allocations, before.live_allocations);
}

TEST_F(CudaAllocator, ChunkSizesOutsideTheRangeAreRefused) {
  EXPECT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, 0, 1024}), Error::InvalidArgument);
  EXPECT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, 0, (size_t{1} << 30) + 1}), Error::InvalidArgument);
  EXPECT_EQ(a.copy_config().chunk_bytes, CudaCopyConfig{}.chunk_bytes);
}

TEST_F(CudaAllocator, ChunkSizesAtBothEndsOfTheRangeAreAccepted) {
  const size_t min = size_t{64} << 10, max = size_t{1} << 30;
  EXPECT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, 0, min - 1}), Error::InvalidArgument);
  EXPECT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, 0, min}), Error::Ok);
  EXPECT_EQ(a.copy_config().chunk_bytes, min);
  EXPECT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, 0, max}), Error::Ok);
  EXPECT_EQ(a.copy_config().chunk_bytes, max);
  EXPECT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, 0, max + 1}), Error::InvalidArgument);
  EXPECT_EQ(a.copy_config().chunk_bytes, max);
}

TEST_F(CudaAllocator, AnUnknownPageableCopyModeIsRefusedAndTheConfigKept) {
  const CudaCopyConfig before = a.copy_config();
  EXPECT_EQ(a.set_copy_config(CudaCopyConfig{static_cast<PageableCopy>(7), 0, size_t{64} << 10}),
            Error::InvalidArgument);
  EXPECT_NE(std::string(CudaDeviceAllocator::last_error_message()).find("unknown pageable copy mode 7"),
            std::string::npos);
  EXPECT_EQ(a.copy_config().pageable, before.pageable);
  EXPECT_EQ(a.copy_config().chunk_bytes, before.chunk_bytes);
}

TEST_F(CudaAllocator, APageableCopyOfExactlyTheStagingThresholdIsStaged) {
  // Staging needs pinned buffers (cudaHostAlloc); a chunk size no lane has
  // used yet makes the lane allocate them, so a failing cudaHostAlloc tells
  // a staged copy from a direct one.
  const size_t threshold = size_t{128} << 10;
  ASSERT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, threshold, size_t{80} << 10}), Error::Ok);
  auto d = a.allocate(threshold, 0);
  ASSERT_TRUE(d.ok());
  auto in = pattern(threshold, 5);
  mock_cuda::fail_after("cudaHostAlloc", 0, cudaErrorMemoryAllocation);
  EXPECT_EQ(a.copy_host_to_device(*d, in.data(), threshold - 1, 0), Error::Ok) << "below the threshold: direct";
  EXPECT_NE(a.copy_host_to_device(*d, in.data(), threshold, 0), Error::Ok) << "at the threshold: staged";
  std::vector<unsigned char> out(threshold);
  EXPECT_EQ(a.copy_host_to_device(*d, in.data(), threshold, 0), Error::Ok);
  EXPECT_EQ(a.copy_device_to_host(out.data(), *d, threshold, 0), Error::Ok);
  EXPECT_EQ(in, out);
  a.deallocate(*d, 0);
}

TEST_F(CudaAllocator, DirectCopiesPageableMemoryWithoutStagingAndStagedStagesIt) {
  // A chunk size no lane has used: a staged copy must make pinned buffers
  // (cudaHostAlloc, failing once here), a direct one makes none.
  const size_t threshold = size_t{64} << 10, chunk = size_t{72} << 10, n = size_t{128} << 10;
  auto d = a.allocate(n, 0);
  ASSERT_TRUE(d.ok());
  auto in = pattern(n, 9);
  std::vector<unsigned char> out(n);
  ASSERT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kDirect, threshold, chunk}), Error::Ok);
  mock_cuda::fail_after("cudaHostAlloc", 0, cudaErrorMemoryAllocation);
  EXPECT_EQ(a.copy_host_to_device(*d, in.data(), n, 0), Error::Ok) << "direct: no staging buffers";
  EXPECT_EQ(a.copy_device_to_host(out.data(), *d, n, 0), Error::Ok) << "direct: no staging buffers";
  EXPECT_EQ(in, out);
  ASSERT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kStaged, threshold, chunk}), Error::Ok);
  EXPECT_EQ(a.copy_host_to_device(*d, in.data(), n, 0), Error::MemoryAllocationFailed) << "staged: staging buffers";
  in[0] ^= 0xFF;
  EXPECT_EQ(a.copy_host_to_device(*d, in.data(), n, 0), Error::Ok);
  EXPECT_EQ(a.copy_device_to_host(out.data(), *d, n, 0), Error::Ok);
  EXPECT_EQ(in, out);
  a.deallocate(*d, 0);
}

TEST_F(CudaAllocator, AZeroByteCopyOnAMissingDeviceIsRefused) {
  const auto before = a.stats();
  EXPECT_EQ(a.copy_host_to_device(nullptr, nullptr, 0, 2), Error::InvalidArgument);
  EXPECT_EQ(a.copy_device_to_host(nullptr, nullptr, 0, -2), Error::InvalidArgument);
  EXPECT_EQ(a.stats().failed_calls, before.failed_calls + 2);
  EXPECT_EQ(a.copy_host_to_device(nullptr, nullptr, 0, 1), Error::Ok);
}

TEST_F(CudaAllocator, AFreeCudaRefusesIsCountedAsAFailureAndTheBookkeepingDropped) {
  auto p = a.allocate(100, 0);
  ASSERT_TRUE(p.ok());
  const auto before = a.stats();
  mock_cuda::fail_after("cudaFree", 0, cudaErrorInvalidValue);
  a.deallocate(*p, 0);
  const auto after = a.stats();
  EXPECT_EQ(after.failed_calls, before.failed_calls + 1);
  EXPECT_EQ(after.deallocations, before.deallocations + 1);
  EXPECT_EQ(after.bytes_outstanding, before.bytes_outstanding - 100);
}

TEST_F(CudaAllocator, StatusAndPropertiesDescribeTheDevices) {
  const auto s = et_copy::cuda_runtime_status();
  EXPECT_EQ(s.error, Error::Ok);
  EXPECT_EQ(s.device_count, 2);
  EXPECT_EQ(s.runtime_version, 13000);
  EXPECT_STREQ(s.message, ""); // nothing to explain
  EXPECT_EQ(s.cuda_error, 0);
  auto p = et_copy::cuda_device_properties(1);
  ASSERT_TRUE(p.ok());
  EXPECT_STREQ(p->name, "Mock GPU 1");
  EXPECT_EQ(p->major, 9);
  EXPECT_EQ(p->minor, 0);
  EXPECT_EQ(p->total_memory, uint64_t{1} << 30);
  EXPECT_STREQ(p->pci_bus_id, "0000:01:00.0");
  EXPECT_FALSE(et_copy::cuda_device_properties(2).ok());
  auto d = a.allocate(8, 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*et_copy::cuda_pointer_device(*d), 1);
  int host = 0;
  EXPECT_EQ(*et_copy::cuda_pointer_device(&host), -1);
  a.deallocate(*d, 1);
}

TEST_F(CudaAllocator, ADeviceNameOfAllThe255CharactersCudasFieldHoldsComesBackWhole) {
  std::string name;
  for (int i = 0; i < 255; ++i) {
    name += static_cast<char>('a' + i % 26);
  }
  mock_cuda::set_device_name(name.c_str());
  auto p = et_copy::cuda_device_properties(0);
  mock_cuda::set_device_name("");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(std::string(p->name), name);
  EXPECT_STREQ(p->pci_bus_id, "0000:00:00.0");
}

// docs/cuda.md: up to 4 copies per device run at once, more wait. The mock
// holds each copy at its start, so the copies in flight can be counted.
TEST_F(CudaAllocator, FourCopiesOnADeviceRunAtOnceAndAFifthWaitsForOneOfThem) {
  constexpr int kDevice = 1;
  constexpr size_t kCopies = 5, kBytes = 64;
  std::vector<void*> device(kCopies);
  std::vector<std::vector<unsigned char>> host;
  for (size_t i = 0; i < kCopies; ++i) {
    auto d = a.allocate(kBytes, kDevice);
    ASSERT_TRUE(d.ok());
    device[i] = *d;
    host.push_back(pattern(kBytes, static_cast<unsigned>(i)));
  }
  // How many pointer checks one copy makes before it asks for a lane.
  const size_t before_one = mock_cuda::pointer_queries();
  ASSERT_EQ(a.copy_host_to_device(device[0], host[0].data(), kBytes, kDevice), Error::Ok);
  const size_t checks = mock_cuda::pointer_queries() - before_one;
  ASSERT_GT(checks, 0u);
  std::vector<Error> result(kCopies, Error::Internal);
  std::vector<std::thread> threads;
  auto copy = [&](size_t i) {
    threads.emplace_back([&, i] { result[i] = a.copy_host_to_device(device[i], host[i].data(), kBytes, kDevice); });
  };
  mock_cuda::hold_copies(true);
  for (size_t i = 0; i < 4; ++i) {
    copy(i);
  }
  // A bound, not a measurement: four lanes take microseconds to reach the copy.
  const bool four_at_once = mock_cuda::wait_for_copies_held(4, 20);
  EXPECT_TRUE(four_at_once) << mock_cuda::copies_held() << " copies in flight";
  if (four_at_once) {
    // The fifth copy checks its pointers, then asks for a lane: none is free.
    const size_t queries = mock_cuda::pointer_queries();
    copy(4);
    for (int i = 0; i < 20000 && mock_cuda::pointer_queries() < queries + checks; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(mock_cuda::pointer_queries(), queries + checks);
    // Time enough for a fifth lane to be made and reach the copy, were there one.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(mock_cuda::copies_held(), 4u);
  }
  mock_cuda::hold_copies(false);
  for (auto& t : threads) {
    t.join();
  }
  for (size_t i = 0; i < threads.size(); ++i) {
    EXPECT_EQ(result[i], Error::Ok) << "copy " << i;
    std::vector<unsigned char> back(kBytes);
    ASSERT_EQ(a.copy_device_to_host(back.data(), device[i], kBytes, kDevice), Error::Ok);
    EXPECT_EQ(back, host[i]) << "copy " << i;
  }
  for (void* d : device) {
    a.deallocate(d, kDevice);
  }
}

// Last in this file: registration is for the life of the process.
TEST_F(CudaAllocator, ZRegistrationIsIdempotent) {
  ASSERT_EQ(get_device_allocator(DeviceType::CUDA), nullptr);
  EXPECT_EQ(et_copy::use_cuda(), Registration::kRegistered);
  EXPECT_EQ(et_copy::use_cuda(), Registration::kAlreadyOurs);
  EXPECT_EQ(get_device_allocator(DeviceType::CUDA), &a);
}

// After ZRegistrationIsIdempotent: with et-copy's CUDA allocator serving the
// device, upstream's CUDA backend is the one whose delegates may take its memory.
TEST_F(CudaAllocator, ZZDeviceBackendsAreUpstreamsCudaBackend) {
  ASSERT_EQ(get_device_allocator(DeviceType::CUDA), &a);
  EXPECT_EQ(et_copy::device_backends(), (std::vector<std::string>{"CudaBackend"}));
  EXPECT_TRUE(et_copy::device_backends(DeviceType::CPU).empty());
}

TEST(NoDriver, EverythingFailsCleanlyWithNotFoundAndNothingIsRegistered) {
  if (!no_driver_mode()) {
    GTEST_SKIP() << "set MOCK_CUDA_DEVICES=nodriver";
  }
  auto& a = et_copy::cuda_device_allocator();
  auto count = a.device_count();
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.error(), Error::NotFound);
  const auto s = et_copy::cuda_runtime_status();
  EXPECT_EQ(s.error, Error::NotFound);
  EXPECT_EQ(s.driver_version, 0);
  EXPECT_NE(std::string(s.message).find("no CUDA driver"), std::string::npos) << s.message;
  auto p = a.allocate(16, 0);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(), Error::NotFound);
  char host[4] = {};
  EXPECT_EQ(a.copy_host_to_device(host, host, 4, -1), Error::NotFound);
  Error err = Error::Ok;
  EXPECT_EQ(et_copy::use_cuda(&err), Registration::kFailed);
  EXPECT_EQ(err, Error::NotFound);
  EXPECT_EQ(get_device_allocator(DeviceType::CUDA), nullptr);
}

// Copies on the caller's stream (et_copy/cuda_stream.h). The mock's device
// memory is host memory, so a test reads it directly to see whether a
// queued copy has run yet.
class CudaCallerStream : public CudaAllocator {
 protected:
  void SetUp() override {
    CudaAllocator::SetUp();
    if (IsSkipped()) {
      return;
    }
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    for (et_copy::DeviceIndex d : {0, 1}) {
      EXPECT_EQ(et_copy::clear_cuda_stream(d), Error::Ok);
    }
    CudaAllocator::TearDown();
  }

  // `n` device bytes of `device`, filled with `fill` through the (synchronous) lanes.
  void* device_bytes(size_t n, int device, unsigned char fill) {
    et_copy::CudaStreamHandle none = nullptr;
    EXPECT_FALSE(et_copy::cuda_stream(static_cast<et_copy::DeviceIndex>(device), &none));
    auto d = a.allocate(n, static_cast<et_copy::DeviceIndex>(device));
    EXPECT_TRUE(d.ok());
    std::vector<unsigned char> v(n, fill);
    EXPECT_EQ(a.copy_host_to_device(*d, v.data(), n, static_cast<et_copy::DeviceIndex>(device)), Error::Ok);
    return *d;
  }

  static bool holds(const void* device, const std::vector<unsigned char>& expected) {
    return std::memcmp(device, expected.data(), expected.size()) == 0;
  }

  cudaStream_t s = nullptr;
  cudaStream_t t = nullptr;
};

TEST(CudaStreamSetting, IsPerThreadAndPerDeviceAndTheGuardPutsBackWhatWasThere) {
  int tag_s = 0, tag_t = 0;
  void* s = &tag_s;
  void* t = &tag_t;
  et_copy::CudaStreamHandle got = nullptr;
  EXPECT_FALSE(et_copy::cuda_stream(0, &got));
  ASSERT_EQ(et_copy::set_cuda_stream(0, s), Error::Ok);
  ASSERT_TRUE(et_copy::cuda_stream(0, &got));
  EXPECT_EQ(got, s);
  EXPECT_FALSE(et_copy::cuda_stream(1, &got)) << "per device";
  bool other_thread_sees_one = true;
  std::thread([&] {
    et_copy::CudaStreamHandle h = nullptr;
    other_thread_sees_one = et_copy::cuda_stream(0, &h);
  }).join();
  EXPECT_FALSE(other_thread_sees_one) << "per thread";
  {
    et_copy::CudaStreamGuard guard(0, t);
    EXPECT_TRUE(guard.ok());
    ASSERT_TRUE(et_copy::cuda_stream(0, &got));
    EXPECT_EQ(got, t);
    {
      et_copy::CudaStreamGuard legacy(0, nullptr); // the legacy default stream is a stream, not "unset"
      got = s;
      ASSERT_TRUE(et_copy::cuda_stream(0, &got));
      EXPECT_EQ(got, nullptr);
    }
    ASSERT_TRUE(et_copy::cuda_stream(0, &got));
    EXPECT_EQ(got, t);
  }
  ASSERT_TRUE(et_copy::cuda_stream(0, &got));
  EXPECT_EQ(got, s);
  EXPECT_EQ(et_copy::clear_cuda_stream(0), Error::Ok);
  EXPECT_FALSE(et_copy::cuda_stream(0, &got));
  {
    et_copy::CudaStreamGuard guard(127, s);
    EXPECT_TRUE(guard.ok());
    EXPECT_TRUE(et_copy::cuda_stream(127, &got));
  }
  EXPECT_FALSE(et_copy::cuda_stream(127, &got)) << "a guard over no stream puts back none";
  for (int bad : {-1, -128}) {
    const auto d = static_cast<et_copy::DeviceIndex>(bad);
    EXPECT_EQ(et_copy::set_cuda_stream(d, s), Error::InvalidArgument) << bad;
    EXPECT_EQ(et_copy::clear_cuda_stream(d), Error::InvalidArgument) << bad;
    EXPECT_FALSE(et_copy::cuda_stream(d, &got)) << bad;
    et_copy::CudaStreamGuard guard(d, s);
    EXPECT_FALSE(guard.ok()) << bad;
  }
}

TEST_F(CudaCallerStream, AHostToDeviceCopyReturnsQueuedOnTheCallersStreamAndLandsWhenItSyncs) {
  const size_t n = 4096;
  void* d = device_bytes(n, 0, 0);
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, n, 0), cudaSuccess);
  for (bool from_pinned : {false, true}) {
    auto in = pattern(n, from_pinned ? 7 : 8);
    void* src = in.data();
    if (from_pinned) {
      std::memcpy(pinned, in.data(), n);
      src = pinned;
    }
    const size_t default_pending = mock_cuda::stream_pending(nullptr);
    const size_t syncs = mock_cuda::stream_syncs(s);
    ASSERT_EQ(et_copy::set_cuda_stream(0, s), Error::Ok);
    ASSERT_EQ(a.copy_host_to_device(d, src, n, 0), Error::Ok);
    EXPECT_GE(mock_cuda::stream_pending(s), 1u) << "queued on the caller's stream";
    EXPECT_FALSE(holds(d, in)) << "returned before the copy ran";
    EXPECT_EQ(mock_cuda::stream_syncs(s), syncs) << "nothing waited for the stream";
    EXPECT_EQ(mock_cuda::stream_pending(t), 0u);
    EXPECT_EQ(mock_cuda::stream_pending(nullptr), default_pending);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_TRUE(holds(d, in)) << (from_pinned ? "pinned" : "pageable");
    ASSERT_EQ(et_copy::clear_cuda_stream(0), Error::Ok);
  }
  EXPECT_EQ(mock_cuda::device_syncs(), 0u);
  cudaFreeHost(pinned);
  a.deallocate(d, 0);
}

TEST_F(CudaCallerStream, APageableSourceMayBeOverwrittenAsSoonAsTheCopyReturns) {
  const size_t n = (size_t{200} << 10) + 5; // over several staging chunks
  ASSERT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kDirect, 0, size_t{64} << 10}), Error::Ok);
  void* d = device_bytes(n, 0, 0);
  auto in = pattern(n, 3);
  const auto sent = in;
  ASSERT_EQ(et_copy::set_cuda_stream(0, s), Error::Ok);
  ASSERT_EQ(a.copy_host_to_device(d, in.data(), n, 0), Error::Ok);
  std::fill(in.begin(), in.end(), 0x5A);
  EXPECT_EQ(mock_cuda::stream_syncs(s), 0u) << "staged by et-copy, not by a copy that syncs the stream";
  EXPECT_FALSE(holds(d, sent)) << "still queued";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(holds(d, sent));
  a.deallocate(d, 0);
}

TEST_F(CudaCallerStream, ASmallCopyStagesThroughOneBlockOf64KiB) {
  // Blocks are sized to the copy, 64 KiB at the least: a 100-byte copy takes
  // one such block, and a copy of one byte more than a block a block twice as large.
  constexpr int kDevice = 1;
  void* d = device_bytes(size_t{256} << 10, kDevice, 0);
  const auto small = pattern(100, 7);
  ASSERT_EQ(et_copy::set_cuda_stream(kDevice, s), Error::Ok);
  ASSERT_EQ(a.copy_host_to_device(d, small.data(), small.size(), kDevice), Error::Ok);
  EXPECT_EQ(a.stream_staging_bytes(kDevice), size_t{64} << 10);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const auto larger = pattern((size_t{64} << 10) + 1, 8);
  ASSERT_EQ(a.copy_host_to_device(d, larger.data(), larger.size(), kDevice), Error::Ok);
  EXPECT_EQ(a.stream_staging_bytes(kDevice), (size_t{64} << 10) + (size_t{128} << 10));
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(holds(d, larger));
  a.deallocate(d, kDevice);
}

TEST_F(CudaCallerStream, StagingIsReusedOnlyOnceTheStreamHasPassedTheCopyThatReadIt) {
  // 64 KiB chunks: 4 blocks of staging at most. Twelve copies queued with no
  // sync must wait for earlier ones (their events), never for the stream.
  constexpr int kDevice = 1;
  const size_t chunk = size_t{64} << 10;
  ASSERT_EQ(a.set_copy_config(CudaCopyConfig{PageableCopy::kDirect, 0, chunk}), Error::Ok);
  constexpr size_t kCopies = 12;
  void* d = device_bytes(kCopies * chunk, kDevice, 0);
  std::vector<unsigned char> expected(kCopies * chunk);
  std::vector<unsigned char> in(chunk);
  ASSERT_EQ(et_copy::set_cuda_stream(kDevice, s), Error::Ok);
  for (size_t i = 0; i < kCopies; ++i) {
    in = pattern(chunk, static_cast<unsigned>(i + 40));
    std::memcpy(expected.data() + i * chunk, in.data(), chunk);
    ASSERT_EQ(a.copy_host_to_device(static_cast<char*>(d) + i * chunk, in.data(), chunk, kDevice), Error::Ok) << i;
  }
  EXPECT_EQ(mock_cuda::stream_syncs(s), 0u);
  EXPECT_GE(mock_cuda::stream_pending(s), 1u);
  EXPECT_LE(a.stream_staging_bytes(kDevice), CudaDeviceAllocator::kStreamStagingChunks * chunk);
  EXPECT_GT(a.stream_staging_bytes(kDevice), 0u);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(holds(d, expected));
  a.deallocate(d, kDevice);
}

TEST_F(CudaCallerStream, ADeviceToHostCopySynchronisesTheCallersStreamAndNoOther) {
  const size_t n = 3000;
  void* d = device_bytes(n, 0, 0);
  auto in = pattern(n, 11);
  bool t_ran = false, default_ran = false;
  mock_cuda::launch(t, [&] { t_ran = true; });
  mock_cuda::launch(nullptr, [&] { default_ran = true; });
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, n, 0), cudaSuccess);
  ASSERT_EQ(et_copy::set_cuda_stream(0, s), Error::Ok);
  for (bool to_pinned : {false, true}) {
    ASSERT_EQ(a.copy_host_to_device(d, in.data(), n, 0), Error::Ok); // queued before the D2H
    std::vector<unsigned char> out(n, 0);
    unsigned char* dst = to_pinned ? static_cast<unsigned char*>(pinned) : out.data();
    std::memset(dst, 0, n);
    const size_t syncs = mock_cuda::stream_syncs(s);
    ASSERT_EQ(a.copy_device_to_host(dst, d, n, 0), Error::Ok);
    EXPECT_EQ(std::memcmp(dst, in.data(), n), 0) << (to_pinned ? "pinned" : "pageable");
    EXPECT_GT(mock_cuda::stream_syncs(s), syncs);
    EXPECT_EQ(mock_cuda::stream_pending(s), 0u);
    in = pattern(n, 12);
  }
  EXPECT_FALSE(t_ran) << "another stream is untouched";
  EXPECT_FALSE(default_ran) << "so is the default stream";
  EXPECT_EQ(mock_cuda::stream_syncs(t), 0u);
  EXPECT_EQ(mock_cuda::device_syncs(), 0u);
  ASSERT_EQ(cudaStreamSynchronize(t), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_TRUE(t_ran && default_ran);
  cudaFreeHost(pinned);
  a.deallocate(d, 0);
}

TEST_F(CudaCallerStream, CopiesAndExecutionOnTheStreamRunInTheirOrder) {
  // H2D x -> A, a stand-in kernel B = A + 1, D2D B -> C, D2H C: x + 1 only
  // if every step ran after the one before it, on one stream.
  const size_t n = 1024;
  auto* A = static_cast<unsigned char*>(device_bytes(n, 0, 0));
  auto* B = static_cast<unsigned char*>(device_bytes(n, 0, 0));
  auto* C = static_cast<unsigned char*>(device_bytes(n, 0, 0));
  auto x = pattern(n, 21);
  ASSERT_EQ(et_copy::set_cuda_stream(0, s), Error::Ok);
  ASSERT_EQ(a.copy_host_to_device(A, x.data(), n, 0), Error::Ok);
  mock_cuda::launch(s, [=] {
    for (size_t i = 0; i < n; ++i) {
      B[i] = static_cast<unsigned char>(A[i] + 1);
    }
  });
  ASSERT_EQ(a.copy_device_to_device(C, B, n, 0), Error::Ok);
  EXPECT_GE(mock_cuda::stream_pending(s), 3u) << "nothing has run yet";
  std::vector<unsigned char> out(n);
  ASSERT_EQ(a.copy_device_to_host(out.data(), C, n, 0), Error::Ok);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], static_cast<unsigned char>(x[i] + 1)) << i;
  }
  for (void* p : {static_cast<void*>(A), static_cast<void*>(B), static_cast<void*>(C)}) {
    a.deallocate(p, 0);
  }
}

TEST_F(CudaCallerStream, AnotherStreamCanWaitForAQueuedCopyThroughAnEvent) {
  const size_t n = 512;
  auto* A = static_cast<unsigned char*>(device_bytes(n, 0, 0));
  auto x = pattern(n, 5);
  ASSERT_EQ(et_copy::set_cuda_stream(0, s), Error::Ok);
  ASSERT_EQ(a.copy_host_to_device(A, x.data(), n, 0), Error::Ok);
  cudaEvent_t ev = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(t, ev, 0), cudaSuccess);
  bool saw_x = false;
  mock_cuda::launch(t, [&] { saw_x = std::memcmp(A, x.data(), n) == 0; });
  ASSERT_EQ(cudaStreamSynchronize(t), cudaSuccess);
  EXPECT_TRUE(saw_x);
  EXPECT_EQ(mock_cuda::stream_syncs(s), 0u);
  cudaEventDestroy(ev);
  a.deallocate(A, 0);
}

TEST_F(CudaCallerStream, WithNoStreamSetCopiesRunOnTheLanesAndAreCompleteOnReturn) {
  const size_t n = 2048;
  void* d = device_bytes(n, 0, 0);
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, n, 0), cudaSuccess);
  auto in = pattern(n, 2);
  std::memcpy(pinned, in.data(), n);
  ASSERT_EQ(et_copy::set_cuda_stream(1, s), Error::Ok); // another device's setting does not apply
  const size_t default_pending = mock_cuda::stream_pending(nullptr);
  ASSERT_EQ(a.copy_host_to_device(d, pinned, n, 0), Error::Ok);
  EXPECT_TRUE(holds(d, in)) << "complete on return";
  EXPECT_EQ(mock_cuda::stream_pending(s), 0u);
  EXPECT_EQ(mock_cuda::stream_syncs(s), 0u);
  EXPECT_EQ(mock_cuda::stream_pending(nullptr), default_pending);
  // The caller's stream from another thread's setting is not this thread's.
  std::thread([&] { EXPECT_EQ(et_copy::set_cuda_stream(0, t), Error::Ok); }).join();
  in = pattern(n, 3);
  ASSERT_EQ(a.copy_host_to_device(d, in.data(), n, 0), Error::Ok);
  EXPECT_TRUE(holds(d, in));
  EXPECT_EQ(mock_cuda::stream_pending(t), 0u);
  cudaFreeHost(pinned);
  a.deallocate(d, 0);
}

TEST_F(CudaCallerStream, ACudaFailureOnTheCallersStreamIsAnErrorWithCudasWordsAndTheNextCopyWorks) {
  const size_t n = 256;
  void* d = device_bytes(n, 0, 0);
  auto in = pattern(n, 9);
  std::vector<unsigned char> out(n);
  ASSERT_EQ(et_copy::set_cuda_stream(0, s), Error::Ok);
  const auto failed = a.stats().failed_calls;
  mock_cuda::fail_after("cudaMemcpyAsync", 0, cudaErrorIllegalAddress);
  EXPECT_EQ(a.copy_host_to_device(d, in.data(), n, 0), Error::Internal);
  EXPECT_NE(std::string(CudaDeviceAllocator::last_error_message()).find("caller's stream"), std::string::npos)
      << CudaDeviceAllocator::last_error_message();
  EXPECT_NE(std::string(CudaDeviceAllocator::last_error_message()).find("an illegal memory access"), std::string::npos);
  mock_cuda::fail_after("cudaEventRecord", 0, cudaErrorIllegalAddress);
  EXPECT_EQ(a.copy_host_to_device(d, in.data(), n, 0), Error::Internal);
  mock_cuda::fail_after("cudaStreamSynchronize", 0, cudaErrorIllegalAddress);
  EXPECT_EQ(a.copy_device_to_host(out.data(), d, n, 0), Error::Internal);
  mock_cuda::fail_after("cudaMemcpyAsync", 0, cudaErrorIllegalAddress);
  EXPECT_EQ(a.copy_device_to_device(d, d, n, 0), Error::Internal);
  EXPECT_EQ(a.stats().failed_calls, failed + 4);
  in = pattern(n, 10);
  ASSERT_EQ(a.copy_host_to_device(d, in.data(), n, 0), Error::Ok);
  ASSERT_EQ(a.copy_device_to_host(out.data(), d, n, 0), Error::Ok);
  EXPECT_EQ(in, out);
  a.deallocate(d, 0);
}

} // namespace

// The copy kernel on the caller's stream: an accepted h2d is queued there; a
// rejected one queues nothing and leaves out untouched.
TEST_F(CudaCallerStream, TheH2dKernelQueuesOnTheCallersStreamAndARejectedOneQueuesNothing) {
  const Registration r = et_copy::use_cuda();
  ASSERT_TRUE(r == Registration::kRegistered || r == Registration::kAlreadyOurs);
  auto d = a.allocate(64, 0);
  ASSERT_TRUE(d.ok());
  std::memset(*d, 0x33, 64);
  std::vector<float> host(16);
  for (size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<float>(i) + 0.5f;
  }
  et_copy_test::TestTensor::Options on_device;
  on_device.device = DeviceType::CUDA;
  et_copy_test::TestTensor out(executorch::aten::ScalarType::Float, {16}, *d, on_device);
  ASSERT_EQ(et_copy::set_cuda_stream(0, s), Error::Ok);
  std::vector<double> wrong(16, 1.0);
  et_copy_test::TestTensor bad(executorch::aten::ScalarType::Double, {16}, wrong.data());
  EXPECT_EQ(et_copy::h2d_copy(bad.t(), out.t(), nullptr), Error::InvalidArgument);
  EXPECT_EQ(mock_cuda::stream_pending(s), 0u);
  EXPECT_EQ(static_cast<unsigned char*>(*d)[0], 0x33);
  et_copy_test::TestTensor self(executorch::aten::ScalarType::Float, {16}, host.data());
  ASSERT_EQ(et_copy::h2d_copy(self.t(), out.t(), nullptr), Error::Ok);
  EXPECT_GE(mock_cuda::stream_pending(s), 1u);
  EXPECT_EQ(static_cast<unsigned char*>(*d)[0], 0x33) << "queued, not yet run";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(std::memcmp(*d, host.data(), 64), 0);
  a.deallocate(*d, 0);
}

// After ZRegistrationIsIdempotent: the kernel's diagnostic carries CUDA's own
// words, so they reach the caller (and Python) and not only the log.
TEST_F(CudaAllocator, ZZAKernelsDiagnosticCarriesCudasErrorString) {
  ASSERT_EQ(et_copy::use_cuda(), Registration::kAlreadyOurs);
  auto d = a.allocate(64, 0);
  ASSERT_TRUE(d.ok());
  std::vector<float> host(16, 1.0f);
  et_copy_test::TestTensor::Options on_device;
  on_device.device = DeviceType::CUDA;
  et_copy_test::TestTensor self(executorch::aten::ScalarType::Float, {16}, host.data());
  et_copy_test::TestTensor out(executorch::aten::ScalarType::Float, {16}, *d, on_device);
  mock_cuda::fail_after("cudaMemcpyAsync", 0, cudaErrorIllegalAddress);
  et_copy::CopyDiagnostic diag;
  EXPECT_EQ(et_copy::h2d_copy(self.t(), out.t(), &diag), Error::Internal);
  const std::string message = diag.message;
  EXPECT_NE(message.find("the device allocator failed the 64-byte copy"), std::string::npos) << message;
  EXPECT_NE(message.find("an illegal memory access was encountered"), std::string::npos) << message;
  a.deallocate(*d, 0);
}

// After ZRegistrationIsIdempotent: a state arena on CUDA whose h2d write
// fails says so, and writes nothing after the failed copy (a later success
// must not hide it): a fresh arena's zeros, then a state new to an arena in use.
TEST_F(CudaAllocator, ZZAStateArenaWriteThatFailsStopsThereAndIsReported) {
  ASSERT_EQ(et_copy::use_cuda(), Registration::kAlreadyOurs);
  et_copy_test::NamedBlobs data;
  for (const char* key : {"a0", "b0", "c0"}) {
    data.blobs[key] = std::vector<uint8_t>(8, static_cast<uint8_t>(key[0]));
  }
  const std::vector<et_copy::ArenaState> ab{{"a", 0, 8, "a0"}, {"b", 8, 8, "b0"}};
  et_copy::FailureReport report;
  mock_cuda::fail_after("cudaMemcpyAsync", 0, cudaErrorIllegalAddress); // the zeros
  auto fresh = et_copy::acquire_arena({"cuda-residency", 1, nullptr}, DeviceType::CUDA, 0, 24, ab, &data, "m", &report);
  ASSERT_FALSE(fresh.ok());
  EXPECT_EQ(report.detail, "writing the start state failed");
  EXPECT_EQ(et_copy::arena_nbytes("cuda-residency", 1), 0u);

  auto in_use = et_copy::acquire_arena({"cuda-residency", 2, nullptr}, DeviceType::CUDA, 0, 24, {{"a", 0, 8, "a0"}},
                                       &data, "prefill", &report);
  ASSERT_TRUE(in_use.ok()) << report.detail;
  mock_cuda::fail_after("cudaMemcpyAsync", 0, cudaErrorIllegalAddress); // b's initial value
  report = {};
  auto more =
      et_copy::acquire_arena({"cuda-residency", 2, nullptr}, DeviceType::CUDA, 0, 24,
                             {{"a", 0, 8, "a0"}, {"b", 8, 8, "b0"}, {"c", 16, 8, "c0"}}, &data, "decode", &report);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(report.detail, "writing the start state failed");
  std::vector<uint8_t> back(24);
  ASSERT_EQ(a.copy_device_to_host(back.data(), (*in_use)->block().device(), back.size(), 0), Error::Ok);
  EXPECT_EQ(back, (std::vector<uint8_t>{'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', 0, 0, 0, 0,
                                        0,   0,   0,   0,   0,   0,   0,   0,   0, 0, 0, 0}))
      << "c is not written after b's copy failed";
}
