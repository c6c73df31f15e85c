// A test double of another library's CUDA allocator (upstream ExecuTorch's
// CUDA backend registers one when its library loads): an implementation of
// ExecuTorch's DeviceAllocator interface that is not et-copy's, whose memory
// behaves as a GPU's does for the host. Each allocation is an address range
// mapped PROT_NONE, so any host read or write of it faults (SIGSEGV); its
// bytes live in a shadow buffer that only this allocator's copies reach, as
// only DMA reaches a GPU's memory. One device (index 0; -1 means it).
//
// Built into gtests (tests/cpp/test_foreign_cuda.cpp) and, by
// tests/python/test_foreign_cuda.py, into a shared library against the
// executorch wheel whose C functions (below) register it and read its counts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include <executorch/runtime/core/device_allocator.h>

namespace foreign_cuda {

class ForeignCudaAllocator final : public executorch::runtime::DeviceAllocator {
 public:
  using DeviceIndex = executorch::runtime::etensor::DeviceIndex;
  using DeviceType = executorch::runtime::etensor::DeviceType;
  using Error = executorch::runtime::Error;

  executorch::runtime::Result<void*> allocate(size_t nbytes, DeviceIndex index, size_t alignment) override;
  void deallocate(void* ptr, DeviceIndex index) override;
  Error copy_host_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) override;
  Error copy_device_to_host(void* dst, const void* src, size_t nbytes, DeviceIndex index) override;
  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }

  /// Whether [ptr, ptr + nbytes) lies inside one live allocation.
  bool is_device_memory(const void* ptr, size_t nbytes) const;

  std::atomic<uint64_t> allocations{0};
  std::atomic<uint64_t> deallocations{0};
  std::atomic<uint64_t> h2d_copies{0};
  std::atomic<uint64_t> h2d_bytes{0};
  std::atomic<uint64_t> d2h_copies{0};
  std::atomic<uint64_t> d2h_bytes{0};
  std::atomic<uint64_t> refused{0}; ///< calls refused (bad index, pointer outside an allocation)

 private:
  struct Block {
    size_t nbytes;               // what was asked for
    size_t mapped;               // the PROT_NONE range's length
    std::vector<uint8_t> shadow; // the "device's" bytes
  };
  // The shadow bytes of [ptr, ptr + nbytes), or nullptr when they do not lie in one live allocation.
  uint8_t* shadow_of(const void* ptr, size_t nbytes, DeviceIndex index);

  mutable std::mutex mu_;
  std::map<uintptr_t, Block> blocks_; // by start address
};

/// The process-wide instance (never destroyed: the registry keeps the pointer).
ForeignCudaAllocator& foreign_cuda_allocator();

} // namespace foreign_cuda

// For ctypes (tests/python/test_foreign_cuda.py).
extern "C" {
/// Registers foreign_cuda_allocator() for CUDA with ExecuTorch's registry:
/// 1 when it did, 0 when an allocator serves CUDA already (left alone: a
/// second registration aborts the process).
int foreign_cuda_register();
/// Counters by name ("allocations", "deallocations", "h2d_copies",
/// "h2d_bytes", "d2h_copies", "d2h_bytes", "refused"); -1 for another name.
long long foreign_cuda_count(const char* name);
/// 1 when [ptr, ptr + nbytes) lies inside one live allocation, else 0.
int foreign_cuda_is_device_memory(uintptr_t ptr, size_t nbytes);
}
