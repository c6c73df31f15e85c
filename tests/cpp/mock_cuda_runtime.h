// A fake CUDA runtime in host memory, linked instead of cudart so the CUDA
// allocator's logic runs where there is no GPU. It implements only the
// runtime calls et-copy makes (and a few its tests make).
//
// Streams are queues: a copy (or a launch()) is queued and runs only when
// the host waits for its stream (cudaStreamSynchronize, cudaEventSynchronize
// up to the event, cudaDeviceSynchronize for all) or a stream that waits on
// one of its events (cudaStreamWaitEvent) is run; cudaEventQuery says
// whether a stream has reached an event. Copies from pinned memory read it
// when they run, as DMA would, so a staging buffer reused too early shows up
// as wrong bytes. As CUDA documents, a copy from pageable memory first
// synchronises its stream and then takes the bytes at the call, and a copy
// to pageable memory returns once it has run; both count as stream syncs.
// The null stream, cudaStreamLegacy and cudaStreamPerThread are one default
// queue, without the legacy stream's implicit waits on other streams.
//
// MOCK_CUDA_DEVICES (read once): a device count (default 2), "nodriver"
// (cudaGetDeviceCount fails with cudaErrorInsufficientDriver, driver version
// 0) or "nodevice" (cudaErrorNoDevice).
#pragma once

#include <cstddef>
#include <functional>

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

/// Work queued on `stream` and not yet run.
size_t stream_pending(cudaStream_t stream);
/// Times the host waited for the whole of `stream`: cudaStreamSynchronize
/// calls and the implicit waits of pageable copies.
size_t stream_syncs(cudaStream_t stream);
/// cudaDeviceSynchronize calls so far.
size_t device_syncs();
/// cudaHostAlloc calls so far.
size_t host_allocs();
/// Queues `kernel` on `stream` like a copy: a stand-in for a kernel launch.
void launch(cudaStream_t stream, std::function<void()> kernel);

/// The name cudaGetDeviceProperties reports for every device ("" for the
/// default, "Mock GPU <index>"); cut to the 255 characters CUDA's field holds.
void set_device_name(const char* name);

} // namespace mock_cuda
