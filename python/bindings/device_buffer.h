// Device memory a Python object owns (et_copy._C.DeviceBuffer, behind every
// DeviceTensor). Freed by free() or when collected, exactly once; the
// allocator is a never-destroyed singleton, so freeing during interpreter
// shutdown is safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/device_memory_buffer.h>

namespace et_copy::bindings {

class DeviceBuffer {
 public:
  /// Throws Failure: InvalidArgument for a CPU or unknown device type or an
  /// index out of range, NotFound when no allocator serves the type, or
  /// the allocator's error.
  DeviceBuffer(size_t nbytes, int device_type, int device_index, size_t alignment);

  uintptr_t ptr() const {
    return reinterpret_cast<uintptr_t>(buffer_.data());
  }
  size_t nbytes() const {
    return buffer_.size();
  }
  int device_index() const {
    return index_;
  }
  bool freed() const {
    return buffer_.data() == nullptr;
  }
  void free() {
    buffer_ = executorch::runtime::DeviceMemoryBuffer();
  }

 private:
  executorch::runtime::DeviceMemoryBuffer buffer_;
  int index_ = 0;
};

} // namespace et_copy::bindings
