// A DeviceAllocator for DeviceType::CUDA backed by host memory, so programs
// with CUDA-planned buffers load and run on machines with no GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include <et_copy/counting_device_allocator.h>

namespace et_copy {

/**
 * Host-backed stand-in for a CUDA device. Memory comes from the host heap;
 * fresh allocations are filled with kFreshByte so that a kernel which never
 * writes its output is caught. Every copy is checked to lie inside one live
 * allocation of the named device, so an out-of-bounds device write becomes
 * an InvalidArgument error instead of heap corruption.
 *
 * Device indices: 0 .. device_count()-1, or -1 for "the current device"
 * (always device 0). Any other index is rejected with InvalidArgument.
 *
 * Errors: allocate() gives InvalidArgument for a bad index or an alignment
 * that is not a power of two, NotSupported above kMaxAlignment,
 * MemoryAllocationFailed when the host heap is exhausted. Copies give
 * InvalidArgument for a bad index, a null pointer with nbytes > 0, or a
 * device range outside every live allocation of that device (nothing is
 * written then). deallocate() of a pointer it did not hand out (or a second
 * free) is refused, logged and counted in failed_calls; nullptr is a no-op.
 *
 * Threading: all methods are thread-safe. The byte copies themselves run
 * outside the allocator's lock, so copies on different threads overlap.
 */
class SimulatedDeviceAllocator final : public CountingDeviceAllocator {
 public:
  /// Byte that fills every fresh allocation.
  static constexpr uint8_t kFreshByte = 0xA5;
  /// Largest alignment allocate() accepts (larger gives NotSupported).
  static constexpr size_t kMaxAlignment = 4096;

  explicit SimulatedDeviceAllocator(int device_count = 1);
  ~SimulatedDeviceAllocator() override;

  SimulatedDeviceAllocator(const SimulatedDeviceAllocator&) = delete;
  SimulatedDeviceAllocator& operator=(const SimulatedDeviceAllocator&) = delete;

  /// Changes how many devices the simulation reports (1..127). Allocations
  /// on devices that no longer exist stay valid until freed. Returns
  /// InvalidArgument for a count outside 1..127.
  Error set_device_count(int count);

  /// The host address at which the backend and tests read and write the
  /// device range [device_ptr, device_ptr + nbytes): InvalidArgument unless
  /// the range lies inside one live allocation of device `index` (-1: device
  /// 0). Today device memory is host memory, so the alias is device_ptr.
  /// Valid while that allocation lives. Thread-safe.
  Result<void*> host_alias(const void* device_ptr, size_t nbytes, DeviceIndex index) const;
  /// True when [ptr, ptr + nbytes) lies inside one live allocation of device
  /// `index` (-1: device 0). Never fails; thread-safe.
  bool is_device_memory(const void* ptr, size_t nbytes, DeviceIndex index) const;

  const char* name() const override {
    return "simulated";
  }
  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }

 private:
  Result<int> count_devices() const override;
  Result<void*> allocate_bytes(size_t nbytes, DeviceIndex index, size_t alignment) override;
  Released release_bytes(void* ptr, DeviceIndex index) override;
  Error move_bytes(CopyKind kind, void* dst, const void* src, size_t nbytes, DeviceIndex index) override;

  struct Allocation {
    size_t nbytes;
    DeviceIndex index;
  };
  // Resolves -1 to device 0; returns -2 for an index that does not exist.
  int resolve_index(DeviceIndex index) const;
  // True when [ptr, ptr+nbytes) lies inside one live allocation on `device`.
  bool contains(const void* ptr, size_t nbytes, int device) const;
  Error check_copy(const char* what, const void* device_ptr, const void* other_ptr, size_t nbytes,
                   DeviceIndex index) const;

  mutable std::mutex mutex_;
  std::map<uintptr_t, Allocation> live_; // keyed by start address
  std::atomic<int> device_count_;
};

/// The process-wide simulated allocator (created on first use and never
/// destroyed, so device memory can be freed safely during process exit).
/// Never fails; safe to call from any thread (a function-local static).
SimulatedDeviceAllocator& simulated_device_allocator();

} // namespace et_copy
