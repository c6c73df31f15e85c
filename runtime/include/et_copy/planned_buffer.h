// A method's planned buffers: host memory, or device memory from the
// registered DeviceAllocator, allocated where the program plans them.
// Sessions (sessions.h) hold them as a pool's scratch and a session's state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/executor/method_meta.h>

#include <et_copy/failure_report.h>

namespace et_copy {

/// One planned buffer's memory: host bytes, or a DeviceMemoryBuffer from
/// the registered DeviceAllocator.
class PlannedBuffer {
 public:
  /// Allocates `nbytes` on `device`. Fails with the allocator's error (or
  /// NotFound when no DeviceAllocator serves the device type), and with
  /// MemoryAllocationFailed when the host has no `nbytes` to give: a size
  /// read from program bytes may be absurd, and must not throw.
  ET_NODISCARD static executorch::runtime::Result<PlannedBuffer> create(size_t nbytes,
                                                                        executorch::runtime::etensor::Device device);
  executorch::runtime::Span<uint8_t> span() const {
    return span_;
  }
  executorch::runtime::etensor::Device device() const {
    return device_;
  }

 private:
  // calloc'd: zeros without touching the pages until they are used.
  struct FreeHost {
    void operator()(uint8_t* p) const noexcept {
      std::free(p);
    }
  };
  std::unique_ptr<uint8_t, FreeHost> host_;
  executorch::runtime::DeviceMemoryBuffer device_memory_;
  executorch::runtime::Span<uint8_t> span_;
  executorch::runtime::etensor::Device device_{executorch::runtime::etensor::DeviceType::CPU, 0};
};

/// Planned buffer `i` of `meta`, allocated on the device the program names.
/// InvalidProgram for a buffer with no valid size or device; the
/// allocation's error otherwise, with the reason in `report` (when not null).
ET_NODISCARD executorch::runtime::Result<PlannedBuffer> planned_buffer(const executorch::runtime::MethodMeta& meta,
                                                                       size_t i, FailureReport* report);

/// Why a buffer for `what` of `nbytes` could not be had on `device`, in words.
std::string not_allocated(const std::string& what, int64_t nbytes, executorch::runtime::etensor::Device device);

} // namespace et_copy
