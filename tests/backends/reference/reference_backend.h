// ReferenceDeviceBackend: a third device backend, in the tests only, that
// shows what a backend is (docs/design.md, "Device backends"): a folder
// with a partitioner and preprocess (reference.py) and this, a BackendFrame
// (et_copy/backend_frame.h) that supplies its payload kind, its handle,
// how to load its payload and how to run it, and registers through the
// seams: register_payload_kind (the record's `payload reference` line and
// its rules) and register_device_backend (ExecuTorch's registry and
// et-copy's table, which sessions and the load check walk). Nothing outside
// this folder names it.
//
// Its payload is a straight-line program of float32 elementwise ops over
// tensors of one shape (no broadcasting), one line each:
//
//   inputs <n>                    first: values %0..%n-1 are the inputs
//   <add|sub|mul> <a> <b>         the next value: a op b
//   relu <a>                      the next value: max(a, 0)
//   outputs <v>...                last: the values returned, in order
//
// where an operand is a value (%k, defined above) or a weight (@fqn, a
// weight line of the record). It computes on the host through the device
// allocator's host alias (HostAliasing, et_copy/counting_device_allocator.h), so it runs where the
// allocator serving CUDA has that capability: the simulated device.
#pragma once

#include <et_copy/backend_frame.h>

namespace et_copy_reference {

inline constexpr const char* kReferenceDeviceBackend = "ReferenceDeviceBackend";
inline constexpr const char* kPayloadReference = "reference";

class ReferenceDeviceBackend final : public et_copy::BackendFrame {
 public:
  const char* id() const override;
  /// An allocator serving CUDA with the host-aliasing capability.
  bool runs_on(const executorch::runtime::DeviceAllocator& server) const override;

 protected:
  const char* payload_kind() const override;
  const char* payload_words() const override;
  std::unique_ptr<et_copy::FrameHandle> new_handle() const override;
  ET_NODISCARD executorch::runtime::Error init_payload(et_copy::FrameHandle& handle,
                                                       executorch::runtime::BackendInitContext& context,
                                                       executorch::runtime::FreeableBuffer& processed) const override;
  Io io(const et_copy::FrameHandle& handle) const override;
  ET_NODISCARD executorch::runtime::Error execute_payload(
      et_copy::FrameHandle& handle, executorch::runtime::Span<executorch::runtime::EValue*> args) const override;
};

/// Adds the payload kind "reference" to the record parser and registers the
/// backend (register_device_backend's outcome; kFailed when the kind could
/// not be added). Idempotent.
ET_NODISCARD et_copy::Registration register_reference_backend();

} // namespace et_copy_reference
