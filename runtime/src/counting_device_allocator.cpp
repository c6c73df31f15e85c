#include <et_copy/counting_device_allocator.h>

#include <algorithm>

namespace et_copy {

namespace {
uint64_t load(const std::atomic<uint64_t>& v) {
  return v.load(std::memory_order_relaxed);
}
void add(std::atomic<uint64_t>& v, uint64_t n) {
  v.fetch_add(n, std::memory_order_relaxed);
}
} // namespace

DeviceAllocatorStats CountingDeviceAllocator::stats() const {
  DeviceAllocatorStats s;
  s.allocations = load(allocations_);
  s.deallocations = load(deallocations_);
  s.live_allocations = s.allocations - s.deallocations;
  s.bytes_outstanding = load(bytes_outstanding_);
  s.peak_bytes_outstanding = load(peak_bytes_outstanding_);
  s.h2d_copies = load(h2d_copies_);
  s.h2d_bytes = load(h2d_bytes_);
  s.d2h_copies = load(d2h_copies_);
  s.d2h_bytes = load(d2h_bytes_);
  s.d2d_copies = load(d2d_copies_);
  s.d2d_bytes = load(d2d_bytes_);
  s.failed_calls = load(failed_calls_);
  return s;
}

Result<void*> CountingDeviceAllocator::allocate(size_t nbytes, DeviceIndex index, size_t alignment) {
  Result<void*> r = allocate_bytes(nbytes, index, alignment);
  if (!r.ok()) {
    add(failed_calls_, 1);
    return r;
  }
  add(allocations_, 1);
  const uint64_t now = bytes_outstanding_.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  uint64_t peak = peak_bytes_outstanding_.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes_outstanding_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  if (open_scopes_.load(std::memory_order_acquire) > 0) {
    scope_allocated(*r, nbytes);
  }
  return r;
}

void CountingDeviceAllocator::deallocate(void* ptr, DeviceIndex index) {
  if (ptr == nullptr) {
    return;
  }
  const Released r = release_bytes(ptr, index);
  if (!r.known || r.error != Error::Ok) {
    add(failed_calls_, 1);
  }
  if (r.known) {
    add(deallocations_, 1);
    bytes_outstanding_.fetch_sub(r.nbytes, std::memory_order_relaxed);
    if (open_scopes_.load(std::memory_order_acquire) > 0) {
      scope_freed(ptr);
    }
  }
}

uint64_t CountingDeviceAllocator::open_scope() {
  std::lock_guard<std::mutex> lock(scope_mu_);
  const uint64_t id = next_scope_id_++;
  scopes_.emplace(id, Scope{next_serial_, {}});
  open_scopes_.fetch_add(1, std::memory_order_release);
  return id;
}

ScopeStats CountingDeviceAllocator::scope_stats(uint64_t scope) const {
  std::lock_guard<std::mutex> lock(scope_mu_);
  const auto it = scopes_.find(scope);
  return it == scopes_.end() ? ScopeStats{} : it->second.stats;
}

ScopeStats CountingDeviceAllocator::close_scope(uint64_t scope) {
  std::lock_guard<std::mutex> lock(scope_mu_);
  const auto it = scopes_.find(scope);
  if (it == scopes_.end()) {
    return {};
  }
  const ScopeStats last = it->second.stats;
  scopes_.erase(it);
  open_scopes_.fetch_sub(1, std::memory_order_release);
  if (scopes_.empty()) {
    born_.clear(); // what is still live can concern no later scope
  }
  return last;
}

void CountingDeviceAllocator::scope_allocated(void* ptr, size_t nbytes) {
  std::lock_guard<std::mutex> lock(scope_mu_);
  if (scopes_.empty()) { // the last one closed since the unlocked check
    return;
  }
  const uint64_t serial = next_serial_++;
  born_[ptr] = Born{serial, nbytes};
  for (auto& [id, s] : scopes_) {
    if (serial < s.first_serial) {
      continue;
    }
    ScopeStats& st = s.stats;
    st.allocations += 1;
    st.live_allocations += 1;
    st.bytes_outstanding += nbytes;
    st.peak_bytes_outstanding = std::max(st.peak_bytes_outstanding, st.bytes_outstanding);
  }
}

void CountingDeviceAllocator::scope_freed(void* ptr) {
  std::lock_guard<std::mutex> lock(scope_mu_);
  const auto b = born_.find(ptr);
  if (b == born_.end()) { // born before every open scope
    return;
  }
  const Born born = b->second;
  born_.erase(b);
  for (auto& [id, s] : scopes_) {
    if (born.serial < s.first_serial) {
      continue;
    }
    ScopeStats& st = s.stats;
    st.deallocations += 1;
    st.live_allocations -= 1;
    st.bytes_outstanding -= born.nbytes;
  }
}

Error CountingDeviceAllocator::counted_copy(CopyKind kind, void* dst, const void* src, size_t nbytes,
                                            DeviceIndex index) {
  const Error err = move_bytes(kind, dst, src, nbytes, index);
  if (err != Error::Ok) {
    add(failed_calls_, 1);
    return err;
  }
  switch (kind) {
    case CopyKind::kHostToDevice:
      add(h2d_copies_, 1);
      add(h2d_bytes_, nbytes);
      break;
    case CopyKind::kDeviceToHost:
      add(d2h_copies_, 1);
      add(d2h_bytes_, nbytes);
      break;
    case CopyKind::kDeviceToDevice:
      add(d2d_copies_, 1);
      add(d2d_bytes_, nbytes);
      break;
  }
  return Error::Ok;
}

Error CountingDeviceAllocator::copy_host_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) {
  return counted_copy(CopyKind::kHostToDevice, dst, src, nbytes, index);
}

Error CountingDeviceAllocator::copy_device_to_host(void* dst, const void* src, size_t nbytes, DeviceIndex index) {
  return counted_copy(CopyKind::kDeviceToHost, dst, src, nbytes, index);
}

Error CountingDeviceAllocator::copy_device_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) {
  return counted_copy(CopyKind::kDeviceToDevice, dst, src, nbytes, index);
}

CountingDeviceAllocator* as_counting_allocator(DeviceAllocator* alloc) {
  return dynamic_cast<CountingDeviceAllocator*>(alloc);
}

const char* allocator_name(const DeviceAllocator* alloc) {
  if (alloc == nullptr) {
    return "none";
  }
  const auto* ours = dynamic_cast<const CountingDeviceAllocator*>(alloc);
  return ours != nullptr ? ours->name() : kForeignAllocatorName;
}

const HostAliasing* host_aliasing(const DeviceAllocator* server) {
  return dynamic_cast<const HostAliasing*>(server);
}

std::string allocator_words(const DeviceAllocator* alloc) {
  const std::string name = allocator_name(alloc);
  if (alloc == nullptr) {
    return "nothing";
  }
  return name == kForeignAllocatorName ? "another library's allocator" : "et-copy's " + name + " allocator";
}

} // namespace et_copy
