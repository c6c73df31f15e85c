#include <et_copy/simulated_device_allocator.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>

#include <executorch/runtime/platform/log.h>

#include "byte_range.h"

namespace et_copy {

namespace {
static_assert(kMaxDevices == std::numeric_limits<DeviceIndex>::max(), "every device below the count has a DeviceIndex");

// The unit of host-unreadable memory: whole pages (madvise works on pages),
// and at least kMaxAlignment, so every offset is aligned for any request.
size_t granule() {
  static const size_t size =
      std::max(static_cast<size_t>(sysconf(_SC_PAGESIZE)), SimulatedDeviceAllocator::kMaxAlignment);
  return size;
}

bool is_power_of_two(size_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}
} // namespace

SimulatedDeviceAllocator::SimulatedDeviceAllocator(int device_count)
    : device_count_(device_count < 1 ? 1 : (device_count > kMaxDevices ? kMaxDevices : device_count)) {}

SimulatedDeviceAllocator::~SimulatedDeviceAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [addr, alloc] : live_) {
    if (alloc.reserved == 0) {
      std::free(reinterpret_cast<void*>(addr));
    }
  }
  if (device_base_ != nullptr) {
    munmap(device_base_, reservation_bytes_);
    munmap(alias_base_, reservation_bytes_);
  }
}

Error SimulatedDeviceAllocator::set_device_count(int count) {
  if (count < 1 || count > kMaxDevices) {
    ET_LOG(Error, "simulated device: device count %d is not in 1..%d", count, kMaxDevices);
    return Error::InvalidArgument;
  }
  device_count_.store(count);
  set_known_device_count(count);
  return Error::Ok;
}

Result<int> SimulatedDeviceAllocator::count_devices() const {
  return device_count_.load();
}

int SimulatedDeviceAllocator::resolve_index(DeviceIndex index) const {
  if (index == -1) {
    return 0;
  }
  if (index < 0 || index >= device_count_.load()) {
    return -2;
  }
  return index;
}

size_t SimulatedDeviceAllocator::reserve_range(size_t size) {
  if (device_base_ == nullptr && !reservation_failed_) {
    // Address space only: PROT_NONE for the device addresses, and an alias
    // whose pages cost memory once written. Halve on refusal (a strict
    // overcommit policy or an address-space limit) rather than give up.
    for (size_t bytes = kReservationBytes; bytes >= (size_t{1} << 30); bytes /= 2) {
      void* device = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (device == MAP_FAILED) {
        continue;
      }
      void* alias = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (alias == MAP_FAILED) {
        munmap(device, bytes);
        continue;
      }
      device_base_ = static_cast<uint8_t*>(device);
      alias_base_ = static_cast<uint8_t*>(alias);
      reservation_bytes_ = bytes;
      free_ranges_[0] = bytes;
      break;
    }
    if (device_base_ == nullptr) {
      reservation_failed_ = true;
      ET_LOG(Error, "simulated device: the system refused to reserve address space for device memory");
    }
  }
  for (auto it = free_ranges_.begin(); it != free_ranges_.end(); ++it) {
    if (it->second >= size) {
      const size_t offset = it->first;
      const size_t rest = it->second - size;
      free_ranges_.erase(it);
      if (rest > 0) {
        free_ranges_[offset + size] = rest;
      }
      return offset;
    }
  }
  return SIZE_MAX;
}

