#include "mock_cuda_runtime.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mock_cuda {
namespace {

struct Range {
  size_t size;
  int device;
};

// A stream is a queue: work runs in order, and only when the host waits for
// it (a stream or event synchronisation, an implicit wait of a pageable
// copy) or another stream's queued wait reaches it.
struct Stream {
  std::mutex mutex;
  std::deque<std::function<void()>> pending;
  size_t enqueued = 0;
  size_t executed = 0;
  size_t syncs = 0; // times the host waited for the whole queue

  // Runs queued work up to op number `target` (exclusive of later work).
  void run_until(size_t target) {
    std::lock_guard<std::mutex> lock(mutex);
    while (executed < target && !pending.empty()) {
      pending.front()();
      pending.pop_front();
      ++executed;
    }
  }

  // Queues `op`; returns its op number.
  size_t enqueue(std::function<void()> op) {
    std::lock_guard<std::mutex> lock(mutex);
    pending.push_back(std::move(op));
    return ++enqueued;
  }

  // The host waits for everything queued so far.
  void synchronize() {
    size_t target;
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++syncs;
      target = enqueued;
    }
    run_until(target);
  }
};

struct Event {
  Stream* stream = nullptr;
  size_t target = 0;
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Range> device; // cudaMalloc
  std::map<uintptr_t, Range> pinned; // cudaHostAlloc / cudaHostRegister
  std::map<std::string, std::pair<int, cudaError_t>> failures;
  int last_malloc_device = -1;
  size_t set_device_calls = 0;
  size_t pointer_queries = 0;
  bool hold_copies = false;
  size_t copies_held = 0;
  std::condition_variable held_changed;
  std::string device_name;
  int count = -1;
  cudaError_t count_error = cudaSuccess;
  int driver_version = 13000;
  std::vector<Stream*> streams; // every stream made, for cudaDeviceSynchronize
  size_t device_syncs = 0;
  size_t host_allocs = 0;
};

State& state() {
  static State* s = new State();
  return *s;
}

thread_local int t_device = 0;

// The legacy default stream (0, cudaStreamLegacy, cudaStreamPerThread: the
// mock has one default queue and does not model the legacy stream's
// implicit waits on other streams).
Stream* default_stream() {
  static Stream* s = [] {
    auto* made = new Stream();
    std::lock_guard<std::mutex> lock(state().mutex);
    state().streams.push_back(made);
    return made;
  }();
  return s;
}

Stream* stream_of(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return default_stream();
  }
  return reinterpret_cast<Stream*>(stream);
}

void configure_locked(State& s) {
  if (s.count >= 0 || s.count_error != cudaSuccess) {
    return;
  }
  const char* env = std::getenv("MOCK_CUDA_DEVICES");
  const std::string v = env ? env : "2";
  if (v == "nodriver") {
    s.count_error = cudaErrorInsufficientDriver;
    s.driver_version = 0;
  } else if (v == "nodevice") {
    s.count_error = cudaErrorNoDevice;
  } else {
    s.count = std::atoi(v.c_str());
  }
}

int device_count() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  configure_locked(s);
  return s.count_error == cudaSuccess ? s.count : 0;
}

cudaError_t injected(const char* call) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.failures.find(call);
  if (it == s.failures.end()) {
    return cudaSuccess;
  }
  if (it->second.first-- > 0) {
    return cudaSuccess;
  }
  const cudaError_t e = it->second.second;
  s.failures.erase(it);
  return e;
}

// The range of `m` holding [p, p+n), or nullptr.
const Range* find(const std::map<uintptr_t, Range>& m, const void* p, size_t n, uintptr_t* start = nullptr) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) {
    return nullptr;
  }
  --it;
  if (a - it->first + n > it->second.size) {
    return nullptr;
  }
  if (start != nullptr) {
    *start = it->first;
  }
  return &it->second;
}

bool is_device(const void* p, size_t n) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return find(s.device, p, n) != nullptr;
}

bool is_pinned(const void* p, size_t n) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return find(s.pinned, p, n) != nullptr;
}

} // namespace

