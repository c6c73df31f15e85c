#include <et_copy/simulated_device_allocator.h>

#include <cstdlib>
#include <cstring>

#include <executorch/runtime/platform/log.h>

namespace et_copy {

namespace {
constexpr int kMaxDevices = 127; // DeviceIndex is int8_t

bool is_power_of_two(size_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}
} // namespace

SimulatedDeviceAllocator::SimulatedDeviceAllocator(int device_count)
    : device_count_(device_count < 1 ? 1 : (device_count > kMaxDevices ? kMaxDevices : device_count)) {}

SimulatedDeviceAllocator::~SimulatedDeviceAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [addr, alloc] : live_) {
    std::free(reinterpret_cast<void*>(addr));
  }
}

Error SimulatedDeviceAllocator::set_device_count(int count) {
  if (count < 1 || count > kMaxDevices) {
    ET_LOG(Error, "simulated device: device count %d is not in 1..127", count);
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
    live_[reinterpret_cast<uintptr_t>(ptr)] = Allocation{nbytes, static_cast<DeviceIndex>(device)};
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
    live_.erase(it);
  }
  std::free(ptr);
  return {true, nbytes, Error::Ok};
}

bool SimulatedDeviceAllocator::contains(const void* ptr, size_t nbytes, int device) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = live_.upper_bound(p);
  if (it == live_.begin()) {
    return false;
  }
  --it;
  const uintptr_t start = it->first;
  const size_t size = it->second.nbytes;
  return it->second.index == device && p >= start && p - start <= size && nbytes <= size - (p - start);
}

bool SimulatedDeviceAllocator::is_device_memory(const void* ptr, size_t nbytes, DeviceIndex index) const {
  const int device = resolve_index(index);
  if (device < 0 || ptr == nullptr) {
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return contains(ptr, nbytes, device);
}

Result<void*> SimulatedDeviceAllocator::host_alias(const void* device_ptr, size_t nbytes, DeviceIndex index) const {
  if (!is_device_memory(device_ptr, nbytes, index)) {
    ET_LOG(Error, "simulated device: %zu bytes at %p are not inside one live allocation on device %d", nbytes,
           device_ptr, static_cast<int>(index));
    return Error::InvalidArgument;
  }
  return const_cast<void*>(device_ptr); // host-backed: the alias is the address itself
}

Error SimulatedDeviceAllocator::check_copy(const char* what, const void* device_ptr, const void* other_ptr,
                                           size_t nbytes, DeviceIndex index) const {
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
  if (!contains(device_ptr, nbytes, device)) {
    ET_LOG(Error, "simulated device: %s of %zu bytes at %p is outside every live allocation on device %d", what, nbytes,
           device_ptr, device);
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

Error SimulatedDeviceAllocator::move_bytes(CopyKind kind, void* dst, const void* src, size_t nbytes,
                                           DeviceIndex index) {
  Error err = Error::Ok;
  switch (kind) {
    case CopyKind::kHostToDevice:
      err = check_copy("host-to-device copy", dst, src, nbytes, index);
      break;
    case CopyKind::kDeviceToHost:
      err = check_copy("device-to-host copy", src, dst, nbytes, index);
      break;
    case CopyKind::kDeviceToDevice:
      err = check_copy("device-to-device copy", dst, src, nbytes, index);
      if (err == Error::Ok) {
        err = check_copy("device-to-device copy", src, dst, nbytes, index);
      }
      break;
  }
  if (err == Error::Ok && nbytes > 0) {
    if (kind == CopyKind::kDeviceToDevice) {
      std::memmove(dst, src, nbytes); // two ranges of one device may overlap
    } else {
      std::memcpy(dst, src, nbytes);
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
