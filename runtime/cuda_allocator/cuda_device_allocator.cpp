#include <et_copy/cuda_device_allocator.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <cuda_runtime_api.h>

#include <et_copy/cuda_stream.h>

#include "caller_stream.h"
#include "copy_lanes.h"
#include "cuda_error.h"
#include "device_guard.h"

namespace et_copy {

using namespace cuda_internal;

namespace {

// One copy-lane pool per device index DeviceIndex can hold.
constexpr int kDeviceSlots = kMaxDeviceIndex + 1;
constexpr size_t kMinChunk = size_t{64} << 10;
constexpr size_t kMaxChunk = size_t{1} << 30;

bool is_power_of_two(size_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

const char* last_byte(const void* p, size_t nbytes) {
  return static_cast<const char*>(p) + (nbytes - 1);
}

// Where a pointer lives, as cudaPointerGetAttributes reports it.
ET_NODISCARD Result<cudaPointerAttributes> attributes(const void* p) {
  cudaPointerAttributes attr{};
  Error err = check(cudaPointerGetAttributes(&attr, p), "cudaPointerGetAttributes");
  if (err != Error::Ok) {
    return err;
  }
  return attr;
}

// InvalidArgument unless both ends of [p, p+nbytes) are device memory of
// `device` (or managed memory, which any device may address).
ET_NODISCARD Error check_device_range(const void* p, size_t nbytes, int device, const char* what, const char* arg) {
  for (const void* q : {p, static_cast<const void*>(last_byte(p, nbytes))}) {
    auto attr = attributes(q);
    if (!attr.ok()) {
      return attr.error();
    }
    if (attr->type == cudaMemoryTypeManaged) {
      continue;
    }
    if (attr->type != cudaMemoryTypeDevice) {
      return fail(Error::InvalidArgument, "cuda: %s: %s (%p, %zu bytes) is not device memory", what, arg, p, nbytes);
    }
    if (attr->device != device) {
      return fail(Error::InvalidArgument, "cuda: %s: %s (%p) is memory of device %d, not of device %d", what, arg, p,
                  attr->device, device);
    }
  }
  return Error::Ok;
}

// True when the whole host range may be DMA'd directly (pinned, registered
// or managed), false for pageable memory; InvalidArgument for device memory.
ET_NODISCARD Result<bool> host_range_is_pinned(const void* p, size_t nbytes, const char* what, const char* arg) {
  bool pinned = true;
  for (const void* q : {p, static_cast<const void*>(last_byte(p, nbytes))}) {
    auto attr = attributes(q);
    if (!attr.ok()) {
      return attr.error();
    }
    if (attr->type == cudaMemoryTypeDevice) {
      return fail(Error::InvalidArgument, "cuda: %s: %s (%p) is device memory, where host memory is needed", what, arg,
                  p);
    }
    pinned = pinned && attr->type != cudaMemoryTypeUnregistered;
  }
  return pinned;
}

struct Allocation {
  size_t nbytes;
  int device;
};

const char* kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::kHostToDevice:
      return "host-to-device copy";
    case CopyKind::kDeviceToHost:
      return "device-to-host copy";
    case CopyKind::kDeviceToDevice:
      return "device-to-device copy";
  }
  return "copy";
}

} // namespace

struct CudaDeviceAllocator::Impl {
  std::once_flag count_once;
  Error count_error = Error::Ok;
  int count = 0;
  std::string count_message;

  std::mutex mutex; // guards live and config
  std::unordered_map<void*, Allocation> live;
  CudaCopyConfig config;

  std::array<std::unique_ptr<LanePool>, kDeviceSlots> lanes;
  std::once_flag lanes_once[kDeviceSlots];
  std::array<std::unique_ptr<StagingPool>, kDeviceSlots> stream_staging;
  std::once_flag stream_staging_once[kDeviceSlots];

  LanePool& pool(int device) {
    std::call_once(lanes_once[device], [&] { lanes[device] = std::make_unique<LanePool>(kMaxLanesPerDevice); });
    return *lanes[device];
  }

  StagingPool& staging(int device) {
    std::call_once(stream_staging_once[device], [&] { stream_staging[device] = std::make_unique<StagingPool>(); });
    return *stream_staging[device];
  }

  ET_NODISCARD Error run_copy(const CudaDeviceAllocator& self, CopyKind kind, void* dst, const void* src, size_t nbytes,
                              DeviceIndex index);
};

CudaDeviceAllocator::CudaDeviceAllocator() : impl_(new Impl()) {}

// The singleton is never destroyed; a stack or test instance would leak its
// lanes, which is acceptable for an object that owns streams of a context
// that may already be gone.
CudaDeviceAllocator::~CudaDeviceAllocator() = default;

