// libFuzzer target: et-copy's kernel entry points and the tensor metadata
// they read.
//
// Each input decodes into one call: direction, entry point (the direct
// function, the KernelRuntimeContext form, or the boxed kernel as
// ExecuTorch's registry dispatches it, sometimes with a malformed stack),
// and for self and out: dtype, rank (up to 17), sizes (up to INT32_MAX),
// dim order (a permutation or arbitrary bytes), strides (dense or
// arbitrary), dynamism and capacity, device type and index, and where the
// memory lives (host, simulated device memory on the right or another
// device, or none). Host buffers are exactly as large as the metadata
// claims, so AddressSanitizer reports any byte written outside them;
// tensors too large to back get null data.
//
// After the call the harness traps unless: a success copied exactly self's
// bytes into out, gave out self's shape, and was legal (same dtype, rank and
// dim order, host side on CPU, device side on an existing device, both
// dense); a failure left out's bytes and shape as they were; self never
// changed; the allocator counted exactly the copies that happened.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_allocator.h>
#include <et_copy/tensor_layout.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/platform.h>
#include <executorch/runtime/platform/runtime.h>

#include "any_rank_tensor_view.h"

namespace {

using executorch::aten::DimOrderType;
using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::TensorShapeDynamism;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

constexpr size_t kMaxRegion = 1 << 20;

struct Dtype {
  ScalarType type;
  size_t size;
};
constexpr Dtype kDtypes[] = {
    {ScalarType::Byte, 1},         {ScalarType::Char, 1},           {ScalarType::Short, 2}, {ScalarType::Int, 4},
    {ScalarType::Long, 8},         {ScalarType::Half, 2},           {ScalarType::Float, 4}, {ScalarType::Double, 8},
    {ScalarType::ComplexFloat, 8}, {ScalarType::ComplexDouble, 16}, {ScalarType::Bool, 1},  {ScalarType::BFloat16, 2},
};
constexpr SizesType kLargeSizes[] = {0x7fffffff, 1 << 30, 1 << 20, 65536, 4097};

// Reads the input a byte at a time; zeros once it runs out.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() {
    return pos_ < size_ ? data_[pos_++] : 0;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

[[noreturn]] void violation(const char* what) {
  std::fprintf(stderr, "et_copy fuzz: contract violated: %s\n", what);
  __builtin_trap();
}

struct FuzzTensor {
  Dtype dtype;
  std::vector<SizesType> sizes;    // current
  std::vector<SizesType> capacity; // what the buffer was sized for
  std::vector<DimOrderType> dim_order;
  std::vector<StridesType> strides;
  TensorShapeDynamism dynamism = TensorShapeDynamism::STATIC;
  DeviceType device_type = DeviceType::CPU;
  DeviceIndex device_index = 0;
  bool on_device = false;
  DeviceIndex alloc_index = 0;
  bool null_data = false;

  uint8_t* data = nullptr;  // what the tensor holds: a device address when on_device
  uint8_t* bytes = nullptr; // where the harness reads and writes those bytes
  size_t region = 0;
  et_copy_test::AnyRankTensorView view; // 17-dim tensors too, for the kernels to refuse
};

bool is_permutation(const std::vector<DimOrderType>& order) {
  std::vector<int> seen(order.size(), 0);
  for (auto d : order) {
    if (d >= order.size() || seen[d]++) {
      return false;
    }
  }
  return true;
}

// Elements the metadata can touch (capacity numel, or the strided extent),
// or SIZE_MAX when that overflows.
size_t claimed_elements(const FuzzTensor& t) {
  unsigned __int128 numel = 1;
  for (auto s : t.capacity) {
    numel *= static_cast<uint64_t>(s);
  }
  unsigned __int128 extent = 1;
  bool empty = false;
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    empty |= t.sizes[i] == 0;
    if (t.strides[i] > 0) {
      extent += static_cast<unsigned __int128>(t.sizes[i] - 1) * t.strides[i];
    }
  }
  const unsigned __int128 n = empty ? numel : std::max(numel, extent);
  return n > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(n);
}

