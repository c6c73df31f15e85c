#include "device_copy.h"

#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <et_copy/counting_device_allocator.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

namespace et_copy {
namespace internal {

namespace {

using executorch::aten::SizesType;
using executorch::runtime::DeviceAllocator;
using executorch::runtime::get_device_allocator;
using executorch::runtime::kTensorDimensionLimit;
using executorch::runtime::TensorShapeDynamism;
using executorch::runtime::etensor::DeviceType;
using executorch::runtime::etensor::kNumDeviceTypes;

const char* op_name(Direction d) {
  return d == Direction::kHostToDevice ? kH2dCopyOutName : kD2hCopyOutName;
}

// Formats "op: <message>" into diag and returns `error`.
Error reject(CopyDiagnostic* diag, Direction d, Error error, const char* fmt, ...) {
  if (diag != nullptr) {
    int n = std::snprintf(diag->message, sizeof(diag->message), "%s: ", op_name(d));
    if (n < 0 || static_cast<size_t>(n) >= sizeof(diag->message)) {
      n = 0;
    }
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(diag->message + n, sizeof(diag->message) - n, fmt, args);
    va_end(args);
  }
  return error;
}

// "[2, 3]" for a sizes array, truncated safely to the buffer.
void format_sizes(const Tensor& t, char* buf, size_t len) {
  size_t used = 0;
  used += std::snprintf(buf, len, "[");
  for (ssize_t i = 0; i < t.dim() && used < len; ++i) {
    used += std::snprintf(buf + used, len - used, i == 0 ? "%d" : ", %d", static_cast<int>(t.sizes()[i]));
  }
  if (used < len) {
    std::snprintf(buf + used, len - used, "]");
  }
}

const char* device_name(DeviceType t) {
  switch (t) {
    case DeviceType::CPU:
      return "CPU";
    case DeviceType::CUDA:
      return "CUDA";
  }
  return "unknown";
}

bool valid_device_type(DeviceType t) {
  return static_cast<size_t>(static_cast<uint8_t>(t)) < kNumDeviceTypes;
}

// Exact byte count of `t`'s current shape, or false on a negative size or
// an overflow (possible only in a malformed program).
bool checked_nbytes(const Tensor& t, uint64_t* out) {
  uint64_t n = static_cast<uint64_t>(t.element_size());
  for (ssize_t i = 0; i < t.dim(); ++i) {
    const SizesType s = t.sizes()[i];
    if (s < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n)) {
      return false;
    }
  }
  *out = n;
  return true;
}

// A dim order is valid when it is a permutation of 0..dim-1.
bool valid_dim_order(const Tensor& t) {
  if (t.dim() == 0) {
    return true;
  }
  if (t.dim_order().data() == nullptr) {
    return false;
  }
  bool seen[kTensorDimensionLimit] = {};
  for (ssize_t i = 0; i < t.dim(); ++i) {
    const auto d = t.dim_order()[i];
    if (d >= t.dim() || seen[d]) {
      return false;
    }
    seen[d] = true;
  }
  return true;
}

// Dense in its dim order: the bytes are exactly numel elements laid out in
// that order, which is what a raw byte copy assumes. Strides of size-1 dims
// do not affect layout and are not checked.
bool dense_in_dim_order(const Tensor& t) {
  if (t.numel() == 0 || t.dim() == 0) {
    return true;
  }
  if (t.strides().data() == nullptr) {
    return false;
  }
  int64_t expected = 1;
  for (ssize_t i = t.dim() - 1; i >= 0; --i) {
    const auto d = t.dim_order()[i];
    const SizesType size = t.sizes()[d];
    if (size != 1 && t.strides()[d] != expected) {
      return false;
    }
    expected *= size;
  }
  return true;
}

bool same_dim_order(const Tensor& a, const Tensor& b) {
  for (ssize_t i = 0; i < a.dim(); ++i) {
    if (a.dim_order()[i] != b.dim_order()[i]) {
      return false;
    }
  }
  return true;
}

bool same_sizes(const Tensor& a, const Tensor& b) {
  for (ssize_t i = 0; i < a.dim(); ++i) {
    if (a.sizes()[i] != b.sizes()[i]) {
      return false;
    }
  }
  return true;
}

// Checks one tensor's own metadata; `arg` is "self" or "out".
Error check_tensor(Direction d, const char* arg, const Tensor& t, CopyDiagnostic* diag) {
  if (t.dim() < 0 || t.dim() > static_cast<ssize_t>(kTensorDimensionLimit)) {
    return reject(diag, d, Error::InvalidArgument, "%s has %zd dims; at most %zu are supported", arg, t.dim(),
                  kTensorDimensionLimit);
  }
  if (t.dim() > 0 && t.sizes().data() == nullptr) {
    return reject(diag, d, Error::InvalidArgument, "%s has no sizes", arg);
  }
  uint64_t nbytes = 0;
  if (!checked_nbytes(t, &nbytes)) {
    return reject(diag, d, Error::InvalidArgument, "%s has a negative size or a byte count that overflows", arg);
  }
  if (!valid_dim_order(t)) {
    return reject(diag, d, Error::InvalidArgument, "%s has a dim order that is not a permutation of its %zd dims", arg,
                  t.dim());
  }
  if (!dense_in_dim_order(t)) {
    return reject(diag, d, Error::InvalidArgument,
                  "%s is not dense in its dim order (its strides leave gaps or overlap)", arg);
  }
  if (!valid_device_type(t.device_type())) {
    return reject(diag, d, Error::InvalidArgument, "%s has unknown device type %d", arg,
                  static_cast<int>(t.device_type()));
  }
  return Error::Ok;
}

// as_counting_allocator(alloc) for the allocator registered for `type`,
// remembered per device type: dynamic_cast across shared objects compares
// type names, a fifth of a kernel call (python -m et_copy bench). Sound
// because a registered allocator has static lifetime and its registry slot
// never changes (no unregister; a second registration aborts).
CountingDeviceAllocator* counting_allocator_for(DeviceType type, DeviceAllocator* alloc) {
  // Per type: 0 = not looked up yet, else the answer with bit 0 set.
  static std::atomic<uintptr_t> cache[kNumDeviceTypes];
  auto& slot = cache[static_cast<size_t>(static_cast<uint8_t>(type))];
  const uintptr_t cached = slot.load(std::memory_order_acquire);
  if (cached != 0) {
    return reinterpret_cast<CountingDeviceAllocator*>(cached & ~uintptr_t{1});
  }
  CountingDeviceAllocator* counting = as_counting_allocator(alloc);
  slot.store(reinterpret_cast<uintptr_t>(counting) | 1, std::memory_order_release);
  return counting;
}

} // namespace

Error device_copy(Direction d, const Tensor& self, Tensor& out, CopyDiagnostic* diag) {
  if (diag != nullptr) {
    diag->message[0] = '\0';
  }
  const bool h2d = d == Direction::kHostToDevice;

  Error err = check_tensor(d, "self", self, diag);
  if (err == Error::Ok) {
    err = check_tensor(d, "out", out, diag);
  }
  if (err != Error::Ok) {
    return err;
  }

  // Direction: the host side must be CPU and the device side must not be.
  const Tensor& host = h2d ? self : out;
  const Tensor& device = h2d ? out : self;
  const char* host_arg = h2d ? "self" : "out";
  const char* device_arg = h2d ? "out" : "self";
  if (host.device_type() != DeviceType::CPU) {
    return reject(diag, d, Error::InvalidArgument, "%s must be a host (CPU) tensor, got a %s tensor", host_arg,
                  device_name(host.device_type()));
  }
  if (device.device_type() == DeviceType::CPU) {
    return reject(diag, d, Error::InvalidArgument, "%s must be a device tensor, got a CPU tensor", device_arg);
  }

  if (self.scalar_type() != out.scalar_type()) {
    return reject(diag, d, Error::InvalidArgument, "dtype mismatch: self has %s, out has %s",
                  executorch::runtime::toString(self.scalar_type()), executorch::runtime::toString(out.scalar_type()));
  }
  if (self.dim() != out.dim()) {
    return reject(diag, d, Error::InvalidArgument, "rank mismatch: self has %zd dims, out has %zd", self.dim(),
                  out.dim());
  }
  if (!same_dim_order(self, out)) {
    return reject(diag, d, Error::InvalidArgument, "dim order mismatch between self and out");
  }

  DeviceAllocator* alloc = get_device_allocator(device.device_type());
  if (alloc == nullptr) {
    return reject(diag, d, Error::NotFound, "no DeviceAllocator is registered for %s",
                  device_name(device.device_type()));
  }
  const auto index = device.device_index();
  if (CountingDeviceAllocator* counting = counting_allocator_for(device.device_type(), alloc)) {
    auto count = counting->device_count();
    if (!count.ok()) {
      return reject(diag, d, count.error(), "the %s allocator cannot count its devices", counting->name());
    }
    if (index < -1 || index >= count.get()) {
      return reject(diag, d, Error::InvalidArgument, "%s is on %s device %d, but the %s allocator has %d device(s)",
                    device_arg, device_name(device.device_type()), static_cast<int>(index), counting->name(),
                    count.get());
    }
  }

  const size_t nbytes = self.nbytes();
  if (nbytes > 0 && self.const_data_ptr() == nullptr) {
    return reject(diag, d, Error::InvalidArgument, "self has no data");
  }

  // Capacity: out takes self's shape, within what its dynamism allows.
  SizesType old_sizes[kTensorDimensionLimit];
  const size_t rank = static_cast<size_t>(out.dim());
  const bool resize = !same_sizes(self, out);
  if (resize) {
    char self_shape[96];
    char out_shape[96];
    format_sizes(self, self_shape, sizeof(self_shape));
    format_sizes(out, out_shape, sizeof(out_shape));
    if (out.shape_dynamism() == TensorShapeDynamism::STATIC) {
      return reject(diag, d, Error::InvalidArgument, "out has static shape %s but self has shape %s", out_shape,
                    self_shape);
    }
    std::memcpy(old_sizes, out.sizes().data(), rank * sizeof(SizesType));
    if (executorch::runtime::resize_tensor(out, self.sizes()) != Error::Ok) {
      return reject(diag, d, Error::InvalidArgument,
                    "self has shape %s (%zu bytes), beyond the capacity of out (shape %s, dynamic bound)", self_shape,
                    nbytes, out_shape);
    }
  }
  if (nbytes > 0 && out.mutable_data_ptr() == nullptr) {
    err = reject(diag, d, Error::InvalidArgument, "out has no data");
  } else if (nbytes > 0) {
    err = h2d ? alloc->copy_host_to_device(out.mutable_data_ptr(), self.const_data_ptr(), nbytes, index)
              : alloc->copy_device_to_host(out.mutable_data_ptr(), self.const_data_ptr(), nbytes, index);
    if (err != Error::Ok) {
      // The allocator's own words (CUDA's error string) when it keeps them.
      const CountingDeviceAllocator* counting = counting_allocator_for(device.device_type(), alloc);
      const char* why = counting != nullptr ? counting->failure_message() : "";
      reject(diag, d, err, "the device allocator failed the %zu-byte copy (error 0x%x)%s%s", nbytes,
             static_cast<unsigned>(err), why[0] != '\0' ? ": " : "", why);
    }
  }
  if (err != Error::Ok && resize) {
    // Put out's shape back: a rejected call leaves out as it was.
    (void)executorch::runtime::resize_tensor(out, executorch::aten::ArrayRef<SizesType>(old_sizes, rank));
  }
  return err;
}

void device_copy_boxed(Direction d, KernelRuntimeContext& ctx, Span<EValue*> stack) {
  if (stack.size() != 3 || stack[0] == nullptr || stack[1] == nullptr || stack[2] == nullptr || !stack[0]->isTensor() ||
      !stack[1]->isTensor()) {
    ET_LOG(Error, "%s: expected arguments (Tensor self, Tensor out) and a result slot", op_name(d));
    ctx.fail(Error::InvalidProgram);
    return;
  }
  Tensor& out = stack[1]->toTensor();
  Tensor& result = d == Direction::kHostToDevice ? h2d_copy_out(ctx, stack[0]->toTensor(), out)
                                                 : d2h_copy_out(ctx, stack[0]->toTensor(), out);
  *stack[2] = EValue(result);
}

} // namespace internal
} // namespace et_copy