Result<int> CudaDeviceAllocator::count_devices() const {
  std::call_once(impl_->count_once, [this] {
    const CudaRuntimeStatus s = cuda_runtime_status();
    impl_->count_error = s.error;
    impl_->count = s.device_count;
    impl_->count_message = s.message;
  });
  if (impl_->count_error != Error::Ok) {
    return fail(impl_->count_error, "%s", impl_->count_message.c_str());
  }
  return impl_->count;
}

namespace {

// -1 becomes the calling thread's current device; any index must exist.
ET_NODISCARD Result<int> resolve(const CudaDeviceAllocator& a, DeviceIndex index, const char* what) {
  auto count = a.device_count();
  if (!count.ok()) {
    return count.error();
  }
  int device = index;
  if (index == -1) {
    Error err = check(cudaGetDevice(&device), "cudaGetDevice");
    if (err != Error::Ok) {
      return err;
    }
  }
  if (device < 0 || device >= *count) {
    return fail(Error::InvalidArgument, "cuda: %s: no device %d (%d device(s) present)", what, static_cast<int>(index),
                *count);
  }
  return device;
}

} // namespace

Result<void*> CudaDeviceAllocator::allocate_bytes(size_t nbytes, DeviceIndex index, size_t alignment) {
  if (!is_power_of_two(alignment)) {
    return fail(Error::InvalidArgument, "cuda: allocate: alignment %zu is not a power of 2", alignment);
  }
  if (alignment > kMaxAlignment) {
    return fail(Error::NotSupported, "cuda: allocate: alignment %zu is above the %zu bytes cudaMalloc guarantees",
                alignment, kMaxAlignment);
  }
  auto device = resolve(*this, index, "allocate");
  if (!device.ok()) {
    return device.error();
  }
  void* ptr = nullptr;
  // Zero bytes still gets a real allocation: callers treat nullptr as
  // "nothing to free", and every allocate() must be freeable.
  const size_t request = std::max<size_t>(nbytes, 1);
  Error err = with_device(*device, [&] { return check(cudaMalloc(&ptr, request), "cudaMalloc", *device); });
  if (err != Error::Ok) {
    return err;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->live[ptr] = Allocation{nbytes, *device};
  }
  return ptr;
}

CountingDeviceAllocator::Released CudaDeviceAllocator::release_bytes(void* ptr, DeviceIndex index) {
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->live.find(ptr);
    if (it == impl_->live.end()) {
      // Recorded for failure_message(): a deallocation returns no Error.
      (void)fail(Error::InvalidArgument,
                 "cuda: deallocate: %p was not allocated by et_copy's CUDA allocator (or was freed already)", ptr);
      return {};
    }
    a = it->second;
    impl_->live.erase(it);
  }
  if (index != -1 && index != a.device) {
    // Recorded for failure_message(); the memory is still freed, on its own device.
    (void)fail(Error::InvalidArgument,
               "cuda: deallocate: %p belongs to device %d, freed as device %d; freeing it on %d", ptr, a.device,
               static_cast<int>(index), a.device);
  }
  const Error err = with_device(a.device, [&] { return check(cudaFree(ptr), "cudaFree", a.device); });
  const cudaError_t cuda_err = last_cuda_error();
  // Freed, or gone with its context at exit: either way no longer ours.
  const bool at_exit = cuda_err == cudaErrorCudartUnloading || cuda_err == cudaErrorContextIsDestroyed;
  return {true, a.nbytes, err != Error::Ok && !at_exit ? err : Error::Ok};
}

Error CudaDeviceAllocator::move_bytes(CopyKind kind, void* dst, const void* src, size_t nbytes, DeviceIndex index) {
  return impl_->run_copy(*this, kind, dst, src, nbytes, index);
}

