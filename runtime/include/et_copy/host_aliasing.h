// HostAliasing: the capability of an allocator whose device memory the host
// can also reach at another address (the simulated device's host alias).
// Device backends ask an allocator for it instead of naming one: a backend
// that computes through the host (SimulatedDeviceBackend, an AOTI model
// compiled for the CPU) runs where the allocator serving the device has it.
#pragma once

#include <cstddef>

#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/result.h>

namespace et_copy {

class HostAliasing {
 public:
  /// The host address of device bytes [device_ptr, device_ptr + nbytes) of
  /// device `index`, valid while that allocation lives. InvalidArgument when
  /// the range is not inside one live allocation of that device; nullptr
  /// for nbytes 0 at nullptr. Counts nothing; any thread.
  ET_NODISCARD virtual executorch::runtime::Result<void*> host_alias(
      const void* device_ptr, size_t nbytes, executorch::runtime::etensor::DeviceIndex index) const = 0;

 protected:
  ~HostAliasing() = default;
};

/// `server`'s host-aliasing capability, or nullptr when it has none (a GPU's
/// allocator, another library's, or nullptr). Pure; any thread.
const HostAliasing* host_aliasing(const executorch::runtime::DeviceAllocator* server);

} // namespace et_copy
