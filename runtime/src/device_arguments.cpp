#include <et_copy/device_arguments.h>

#include <cstdio>

#include <et_copy/failure_report.h>
#include <et_copy/simulated_device_allocator.h>
#include <executorch/runtime/core/device_allocator.h>

namespace et_copy {

namespace {
// Whether the bytes lie inside one live allocation, where the simulated allocator serves `type`.
bool inside_an_allocation(const void* data, size_t nbytes, executorch::runtime::etensor::DeviceType type,
                          executorch::runtime::etensor::DeviceIndex index) {
  SimulatedDeviceAllocator& sim = simulated_device_allocator();
  return nbytes == 0 || executorch::runtime::get_device_allocator(type) != &sim ||
         sim.is_device_memory(data, nbytes, index);
}
} // namespace

bool is_device_argument(const executorch::aten::Tensor& t, size_t nbytes, executorch::runtime::etensor::DeviceType type,
                        executorch::runtime::etensor::DeviceIndex index) {
  const auto* impl = t.unsafeGetTensorImpl();
  return impl->device_type() == type && impl->device_index() == index &&
         inside_an_allocation(t.const_data_ptr(), nbytes, type, index);
}

std::string refuse_device_argument(const executorch::aten::Tensor& t, size_t nbytes,
                                   executorch::runtime::etensor::DeviceType type,
                                   executorch::runtime::etensor::DeviceIndex index) {
  const auto* impl = t.unsafeGetTensorImpl();
  const std::string on = device_name(impl->device_type(), impl->device_index());
  const std::string want = device_name(type, index);
  char where[64];
  std::snprintf(where, sizeof(where), "%zu bytes at %p", nbytes, t.const_data_ptr());
  if (impl->device_type() != type) {
    return "is host memory (" + on + "): " + where + "; the delegate reads device memory only (" + want + ")";
  }
  if (impl->device_index() != index) {
    return "is on " + on + ", the delegate on " + want;
  }
  if (!inside_an_allocation(t.const_data_ptr(), nbytes, type, index)) {
    return std::string("says ") + on + " but " + where + " are not inside one allocation of the simulated device";
  }
  return {};
}

} // namespace et_copy