void decode(Input& in, FuzzTensor& t, bool device_side, int num_devices) {
  t.dtype = kDtypes[in.byte() % std::size(kDtypes)];
  const uint8_t rank_byte = in.byte();
  const size_t rank = rank_byte % 20 == 19 ? 17 : rank_byte % 5;
  for (size_t i = 0; i < rank; ++i) {
    const uint8_t b = in.byte();
    t.sizes.push_back(b >= 250 ? kLargeSizes[(b - 250) % std::size(kLargeSizes)] : b % 6);
  }
  const uint8_t order_mode = in.byte();
  t.dim_order.resize(rank);
  std::iota(t.dim_order.begin(), t.dim_order.end(), 0);
  if (order_mode % 8 == 7) {
    for (auto& d : t.dim_order) {
      d = static_cast<DimOrderType>(in.byte() % (rank + 2));
    }
  } else if (order_mode % 2) {
    for (size_t i = rank; i > 1; --i) {
      std::swap(t.dim_order[i - 1], t.dim_order[in.byte() % i]);
    }
  }
  t.strides.assign(rank, 1);
  if (in.byte() % 4 == 3 || !is_permutation(t.dim_order)) {
    for (auto& s : t.strides) {
      s = static_cast<int8_t>(in.byte()) % 13;
    }
  } else if (et_copy::dense_strides(t.sizes.data(), t.dim_order.data(), rank, t.strides.data()) != Error::Ok) {
    // 17 dims, or a stride beyond int32: not dense, then.
    t.strides.assign(rank, 1);
  }
  t.dynamism = static_cast<TensorShapeDynamism>(in.byte() % 3);
  t.capacity = t.sizes;
  if (t.dynamism != TensorShapeDynamism::STATIC && is_permutation(t.dim_order)) {
    for (size_t i = 0; i < rank; ++i) {
      if (t.sizes[i] < 6) {
        t.capacity[i] += in.byte() % 3;
      }
    }
  }
  const uint8_t type_byte = in.byte();
  t.device_type = device_side ? DeviceType::CUDA : DeviceType::CPU;
  if (type_byte % 10 == 0) {
    t.device_type = t.device_type == DeviceType::CPU ? DeviceType::CUDA : DeviceType::CPU;
  } else if (type_byte % 10 == 1) {
    t.device_type = static_cast<DeviceType>(2 + type_byte % 5);
  }
  const uint8_t index_byte = in.byte();
  switch (index_byte % 10) {
    case 0:
      t.device_index = -1;
      break;
    case 1:
      t.device_index = -2;
      break;
    case 2:
      t.device_index = static_cast<DeviceIndex>(num_devices);
      break;
    case 3:
      t.device_index = 127;
      break;
    case 4:
      t.device_index = -128;
      break;
    default:
      t.device_index = static_cast<DeviceIndex>(index_byte % num_devices);
  }
  const uint8_t mem = in.byte();
  t.on_device = t.device_type == DeviceType::CUDA && mem % 8 != 0;
  const int claimed = t.device_index == -1 ? 0 : t.device_index;
  t.alloc_index = static_cast<DeviceIndex>(claimed >= 0 && claimed < num_devices ? claimed : 0);
  if (mem % 16 == 1) {
    t.alloc_index = static_cast<DeviceIndex>((t.alloc_index + 1) % num_devices);
  }
  t.null_data = mem % 32 == 2;
}

