// A DeviceAllocator for DeviceType::CUDA on the host, so programs with
// CUDA-planned buffers load and run on machines with no GPU; its memory
// faults on a host access, as a GPU's does, unless made host-readable.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include <et_copy/counting_device_allocator.h>
#include <et_copy/limits.h>

namespace et_copy {

/**
 * Stand-in for a CUDA device on a machine with none. Fresh allocations are
 * filled with kFreshByte so that a kernel which never writes its output is
 * caught. Every copy is checked to lie inside one live allocation of the
 * named device, so an out-of-bounds device write becomes an InvalidArgument
 * error instead of memory corruption.
 *
 * Two kinds of memory, chosen per allocation by the mode at the time of
 * allocate() (set_host_readable(); each allocation keeps its mode):
 * - Host-unreadable (what a GPU gives). The address handed out lies in a
 *   PROT_NONE reservation of kReservationBytes of address space, so any
 *   host read or write of it dies with SIGSEGV, as a CUDA pointer would on
 *   the CPU. The bytes live at the same offset in a second, read/write
 *   mapping, the *host alias*, which only the allocator's copies and
 *   host_alias() callers (a device backend's processor, test and debugger
 *   hooks) use. First fit at page granularity; a freed range's alias pages
 *   are returned to the system (MADV_DONTNEED).
 * - Host-readable (not what a GPU gives). The address handed out is host
 *   heap memory, its own alias, so ExecuTorch's CPU kernels can run on
 *   device tensors; AddressSanitizer still sees overruns of it.
 * The mode starts as kDefaultHostReadable, the one place the default is set.
 *
 * Device indices: 0 .. device_count()-1, or -1 for "the current device"
 * (always device 0). Any other index is rejected with InvalidArgument.
 *
 * Errors: allocate() gives InvalidArgument for a bad index or an alignment
 * that is not a power of two, NotSupported above kMaxAlignment,
 * MemoryAllocationFailed when the host heap (host-readable) or the
 * reservation (host-unreadable) has no room. Copies give InvalidArgument
 * for a bad index, a null pointer with nbytes > 0, or a device range outside
 * every live allocation of that device (nothing is written then).
 * deallocate() of a pointer it did not hand out (or a second free) is
 * refused, logged and counted in failed_calls; nullptr is a no-op.
 *
 * Threading: all methods are thread-safe. The byte copies themselves run
 * outside the allocator's lock, so copies on different threads overlap.
 */
class SimulatedDeviceAllocator final : public CountingDeviceAllocator, public HostAliasing {
 public:
  /// Byte that fills every fresh allocation.
  static constexpr uint8_t kFreshByte = 0xA5;
  /// Largest alignment allocate() accepts (larger gives NotSupported).
  static constexpr size_t kMaxAlignment = 4096;
  /// The mode a new allocator starts in: the one place the default is
  /// decided (Python's et_copy.use_simulated_device() keeps it unless told).
  /// Host-unreadable, as a GPU's memory is: device programs compute in
  /// SimulatedDeviceBackend, and a host read of device memory faults.
  static constexpr bool kDefaultHostReadable = false;
  /// Address space reserved for host-unreadable memory, all devices
  /// together (the most they can hold at once). Virtual only: a page costs
  /// memory once written. 64 GiB fits beside AddressSanitizer's shadow and
  /// needs no overcommit (MAP_NORESERVE); if the system refuses it, the
  /// reservation halves down to 1 GiB.
  static constexpr size_t kReservationBytes = size_t{64} << 30;

  explicit SimulatedDeviceAllocator(int device_count = 1);
  ~SimulatedDeviceAllocator() override;

  SimulatedDeviceAllocator(const SimulatedDeviceAllocator&) = delete;
  SimulatedDeviceAllocator& operator=(const SimulatedDeviceAllocator&) = delete;

  /// Changes how many devices the simulation reports (1..kMaxDevices,
  /// et_copy/limits.h). Allocations on devices that no longer exist stay
  /// valid until freed. Returns InvalidArgument for a count outside that.
  ET_NODISCARD Error set_device_count(int count);

