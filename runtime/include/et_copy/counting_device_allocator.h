// The DeviceAllocator contract et-copy's allocators share: ExecuTorch's
// interface plus a device count, device-to-device copies and exact counters.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

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

/// What one counting scope saw (open_scope()): only the allocations made
/// since it opened, and their frees. Memory allocated before the scope and
/// freed inside it (say, by the garbage collector) is not its business, so a
/// test can count its own allocations whatever other tests left behind.
struct ScopeStats {
  uint64_t allocations = 0;   ///< allocations made since the scope opened
  uint64_t deallocations = 0; ///< how many of those were freed since
  uint64_t live_allocations = 0;
  uint64_t bytes_outstanding = 0; ///< bytes of those still allocated
  uint64_t peak_bytes_outstanding = 0;
};

/// Which way a copy moves bytes.
enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

/**
 * Base of et-copy's allocators. Adds to ExecuTorch's DeviceAllocator what a
 * copy kernel and a test need: how many devices exist, device-to-device
 * copies, and counters that are exact under concurrent use.
 *
 * The public methods are implemented here, once, and count every call;
 * subclasses supply the memory and the byte moves (allocate_bytes,
 * release_bytes, move_bytes), so no allocator can count differently.
 *
 * Threading: every method may be called from any thread at any time; the
 * counters are atomics and each subclass guards its own state.
 */
class CountingDeviceAllocator : public DeviceAllocator {
 public:
  ET_NODISCARD Result<void*> allocate(size_t nbytes, DeviceIndex index, size_t alignment = kDefaultAlignment) final;
  /// nullptr is a no-op; a pointer the allocator did not hand out is
  /// refused (counted in failed_calls).
  void deallocate(void* ptr, DeviceIndex index) final;
  ET_NODISCARD Error copy_host_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) final;
  ET_NODISCARD Error copy_device_to_host(void* dst, const void* src, size_t nbytes, DeviceIndex index) final;
  /// Copies nbytes between two buffers of device `index`.
  ET_NODISCARD Error copy_device_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index);

  /// Number of devices this allocator serves, or the Error that prevented
  /// counting them (e.g. no CUDA driver). Once a subclass has counted them
  /// it is an atomic load, not a virtual call: the copy kernels ask on
  /// every call.
  ET_NODISCARD Result<int> device_count() const {
    const int known = known_device_count_.load(std::memory_order_relaxed);
    if (known > 0) {
      return known;
    }
    Result<int> counted = count_devices();
    if (counted.ok() && *counted > 0) {
      known_device_count_.store(*counted, std::memory_order_relaxed);
    }
    return counted;
  }

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

  /// Opens a counting scope and returns its id (never 0). Scopes nest and
  /// overlap freely; each must be closed. While any is open, allocate() and
  /// deallocate() take a mutex to remember which allocations are whose (the
  /// copies, the hot path, never do).
  uint64_t open_scope();
  /// The scope's counts so far; all zero for an id that is not open.
  ScopeStats scope_stats(uint64_t scope) const;
  /// Closes a scope, returning its final counts (all zero for an id that is
  /// not open).
  ScopeStats close_scope(uint64_t scope);

 protected:
  /// What release_bytes did with a pointer.
  struct Released {
    bool known = false;      ///< the pointer was one of ours (else refused)
    size_t nbytes = 0;       ///< its size, when known
    Error error = Error::Ok; ///< a failure freeing it (it is no longer ours either way)
  };

  /// Counts the devices (device_count() remembers a successful answer).
  ET_NODISCARD virtual Result<int> count_devices() const = 0;
  /// A new device count, for allocators whose count changes.
  void set_known_device_count(int count) {
    known_device_count_.store(count, std::memory_order_relaxed);
  }

  /// The memory of allocate(); an Error when there is none to give.
  ET_NODISCARD virtual Result<void*> allocate_bytes(size_t nbytes, DeviceIndex index, size_t alignment) = 0;
  /// Frees `ptr` (never nullptr).
  virtual Released release_bytes(void* ptr, DeviceIndex index) = 0;
  /// Moves the bytes of one copy, complete on return.
  ET_NODISCARD virtual Error move_bytes(CopyKind kind, void* dst, const void* src, size_t nbytes,
                                        DeviceIndex index) = 0;

 private:
  mutable std::atomic<int> known_device_count_{0};
  ET_NODISCARD Error counted_copy(CopyKind kind, void* dst, const void* src, size_t nbytes, DeviceIndex index);

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

  // Counting scopes. An allocation made while a scope is open is born with
  // the next serial; a scope counts the allocations born at or after the
  // serial it opened at. Allocations made while none is open can never
  // concern a scope, so nothing is remembered then.
  struct Born {
    uint64_t serial;
    size_t nbytes;
  };
  struct Scope {
    uint64_t first_serial;
    ScopeStats stats;
  };
  void scope_allocated(void* ptr, size_t nbytes);
  void scope_freed(void* ptr);
  std::atomic<int> open_scopes_{0}; // read without the mutex on the fast path
  mutable std::mutex scope_mu_;
  uint64_t next_serial_ = 0;
  uint64_t next_scope_id_ = 1;
  std::map<uint64_t, Scope> scopes_;
  std::unordered_map<const void*, Born> born_;
};

/// Returns `alloc` as et-copy's allocator type, or nullptr when it is some
/// other implementation of ExecuTorch's interface (or nullptr). Pure; any
/// thread.
CountingDeviceAllocator* as_counting_allocator(DeviceAllocator* alloc);

/// The name allocator_name() gives another library's allocator (say,
/// upstream ExecuTorch's CUDA backend's, registered when its library loads).
inline constexpr const char* kForeignAllocatorName = "foreign";

/// Who `alloc` is, in the words device backends and messages use: an
/// et-copy allocator's name() ("simulated", "cuda"), kForeignAllocatorName
/// for any other implementation of ExecuTorch's interface, "none" for
/// nullptr. Pure; any thread.
const char* allocator_name(const DeviceAllocator* alloc);

/// `alloc` in words for messages: "et-copy's simulated allocator",
/// "et-copy's cuda allocator", "another library's allocator", or "nothing"
/// for nullptr. Pure; any thread.
std::string allocator_words(const DeviceAllocator* alloc);

/// HostAliasing: the capability of an allocator whose device memory the
/// host can also reach at another address (the simulated device's host
/// alias). Device backends ask an allocator for it (host_aliasing())
/// instead of naming one: a backend that computes through the host
/// (SimulatedDeviceBackend, an AOTI model compiled for the CPU) runs where
/// the allocator serving the device has it.
class HostAliasing {
 public:
  /// The host address of device bytes [device_ptr, device_ptr + nbytes) of
  /// device `index`, valid while that allocation lives. InvalidArgument when
  /// the range is not inside one live allocation of that device; nullptr
  /// for nbytes 0 at nullptr. Counts nothing; any thread.
  ET_NODISCARD virtual executorch::runtime::Result<void*> host_alias(
      const void* device_ptr, size_t nbytes, executorch::runtime::etensor::DeviceIndex index) const = 0;

 protected:
  ~HostAliasing() = default;
};

/// `server`'s host-aliasing capability, or nullptr when it has none (a GPU's
/// allocator, another library's, or nullptr). Pure; any thread.
const HostAliasing* host_aliasing(const DeviceAllocator* server);

} // namespace et_copy
