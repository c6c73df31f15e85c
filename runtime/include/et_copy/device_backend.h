// DeviceBackend: the seam between et-copy's sessions and the backends that
// compute on a device (docs/design.md, "A compiled device backend", part 1).
// ExecuTorch knows a backend only through BackendInterface and its registry;
// et-copy also needs to know which device a backend runs on (the load check,
// device_backends() in program_check.h) and to reach the per-session state
// a backend keeps (Session::reset, state_nbytes) and the per-pool resources
// it holds (released with the SessionPool). A device backend says both here.
//
// A backend's library says everything the runtime needs of it in one value,
// a DeviceBackendDefinition (the backend, its payload kind, how to register
// it), and registers it with one call, register_device_backend(definition):
// it goes into ExecuTorch's registry (when its id is absent there) and into
// et-copy's table, which sessions walk. Each of et-copy's backends is a folder
// of backends/ (simulated, aoti).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <et_copy/counting_device_allocator.h>
#include <et_copy/delegate_record.h>
#include <et_copy/registration.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/error.h>

namespace et_copy {

/// Runtime spec keys (LoadBackendOptionsMap, for every device backend),
/// both ints. kSessionSpec names the state arena the delegate binds: loads
/// with one session id share one arena. Without it, one arena per
/// BackendInitContext::get_named_data_map() pointer (per program when the
/// program has no .ptd). kPoolSpec pins the weights in the pool when it is
/// open (device_residency.h: a SessionPool's are, until it is destroyed),
/// and shares a backend's per-program resources (the simulated backend's
/// scratch) among loads with one pool id; without it, each load has its own
/// and the weights go with their last handle.
inline constexpr const char* kSessionSpec = "session";
inline constexpr const char* kPoolSpec = "pool";
/// The runtime spec keys LoadOptions' conveniences set for every backend
/// (loaded_program.h: threads, verify_data, trust_code); a backend reads
/// those it takes, and documents them beside itself. Every other option of a
/// backend travels opaque (BackendLoadOptions, backend_options.h).
/// "threads" (int, at least 1): the intra-op threads a backend's compiled
/// code may use in each execution (AotiDeviceBackend's).
inline constexpr const char* kThreadsSpec = "threads";
/// "verify_data" (bool): verify every weight and initial state value by its
/// content key (the SHA-256 it is stored under) as it is copied to the
/// device, refusing a mismatch (every BackendFrame's, backend_frame.h).
inline constexpr const char* kVerifyDataSpec = "verify_data";
/// "trust_code" (bool): run the program's compiled code though this machine
/// did not compile it (AotiDeviceBackend's; code_trust.h).
inline constexpr const char* kTrustCodeSpec = "trust_code";

/// The bool runtime spec `key` of a load: false when the load does not
/// pass it, InvalidArgument when it is not a bool.
ET_NODISCARD executorch::runtime::Result<bool> runtime_flag(const executorch::runtime::BackendInitContext& context,
                                                            const char* key);

/**
 * A delegate backend whose delegates compute over device memory. Besides
 * BackendInterface (init, execute, destroy, is_available) it says:
 * - id(): the delegate backend id it serves and is registered under; the
 *   same static string on every call, at most kMaxDeviceBackendIdLength
 *   chars (limits.h);
 * - runs_on(server): whether its delegates may read and write the memory of
 *   a device served by `server`, which may be another library's allocator
 *   (allocator_name(&server) says whose: "simulated", "cuda", "foreign");
 * - the session and pool hooks below. Their defaults use the residency
 *   module (device_residency.h), keyed by id(): a backend that keeps its
 *   weights and state arenas there needs to override none of them.
 *
 * Sessions (sessions.h) load every method with the runtime specs
 * {"pool": pool id, "session": session id} (both int, kPoolSpec and
 * kSessionSpec above) for every registered device backend, and the load's
 * options for that backend (BackendLoadOptions), whatever their keys.
 *
 * Threading: the hooks may be called from any thread. reset_state races
 * with execute of the same session: the caller serializes them
 * (SessionPool's execution lock). An instance must live for the process
 * once registered (ExecuTorch's registry keeps the pointer).
 */
class DeviceBackend : public executorch::runtime::BackendInterface {
 public:
  /// The delegate backend id this backend serves.
  virtual const char* id() const = 0;
  /// Whether this backend's delegates run on the device `server` serves.
  virtual bool runs_on(const executorch::runtime::DeviceAllocator& server) const = 0;