void fail_after(const char* call, int skip, cudaError_t error) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.failures[call] = {skip, error};
}

int last_malloc_device() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().last_malloc_device;
}

size_t live_device_allocations() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().device.size();
}

size_t set_device_calls() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().set_device_calls;
}

size_t pointer_queries() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().pointer_queries;
}

void hold_copies(bool hold) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.hold_copies = hold;
  s.held_changed.notify_all();
}

size_t copies_held() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().copies_held;
}

bool wait_for_copies_held(size_t n, int seconds) {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  return s.held_changed.wait_for(lock, std::chrono::seconds(seconds), [&] { return s.copies_held >= n; });
}

size_t stream_pending(cudaStream_t stream) {
  Stream* s = stream_of(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->pending.size();
}

size_t stream_syncs(cudaStream_t stream) {
  Stream* s = stream_of(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->syncs;
}

size_t device_syncs() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().device_syncs;
}

size_t host_allocs() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().host_allocs;
}

void launch(cudaStream_t stream, std::function<void()> kernel) {
  stream_of(stream)->enqueue(std::move(kernel));
}

void set_device_name(const char* name) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().device_name = name;
}

} // namespace mock_cuda

using namespace mock_cuda;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  configure_locked(s);
  if (s.count_error != cudaSuccess) {
    return s.count_error; // *count left unwritten, as the real one does
  }
  *count = s.count;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  device_count();
  *v = state().driver_version;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  return cudaSuccess;
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorCudartUnloading:
      return "driver shutting down";
    case cudaErrorHostMemoryAlreadyRegistered:
      return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered:
      return "pointer does not correspond to a registered memory region";
    default:
      return "unknown error";
  }
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorCudartUnloading:
      return "cudaErrorCudartUnloading";
    default:
      return "cudaErrorUnknown";
  }
}

