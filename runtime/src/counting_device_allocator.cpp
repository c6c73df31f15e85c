#include <et_copy/counting_device_allocator.h>

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

void CountingDeviceAllocator::record_allocation(size_t nbytes) {
  add(allocations_, 1);
  const uint64_t now = bytes_outstanding_.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  uint64_t peak = peak_bytes_outstanding_.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes_outstanding_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void CountingDeviceAllocator::record_deallocation(size_t nbytes) {
  add(deallocations_, 1);
  bytes_outstanding_.fetch_sub(nbytes, std::memory_order_relaxed);
}

void CountingDeviceAllocator::record_h2d(size_t nbytes) {
  add(h2d_copies_, 1);
  add(h2d_bytes_, nbytes);
}

void CountingDeviceAllocator::record_d2h(size_t nbytes) {
  add(d2h_copies_, 1);
  add(d2h_bytes_, nbytes);
}

void CountingDeviceAllocator::record_d2d(size_t nbytes) {
  add(d2d_copies_, 1);
  add(d2d_bytes_, nbytes);
}

void CountingDeviceAllocator::record_failure() {
  add(failed_calls_, 1);
}

CountingDeviceAllocator* as_counting_allocator(DeviceAllocator* alloc) {
  return dynamic_cast<CountingDeviceAllocator*>(alloc);
}

} // namespace et_copy
