#include "foreign_cuda_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace foreign_cuda {

using executorch::runtime::Error;
using executorch::runtime::Result;

namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

bool device_zero(ForeignCudaAllocator::DeviceIndex index) {
  return index == 0 || index == -1;
}

} // namespace

Result<void*> ForeignCudaAllocator::allocate(size_t nbytes, DeviceIndex index, size_t alignment) {
  if (!device_zero(index) || alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > page_size()) {
    refused++;
    return Error::InvalidArgument;
  }
  // At least a page, so every allocation (an empty one too) has an address of its own.
  const size_t mapped = ((nbytes == 0 ? 1 : nbytes) + page_size() - 1) / page_size() * page_size();
  void* p = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return Error::MemoryAllocationFailed;
  }
  std::lock_guard<std::mutex> lock(mu_);
  blocks_.emplace(reinterpret_cast<uintptr_t>(p), Block{nbytes, mapped, std::vector<uint8_t>(nbytes, 0x5A)});
  allocations++;
  return p;
}

void ForeignCudaAllocator::deallocate(void* ptr, DeviceIndex) {
  if (ptr == nullptr) {
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks_.end()) {
    refused++;
    return;
  }
  munmap(ptr, it->second.mapped);
  blocks_.erase(it);
  deallocations++;
}

uint8_t* ForeignCudaAllocator::shadow_of(const void* ptr, size_t nbytes, DeviceIndex index) {
  if (!device_zero(index)) {
    return nullptr;
  }
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) {
    return nullptr;
  }
  --it;
  const size_t offset = p - it->first;
  if (offset > it->second.nbytes || nbytes > it->second.nbytes - offset) {
    return nullptr;
  }
  return it->second.shadow.data() + offset;
}

bool ForeignCudaAllocator::is_device_memory(const void* ptr, size_t nbytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  return const_cast<ForeignCudaAllocator*>(this)->shadow_of(ptr, nbytes, 0) != nullptr;
}

Error ForeignCudaAllocator::copy_host_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) {
  std::lock_guard<std::mutex> lock(mu_);
  uint8_t* shadow = shadow_of(dst, nbytes, index);
  if (shadow == nullptr || (nbytes > 0 && src == nullptr)) {
    refused++;
    return Error::InvalidArgument;
  }
  if (nbytes > 0) {
    std::memcpy(shadow, src, nbytes); // reads host memory: faults if src is another allocation's address
  }
  h2d_copies++;
  h2d_bytes += nbytes;
  return Error::Ok;
}

Error ForeignCudaAllocator::copy_device_to_host(void* dst, const void* src, size_t nbytes, DeviceIndex index) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint8_t* shadow = shadow_of(src, nbytes, index);
  if (shadow == nullptr || (nbytes > 0 && dst == nullptr)) {
    refused++;
    return Error::InvalidArgument;
  }
  if (nbytes > 0) {
    std::memcpy(dst, shadow, nbytes);
  }
  d2h_copies++;
  d2h_bytes += nbytes;
  return Error::Ok;
}

ForeignCudaAllocator& foreign_cuda_allocator() {
  static auto* instance = new ForeignCudaAllocator();
  return *instance;
}

} // namespace foreign_cuda

extern "C" {

int foreign_cuda_register() {
  auto& a = foreign_cuda::foreign_cuda_allocator();
  if (executorch::runtime::get_device_allocator(a.device_type()) != nullptr) {
    return 0;
  }
  executorch::runtime::register_device_allocator(&a);
  return 1;
}

long long foreign_cuda_count(const char* name) {
  const auto& a = foreign_cuda::foreign_cuda_allocator();
  const std::string n = name == nullptr ? "" : name;
  const std::pair<const char*, const std::atomic<uint64_t>*> counters[] = {
      {"allocations", &a.allocations}, {"deallocations", &a.deallocations}, {"h2d_copies", &a.h2d_copies},
      {"h2d_bytes", &a.h2d_bytes},     {"d2h_copies", &a.d2h_copies},       {"d2h_bytes", &a.d2h_bytes},
      {"refused", &a.refused},
  };
  for (const auto& [key, value] : counters) {
    if (n == key) {
      return static_cast<long long>(value->load());
    }
  }
  return -1;
}

int foreign_cuda_is_device_memory(uintptr_t ptr, size_t nbytes) {
  return foreign_cuda::foreign_cuda_allocator().is_device_memory(reinterpret_cast<const void*>(ptr), nbytes) ? 1 : 0;
}
}