  /// Whether allocations made from now on are host-readable (true: host
  /// memory, not what a GPU gives) or fault on a host access (false).
  /// Live allocations keep the mode they were made in.
  void set_host_readable(bool readable) {
    host_readable_.store(readable);
  }
  /// The mode allocate() uses now.
  bool host_readable() const {
    return host_readable_.load();
  }

  /**
   * The host-readable address of device bytes [device_ptr, device_ptr +
   * nbytes), as a device's own processor (or a debugger) reaches them: valid
   * while that allocation lives. For host-readable allocations it is
   * device_ptr itself. Returns InvalidArgument (and logs) when the range is
   * not inside one live allocation of device `index` (-1: device 0) or the
   * index is no device; nullptr with nbytes 0 gives nullptr. Counts nothing.
   * For a device backend's compute and for inspection hooks (tests, the
   * parity harness); copies go through the copy methods. Any thread.
   */
  ET_NODISCARD Result<void*> host_alias(const void* device_ptr, size_t nbytes, DeviceIndex index) const override;

  /// True when [ptr, ptr + nbytes) lies inside one live allocation of
  /// device `index` (-1: device 0), in either mode: the check a device
  /// backend makes to refuse host pointers (CUDA's cudaPointerGetAttributes).
  /// False for nullptr or a missing device. Logs nothing; any thread.
  bool is_device_memory(const void* ptr, size_t nbytes, DeviceIndex index) const;

  const char* name() const override {
    return "simulated";
  }
  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }

 private:
  ET_NODISCARD Result<int> count_devices() const override;
  ET_NODISCARD Result<void*> allocate_bytes(size_t nbytes, DeviceIndex index, size_t alignment) override;
  Released release_bytes(void* ptr, DeviceIndex index) override;
  ET_NODISCARD Error move_bytes(CopyKind kind, void* dst, const void* src, size_t nbytes, DeviceIndex index) override;

  struct Allocation {
    size_t nbytes;
    DeviceIndex index;
    uint8_t* alias;  // where the bytes are: the address itself when host-readable
    size_t reserved; // bytes of the reservation it holds; 0: host heap
  };
  // Resolves -1 to device 0; returns -2 for an index that does not exist.
  int resolve_index(DeviceIndex index) const;
  // The alias of ptr when [ptr, ptr+nbytes) lies inside one live allocation
  // on `device`, else null. Caller holds mutex_.
  uint8_t* find(const void* ptr, size_t nbytes, int device) const;
  // Checks a copy's device side and gives its alias (nullptr for nbytes 0).
  ET_NODISCARD Error check_copy(const char* what, const void* device_ptr, const void* other_ptr, size_t nbytes,
                                DeviceIndex index, uint8_t** alias) const;
  // First fit of `size` bytes (a multiple of the page size) in the
  // reservation, made on first use; its offset, or SIZE_MAX when full.
  // Caller holds mutex_.
  size_t reserve_range(size_t size);
  // Returns [offset, offset+size) to the free list and its alias pages to
  // the system. Caller holds mutex_.
  void release_range(size_t offset, size_t size);

  mutable std::mutex mutex_;
  std::map<uintptr_t, Allocation> live_; // keyed by the address handed out
  std::atomic<int> device_count_;
  std::atomic<bool> host_readable_{kDefaultHostReadable};
  // The reservation: device addresses (PROT_NONE) and their alias, the
  // same size; null until the first host-unreadable allocation.
  uint8_t* device_base_ = nullptr;
  uint8_t* alias_base_ = nullptr;
  size_t reservation_bytes_ = 0;
  bool reservation_failed_ = false;
  std::map<size_t, size_t> free_ranges_; // offset -> size, coalesced
};

/// The process-wide simulated allocator (created on first use and never
/// destroyed, so device memory can be freed safely during process exit).
/// Never fails; safe to call from any thread (a function-local static).
SimulatedDeviceAllocator& simulated_device_allocator();

} // namespace et_copy
