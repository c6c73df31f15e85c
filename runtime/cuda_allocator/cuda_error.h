// Checking CUDA runtime results: every failure is logged with
// cudaGetErrorString's words, kept as the thread's last message, and mapped
// to the ExecuTorch Error the allocator's header documents.
#pragma once

#include <cuda_runtime_api.h>

#include <executorch/runtime/core/error.h>

namespace et_copy {
namespace cuda_internal {

using executorch::runtime::Error;

/// The ExecuTorch Error a CUDA result stands for (Ok for cudaSuccess).
ET_NODISCARD Error map_cuda_error(cudaError_t e);

/// Ok for cudaSuccess. Otherwise logs "cuda: <call> on device <device>
/// failed: <cudaGetErrorString> (<cudaGetErrorName>)", stores it as the
/// thread's last message and last CUDA error, and returns the mapped Error.
/// `device` < 0 leaves the device out of the message. While the runtime is
/// unloading (process exit) nothing is logged: that failure is expected.
ET_NODISCARD Error check(cudaError_t e, const char* call, int device = -1);

/// Formats, logs and stores a failure that has no CUDA result behind it
/// (e.g. an index out of range); returns `error`.
ET_NODISCARD Error fail(Error error, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// The last CUDA result check() saw fail on this thread.
cudaError_t last_cuda_error();

/// The thread's last failure message ("" if none).
const char* last_message();

} // namespace cuda_internal
} // namespace et_copy