  /// Puts the state of `session` back to its start (zeros, then each
  /// state's initial value, through counted h2d copies). Default: the
  /// residency module's arena of (id(), session) (reset_arena). NotFound
  /// when this backend holds no state for the session; the copy's error
  /// otherwise. Logs the failure (ET_LOG, naming the backend).
  ET_NODISCARD virtual executorch::runtime::Error reset_state(int session);
  /// Device bytes of the state this backend holds for `session`, 0 when
  /// none. Default: arena_nbytes(id(), session). Never fails.
  virtual size_t state_nbytes(int session) const;
  /// Called when the SessionPool `pool` is destroyed: drop whatever the
  /// backend keeps for the pool's program (its pinned weights). Default:
  /// the residency module's release_pool(pool). Idempotent; never fails.
  /// An override should call DeviceBackend::release_pool too.
  virtual void release_pool(int pool);
};

/**
 * Adds `backend` to et-copy's table of device backends and registers it
 * with ExecuTorch's backend registry under backend.id() when no backend of
 * that id is registered there yet (a duplicate registration aborts the
 * process). Returns kRegistered when this call registered it, kAlreadyOurs
 * when `backend` itself is registered already (with ExecuTorch, by et-copy
 * or directly; it is then in the table too), kAlreadyOther when another
 * backend holds the id (left alone, not added: ExecuTorch cannot replace a
 * registered backend), kFailed with `*error` (when given) set to: the
 * registry's error; InvalidArgument for an id that is null, empty or longer
 * than kMaxDeviceBackendIdLength; NotSupported when the table already holds
 * kMaxDeviceBackends backends. Never registers twice. `backend` must live
 * for the process.
 *
 * Threading: serialized with the other registration functions
 * (registration.h); must not race with another library registering.
 */
ET_NODISCARD Registration register_device_backend(DeviceBackend& backend, executorch::runtime::Error* error = nullptr);

/// The device backends in et-copy's table, in registration order (a
/// snapshot). Never fails; any thread.
std::vector<DeviceBackend*> registered_device_backends();

/**
 * Everything the runtime learns of one device backend, in one value, as
 * upstream's `Backend{name, &instance}` is for ExecuTorch's registry:
 * - backend: the instance (its id() and runs_on()); lives for the process;
 * - payload: the rules of the payload kind its delegates carry (its record
 *   lines and their reader; delegate_record.h), so its records parse;
 * - python, cpp: the calls that register it ("et_copy.use_aoti_backend()",
 *   "et_copy::register_aoti_backend()"), and runs_on: where it runs, in
 *   words ("et-copy's simulated device only (...)"), which a load check's
 *   refusal names (backend_hint).
 * The strings are static. A backend's library gives the same definition to
 * describe_device_backend when it loads and to register_device_backend.
 */
struct DeviceBackendDefinition {
  DeviceBackend* backend;
  PayloadRules payload;
  const char* python;
  const char* cpp;
  const char* runs_on;
};

/**
 * What a backend's library does when it loads: makes its payload kind known
 * (register_payload_kind) and its description (for backend_hint), so its
 * records parse and a refusal can name its registration before anything
 * registers it. Registers nothing with ExecuTorch. Ok when done or done
 * already (idempotent: the first description of an id stays);
 * InvalidArgument for a null backend or string, or an id that is null or
 * empty; else register_payload_kind's error. Thread-safe.
 */
ET_NODISCARD executorch::runtime::Error describe_device_backend(const DeviceBackendDefinition& definition);

/**
 * The one registration of a device backend: describe_device_backend, then
 * register_device_backend(*definition.backend). Returns as that (kRegistered,
 * kAlreadyOurs, kAlreadyOther), or kFailed with `*error` (when given) set to
 * describe_device_backend's error. Never registers twice.
 */
ET_NODISCARD Registration register_device_backend(const DeviceBackendDefinition& definition,
                                                  executorch::runtime::Error* error = nullptr);

/// For a delegate backend id a load check refused on a device, what to do
/// about it when a backend of that id is described (describe_device_backend):
/// when it is not registered and would run on the allocator serving CUDA
/// once registered (its runs_on), what registers it ("backend
/// 'AotiDeviceBackend' is not registered: call et_copy.use_aoti_backend()
/// (C++: et_copy::register_aoti_backend()) before loading"); when it cannot
/// run on that allocator, where it runs and who serves CUDA ("backend
/// 'SimulatedDeviceBackend' runs on et-copy's simulated device only (...),
/// and cuda is served by another library's allocator"). Else empty. Any
/// thread.
std::string backend_hint(const std::string& id);

} // namespace et_copy