// Allocates t's memory and builds its TensorImpl; false to skip the input
// (a tensor ExecuTorch itself could not construct).
bool materialize(FuzzTensor& t, Input& in) {
  const size_t elements = claimed_elements(t);
  if (elements == SIZE_MAX || elements > kMaxRegion / t.dtype.size) {
    t.null_data = true;
  }
  if (!t.null_data) {
    t.region = elements * t.dtype.size;
    if (t.on_device) {
      auto p = et_copy::simulated_device_allocator().allocate(t.region, t.alloc_index, 1);
      if (!p.ok()) {
        return false;
      }
      t.data = static_cast<uint8_t*>(*p);
      // Device memory faults on a host access, as a GPU's does: the harness
      // fills and checks it through the simulated device's inspection hook.
      auto alias = et_copy::simulated_device_allocator().host_alias(t.data, t.region, t.alloc_index);
      if (!alias.ok()) {
        violation("no host alias for a live device allocation");
      }
      t.bytes = static_cast<uint8_t*>(*alias);
    } else {
      t.data = static_cast<uint8_t*>(std::malloc(t.region));
      t.bytes = t.data;
    }
    const uint8_t seed = in.byte();
    for (size_t i = 0; i < t.region; ++i) {
      t.bytes[i] = static_cast<uint8_t>(seed + i * 7);
    }
  }
  et_copy_test::AnyRankTensorView::Spec spec;
  spec.dtype = t.dtype.type;
  spec.sizes = {t.capacity.data(), t.capacity.size()};
  spec.dim_order = {t.dim_order.data(), t.dim_order.size()};
  spec.strides = {t.strides.data(), t.strides.size()};
  spec.current_sizes = {t.sizes.data(), t.sizes.size()};
  spec.data = t.data;
  spec.dynamism = t.dynamism;
  spec.device_type = t.device_type;
  spec.device_index = t.device_index;
  // Fails only where ExecuTorch's resize_tensor refuses the current sizes
  // (and for a 17-dim tensor with current sizes of its own: no resize there).
  return t.view.reset(spec) == Error::Ok;
}

void release(FuzzTensor& t) {
  if (t.data == nullptr) {
    return;
  }
  if (t.on_device) {
    et_copy::simulated_device_allocator().deallocate(t.data, t.alloc_index);
  } else {
    std::free(t.data);
  }
}

bool dense(const Tensor& t) {
  if (t.numel() == 0 || t.dim() == 0) {
    return true;
  }
  int64_t expected = 1;
  for (ssize_t i = t.dim() - 1; i >= 0; --i) {
    const auto d = t.dim_order()[i];
    if (t.sizes()[d] != 1 && t.strides()[d] != expected) {
      return false;
    }
    expected *= t.sizes()[d];
  }
  return true;
}

std::vector<SizesType> sizes_of(const Tensor& t) {
  return {t.sizes().begin(), t.sizes().end()};
}

// Runs one decoded call through the chosen entry point; returns its Error.
Error call(uint8_t mode, bool h2d, Tensor& self, Tensor& out) {
  const char* name = h2d ? et_copy::kH2dCopyOutName : et_copy::kD2hCopyOutName;
  switch (mode % 4) {
    case 0:
      return h2d ? et_copy::h2d_copy(self, out) : et_copy::d2h_copy(self, out);
    case 1: {
      KernelRuntimeContext ctx;
      if (h2d) {
        et_copy::h2d_copy_out(ctx, self, out);
      } else {
        et_copy::d2h_copy_out(ctx, self, out);
      }
      return ctx.failure_state();
    }
    default: {
      auto fn = executorch::runtime::get_op_function_from_registry(name);
      if (!fn.ok()) {
        violation("et_copy's kernels are not in the registry");
      }
      EValue self_value(self);
      EValue out_value(out);
      EValue result;
      EValue not_a_tensor(static_cast<int64_t>(mode));
      EValue* stack[3] = {&self_value, &out_value, &result};
      size_t n = 3;
      if (mode % 4 == 3) { // a malformed stack: must fail, never crash
        switch ((mode >> 2) % 4) {
          case 0:
            n = 2;
            break;
          case 1:
            stack[0] = &not_a_tensor;
            break;
          case 2:
            stack[1] = &not_a_tensor;
            break;
          default:
            stack[2] = nullptr;
            break;
        }
      }
      KernelRuntimeContext ctx;
      (*fn)(ctx, {stack, n});
      if (mode % 4 == 3 && ctx.failure_state() != Error::InvalidProgram) {
        violation("a malformed stack did not fail with InvalidProgram");
      }
      return ctx.failure_state();
    }
  }
}

} // namespace

