// AotiDeviceBackend: the compiled device backend (docs/design.md, "A
// compiled device backend", part 4). A delegate of this backend carries a
// delegate record (delegate_record.h) whose payload is an AOTInductor model
// .so; the backend runs it with libtorch's own AOTI runtime, over device
// memory, through torch's C ABI only: compiled for the CPU on the simulated
// device (the model reads and writes device memory through its host alias,
// as the simulated device's processor), for CUDA on a GPU, served by
// et-copy's CUDA allocator or another library's (upstream ExecuTorch's CUDA
// backend registers its own when its library loads).
//
// Library et_copy_aoti (backends/aoti): links et_copy_runtime and libtorch's
// C shim libraries (torch_cpu, c10); runtime/ stays free of libtorch.
#pragma once

#include <memory>

#include <et_copy/backend_frame.h>
#include <et_copy/registration.h>

namespace et_copy {

/// The name delegates of this backend carry (DelegationSpec's backend id)
/// and the name it is registered under.
inline constexpr const char* kAotiDeviceBackend = "AotiDeviceBackend";

/// Its payload kind, as the delegate record's payload line spells it: an
/// AOTInductor shared object (.so). Its arena is "-" (the state tensors are
/// bound in place, not planned), every weight and state has a tensor line
/// giving the layout it is bound with, and the kind's own lines
/// (backends/aoti/src/aoti_record.h, read by this library) say which torch
/// compiled it for which target, its input and output counts, and its
/// SHA-256.
inline constexpr const char* kPayloadAoti = "aoti";

/// The torch release this library was built against ("2.13.0"): a record's
/// target line must name it (compared without a local suffix like "+cpu").
const char* aoti_torch_version();

/// The intra-op threads a delegate's compiled code runs with when the load
/// passes no runtime spec "threads" (kThreadsSpec). One: a parallel region
/// waits at its barrier for every thread of its team, and on a machine
/// shared with other work a thread that is not scheduled stalls the whole
/// step (libgomp spins up to GOMP_SPINCOUNT before it sleeps, docs/benchmarks.md).
inline constexpr int kDefaultThreads = 1;

/**
 * The backend.
 *
 * init() parses the record and refuses (DelegateInvalidCompatibility,
 * logged naming both sides): a payload that is not `aoti`; target `cpu`
 * unless et-copy's simulated allocator serves CUDA, target `cuda` unless a
 * GPU's allocator does (et-copy's CUDA allocator or another library's: not
 * the simulated one, nor none); a torch version other than
 * aoti_torch_version(); a model whose inputs, outputs or constants do not
 * match the record's io and weight/state lines. It loads the .so from an
 * anonymous file once per content (never unloaded), creates one model
 * container per handle on "cpu" or "cuda:<index>", uploads each weight
 * through the residency module (device_residency.h: counted, shared by
 * content key, pinned by the runtime spec "pool"), binds the session's
 * state arena there (runtime spec "session"; without it one arena per named
 * data map), and binds every weight and
 * state as a user-managed constant over that device memory: the model
 * updates state in place. The runtime spec "threads" (kThreadsSpec, an int
 * of at least 1; kDefaultThreads without it) is the intra-op thread count
 * every execute of the handle runs the model with; another value is
 * InvalidArgument. NotFound when nothing serves CUDA or the named data
 * lacks a weight; the allocator's error when it cannot give or fill the
 * weights' memory; InvalidProgram
 * when methods of one session disagree on the arena.
 *
 * execute() takes the record's inputs then outputs; every tensor argument
 * must be device memory of the record's device (device type CUDA, its
 * index, and on the simulated device inside one live allocation), else
 * InvalidArgument naming the argument; non-tensor arguments are
 * NotSupported. Inputs are wrapped without a copy; each output, allocated
 * by the model, is copied into the argument's memory after the argument is
 * resized to its shape (InvalidArgument on a dtype or capacity mismatch).
 * The model runs with the OpenMP thread count of the calling thread set to
 * the handle's threads, and restored after (OpenMP keeps the count per
 * thread; the compiled code reads it at each parallel region).
 * On CUDA everything runs on the default stream, which the copy kernels use
 * too. A failed AOTI call is DelegateInvalidCompatibility at init and
 * Internal at execute, logged with the runtime's message.
 *
 * Threading: init and destroy may run on any thread. execute of one handle,
 * and of handles sharing an arena (one session), must be serialized by the
 * caller (SessionPool's execution lock).
 */
class AotiDeviceBackend final : public BackendFrame {
 public:
  /// kAotiDeviceBackend.
  const char* id() const override;
  /// Any allocator serving CUDA: one with the host-aliasing capability
  /// (HostAliasing, counting_device_allocator.h: the simulated device: code compiled for the CPU),
  /// et-copy's CUDA allocator or another library's (code compiled for CUDA).
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

/// The process-wide instance register_aoti_backend() registers.
AotiDeviceBackend& aoti_backend();

/**
 * Registers aoti_backend() under kAotiDeviceBackend unless a backend of that
 * name is registered already: kAlreadyOurs when it is this one,
 * kAlreadyOther when it is another (left alone: ExecuTorch's registry cannot
 * replace one and aborts on a duplicate), kFailed with `*error` (when given)
 * set to the registry's error. Never registers twice. Thread-safe; must not
 * race with other libraries registering backends.
 */
ET_NODISCARD Registration register_aoti_backend(executorch::runtime::Error* error = nullptr);

} // namespace et_copy
