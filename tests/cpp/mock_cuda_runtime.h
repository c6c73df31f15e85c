// A fake CUDA runtime in host memory, linked instead of cudart so the CUDA
// allocator's logic runs where there is no GPU. It implements only the
// runtime calls et-copy makes. Copies from pinned memory are truly deferred
// (they run when an event or the stream is synchronised, as DMA would), so a
// staging buffer reused too early shows up as wrong bytes; copies from or to
// pageable memory are consumed at the call, as the driver's own staging is.
//
// MOCK_CUDA_DEVICES (read once): a device count (default 2), "nodriver"
// (cudaGetDeviceCount fails with cudaErrorInsufficientDriver, driver version
// 0) or "nodevice" (cudaErrorNoDevice).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace mock_cuda {

/// After `skip` more successful calls of `call` (e.g. "cudaMemcpyAsync"),
/// the next one returns `error` (once).
void fail_after(const char* call, int skip, cudaError_t error);

/// Device that was current at the last cudaMalloc.
int last_malloc_device();

/// Device allocations not yet freed.
size_t live_device_allocations();

/// Number of cudaSetDevice calls so far.
size_t set_device_calls();

/// Number of cudaPointerGetAttributes calls so far.
size_t pointer_queries();

/// While held, every cudaMemcpyAsync waits at its start (counted by
/// copies_held()) until hold_copies(false): copies in flight at once.
void hold_copies(bool hold);
size_t copies_held();
/// Waits until `n` copies are held; false if that takes over `seconds`.
bool wait_for_copies_held(size_t n, int seconds);

/// The name cudaGetDeviceProperties reports for every device ("" for the
/// default, "Mock GPU <index>"); cut to the 255 characters CUDA's field holds.
void set_device_name(const char* name);

} // namespace mock_cuda
