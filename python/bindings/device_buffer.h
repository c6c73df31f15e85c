// Device memory a Python object owns (et_copy._C.DeviceBuffer, behind every
// DeviceTensor). Freed by free() or when collected, exactly once; the
// allocator is a never-destroyed singleton, so freeing during interpreter
// shutdown is safe. A slice is a DeviceBuffer over a byte range of another
// one (the parity harness puts guard bytes around tensors that way): it
// owns nothing, and is freed when its parent is.
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

  /// A slice: bytes [offset, offset + nbytes) of `parent` (of its root, for
  /// a slice of a slice). The caller keeps `parent` alive as long as the
  /// slice (the Python binding does, with keep_alive). Throws Failure
  /// (InvalidArgument) for a range outside the parent or a freed parent.
  DeviceBuffer(const DeviceBuffer& parent, size_t offset, size_t nbytes);

  /// 0 once freed.
  uintptr_t ptr() const {
    if (parent_ != nullptr) {
      return parent_->freed() ? 0 : parent_->ptr() + offset_;
    }
    return reinterpret_cast<uintptr_t>(buffer_.data());
  }
  size_t nbytes() const {
    return parent_ != nullptr ? nbytes_ : buffer_.size();
  }
  int device_index() const {
    return parent_ != nullptr ? parent_->device_index() : index_;
  }
  bool freed() const {
    return parent_ != nullptr ? parent_->freed() : buffer_.data() == nullptr;
  }
  /// Returns the memory to the allocator (idempotent); on a slice, does
  /// nothing: the memory is the parent's to free.
  void free() {
    if (parent_ == nullptr) {
      buffer_ = executorch::runtime::DeviceMemoryBuffer();
    }
  }

 private:
  executorch::runtime::DeviceMemoryBuffer buffer_;
  int index_ = 0;
  const DeviceBuffer* parent_ = nullptr; // a slice's root buffer
  size_t offset_ = 0;
  size_t nbytes_ = 0;
};

} // namespace et_copy::bindings
