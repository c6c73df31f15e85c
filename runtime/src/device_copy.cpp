#include "device_copy.h"

#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <et_copy/counting_device_allocator.h>
#include <et_copy/limits.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/event_tracer_hooks.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

namespace et_copy {
namespace internal {

namespace {

using executorch::aten::SizesType;
using executorch::runtime::DeviceAllocator;
using executorch::runtime::get_device_allocator;
using executorch::runtime::TensorShapeDynamism;
using executorch::runtime::etensor::DeviceType;
using executorch::runtime::etensor::kNumDeviceTypes;

const char* op_name(Direction d) {
  return d == Direction::kHostToDevice ? kH2dCopyOutName : kD2hCopyOutName;
}

// Formats "op: <message>" into diag and returns `error`.
ET_NODISCARD Error reject(CopyDiagnostic* diag, Direction d, Error error, const char* fmt, ...) {
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

// A device type as the kernels' messages spell it ("CPU", "CUDA"), with no
// allocation on the kernel path; et_copy::device_name names a device.
const char* device_type_name(DeviceType t) {
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

// A stride (int32 in ExecuTorch) equal to an element count of up to 64 bits.
bool stride_is(int64_t stride, uint64_t expected) {
  return stride >= 0 && static_cast<uint64_t>(stride) == expected;
}

enum class Problem { kNone, kDims, kNoSizes, kDimOrder, kSize, kNotDense };

// One tensor's own metadata, read in one pass: every check a raw byte copy
// of it assumes. `nbytes` is its exact byte count (needed for the copy).
Problem tensor_problem(const Tensor& t, uint64_t* nbytes) {
  const ssize_t dim = t.dim();
  if (dim < 0 || dim > static_cast<ssize_t>(kMaxTensorDims)) {
    return Problem::kDims;
  }
  const SizesType* sizes = t.sizes().data();
  const auto* order = t.dim_order().data();
  const auto* strides = t.strides().data();
  // elementSize is an inline switch; TensorImpl::element_size() is a call into libexecutorch.
  uint64_t n = static_cast<uint64_t>(executorch::runtime::elementSize(t.scalar_type()));
  if (dim == 0) {
    *nbytes = n;
    return Problem::kNone;
  }
  if (sizes == nullptr) {
    return Problem::kNoSizes;
  }
  if (order == nullptr) {
    return Problem::kDimOrder;
  }
  // Walking dims innermost first in dim order: a permutation (each dim once),
  // dense (each stride the product of the sizes inside it; size-1 dims may
  // have any stride), and the byte count without overflow.
  // `expected` is the product of the sizes walked so far: at most n, which
  // the overflow check keeps within 64 bits (int64 would overflow).
  uint32_t seen = 0;
  uint64_t expected = 1;
  bool dense = true;
  for (ssize_t i = dim - 1; i >= 0; --i) {
    const auto d = order[i];
    if (d >= dim || (seen >> d) & 1u) {
      return Problem::kDimOrder;
    }
    seen |= 1u << d;
    const SizesType size = sizes[d];
    if (size < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(size), &n)) {
      return Problem::kSize;
    }
    dense = dense && (size == 1 || (strides != nullptr && stride_is(strides[d], expected)));
    expected *= static_cast<uint64_t>(size);
  }
  *nbytes = n;
  return n == 0 || (dense && strides != nullptr) ? Problem::kNone : Problem::kNotDense;
}

// Checks one tensor's own metadata; `arg` is "self" or "out".
ET_NODISCARD Error check_tensor(Direction d, const char* arg, const Tensor& t, uint64_t* nbytes, CopyDiagnostic* diag) {
  switch (tensor_problem(t, nbytes)) {
    case Problem::kNone:
      break;
    case Problem::kDims:
      return reject(diag, d, Error::InvalidArgument, "%s has %zd dims; at most %zu are supported", arg, t.dim(),
                    kMaxTensorDims);
    case Problem::kNoSizes:
      return reject(diag, d, Error::InvalidArgument, "%s has no sizes", arg);
    case Problem::kDimOrder:
      return reject(diag, d, Error::InvalidArgument, "%s has a dim order that is not a permutation of its %zd dims",
                    arg, t.dim());
    case Problem::kSize:
      return reject(diag, d, Error::InvalidArgument, "%s has a negative size or a byte count that overflows", arg);
    case Problem::kNotDense:
      return reject(diag, d, Error::InvalidArgument,
                    "%s is not dense in its dim order (its strides leave gaps or overlap)", arg);
  }
  if (!valid_device_type(t.device_type())) {
    return reject(diag, d, Error::InvalidArgument, "%s has unknown device type %d", arg,
                  static_cast<int>(t.device_type()));
  }
  return Error::Ok;
}

bool same_dim_order(const Tensor& a, const Tensor& b) {
  for (ssize_t at = 0; at < a.dim(); ++at) {
    if (a.dim_order()[at] != b.dim_order()[at]) {
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

} // namespace

// The common case, in one pass over both tensors: known device types, same
// dtype, rank (1..kMaxTensorDims) and dim order, the dim order a permutation, sizes
// non-negative with byte counts that fit 64 bits, both dense; and whether
// out already has self's sizes. False at any doubt, and then the checks in
// device_copy run one by one and name the problem: this is a shortcut
// through them (a third of the kernel's own cost, python -m et_copy bench),
// never a different rule.
bool common_case(const Tensor& self, const Tensor& out, uint64_t* nbytes, bool* same_shape) {
  const ssize_t dim = self.dim();
  if (dim != out.dim() || dim < 1 || dim > static_cast<ssize_t>(kMaxTensorDims) ||
      self.scalar_type() != out.scalar_type() || !valid_device_type(self.device_type()) ||
      !valid_device_type(out.device_type())) {
    return false;
  }
  const SizesType* ss = self.sizes().data();
  const SizesType* os = out.sizes().data();
  const auto* so = self.dim_order().data();
  const auto* oo = out.dim_order().data();
  const auto* st = self.strides().data();
  const auto* ot = out.strides().data();
  if (ss == nullptr || os == nullptr || so == nullptr || oo == nullptr || st == nullptr || ot == nullptr) {
    return false;
  }
  uint64_t sn = static_cast<uint64_t>(executorch::runtime::elementSize(self.scalar_type()));
  uint64_t on = sn;
  uint64_t s_expected = 1; // as in tensor_problem: within 64 bits while the byte counts are
  uint64_t o_expected = 1;
  uint32_t seen = 0;
  bool same = true;
  for (ssize_t i = dim - 1; i >= 0; --i) {
    const auto d = so[i];
    if (d >= dim || oo[i] != d || (seen >> d) & 1u) {
      return false;
    }
    seen |= 1u << d;
    const SizesType s = ss[d];
    const SizesType o = os[d];
    if (s < 0 || o < 0 || __builtin_mul_overflow(sn, static_cast<uint64_t>(s), &sn) ||
        __builtin_mul_overflow(on, static_cast<uint64_t>(o), &on) || (s != 1 && !stride_is(st[d], s_expected)) ||
        (o != 1 && !stride_is(ot[d], o_expected))) {
      return false;
    }
    s_expected *= static_cast<uint64_t>(s);
    o_expected *= static_cast<uint64_t>(o);
    same = same && s == o;
  }
  *nbytes = sn;
  *same_shape = same;
  return true;
}

namespace {

// The allocator registered for `type`, and it as et-copy's counting
// allocator (null for another implementation), remembered once found: a
// registered allocator has static lifetime and its registry slot never
// changes (no unregister; a second registration aborts). Saves two calls
// into libexecutorch and a dynamic_cast per copy (across shared objects GCC
// compares type names; python -m et_copy bench, kernel overhead).
struct Served {
  DeviceAllocator* alloc = nullptr;
  CountingDeviceAllocator* counting = nullptr;
};

Served served(DeviceType type) {
  static std::atomic<DeviceAllocator*> allocs[kNumDeviceTypes];
  static std::atomic<CountingDeviceAllocator*> countings[kNumDeviceTypes]; // published by allocs' release
  const size_t i = static_cast<size_t>(static_cast<uint8_t>(type));
  DeviceAllocator* alloc = allocs[i].load(std::memory_order_acquire);
  if (alloc != nullptr) {
    return {alloc, countings[i].load(std::memory_order_relaxed)};
  }
  alloc = get_device_allocator(type);
  if (alloc == nullptr) {
    return {};
  }
  CountingDeviceAllocator* counting = as_counting_allocator(alloc);
  countings[i].store(counting, std::memory_order_relaxed);
  allocs[i].store(alloc, std::memory_order_release);
  return {alloc, counting};
}

} // namespace

Error device_copy(Direction d, const Tensor& self, Tensor& out, CopyDiagnostic* diag) {
  if (diag != nullptr) {
    diag->message[0] = '\0';
  }
  const bool h2d = d == Direction::kHostToDevice;

  uint64_t self_nbytes = 0;
  bool same_shape = false;
  const bool common = common_case(self, out, &self_nbytes, &same_shape);
  Error err = Error::Ok;
  if (!common) {
    uint64_t out_nbytes = 0;
    err = check_tensor(d, "self", self, &self_nbytes, diag);
    if (err == Error::Ok) {
      err = check_tensor(d, "out", out, &out_nbytes, diag);
    }
    if (err != Error::Ok) {
      return err;
    }
  }

  // Direction: the host side must be CPU and the device side must not be.
  const Tensor& host = h2d ? self : out;
  const Tensor& device = h2d ? out : self;
  const char* host_arg = h2d ? "self" : "out";
  const char* device_arg = h2d ? "out" : "self";
  if (host.device_type() != DeviceType::CPU) {
    return reject(diag, d, Error::InvalidArgument, "%s must be a host (CPU) tensor, got a %s tensor", host_arg,
                  device_type_name(host.device_type()));
  }
  if (device.device_type() == DeviceType::CPU) {
    return reject(diag, d, Error::InvalidArgument, "%s must be a device tensor, got a CPU tensor", device_arg);
  }

  if (!common) {
    if (self.scalar_type() != out.scalar_type()) {
      return reject(diag, d, Error::InvalidArgument, "dtype mismatch: self has %s, out has %s",
                    executorch::runtime::toString(self.scalar_type()),
                    executorch::runtime::toString(out.scalar_type()));
    }
    if (self.dim() != out.dim()) {
      return reject(diag, d, Error::InvalidArgument, "rank mismatch: self has %zd dims, out has %zd", self.dim(),
                    out.dim());
    }
    if (!same_dim_order(self, out)) {
      return reject(diag, d, Error::InvalidArgument, "dim order mismatch between self and out");
    }
    same_shape = same_sizes(self, out);
  }

  const Served server = served(device.device_type());
  DeviceAllocator* alloc = server.alloc;
  if (alloc == nullptr) {
    return reject(diag, d, Error::NotFound, "no DeviceAllocator is registered for %s",
                  device_type_name(device.device_type()));
  }
  const auto index = device.device_index();
  if (CountingDeviceAllocator* counting = server.counting) {
    auto count = counting->device_count();
    if (!count.ok()) {
      return reject(diag, d, count.error(), "the %s allocator cannot count its devices", counting->name());
    }
    if (index < -1 || index >= count.get()) {
      return reject(diag, d, Error::InvalidArgument, "%s is on %s device %d, but the %s allocator has %d device(s)",
                    device_arg, device_type_name(device.device_type()), static_cast<int>(index), counting->name(),
                    count.get());
    }
  }

  const size_t nbytes = static_cast<size_t>(self_nbytes);
  if (nbytes > 0 && self.const_data_ptr() == nullptr) {
    return reject(diag, d, Error::InvalidArgument, "self has no data");
  }

  // Capacity: out takes self's shape, within what its dynamism allows.
  SizesType old_sizes[kMaxTensorDims];
  const size_t rank = static_cast<size_t>(out.dim());
  const bool resize = !same_shape;
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
      const CountingDeviceAllocator* counting = server.counting;
      const char* why = counting != nullptr ? counting->failure_message() : "";
      err = reject(diag, d, err, "the device allocator failed the %zu-byte copy (error 0x%x)%s%s", nbytes,
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
  // Named in an ETDump profile the way the wheel's kernels name theirs.
  executorch::runtime::internal::EventTracerProfileOpScope scope(
      ctx.internal_event_tracer(),
      d == Direction::kHostToDevice ? "native_call__h2d_copy.out" : "native_call__d2h_copy.out");
  if (stack.size() != 3 || stack[0] == nullptr || stack[1] == nullptr || stack[2] == nullptr || !stack[0]->isTensor() ||
      !stack[1]->isTensor()) {
    ET_LOG(Error, "%s: expected arguments (Tensor self, Tensor out) and a result slot", op_name(d));
    ctx.fail(Error::InvalidProgram);
    return;
  }
  Tensor& out = stack[1]->toTensor();
  *stack[2] = EValue(device_copy_out(d, ctx, stack[0]->toTensor(), out));
}

Tensor& device_copy_out(Direction d, KernelRuntimeContext& ctx, const Tensor& self, Tensor& out) {
  CopyDiagnostic diag;
  const Error err = device_copy(d, self, out, &diag);
  if (err != Error::Ok) {
    ET_LOG(Error, "%s", diag.message);
    ctx.fail(err);
  }
  return out;
}

} // namespace internal
} // namespace et_copy
