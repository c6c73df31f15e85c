#include "copy_lanes.h"

namespace et_copy {
namespace cuda_internal {

Error Lane::ensure_staging(size_t chunk) {
  if (chunk_bytes == chunk) {
    return Error::Ok;
  }
  // Only reached between copies (the lane is held by one caller), so no
  // DMA can still be using the old buffers.
  for (void*& buf : staging) {
    if (buf != nullptr) {
      Error err = check(cudaFreeHost(buf), "cudaFreeHost (staging)", device);
      if (err != Error::Ok) {
        return err;
      }
      buf = nullptr;
    }
  }
  chunk_bytes = 0;
  for (void*& buf : staging) {
    Error err = check(cudaHostAlloc(&buf, chunk, cudaHostAllocDefault), "cudaHostAlloc (staging)", device);
    if (err != Error::Ok) {
      buf = nullptr;
      return err;
    }
  }
  chunk_bytes = chunk;
  return Error::Ok;
}

Result<Lane*> LanePool::acquire(int device) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    freed_.wait(lock, [&] { return !free_.empty() || live_ < max_lanes_; });
    if (!free_.empty()) {
      Lane* lane = free_.back();
      free_.pop_back();
      return lane;
    }
    ++live_; // reserve a slot; made outside the lock (CUDA calls are slow)
  }
  Lane* lane = new Lane();
  lane->device = device;
  Error err = check(cudaStreamCreateWithFlags(&lane->stream, cudaStreamDefault), "cudaStreamCreateWithFlags", device);
  for (cudaEvent_t& ev : lane->done) {
    if (err == Error::Ok) {
      err = check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags", device);
    }
  }
  if (err != Error::Ok) {
    // Whatever was made is leaked: a lane that failed to be made usually
    // means a broken context, where destroying would fail too.
    delete lane;
    std::lock_guard<std::mutex> lock(mutex_);
    --live_;
    freed_.notify_one();
    return err;
  }
  return lane;
}

void LanePool::release(Lane* lane, bool healthy) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (healthy) {
    free_.push_back(lane);
  } else {
    --live_; // leaked on purpose, see the header
  }
  freed_.notify_one();
}

} // namespace cuda_internal
} // namespace et_copy
