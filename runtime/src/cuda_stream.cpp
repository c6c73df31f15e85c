#include <et_copy/cuda_stream.h>

#include <bitset>

#include <et_copy/limits.h>
#include <executorch/runtime/platform/log.h>

namespace et_copy {

namespace {

constexpr int kSlots = kMaxDeviceIndex + 1;

// The calling thread's streams, one slot per device index; `set` tells a
// stream (nullptr included: the legacy default stream) from none.
struct ThreadStreams {
  std::bitset<kSlots> set;
  CudaStreamHandle stream[kSlots] = {};
};

ThreadStreams& streams() {
  thread_local ThreadStreams t;
  return t;
}

bool in_range(DeviceIndex device) {
  return device >= 0 && device <= kMaxDeviceIndex;
}

ET_NODISCARD Error refuse(const char* what, DeviceIndex device) {
  ET_LOG(Error, "%s: device %d is not a CUDA device index (0..%d)", what, static_cast<int>(device), kMaxDeviceIndex);
  return Error::InvalidArgument;
}

} // namespace

Error set_cuda_stream(DeviceIndex device, CudaStreamHandle stream) {
  if (!in_range(device)) {
    return refuse("set_cuda_stream", device);
  }
  ThreadStreams& t = streams();
  t.set.set(static_cast<size_t>(device));
  t.stream[device] = stream;
  return Error::Ok;
}

Error clear_cuda_stream(DeviceIndex device) {
  if (!in_range(device)) {
    return refuse("clear_cuda_stream", device);
  }
  ThreadStreams& t = streams();
  t.set.reset(static_cast<size_t>(device));
  t.stream[device] = nullptr;
  return Error::Ok;
}

bool cuda_stream(DeviceIndex device, CudaStreamHandle* stream) {
  if (!in_range(device)) {
    return false;
  }
  const ThreadStreams& t = streams();
  if (!t.set.test(static_cast<size_t>(device))) {
    return false;
  }
  *stream = t.stream[device];
  return true;
}

CudaStreamGuard::CudaStreamGuard(DeviceIndex device, CudaStreamHandle stream) : device_(device) {
  if (!in_range(device)) {
    (void)refuse("CudaStreamGuard", device);
    return;
  }
  had_ = cuda_stream(device, &previous_);
  ok_ = set_cuda_stream(device, stream) == Error::Ok;
}

CudaStreamGuard::~CudaStreamGuard() {
  if (!ok_) {
    return;
  }
  (void)(had_ ? set_cuda_stream(device_, previous_) : clear_cuda_stream(device_));
}

} // namespace et_copy
