#include <et_copy/registration.h>

#include <cstring>
#include <mutex>

#include <et_copy/copy_ops.h>
#include <et_copy/device_backend.h>
#include <et_copy/simulated_device_allocator.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include "registry_lock.h"

namespace et_copy {

namespace internal {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

} // namespace internal

namespace {

using internal::registry_mutex;

using executorch::runtime::DeviceAllocator;
using executorch::runtime::get_device_allocator;
using executorch::runtime::Kernel;
using executorch::runtime::OpFunction;
using executorch::runtime::register_device_allocator;

struct OurKernel {
  const char* name;
  OpFunction fn;
};

// Static storage: the registry keeps the name pointers.
constexpr OurKernel kOurKernels[2] = {
    {kH2dCopyOutName, &h2d_copy_out_boxed},
    {kD2hCopyOutName, &d2h_copy_out_boxed},
};

// The kernel the registry resolves for op_name with no tensor metadata (its
// fallback kernel), or nullptr. Scans the registry instead of asking
// registry_has_op_function(), which logs an error line for every miss.
OpFunction find_fallback(const char* op_name) {
  for (const Kernel& k : executorch::runtime::get_registered_kernels()) {
    if (k.kernel_key_.is_fallback() && k.name_ != nullptr && std::strcmp(k.name_, op_name) == 0) {
      return k.op_;
    }
  }
  return nullptr;
}

ET_NODISCARD Registration owner_locked(const char* op_name) {
  const OpFunction fn = find_fallback(op_name);
  if (fn == nullptr) {
    return Registration::kAbsent;
  }
  for (const auto& k : kOurKernels) {
    if (fn == k.fn) {
      return Registration::kAlreadyOurs;
    }
  }
  return Registration::kAlreadyOther;
}

} // namespace

const char* registration_name(Registration r) {
  switch (r) {
    case Registration::kRegistered:
      return "registered";
    case Registration::kAlreadyOurs:
      return "already et_copy";
    case Registration::kAlreadyOther:
      return "already other";
    case Registration::kFailed:
      return "failed";
    case Registration::kAbsent:
      return "absent";
  }
  return "failed";
}

Registration kernel_owner(const char* op_name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return owner_locked(op_name);
}

std::array<KernelRegistration, 2> register_kernels() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::array<KernelRegistration, 2> result{};
  for (size_t i = 0; i < 2; ++i) {
    const OurKernel& k = kOurKernels[i];
    result[i] = {k.name, Registration::kRegistered, Error::Ok};
    if (find_fallback(k.name) != nullptr) {
      result[i].outcome = owner_locked(k.name);
      continue;
    }
    static const Kernel kernels[2] = {
        Kernel(kOurKernels[0].name, kOurKernels[0].fn),
        Kernel(kOurKernels[1].name, kOurKernels[1].fn),
    };
    const Error err = executorch::runtime::register_kernels({&kernels[i], 1});
    if (err != Error::Ok) {
      result[i].outcome = Registration::kFailed;
      result[i].error = err;
    }
  }
  return result;
}

Registration register_allocator(DeviceAllocator* alloc) {
  if (alloc == nullptr) {
    return Registration::kFailed;
  }
  std::lock_guard<std::mutex> lock(registry_mutex());
  DeviceAllocator* current = get_device_allocator(alloc->device_type());
  if (current == alloc) {
    return Registration::kAlreadyOurs;
  }
  if (current != nullptr) {
    return Registration::kAlreadyOther;
  }
  register_device_allocator(alloc);
  return Registration::kRegistered;
}

Registration use_simulated_device(int device_count, Error* error) {
  if (error != nullptr) {
    *error = Error::Ok;
  }
  SimulatedDeviceAllocator& sim = simulated_device_allocator();
  std::lock_guard<std::mutex> lock(registry_mutex());
  DeviceAllocator* current = get_device_allocator(DeviceType::CUDA);
  if (current != nullptr && current != &sim) {
    return Registration::kAlreadyOther; // its device count is not ours to change
  }
  const Error err = sim.set_device_count(device_count);
  if (err != Error::Ok) {
    if (error != nullptr) {
      *error = err;
    }
    return Registration::kFailed;
  }
  if (current == &sim) {
    return Registration::kAlreadyOurs;
  }
  register_device_allocator(&sim);
  return Registration::kRegistered;
}

} // namespace et_copy