void SimulatedDeviceAllocator::release_range(size_t offset, size_t size) {
  // The pages read as zero afterwards and cost nothing until written again.
  madvise(alias_base_ + offset, size, MADV_DONTNEED);
  auto next = free_ranges_.lower_bound(offset);
  if (next != free_ranges_.end() && next->first == offset + size) {
    size += next->second;
    next = free_ranges_.erase(next);
  }
  if (next != free_ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_ranges_[offset] = size;
}

Result<void*> SimulatedDeviceAllocator::allocate_bytes(size_t nbytes, DeviceIndex index, size_t alignment) {
  const int device = resolve_index(index);
  if (device < 0) {
    ET_LOG(Error, "simulated device: no device %d", static_cast<int>(index));
    return Error::InvalidArgument;
  }
  if (!is_power_of_two(alignment)) {
    ET_LOG(Error, "simulated device: alignment %zu is not a power of 2", alignment);
    return Error::InvalidArgument;
  }
  if (alignment > kMaxAlignment) {
    ET_LOG(Error, "simulated device: alignment %zu above %zu", alignment, kMaxAlignment);
    return Error::NotSupported;
  }
  if (!host_readable_.load()) {
    // Whole pages: every page offset is aligned to kMaxAlignment or more,
    // and a zero-byte request still gets a unique address.
    const size_t unit = granule();
    const size_t units = nbytes / unit + (nbytes % unit != 0 || nbytes == 0 ? 1 : 0);
    if (units > SIZE_MAX / unit) {
      return Error::MemoryAllocationFailed;
    }
    const size_t size = units * unit;
    void* ptr = nullptr;
    uint8_t* alias = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const size_t offset = reserve_range(size);
      if (offset == SIZE_MAX) {
        ET_LOG(Error, "simulated device: no room for %zu bytes in the %zu-byte reservation", nbytes,
               reservation_bytes_);
        return Error::MemoryAllocationFailed;
      }
      ptr = device_base_ + offset;
      alias = alias_base_ + offset;
    }
    // Outside the lock: the range is ours alone until ptr is returned.
    std::memset(alias, kFreshByte, nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    live_[reinterpret_cast<uintptr_t>(ptr)] = Allocation{nbytes, static_cast<DeviceIndex>(device), alias, size};
    return ptr;
  }
  alignment = alignment < alignof(std::max_align_t) ? alignof(std::max_align_t) : alignment;
  // aligned_alloc wants a size that is a multiple of the alignment; a zero
  // byte request still gets a unique pointer so it can be freed like any.
  size_t padded = (nbytes + alignment - 1) / alignment * alignment;
  if (padded < nbytes) {
    return Error::MemoryAllocationFailed;
  }
  if (padded == 0) {
    padded = alignment;
  }
  void* ptr = std::aligned_alloc(alignment, padded);
  if (ptr == nullptr) {
    ET_LOG(Error, "simulated device: out of host memory for %zu bytes", nbytes);
    return Error::MemoryAllocationFailed;
  }
  std::memset(ptr, kFreshByte, padded);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_[reinterpret_cast<uintptr_t>(ptr)] =
        Allocation{nbytes, static_cast<DeviceIndex>(device), static_cast<uint8_t*>(ptr), 0};
  }
  return ptr;
}

CountingDeviceAllocator::Released SimulatedDeviceAllocator::release_bytes(void* ptr, DeviceIndex index) {
  size_t nbytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end()) {
      // Freeing memory we never handed out (or freeing twice) would corrupt
      // the host heap; refuse and count it instead.
      ET_LOG(Error, "simulated device: deallocate of unknown pointer %p", ptr);
      return {};
    }
    const int device = index == -1 ? 0 : index;
    if (device != it->second.index) {
      ET_LOG(Error, "simulated device: %p belongs to device %d, freed as device %d", ptr,
             static_cast<int>(it->second.index), device);
    }
    nbytes = it->second.nbytes;
    const size_t reserved = it->second.reserved;
    live_.erase(it);
    if (reserved != 0) {
      release_range(static_cast<size_t>(static_cast<uint8_t*>(ptr) - device_base_), reserved);
      return {true, nbytes, Error::Ok};
    }
  }
  std::free(ptr);
  return {true, nbytes, Error::Ok};
}

uint8_t* SimulatedDeviceAllocator::find(const void* ptr, size_t nbytes, int device) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = live_.upper_bound(p);
  if (it == live_.begin()) {
    return nullptr;
  }
  --it;
  const uintptr_t start = it->first;
  const size_t size = it->second.nbytes;
  const bool inside =
      it->second.index == device && internal::bytes_within(ptr, nbytes, reinterpret_cast<const void*>(start), size);
  return inside ? it->second.alias + (p - start) : nullptr;
}

