#include "caller_stream.h"

#include <algorithm>
#include <cstring>

namespace et_copy {
namespace cuda_internal {

namespace {

size_t block_size(size_t nbytes) {
  size_t size = StagingPool::kMinBlock;
  while (size < nbytes) {
    size <<= 1;
  }
  return size;
}

// Frees a block no queued copy reads any more.
void destroy(StagingBlock* b, int device) {
  (void)check(cudaFreeHost(b->host), "cudaFreeHost (stream staging)", device);
  (void)check(cudaEventDestroy(b->read), "cudaEventDestroy (stream staging)", device);
  delete b;
}

} // namespace

Result<StagingBlock*> StagingPool::make(size_t size, int device) {
  auto* b = new StagingBlock();
  Error err = check(cudaHostAlloc(&b->host, size, cudaHostAllocDefault), "cudaHostAlloc (stream staging)", device);
  if (err == Error::Ok) {
    err = check(cudaEventCreateWithFlags(&b->read, cudaEventDisableTiming), "cudaEventCreateWithFlags", device);
    if (err != Error::Ok) {
      (void)check(cudaFreeHost(b->host), "cudaFreeHost (stream staging)", device);
    }
  }
  if (err != Error::Ok) {
    delete b;
    std::lock_guard<std::mutex> lock(mutex_);
    total_ -= size;
    given_.notify_one();
    return err;
  }
  b->capacity = size;
  return b;
}

Result<StagingBlock*> StagingPool::take(size_t nbytes, size_t budget, int device) {
  const size_t size = block_size(nbytes);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // An idle block large enough whose last copy the stream has passed: the smallest such.
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      StagingBlock* b = *it;
      if (b->capacity < nbytes || (best != idle_.end() && (*best)->capacity <= b->capacity)) {
        continue;
      }
      if (b->recorded) {
        const cudaError_t q = cudaEventQuery(b->read);
        if (q == cudaErrorNotReady) {
          continue;
        }
        Error err = check(q, "cudaEventQuery (stream staging)", device);
        if (err != Error::Ok) {
          return err;
        }
      }
      best = it;
    }
    if (best != idle_.end()) {
      StagingBlock* b = *best;
      idle_.erase(best);
      return b;
    }
    // Room for a new block.
    if (total_ == 0 || total_ + size <= budget) {
      total_ += size;
      lock.unlock();
      return make(size, device);
    }
    // Wait for the oldest idle block's copy (not for the whole stream); a
    // block too small for this copy is freed for a larger one.
    if (!idle_.empty()) {
      StagingBlock* b = idle_.front();
      idle_.pop_front();
      lock.unlock();
      if (b->recorded) {
        Error err = check(cudaEventSynchronize(b->read), "cudaEventSynchronize (stream staging)", device);
        if (err != Error::Ok) {
          drop(b);
          return err;
        }
        b->recorded = false;
      }
      if (b->capacity >= nbytes) {
        return b;
      }
      const size_t freed = b->capacity;
      destroy(b, device);
      lock.lock();
      total_ -= freed;
      continue;
    }
    // Every block is taken by a copy being queued on another thread.
    given_.wait(lock);
  }
}

void StagingPool::give(StagingBlock* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(block);
  given_.notify_one();
}

void StagingPool::drop(StagingBlock* block) {
  // Still counted in total_: its pinned memory is not given back.
  (void)block;
  std::lock_guard<std::mutex> lock(mutex_);
  given_.notify_one();
}

size_t StagingPool::pinned_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

Error copy_on_stream(StagingPool& staging, CopyKind kind, cudaStream_t stream, int device, void* dst, const void* src,
                     size_t nbytes, bool host_pinned, size_t chunk_bytes, size_t budget) {
  if (kind == CopyKind::kDeviceToDevice) {
    return check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpyAsync (device to device, caller's stream)", device);
  }
  if (kind == CopyKind::kDeviceToHost) {
    Error err = check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream),
                      "cudaMemcpyAsync (device to host, caller's stream)", device);
    if (err != Error::Ok) {
      return err;
    }
    // The host reads the bytes on return: wait for this stream, and only it.
    return check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (caller's stream)", device);
  }
  if (host_pinned) {
    // DMA'd when the stream gets there: the caller keeps the source as it is until then (cuda_stream.h).
    return check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream),
                 "cudaMemcpyAsync (host to device, caller's stream)", device);
  }
  // Pageable: a direct cudaMemcpyAsync would synchronise the stream first. The
  // bytes go into pinned staging now, so the caller may reuse its memory on return.
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  for (size_t off = 0; off < nbytes; off += chunk_bytes) {
    const size_t len = std::min(chunk_bytes, nbytes - off);
    auto block = staging.take(len, budget, device);
    if (!block.ok()) {
      return block.error();
    }
    StagingBlock* b = *block;
    std::memcpy(b->host, in + off, len);
    Error err = check(cudaMemcpyAsync(out + off, b->host, len, cudaMemcpyHostToDevice, stream),
                      "cudaMemcpyAsync (host to device, staged on the caller's stream)", device);
    if (err != Error::Ok) {
      staging.give(b); // nothing was queued: its previous event still holds
      return err;
    }
    err = check(cudaEventRecord(b->read, stream), "cudaEventRecord (stream staging)", device);
    if (err != Error::Ok) {
      staging.drop(b); // a queued copy reads it and no event says when it is done
      return err;
    }
    b->recorded = true;
    staging.give(b);
  }
  return Error::Ok;
}

} // namespace cuda_internal
} // namespace et_copy
