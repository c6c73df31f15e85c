// What the CUDA runtime and driver report, for use_cuda()'s errors and for
// `python -m et_copy doctor`. Nothing here creates a context.
#include <et_copy/cuda_device_allocator.h>
#include <et_copy/simulated_device_allocator.h>

#include <cstdio>
#include <cstring>

#include <cuda_runtime_api.h>

#include "cuda_error.h"

namespace et_copy {

using namespace cuda_internal;

namespace {

// "13.0" for 13000.
void version_text(int v, char* buf, size_t len) {
  std::snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

} // namespace

CudaRuntimeStatus cuda_runtime_status() {
  CudaRuntimeStatus s;
  // Neither call needs a driver: with none, the driver version reads 0.
  (void)cudaRuntimeGetVersion(&s.runtime_version);
  if (cudaDriverGetVersion(&s.driver_version) != cudaSuccess) {
    s.driver_version = 0;
  }
  char runtime[16];
  char driver[16];
  version_text(s.runtime_version, runtime, sizeof(runtime));
  version_text(s.driver_version, driver, sizeof(driver));

  // Without a driver this returns cudaErrorInsufficientDriver and leaves
  // the count unwritten: trust the result code, not the count.
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  // The failure is sticky for cudaGetLastError; clear what can be cleared
  // so unrelated later checks of the last error are not confused by it.
  (void)cudaGetLastError();
  s.cuda_error = static_cast<int>(e);
  if (e == cudaSuccess && count > 0) {
    s.device_count = count;
    return s;
  }
  s.error = Error::NotFound;
  if (e == cudaSuccess || e == cudaErrorNoDevice) {
    std::snprintf(
        s.message, sizeof(s.message),
        "no CUDA device: the CUDA driver (%s) is installed but reports no device (check CUDA_VISIBLE_DEVICES)", driver);
  } else if ((e == cudaErrorInsufficientDriver && s.driver_version == 0) || e == cudaErrorStubLibrary) {
    std::snprintf(s.message, sizeof(s.message),
                  "no CUDA driver: libcuda.so%s was not found, so no GPU can be used (cudaGetDeviceCount: %s)",
                  e == cudaErrorStubLibrary ? " (only its stub)" : "", cudaGetErrorString(e));
  } else if (e == cudaErrorInsufficientDriver) {
    std::snprintf(s.message, sizeof(s.message),
                  "CUDA driver too old: it supports CUDA %s, et_copy was built with CUDA runtime %s", driver, runtime);
  } else {
    s.error = map_cuda_error(e) == Error::NotFound ? Error::NotFound : Error::Internal;
    std::snprintf(s.message, sizeof(s.message), "CUDA is unusable: cudaGetDeviceCount failed: %s (%s)",
                  cudaGetErrorString(e), cudaGetErrorName(e));
  }
  return s;
}

Result<CudaDeviceProperties> cuda_device_properties(int index) {
  auto count = cuda_device_allocator().device_count();
  if (!count.ok()) {
    return count.error();
  }
  if (index < 0 || index >= *count) {
    return fail(Error::InvalidArgument, "cuda: no device %d (%d device(s) present)", index, *count);
  }
  cudaDeviceProp prop{};
  Error err = check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties", index);
  if (err != Error::Ok) {
    return err;
  }
  CudaDeviceProperties p;
  std::snprintf(p.name, sizeof(p.name), "%s", prop.name);
  p.major = prop.major;
  p.minor = prop.minor;
  p.total_memory = prop.totalGlobalMem;
  err = check(cudaDeviceGetPCIBusId(p.pci_bus_id, sizeof(p.pci_bus_id), index), "cudaDeviceGetPCIBusId", index);
  if (err != Error::Ok) {
    return err;
  }
  return p;
}

Result<int> cuda_pointer_device(const void* ptr) {
  auto count = cuda_device_allocator().device_count();
  if (!count.ok()) {
    return count.error();
  }
  cudaPointerAttributes attr{};
  Error err = check(cudaPointerGetAttributes(&attr, ptr), "cudaPointerGetAttributes");
  if (err != Error::Ok) {
    return err;
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
    return attr.device;
  }
  return -1;
}

Registration use_cuda(Error* error) {
  if (error != nullptr) {
    *error = Error::Ok;
  }
  CudaDeviceAllocator& cuda = cuda_device_allocator();
  // The slot taken: ours; the simulated device, which is no GPU (refused); another library's, taken to be a
  // GPU's, which et-copy's kernels and backends use as it is (kAlreadyOther).
  const auto taken = [&](const executorch::runtime::DeviceAllocator* current) {
    if (current == &cuda) {
      return Registration::kAlreadyOurs;
    }
    if (current == &simulated_device_allocator()) {
      if (error != nullptr) {
        *error = Error::RegistrationAlreadyRegistered;
      }
      return Registration::kFailed;
    }
    return Registration::kAlreadyOther;
  };
  const executorch::runtime::DeviceAllocator* current = executorch::runtime::get_device_allocator(DeviceType::CUDA);
  if (current != nullptr) { // taken: no device query needed
    return taken(current);
  }
  auto count = cuda.device_count();
  if (!count.ok()) {
    // Registering an allocator with no device behind it would take the
    // CUDA slot for good; leave it free for e.g. the simulated device.
    if (error != nullptr) {
      *error = count.error();
    }
    return Registration::kFailed;
  }
  const Registration r = register_allocator(&cuda); // rechecks under the registry lock
  return r == Registration::kAlreadyOther ? taken(executorch::runtime::get_device_allocator(DeviceType::CUDA)) : r;
}

} // namespace et_copy