cudaError_t cudaGetDevice(int* device) {
  if (cudaError_t e = injected("cudaGetDevice")) {
    return e;
  }
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = injected("cudaSetDevice")) {
    return e;
  }
  if (device < 0 || device >= device_count()) {
    return cudaErrorInvalidDevice;
  }
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().set_device_calls;
  }
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  std::memset(prop, 0, sizeof(*prop));
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().device_name.empty()) {
      std::snprintf(prop->name, sizeof(prop->name), "Mock GPU %d", device);
    } else {
      std::snprintf(prop->name, sizeof(prop->name), "%s", state().device_name.c_str());
    }
  }
  prop->major = 9;
  prop->totalGlobalMem = size_t{1} << 30;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int device) {
  std::snprintf(bus, len, "0000:%02x:00.0", device);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t n) {
  if (cudaError_t e = injected("cudaMalloc")) {
    return e;
  }
  void* mem = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (mem == nullptr) {
    return cudaErrorMemoryAllocation;
  }
  std::memset(mem, 0xA5, n); // never zeros: an unwritten byte shows
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.device[reinterpret_cast<uintptr_t>(mem)] = Range{n, t_device};
  s.last_malloc_device = t_device;
  *p = mem;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (cudaError_t e = injected("cudaFree")) {
    return e;
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.device.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.device.end()) {
    return cudaErrorInvalidValue;
  }
  s.device.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int) {
  if (cudaError_t e = injected("cudaHostAlloc")) {
    return e;
  }
  void* mem = std::malloc(n);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.host_allocs;
  s.pinned[reinterpret_cast<uintptr_t>(mem)] = Range{n, t_device};
  *p = mem;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.pinned.erase(reinterpret_cast<uintptr_t>(p)) == 0) {
    return cudaErrorInvalidValue;
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void* p, size_t n, unsigned int) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (find(s.pinned, p, 1) != nullptr) {
    return cudaErrorHostMemoryAlreadyRegistered;
  }
  s.pinned[reinterpret_cast<uintptr_t>(p)] = Range{n, t_device};
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* p) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.pinned.erase(reinterpret_cast<uintptr_t>(p)) ? cudaSuccess : cudaErrorHostMemoryNotRegistered;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attr, const void* p) {
  std::memset(attr, 0, sizeof(*attr));
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.pointer_queries;
  if (const Range* r = find(s.device, p, 1)) {
    attr->type = cudaMemoryTypeDevice;
    attr->device = r->device;
  } else if (const Range* r = find(s.pinned, p, 1)) {
    attr->type = cudaMemoryTypeHost;
    attr->device = r->device;
  } else {
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
  }
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  if (cudaError_t e = injected("cudaStreamCreateWithFlags")) {
    return e;
  }
  auto* s = new Stream();
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().streams.push_back(s);
  }
  *stream = reinterpret_cast<cudaStream_t>(s);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  // Work queued on it still completes (as CUDA's does); the mock keeps the
  // object, so an event recorded on it stays valid.
  stream_of(stream)->run_until(static_cast<size_t>(-1));
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  if (cudaError_t e = injected("cudaEventCreateWithFlags")) {
    return e;
  }
  *event = reinterpret_cast<cudaEvent_t>(new Event());
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<Event*>(event);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream) {
  if (cudaError_t e = injected("cudaMemcpyAsync")) {
    return e;
  }
  {
    State& st = state();
    std::unique_lock<std::mutex> lock(st.mutex);
    if (st.hold_copies) {
      ++st.copies_held;
      st.held_changed.notify_all();
      st.held_changed.wait(lock, [&] { return !st.hold_copies; });
      --st.copies_held;
    }
  }
  const bool dst_device = is_device(dst, n);
  const bool src_device = is_device(src, n);
  if ((kind == cudaMemcpyHostToDevice && (!dst_device || src_device)) ||
      (kind == cudaMemcpyDeviceToHost && (dst_device || !src_device)) ||
      (kind == cudaMemcpyDeviceToDevice && (!dst_device || !src_device))) {
    return cudaErrorInvalidValue;
  }
  Stream* s = stream_of(stream);
  std::function<void()> op;
  if (kind == cudaMemcpyHostToDevice && !is_pinned(src, n)) {
    // As CUDA documents for pageable sources: the stream is synchronised,
    // then the driver stages the bytes at the call.
    s->synchronize();
    auto copy = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + n);
    op = [dst, copy] { std::memcpy(dst, copy->data(), copy->size()); };
  } else {
    op = [dst, src, n] { std::memcpy(dst, src, n); };
  }
  const size_t target = s->enqueue(std::move(op));
  if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, n)) {
    // Synchronous for pageable destinations: the host waits for the stream up to this copy.
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      ++s->syncs;
    }
    s->run_until(target);
  }
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = injected("cudaEventRecord")) {
    return e;
  }
  auto* ev = reinterpret_cast<Event*>(event);
  Stream* s = stream_of(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  ev->stream = s;
  ev->target = s->enqueued;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (cudaError_t e = injected("cudaEventQuery")) {
    return e;
  }
  auto* ev = reinterpret_cast<Event*>(event);
  if (ev->stream == nullptr) {
    return cudaSuccess; // never recorded
  }
  std::lock_guard<std::mutex> lock(ev->stream->mutex);
  return ev->stream->executed >= ev->target ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (cudaError_t e = injected("cudaEventSynchronize")) {
    return e;
  }
  auto* ev = reinterpret_cast<Event*>(event);
  if (ev->stream != nullptr) {
    ev->stream->run_until(ev->target);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  auto* ev = reinterpret_cast<Event*>(event);
  if (ev->stream == nullptr) {
    return cudaSuccess;
  }
  Stream* other = ev->stream;
  const size_t target = ev->target;
  stream_of(stream)->enqueue([other, target] { other->run_until(target); });
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = injected("cudaStreamSynchronize")) {
    return e;
  }
  stream_of(stream)->synchronize();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  std::vector<Stream*> all;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().device_syncs;
    all = state().streams;
  }
  for (Stream* s : all) {
    s->run_until(static_cast<size_t>(-1));
  }
  return cudaSuccess;
}

} // extern "C"
