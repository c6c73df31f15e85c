// Copies on the caller's stream (et_copy/cuda_stream.h): queued, not waited
// for, except device-to-host, which synchronises that one stream. A
// pageable host source goes through pinned staging blocks that are reused
// only once the stream has passed the copy that read them (an event).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

#include <cuda_runtime_api.h>

#include <et_copy/counting_device_allocator.h>
#include <executorch/runtime/core/result.h>

#include "cuda_error.h"

namespace et_copy {
namespace cuda_internal {

using executorch::runtime::Result;

/// One pinned staging buffer and the event recorded after the copy that
/// last read it.
struct StagingBlock {
  void* host = nullptr;
  size_t capacity = 0;
  cudaEvent_t read = nullptr;
  bool recorded = false; ///< `read` marks a queued copy (else the block was never used)
};

/**
 * The pinned staging blocks of one device for copies on callers' streams.
 * Blocks are sized to the copy (a power of two, kMinBlock at least), and
 * all of a device's together hold at most `budget` bytes (one block may
 * exceed it when it is the only one). When no idle block has been passed by
 * its stream and the budget is spent, take() waits for the oldest idle
 * block's event: the caller's stream is never synchronised as a whole.
 * Thread-safe; blocks are never freed except to make room for a larger one.
 */
class StagingPool {
 public:
  static constexpr size_t kMinBlock = size_t{64} << 10;

  /// A block of at least `nbytes` that no queued copy still reads. The
  /// pool's device must be current.
  ET_NODISCARD Result<StagingBlock*> take(size_t nbytes, size_t budget, int device);
  /// Returns a block whose event was recorded after its copy (or that no
  /// copy read).
  void give(StagingBlock* block);
  /// Forgets a block a queued copy may read with no event to show when it
  /// has (its event could not be recorded): its memory is leaked, never reused.
  void drop(StagingBlock* block);

  /// Bytes of pinned memory the pool holds (blocks idle and taken).
  size_t pinned_bytes();

 private:
  ET_NODISCARD Result<StagingBlock*> make(size_t size, int device);

  std::mutex mutex_;
  std::condition_variable given_;
  std::deque<StagingBlock*> idle_; // the oldest given first
  size_t total_ = 0;
};

/**
 * One copy of `nbytes` (> 0, pointers already checked) on `stream`, with
 * device `device` current: host-to-device and device-to-device are queued
 * and not waited for; device-to-host is queued and `stream` synchronised.
 * `host_pinned`: the host side may be DMA'd directly (host-to-device reads
 * it when the stream gets there); else a host-to-device source goes through
 * `staging` in pieces of at most `chunk_bytes`, its blocks within
 * `budget` bytes.
 */
ET_NODISCARD Error copy_on_stream(StagingPool& staging, CopyKind kind, cudaStream_t stream, int device, void* dst,
                                  const void* src, size_t nbytes, bool host_pinned, size_t chunk_bytes, size_t budget);

} // namespace cuda_internal
} // namespace et_copy
