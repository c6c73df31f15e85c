#include "cuda_error.h"

#include <cstdarg>
#include <cstdio>

#include <executorch/runtime/platform/log.h>

namespace et_copy {
namespace cuda_internal {

namespace {
thread_local char t_message[320] = {0};
thread_local cudaError_t t_error = cudaSuccess;

bool is_shutdown(cudaError_t e) {
  return e == cudaErrorCudartUnloading || e == cudaErrorContextIsDestroyed;
}
} // namespace

Error map_cuda_error(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return Error::Ok;
    case cudaErrorMemoryAllocation:
      return Error::MemoryAllocationFailed;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorHostMemoryAlreadyRegistered:
    case cudaErrorHostMemoryNotRegistered:
      return Error::InvalidArgument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
      return Error::NotFound;
    case cudaErrorNotSupported:
      return Error::NotSupported;
    case cudaErrorCudartUnloading:
    case cudaErrorContextIsDestroyed:
      return Error::InvalidState;
    default:
      return Error::Internal;
  }
}

Error check(cudaError_t e, const char* call, int device) {
  if (e == cudaSuccess) {
    return Error::Ok;
  }
  t_error = e;
  if (device >= 0) {
    std::snprintf(t_message, sizeof(t_message), "cuda: %s on device %d failed: %s (%s)", call, device,
                  cudaGetErrorString(e), cudaGetErrorName(e));
  } else {
    std::snprintf(t_message, sizeof(t_message), "cuda: %s failed: %s (%s)", call, cudaGetErrorString(e),
                  cudaGetErrorName(e));
  }
  if (!is_shutdown(e)) {
    ET_LOG(Error, "%s", t_message);
  }
  return map_cuda_error(e);
}

Error fail(Error error, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(t_message, sizeof(t_message), fmt, args);
  va_end(args);
  ET_LOG(Error, "%s", t_message);
  return error;
}

cudaError_t last_cuda_error() {
  return t_error;
}

const char* last_message() {
  return t_message;
}

} // namespace cuda_internal
} // namespace et_copy
