// Runs work with a given CUDA device current on the calling thread, then
// puts the thread's previous device back. Every get/set result is checked.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda_error.h"

namespace et_copy {
namespace cuda_internal {

/// Makes `device` current, runs `work()` (which returns an Error), restores
/// the previous device (switching only when it differs). Returns work's error, else the restore's error.
template <typename Work>
ET_NODISCARD Error with_device(int device, Work&& work) {
  int previous = -1;
  Error err = check(cudaGetDevice(&previous), "cudaGetDevice");
  if (err != Error::Ok) {
    return err;
  }
  const bool switched = previous != device;
  if (switched) {
    err = check(cudaSetDevice(device), "cudaSetDevice", device);
    if (err != Error::Ok) {
      return err;
    }
  }
  err = work();
  if (switched) {
    // A failed restore would leave the caller on the wrong device: report
    // it even when the work itself succeeded.
    const Error restored = check(cudaSetDevice(previous), "cudaSetDevice (restoring the caller's device)", previous);
    if (err == Error::Ok) {
      err = restored;
    }
  }
  return err;
}

} // namespace cuda_internal
} // namespace et_copy
