#include <et_copy/planned_buffer.h>

#include <cstdlib>
#include <string>

namespace et_copy {

using executorch::runtime::DeviceMemoryBuffer;
using executorch::runtime::Error;
using executorch::runtime::Result;
using executorch::runtime::Span;
namespace et = executorch::runtime::etensor;

std::string not_allocated(const std::string& what, int64_t nbytes, et::Device device) {
  return "could not allocate " + what + " (" + std::to_string(nbytes) + " bytes) on " + device_name(device) +
         (device.type() == et::DeviceType::CPU ? ": the host has no memory to give it"
                                               : ": no DeviceAllocator is registered for it, or it failed");
}

Result<PlannedBuffer> planned_buffer(const executorch::runtime::MethodMeta& meta, size_t i, FailureReport* report) {
  auto size = meta.memory_planned_buffer_size(i);
  auto device = meta.memory_planned_buffer_device(i);
  if (!size.ok() || !device.ok() || *size < 0) {
    return fail(report, Error::InvalidProgram, "planned buffer " + std::to_string(i) + " has no valid size or device");
  }
  auto b = PlannedBuffer::create(static_cast<size_t>(*size), *device);
  if (!b.ok()) {
    return fail(report, b.error(), not_allocated("planned buffer " + std::to_string(i), *size, *device));
  }
  return b;
}

Result<PlannedBuffer> PlannedBuffer::create(size_t nbytes, et::Device device) {
  PlannedBuffer b;
  b.device_ = device;
  if (device.type() == et::DeviceType::CPU) {
    // At least one byte, so that an empty buffer still has an address.
    b.host_.reset(static_cast<uint8_t*>(std::calloc(nbytes == 0 ? 1 : nbytes, 1)));
    if (b.host_ == nullptr) {
      return Error::MemoryAllocationFailed;
    }
    b.span_ = Span<uint8_t>(b.host_.get(), nbytes);
    return b;
  }
  auto memory = DeviceMemoryBuffer::create(nbytes, device.type(), device.index());
  if (!memory.ok()) {
    return memory.error();
  }
  b.device_memory_ = std::move(*memory);
  b.span_ = b.device_memory_.as_span();
  return b;
}

} // namespace et_copy
