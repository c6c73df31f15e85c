// The caller's CUDA stream: one setting that et-copy's CUDA allocator (the
// h2d/d2h copies) and AotiDeviceBackend (the compiled code and its output
// copies) both read, so a decode step's copies and execution are queued on
// one stream. It lives in the core, as an opaque handle, so that neither the
// core nor the compiled backend needs the CUDA toolkit to see it.
#pragma once

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/portable_type/device.h>

namespace et_copy {

using executorch::runtime::Error;
using executorch::runtime::etensor::DeviceIndex;

/// A cudaStream_t, opaque here. nullptr is CUDA's legacy default stream (a
/// stream like any other to this API, not "unset").
using CudaStreamHandle = void*;

/**
 * Sets the calling thread's stream for CUDA device `device`
 * (0..kMaxDeviceIndex; -1, "the current device", is not accepted: the
 * setting must name the device its stream belongs to). Until it is cleared,
 * on this thread and for that device:
 *
 * - host-to-device copies are queued on `stream` and return before they
 *   run. A pageable source is first copied into et-copy's pinned staging
 *   (so the caller may reuse it at once); a pinned or registered source is
 *   read by the DMA when the stream reaches the copy, so the caller keeps it
 *   alive and unchanged until then (a device-to-host copy on the stream, a
 *   stream synchronisation or an event shows that point);
 * - device-to-device copies are queued on `stream` and return at once;
 * - device-to-host copies are queued on `stream`, which is then
 *   synchronised (that stream only: not the device, not other streams), so
 *   the host bytes are there on return;
 * - AotiDeviceBackend runs its compiled code and copies its outputs on
 *   `stream`.
 *
 * With no stream set (the default) the copies run on the allocator's own
 * streams and are complete when each call returns, and the compiled code
 * runs on the legacy default stream (docs/cuda.md, "Streams").
 *
 * Thread-local, like torch's current stream: threads running different
 * sessions on different streams do not see each other's setting. ExecuTorch
 * runs a method's kernels and delegates on the thread that calls execute,
 * so set it on that thread. InvalidArgument (nothing set) for a device out
 * of range. The stream must be of `device` and outlive its use.
 */
ET_NODISCARD Error set_cuda_stream(DeviceIndex device, CudaStreamHandle stream);

/// Unsets the calling thread's stream for `device`: back to the default.
/// InvalidArgument for a device out of range.
ET_NODISCARD Error clear_cuda_stream(DeviceIndex device);

/// True, with `*stream` set, when the calling thread has a stream set for
/// `device`; false (`*stream` untouched) when it has none or `device` is out
/// of range. A thread-local read: cheap enough for every copy.
bool cuda_stream(DeviceIndex device, CudaStreamHandle* stream);

/// Sets a stream for `device` for its scope and puts back what the thread
/// had before (a stream, or none) when it ends. A device out of range sets
/// nothing (ok() is false) and restores nothing.
class CudaStreamGuard {
 public:
  CudaStreamGuard(DeviceIndex device, CudaStreamHandle stream);
  ~CudaStreamGuard();
  CudaStreamGuard(const CudaStreamGuard&) = delete;
  CudaStreamGuard& operator=(const CudaStreamGuard&) = delete;

  bool ok() const {
    return ok_;
  }

 private:
  DeviceIndex device_;
  bool ok_ = false;
  bool had_ = false;
  CudaStreamHandle previous_ = nullptr;
};

} // namespace et_copy
