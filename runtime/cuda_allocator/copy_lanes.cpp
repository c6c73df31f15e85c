#include "copy_lanes.h"

#include <algorithm>
#include <cstring>

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

Error staged_h2d(Lane& lane, char* dst, const char* src, size_t nbytes) {
  const size_t chunk = lane.chunk_bytes;
  size_t i = 0;
  for (size_t off = 0; off < nbytes; off += chunk, ++i) {
    const size_t len = std::min(chunk, nbytes - off);
    const int b = static_cast<int>(i & 1);
    if (i >= 2) {
      Error err = check(cudaEventSynchronize(lane.done[b]), "cudaEventSynchronize", lane.device);
      if (err != Error::Ok) {
        return err;
      }
    }
    std::memcpy(lane.staging[b], src + off, len);
    Error err = check(cudaMemcpyAsync(dst + off, lane.staging[b], len, cudaMemcpyHostToDevice, lane.stream),
                      "cudaMemcpyAsync (host to device, staged)", lane.device);
    if (err == Error::Ok) {
      err = check(cudaEventRecord(lane.done[b], lane.stream), "cudaEventRecord", lane.device);
    }
    if (err != Error::Ok) {
      return err;
    }
  }
  return Error::Ok;
}

Error staged_d2h(Lane& lane, char* dst, const char* src, size_t nbytes) {
  const size_t chunk = lane.chunk_bytes;
  const size_t chunks = (nbytes + chunk - 1) / chunk;
  auto issue = [&](size_t i) {
    const int b = static_cast<int>(i & 1);
    const size_t off = i * chunk;
    const size_t len = std::min(chunk, nbytes - off);
    Error err = check(cudaMemcpyAsync(lane.staging[b], src + off, len, cudaMemcpyDeviceToHost, lane.stream),
                      "cudaMemcpyAsync (device to host, staged)", lane.device);
    if (err == Error::Ok) {
      err = check(cudaEventRecord(lane.done[b], lane.stream), "cudaEventRecord", lane.device);
    }
    return err;
  };
  for (size_t i = 0; i < std::min<size_t>(chunks, 2); ++i) {
    Error err = issue(i);
    if (err != Error::Ok) {
      return err;
    }
  }
  for (size_t i = 0; i < chunks; ++i) {
    const int b = static_cast<int>(i & 1);
    Error err = check(cudaEventSynchronize(lane.done[b]), "cudaEventSynchronize", lane.device);
    if (err != Error::Ok) {
      return err;
    }
    const size_t off = i * chunk;
    std::memcpy(dst + off, lane.staging[b], std::min(chunk, nbytes - off));
    if (i + 2 < chunks) {
      err = issue(i + 2);
      if (err != Error::Ok) {
        return err;
      }
    }
  }
  return Error::Ok;
}

} // namespace cuda_internal
} // namespace et_copy
