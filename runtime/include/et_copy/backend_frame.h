// BackendFrame: what every device backend of et-copy does the same way
// around its payload (docs/design.md, "Device backends"): the init prelude
// (the processed bytes, the delegate record, its payload kind, the compile
// spec target_device, the runtime specs pool and verify_data), the weights
// and the session's state arena in the residency module, the execute
// prelude (a handle, the argument count, no missing argument), destroy, and
// one way to log a failure. A backend derives from it and supplies only
// what is its own: how to load its payload and how to run it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <et_copy/delegate_record.h>
#include <et_copy/device_backend.h>
#include <et_copy/device_residency.h>
#include <executorch/runtime/backend/interface.h>

namespace et_copy {

/// What every delegate handle of a framed backend holds, set by the init
/// prelude; a backend's own handle derives from it and adds its payload's
/// objects (destroyed first: they point into what this holds).
struct FrameHandle {
  virtual ~FrameHandle() = default;
  std::string method_name; ///< the outer method, for messages ("?" when the context has none)
  DelegateRecord record;   ///< its payload points into `processed` until init_payload frees that
  std::optional<int> pool; ///< the runtime spec "pool" (kPoolSpec)
  bool verify = false;     ///< the runtime spec "verify_data" (kVerifyDataSpec)
};

/**
 * A DeviceBackend whose init, execute and destroy run the shared preludes
 * and call the backend's hooks. init refuses, each logged as
 * "<id>: method '<m>': <problem>": no processed bytes (InvalidArgument); a
 * record parse_delegate_record refuses (its error and reason); a payload
 * kind other than payload_kind() (DelegateInvalidCompatibility); a compile
 * spec target_device other than the record's device; a pool spec that is
 * not an int or a verify_data spec that is not a bool (InvalidArgument);
 * then whatever init_payload returns. execute refuses a null handle, an
 * argument count other than io() gives, and a null argument
 * (InvalidArgument), then returns execute_payload's result.
 *
 * Threading: as DeviceBackend; the hooks are called from init and execute,
 * on the caller's thread, with the handle of that call.
 */
class BackendFrame : public DeviceBackend {
 public:
  bool is_available() const override {
    return true;
  }
  ET_NODISCARD executorch::runtime::Result<executorch::runtime::DelegateHandle*> init(
      executorch::runtime::BackendInitContext& context, executorch::runtime::FreeableBuffer* processed,
      executorch::runtime::ArrayRef<executorch::runtime::CompileSpec> compile_specs) const final;
  ET_NODISCARD executorch::runtime::Error execute(
      executorch::runtime::BackendExecutionContext& context, executorch::runtime::DelegateHandle* handle,
      executorch::runtime::Span<executorch::runtime::EValue*> args) const final;
  void destroy(executorch::runtime::DelegateHandle* handle) const final;

  // For the backend's own code (its helpers are free functions of its file).
  /// Logs "<id>: method '<method>': <message>" and returns `e`.
  ET_NODISCARD executorch::runtime::Error fail(executorch::runtime::Error e, const std::string& method,
                                               const std::string& message) const;
  /// The runtime spec `key` of the load: `*out` set when it is an int, left
  /// alone when the load does not pass it; InvalidArgument, logged as
  /// "runtime spec '<key>' must be an int", when it is another type.
  ET_NODISCARD executorch::runtime::Error int_spec(const FrameHandle& handle,
                                                   const executorch::runtime::BackendInitContext& context,
                                                   const char* key, std::optional<int>* out) const;
  /// The bool runtime spec `key` (runtime_flag: false when absent), or
  /// InvalidArgument, logged as "runtime spec '<key>' must be a bool".
  ET_NODISCARD executorch::runtime::Error flag_spec(const FrameHandle& handle,
                                                    const executorch::runtime::BackendInitContext& context,
                                                    const char* key, bool* out) const;
  /// The record's weight `w` on its device, from the residency cache or
  /// uploaded from `named` (pinned in the handle's pool, verified when the
  /// handle says so). On failure logs "weight '<fqn>': <why>" and returns
  /// the residency module's error.
  ET_NODISCARD executorch::runtime::Result<std::shared_ptr<DeviceBlock>> bind_weight(
      const FrameHandle& handle, const DelegateWeight& w, const executorch::runtime::NamedDataMap* named) const;
  /// The state arena of `nbytes` the handle binds, holding the record's
  /// states: the session's (runtime spec "session") or, without one, the
  /// named data map's, under this backend's id. On failure logs and returns
  /// InvalidArgument for a session spec that is not an int, or the
  /// residency module's error (acquire_arena).
  ET_NODISCARD executorch::runtime::Result<std::shared_ptr<StateArena>> bind_arena(
      const FrameHandle& handle, executorch::runtime::BackendInitContext& context, size_t nbytes) const;

 protected:
  /// The payload line's kind this backend runs ("program"), and what that
  /// is in words for the refusal ("a nested program").
  virtual const char* payload_kind() const = 0;
  virtual const char* payload_words() const = 0;
  /// A fresh handle of the backend's own type.
  virtual std::unique_ptr<FrameHandle> new_handle() const = 0;
  /// After the prelude: the backend's own checks, its payload loaded and
  /// bound (weights through bind_weight, state through bind_arena).
  /// `processed` is the delegate's bytes (the record's payload points into
  /// them): free it once they are no longer needed. Logs its failures
  /// (fail()).
  ET_NODISCARD virtual executorch::runtime::Error init_payload(
      FrameHandle& handle, executorch::runtime::BackendInitContext& context,
      executorch::runtime::FreeableBuffer& processed) const = 0;
  /// The inputs and outputs a call of `handle` takes, and the payload in
  /// words for the count's refusal ("the nested method", "the model").
  struct Io {
    size_t inputs;
    size_t outputs;
    const char* payload;
  };
  virtual Io io(const FrameHandle& handle) const = 0;
  /// Runs the payload over `args` (inputs then outputs, none null, as many
  /// as io() says). Logs its failures (fail()).
  ET_NODISCARD virtual executorch::runtime::Error execute_payload(
      FrameHandle& handle, executorch::runtime::Span<executorch::runtime::EValue*> args) const = 0;
};

} // namespace et_copy
