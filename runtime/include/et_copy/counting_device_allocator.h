// The DeviceAllocator contract et-copy's allocators share: ExecuTorch's
// interface plus a device count, device-to-device copies and exact counters.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/result.h>

namespace et_copy {

using executorch::runtime::DeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::Result;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

/// A snapshot of an allocator's counters. Counters only ever grow, except
/// bytes_outstanding and live_allocations, which fall on deallocate().
struct DeviceAllocatorStats {
  uint64_t allocations = 0;       ///< successful allocate() calls
  uint64_t deallocations = 0;     ///< deallocate() calls that freed memory
  uint64_t live_allocations = 0;  ///< allocations - deallocations
  uint64_t bytes_outstanding = 0; ///< bytes allocated and not yet freed
  uint64_t peak_bytes_outstanding = 0;
  uint64_t h2d_copies = 0; ///< successful copy_host_to_device() calls
  uint64_t h2d_bytes = 0;
  uint64_t d2h_copies = 0; ///< successful copy_device_to_host() calls
  uint64_t d2h_bytes = 0;
  uint64_t d2d_copies = 0; ///< successful copy_device_to_device() calls
  uint64_t d2d_bytes = 0;
  uint64_t failed_calls = 0; ///< calls rejected with an Error
};

/**
 * Base of et-copy's allocators. Adds to ExecuTorch's DeviceAllocator what a
 * copy kernel and a test need: how many devices exist, device-to-device
 * copies, and counters that are exact under concurrent use.
 *
 * Threading: every method may be called from any thread at any time; the
 * counters are atomics and each subclass guards its own state.
 */
class CountingDeviceAllocator : public DeviceAllocator {
 public:
  /// Number of devices this allocator serves, or the Error that prevented
  /// counting them (e.g. no CUDA driver).
  virtual Result<int> device_count() const = 0;

  /// Copies nbytes between two buffers of device `index`.
  virtual Error copy_device_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) = 0;

  /// A short human-readable name ("simulated", "cuda").
  virtual const char* name() const = 0;

  /// The calling thread's last failure in this allocator, in its own words
  /// (for CUDA, cudaGetErrorString's), or "" when it has none to give. The
  /// copy kernels append it to their diagnostic, so the words reach the
  /// caller (and Python) and not only the log.
  virtual const char* failure_message() const {
    return "";
  }

  /// A consistent-enough snapshot of the counters (each field is read
  /// atomically; fields are not read under one lock).
  DeviceAllocatorStats stats() const;

 protected:
  void record_allocation(size_t nbytes);
  void record_deallocation(size_t nbytes);
  void record_h2d(size_t nbytes);
  void record_d2h(size_t nbytes);
  void record_d2d(size_t nbytes);
  void record_failure();

 private:
  std::atomic<uint64_t> allocations_{0};
  std::atomic<uint64_t> deallocations_{0};
  std::atomic<uint64_t> bytes_outstanding_{0};
  std::atomic<uint64_t> peak_bytes_outstanding_{0};
  std::atomic<uint64_t> h2d_copies_{0};
  std::atomic<uint64_t> h2d_bytes_{0};
  std::atomic<uint64_t> d2h_copies_{0};
  std::atomic<uint64_t> d2h_bytes_{0};
  std::atomic<uint64_t> d2d_copies_{0};
  std::atomic<uint64_t> d2d_bytes_{0};
  std::atomic<uint64_t> failed_calls_{0};
};

/// Returns `alloc` as et-copy's allocator type, or nullptr when it is some
/// other implementation of ExecuTorch's interface (or nullptr). Pure; any
/// thread.
CountingDeviceAllocator* as_counting_allocator(DeviceAllocator* alloc);

} // namespace et_copy
