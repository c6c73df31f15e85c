// The check every device backend makes of its tensor arguments before it
// binds them: they must be memory of the delegate's device, never host
// memory (upstream's CUDA backend asks cudaPointerGetAttributes the same).
#pragma once

#include <cstddef>
#include <string>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/portable_type/device.h>

namespace et_copy {

/**
 * Whether `t`, a delegate's tensor argument whose bytes span `nbytes` from
 * its data pointer, is memory of device (`type`, `index`), by the rules of
 * refuse_device_argument below: the per-execute check, which builds no
 * string. Thread-safe; logs nothing.
 */
bool is_device_argument(const executorch::aten::Tensor& t, size_t nbytes, executorch::runtime::etensor::DeviceType type,
                        executorch::runtime::etensor::DeviceIndex index);

/**
 * Why `t`, a delegate's tensor argument whose bytes span `nbytes` from its
 * data pointer, is not memory of device (`type`, `index`), in words for a
 * refusal ("is host memory (cpu): 16 bytes at 0x...; the delegate reads
 * device memory only (cuda:0)"); empty when it is. The tensor's device type
 * and index must be the delegate's; where et-copy's simulated allocator
 * serves `type`, its `nbytes` (when above 0) must also lie inside one live
 * allocation (SimulatedDeviceAllocator::is_device_memory). On other
 * allocators only the metadata can be checked. Builds the message: call it
 * once is_device_argument said no. Thread-safe; logs nothing.
 */
std::string refuse_device_argument(const executorch::aten::Tensor& t, size_t nbytes,
                                   executorch::runtime::etensor::DeviceType type,
                                   executorch::runtime::etensor::DeviceIndex index);

} // namespace et_copy
