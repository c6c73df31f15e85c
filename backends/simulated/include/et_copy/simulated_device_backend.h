// SimulatedDeviceBackend: the device backend of the simulated device, the
// stand-in for upstream's CUDA backend (docs/design.md, "Device programs
// compute in a device backend"). A delegate of this backend receives device
// tensors (planned on CUDA by the outer program, filled by _h2d_copy) and
// computes over device memory by running a nested ExecuTorch program, with
// CPU kernels from the global registry, whose every buffer is device memory
// reached through SimulatedDeviceAllocator::host_alias.
//
// Register it with et_copy::register_simulated_device_backend() (below),
// after use_simulated_device(): init needs the simulated allocator serving
// CUDA. It is a BackendFrame (backend_frame.h: the shared preludes, weights
// and state arena) whose own part is the nested program.
#pragma once

#include <memory>

#include <et_copy/backend_frame.h>
#include <et_copy/registration.h>
#include <executorch/runtime/backend/interface.h>

namespace et_copy {

/// The name delegates of this backend carry in a program (DelegationSpec's
/// backend id) and the name it is registered under.
inline constexpr const char* kSimulatedDeviceBackend = "SimulatedDeviceBackend";

/// Its payload kind, as the delegate record's payload line spells it. A
/// `program` record (delegate_record.h) carries a nested ExecuTorch program
/// and no lines of its own: its arena names the nested planned buffer that
/// holds the state, and it has no tensor line, nor another kind's line.
inline constexpr const char* kPayloadProgram = "program";

/**
 * The backend. init() parses the delegate record (delegate_record.h),
 * copies the nested program (small: its constants are external) and frees
 * `processed`, uploads each weight unless the process-wide weight cache
 * holds it, binds the session's state arena and the pool's scratch, and
 * loads the nested program's one method. execute() checks that every tensor
 * argument is device memory of the record's device, binds them by pointer
 * and runs the nested method; nothing is copied. Failures are logged
 * (ET_LOG, naming the backend, the method, the argument and the problem)
 * and returned as codes: DelegateInvalidCompatibility for a record or
 * nested program this backend cannot run, NotFound / NotSupported when the
 * simulated allocator does not serve CUDA or the named data lacks a weight,
 * InvalidProgram when methods of one session disagree on the arena,
 * InvalidArgument for host or wrong-device arguments.
 *
 * Caches, process-wide, each under one lock, holding weak references
 * (what they hold is freed with the last handle using it):
 * - weights, by (content key, device) in the residency module: uploaded
 *   once while any handle uses them or an open pool pins them;
 * - state arenas, by session id (or named data map), in the residency
 *   module under this backend's id;
 * - scratch, by (pool id, nested program bytes), here.
 *
 * Threading: init and destroy may run on any thread. execute of handles
 * that share scratch (one pool) or an arena (one session) must be
 * serialized by the caller (SessionPool's execution lock), and so must
 * reset_simulated_device_state against execute of that session.
 */
class SimulatedDeviceBackend final : public BackendFrame {
 public:
  /// kSimulatedDeviceBackend.
  const char* id() const override;
  /// True for an allocator serving CUDA with the host-aliasing capability
  /// (HostAliasing, counting_device_allocator.h: the simulated device's): its processor reads device
  /// memory through the host alias, which a GPU's (et-copy's CUDA
  /// allocator's or another library's) does not have.
  bool runs_on(const executorch::runtime::DeviceAllocator& server) const override;

 protected:
  const char* payload_kind() const override;
  const char* payload_words() const override;
  std::unique_ptr<FrameHandle> new_handle() const override;
  ET_NODISCARD executorch::runtime::Error init_payload(FrameHandle& handle,
                                                       executorch::runtime::BackendInitContext& context,
                                                       executorch::runtime::FreeableBuffer& processed) const override;
  Io io(const FrameHandle& handle) const override;
  ET_NODISCARD executorch::runtime::Error execute_payload(
      FrameHandle& handle, executorch::runtime::Span<executorch::runtime::EValue*> args) const override;
};

/// The process-wide instance register_simulated_device_backend() registers.
SimulatedDeviceBackend& simulated_device_backend();

/**
 * Registers simulated_device_backend() under kSimulatedDeviceBackend:
 * register_device_backend (device_backend.h). kAlreadyOurs when it is
 * registered already, kAlreadyOther when another backend holds the name
 * (left alone: ExecuTorch's registry cannot replace one), kFailed with
 * `*error` (when given) set to the registry's error. Never registers twice.
 * Delegates of the backend need the simulated allocator serving CUDA at
 * load (use_simulated_device(), registration.h). Threading as
 * register_kernels().
 */
ET_NODISCARD Registration register_simulated_device_backend(executorch::runtime::Error* error = nullptr);

/**
 * Adds the backend's payload kind (kPayloadProgram, its rules) and its
 * description (how to register it, where it runs) to et-copy's tables, as
 * every backend library does (register_payload_kind, describe_device_backend):
 * registers nothing with ExecuTorch. Runs when the library loads, and in
 * register_simulated_device_backend(); for a program that parses or checks
 * records of the kind without linking the rest of the backend. Ok, or the
 * tables' error (InvalidState when another kind took the word). Idempotent;
 * thread-safe.
 */
ET_NODISCARD executorch::runtime::Error describe_simulated_device_backend();

/**
 * simulated_device_backend().reset_state(session): puts the state arena of
 * `session` back to its start (zeros, then each state's initial value,
 * through the allocator's counted h2d copies). NotFound when no loaded
 * delegate holds an arena for that session (no method loaded, or a
 * program without state); the copy's error otherwise. Sessions reach it
 * through the DeviceBackend interface; this name stays for callers that
 * hold no backend. Threading: see SimulatedDeviceBackend.
 */
ET_NODISCARD executorch::runtime::Error reset_simulated_device_state(int session);

/// simulated_device_backend().state_nbytes(session): bytes of the state
/// arena of `session`, 0 when there is none. Thread-safe.
size_t simulated_device_state_nbytes(int session);

/// The earlier names of the two above, which said nothing of whose state.
[[deprecated("use reset_simulated_device_state")]] ET_NODISCARD inline executorch::runtime::Error reset_device_state(
    int session) {
  return reset_simulated_device_state(session);
}
[[deprecated("use simulated_device_state_nbytes")]] inline size_t device_state_nbytes(int session) {
  return simulated_device_state_nbytes(session);
}

} // namespace et_copy
