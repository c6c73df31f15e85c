// Copy lanes: each is one blocking CUDA stream plus (made on first need) two
// pinned staging buffers with an event each. A copy takes a lane for its
// whole duration, so copies on different threads overlap on different
// streams and never share a staging buffer. The staged copies of pageable
// memory through a lane are here too.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

#include <cuda_runtime_api.h>

#include <executorch/runtime/core/result.h>

#include "cuda_error.h"

namespace et_copy {
namespace cuda_internal {

using executorch::runtime::Result;

struct Lane {
  int device = 0;
  cudaStream_t stream = nullptr;
  void* staging[2] = {nullptr, nullptr};    ///< pinned, chunk_bytes each
  cudaEvent_t done[2] = {nullptr, nullptr}; ///< recorded after each use of staging[i]
  size_t chunk_bytes = 0;                   ///< 0 until staging is made

  /// Makes (or remakes, for a new size) the pinned staging buffers. The
  /// lane's device must be current.
  ET_NODISCARD Error ensure_staging(size_t chunk);
};

/// The lanes of one device. At most `max_lanes` exist; callers beyond that
/// wait for one to be released.
class LanePool {
 public:
  explicit LanePool(int max_lanes) : max_lanes_(max_lanes) {}

  /// A free lane of `device` (made on first need). `device` must be current.
  ET_NODISCARD Result<Lane*> acquire(int device);

  /// Returns a lane. `healthy` false (its stream could not be drained after
  /// a failure) drops it instead: its staging may still be in flight.
  void release(Lane* lane, bool healthy);

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<Lane*> free_;
  int live_ = 0;
  const int max_lanes_;
};

/// Pageable host -> device through the lane's pinned staging, chunked and
/// double-buffered: the host memcpy of chunk i+1 overlaps the DMA of chunk
/// i; a buffer is refilled only after the event recorded after its last DMA
/// has fired. Queued on the lane's stream; the caller drains it.
ET_NODISCARD Error staged_h2d(Lane& lane, char* dst, const char* src, size_t nbytes);

/// Device -> pageable host through the lane's pinned staging: two chunks in
/// flight; chunk i+2 reuses chunk i's buffer only after chunk i has been
/// copied out of it. Complete when it returns.
ET_NODISCARD Error staged_d2h(Lane& lane, char* dst, const char* src, size_t nbytes);

} // namespace cuda_internal
} // namespace et_copy