// ExecuTorch logs every rejection; the fuzzer would spend its time printing.
extern "C" void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t, const char*, const char*, size_t,
                                        const char*, size_t) {}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  executorch::runtime::runtime_init();
  // Without the kernels or the simulated device every input would only be rejected: stop instead.
  for (const auto& r : et_copy::register_kernels()) {
    if (r.outcome == et_copy::Registration::kFailed) {
      std::fprintf(stderr, "et_copy fuzz: cannot register %s\n", r.op_name);
      std::abort();
    }
  }
  const et_copy::Registration device = et_copy::use_simulated_device();
  if (device != et_copy::Registration::kRegistered && device != et_copy::Registration::kAlreadyOurs) {
    std::fprintf(stderr, "et_copy fuzz: cannot serve CUDA with the simulated device (%s)\n",
                 et_copy::registration_name(device));
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t flags = in.byte();
  const bool h2d = flags % 2 == 0;
  const int num_devices = 1 + (flags >> 1) % 3;
  const uint8_t mode = in.byte();
  auto& sim = et_copy::simulated_device_allocator();
  (void)sim.set_device_count(num_devices);

  FuzzTensor s, o;
  decode(in, s, !h2d, num_devices);
  decode(in, o, h2d, num_devices);
  if (in.byte() % 3 != 0 && s.sizes.size() == o.sizes.size()) {
    o.dtype = s.dtype; // bias towards pairs that get past the dtype check
  }
  const bool ok = materialize(s, in) && materialize(o, in);
  if (ok) {
    Tensor& self = s.view.tensor();
    Tensor& out = o.view.tensor();
    const std::vector<uint8_t> self_before(s.bytes, s.bytes + s.region);
    const std::vector<uint8_t> out_before(o.bytes, o.bytes + o.region);
    const auto out_sizes_before = sizes_of(out);
    const auto stats_before = sim.stats();

    const Error err = call(mode, h2d, self, out);

    const auto stats_after = sim.stats();
    const uint64_t copies =
        h2d ? stats_after.h2d_copies - stats_before.h2d_copies : stats_after.d2h_copies - stats_before.d2h_copies;
    if (!std::equal(self_before.begin(), self_before.end(), s.bytes)) {
      violation("self's memory changed");
    }
    if (err == Error::Ok) {
      const Tensor& host = h2d ? self : out;
      const Tensor& device = h2d ? out : self;
      const int count = num_devices;
      if (self.scalar_type() != out.scalar_type() || self.dim() != out.dim() || host.device_type() != DeviceType::CPU ||
          device.device_type() != DeviceType::CUDA || device.device_index() < -1 || device.device_index() >= count ||
          !dense(self) || !dense(out)) {
        violation("an illegal copy succeeded");
      }
      for (ssize_t i = 0; i < self.dim(); ++i) {
        if (self.dim_order()[i] != out.dim_order()[i]) {
          violation("a copy between dim orders succeeded");
        }
      }
      if (sizes_of(out) != sizes_of(self)) {
        violation("out does not have self's shape");
      }
      const size_t n = self.nbytes();
      if (n > o.region || n > s.region || (n > 0 && std::memcmp(o.bytes, s.bytes, n) != 0) ||
          !std::equal(out_before.begin() + n, out_before.end(), o.bytes + n)) {
        violation("out does not hold exactly self's bytes");
      }
      if (copies != (n > 0 ? 1u : 0u)) {
        violation("the copy counter is off");
      }
    } else {
      if (sizes_of(out) != out_sizes_before) {
        violation("a rejected call changed out's shape");
      }
      if (!std::equal(out_before.begin(), out_before.end(), o.bytes)) {
        violation("a rejected call changed out's memory");
      }
      if (copies != 0) {
        violation("a rejected call counted a copy");
      }
    }
  }
  release(s);
  release(o);
  return 0;
}