Result<void*> SimulatedDeviceAllocator::host_alias(const void* device_ptr, size_t nbytes, DeviceIndex index) const {
  const int device = resolve_index(index);
  if (device < 0) {
    ET_LOG(Error, "simulated device: host_alias on missing device %d", static_cast<int>(index));
    return Error::InvalidArgument;
  }
  if (device_ptr == nullptr && nbytes == 0) {
    return static_cast<void*>(nullptr);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  uint8_t* alias = device_ptr == nullptr ? nullptr : find(device_ptr, nbytes, device);
  if (alias == nullptr) {
    ET_LOG(Error, "simulated device: host_alias of %zu bytes at %p: outside every live allocation on device %d", nbytes,
           device_ptr, device);
    return Error::InvalidArgument;
  }
  return static_cast<void*>(alias);
}

bool SimulatedDeviceAllocator::is_device_memory(const void* ptr, size_t nbytes, DeviceIndex index) const {
  const int device = resolve_index(index);
  if (device < 0 || ptr == nullptr) {
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return find(ptr, nbytes, device) != nullptr;
}

Error SimulatedDeviceAllocator::check_copy(const char* what, const void* device_ptr, const void* other_ptr,
                                           size_t nbytes, DeviceIndex index, uint8_t** alias) const {
  *alias = nullptr;
  const int device = resolve_index(index);
  if (device < 0) {
    ET_LOG(Error, "simulated device: %s on missing device %d", what, static_cast<int>(index));
    return Error::InvalidArgument;
  }
  if (nbytes == 0) {
    return Error::Ok;
  }
  if (device_ptr == nullptr || other_ptr == nullptr) {
    ET_LOG(Error, "simulated device: %s with a null pointer", what);
    return Error::InvalidArgument;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  *alias = find(device_ptr, nbytes, device);
  if (*alias == nullptr) {
    ET_LOG(Error, "simulated device: %s of %zu bytes at %p is outside every live allocation on device %d", what, nbytes,
           device_ptr, device);
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

Error SimulatedDeviceAllocator::move_bytes(CopyKind kind, void* dst, const void* src, size_t nbytes,
                                           DeviceIndex index) {
  // The bytes move between aliases: a device address itself may fault.
  uint8_t* dst_alias = nullptr;
  uint8_t* src_alias = nullptr;
  Error err = Error::Ok;
  switch (kind) {
    case CopyKind::kHostToDevice:
      err = check_copy("host-to-device copy", dst, src, nbytes, index, &dst_alias);
      src_alias = static_cast<uint8_t*>(const_cast<void*>(src));
      break;
    case CopyKind::kDeviceToHost:
      err = check_copy("device-to-host copy", src, dst, nbytes, index, &src_alias);
      dst_alias = static_cast<uint8_t*>(dst);
      break;
    case CopyKind::kDeviceToDevice:
      err = check_copy("device-to-device copy", dst, src, nbytes, index, &dst_alias);
      if (err == Error::Ok) {
        err = check_copy("device-to-device copy", src, dst, nbytes, index, &src_alias);
      }
      break;
  }
  if (err == Error::Ok && nbytes > 0) {
    if (kind == CopyKind::kDeviceToDevice) {
      std::memmove(dst_alias, src_alias, nbytes); // two ranges of one device may overlap
    } else {
      std::memcpy(dst_alias, src_alias, nbytes);
    }
  }
  return err;
}

SimulatedDeviceAllocator& simulated_device_allocator() {
  // Leaked on purpose: device memory may be freed by destructors that run
  // after static destruction would have torn a static instance down.
  static SimulatedDeviceAllocator* instance = new SimulatedDeviceAllocator();
  return *instance;
}

} // namespace et_copy