// All three copies: validate, pick the path. On the caller's stream
// (cuda_stream.h) the copy is queued there; otherwise it runs on a lane's
// stream and the lane is drained, so the copy is complete when this returns.
Error CudaDeviceAllocator::Impl::run_copy(const CudaDeviceAllocator& self, CopyKind kind, void* dst, const void* src,
                                          size_t nbytes, DeviceIndex index) {
  const char* what = kind_name(kind);
  auto device = resolve(self, index, what);
  if (!device.ok()) {
    return device.error();
  }
  if (nbytes == 0) {
    return Error::Ok;
  }
  if (dst == nullptr || src == nullptr) {
    return fail(Error::InvalidArgument, "cuda: %s of %zu bytes with a null %s pointer", what, nbytes,
                dst == nullptr ? "destination" : "source");
  }
  const CudaCopyConfig config = self.copy_config();
  CudaStreamHandle caller = nullptr;
  const bool on_caller_stream = cuda_stream(static_cast<DeviceIndex>(*device), &caller);
  return with_device(*device, [&]() -> Error {
    bool host_pinned = true;
    if (kind == CopyKind::kDeviceToDevice) {
      Error err = check_device_range(src, nbytes, *device, what, "source");
      if (err == Error::Ok) {
        err = check_device_range(dst, nbytes, *device, what, "destination");
      }
      if (err != Error::Ok) {
        return err;
      }
    } else {
      const bool h2d = kind == CopyKind::kHostToDevice;
      const void* host = h2d ? src : dst;
      const void* dev = h2d ? dst : src;
      Error err = check_device_range(dev, nbytes, *device, what, h2d ? "destination" : "source");
      if (err != Error::Ok) {
        return err;
      }
      auto pinned = host_range_is_pinned(host, nbytes, what, h2d ? "source" : "destination");
      if (!pinned.ok()) {
        return pinned.error();
      }
      host_pinned = *pinned;
    }
    if (on_caller_stream) {
      return copy_on_stream(staging(*device), kind, static_cast<cudaStream_t>(caller), *device, dst, src, nbytes,
                            host_pinned, config.chunk_bytes, kStreamStagingChunks * config.chunk_bytes);
    }
    const bool staged = kind != CopyKind::kDeviceToDevice && !host_pinned && config.pageable == PageableCopy::kStaged &&
                        nbytes >= config.staging_threshold;

    auto lane = pool(*device).acquire(*device);
    if (!lane.ok()) {
      return lane.error();
    }
    Lane& l = **lane;
    Error err = Error::Ok;
    if (staged) {
      err = l.ensure_staging(config.chunk_bytes);
      if (err == Error::Ok) {
        err = kind == CopyKind::kHostToDevice
                  ? staged_h2d(l, static_cast<char*>(dst), static_cast<const char*>(src), nbytes)
                  : staged_d2h(l, static_cast<char*>(dst), static_cast<const char*>(src), nbytes);
      }
    } else {
      const cudaMemcpyKind k = kind == CopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                               : kind == CopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                                 : cudaMemcpyDeviceToDevice;
      err = check(cudaMemcpyAsync(dst, src, nbytes, k, l.stream), "cudaMemcpyAsync", *device);
    }
    // Always drain the stream: on success the copy must be complete before
    // the caller reads or reuses its memory; on failure the staging buffers
    // must be idle before another copy takes this lane.
    const Error synced = check(cudaStreamSynchronize(l.stream), "cudaStreamSynchronize", *device);
    pool(*device).release(&l, synced == Error::Ok);
    return err != Error::Ok ? err : synced;
  });
}

size_t CudaDeviceAllocator::stream_staging_bytes(DeviceIndex index) const {
  if (index < 0 || index > kMaxDeviceIndex) {
    return 0;
  }
  return impl_->staging(index).pinned_bytes();
}

Error CudaDeviceAllocator::register_host_memory(void* ptr, size_t nbytes) {
  auto count = device_count();
  if (!count.ok()) {
    return count.error();
  }
  if (ptr == nullptr || nbytes == 0) {
    return fail(Error::InvalidArgument, "cuda: register_host_memory needs a non-null pointer and a non-zero size");
  }
  auto attr = attributes(ptr);
  if (!attr.ok()) {
    return attr.error();
  }
  if (attr->type != cudaMemoryTypeUnregistered) {
    return fail(Error::InvalidArgument, "cuda: register_host_memory: %p is already pinned, registered or device memory",
                ptr);
  }
  // Portable: the pages are pinned for every device's context.
  return check(cudaHostRegister(ptr, nbytes, cudaHostRegisterPortable), "cudaHostRegister");
}

Error CudaDeviceAllocator::unregister_host_memory(void* ptr) {
  auto count = device_count();
  if (!count.ok()) {
    return count.error();
  }
  return check(cudaHostUnregister(ptr), "cudaHostUnregister");
}

CudaCopyConfig CudaDeviceAllocator::copy_config() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->config;
}

Error CudaDeviceAllocator::set_copy_config(const CudaCopyConfig& config) {
  if (config.chunk_bytes < kMinChunk || config.chunk_bytes > kMaxChunk) {
    return fail(Error::InvalidArgument, "cuda: chunk_bytes %zu is outside 64 KiB .. 1 GiB", config.chunk_bytes);
  }
  if (config.pageable != PageableCopy::kDirect && config.pageable != PageableCopy::kStaged) {
    return fail(Error::InvalidArgument, "cuda: unknown pageable copy mode %d", static_cast<int>(config.pageable));
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->config = config;
  return Error::Ok;
}

const char* CudaDeviceAllocator::last_error_message() {
  return last_message();
}

CudaDeviceAllocator& cuda_device_allocator() {
  // Leaked on purpose, like simulated_device_allocator().
  static CudaDeviceAllocator* instance = new CudaDeviceAllocator();
  return *instance;
}

} // namespace et_copy
