// Explicit, idempotent registration of et-copy's kernels and allocators
// with ExecuTorch's registries, which abort the process on a duplicate.
#pragma once

#include <array>

#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/kernel/operator_registry.h>

namespace et_copy {

/// What a registration call found and did.
enum class Registration {
  kRegistered,   ///< this call registered et-copy's implementation
  kAlreadyOurs,  ///< et-copy's implementation was already registered
  kAlreadyOther, ///< another implementation holds the slot; left alone
  kFailed,       ///< the registry refused (see the accompanying Error)
  kAbsent,       ///< (kernel_owner only) nothing is registered under the name
};

/// Lower-case words for a Registration ("registered", "already et_copy",
/// "already other", "failed", "absent").
const char* registration_name(Registration r);

struct KernelRegistration {
  const char* op_name;
  Registration outcome;
  executorch::runtime::Error error; ///< Ok unless outcome is kFailed
};

/**
 * Registers et_copy::_h2d_copy.out and et_copy::_d2h_copy.out where no
 * kernel of that name is registered yet. Never registers a name twice, so
 * it never trips the registry's duplicate abort.
 *
 * Threading: serialised by an internal lock against the other functions
 * here; must not race with registrations done by other libraries (e.g. a
 * kernel library being dlopen'ed on another thread).
 */
ET_NODISCARD std::array<KernelRegistration, 2> register_kernels();

/// Who provides the kernel for `op_name` now: kAlreadyOurs, kAlreadyOther or
/// kAbsent. Registers nothing and never fails. Threading as register_kernels().
ET_NODISCARD Registration kernel_owner(const char* op_name);

/**
 * Registers `alloc` for its device type unless an allocator is already
 * registered for that type. Returns kAlreadyOurs when `alloc` itself is the
 * registered one, kAlreadyOther when a different allocator is, kFailed for
 * a null `alloc`. `alloc` must have static lifetime (the registry keeps the
 * pointer and cannot unregister). Threading as register_kernels().
 */
ET_NODISCARD Registration register_allocator(executorch::runtime::DeviceAllocator* alloc);

/**
 * et-copy's kernels for one method: pass the result to
 * `Program::load_method(..., kernel_registry)` or
 * `extension::Module::load_method(..., kernel_registry)`. This is how an
 * executor that links an ExecuTorch kernel library (which registers its own
 * et_copy::_h2d_copy.out / _d2h_copy.out globally, first) gets et-copy's
 * checked kernels: the method resolves operators in this list before the
 * global registry, and nothing is registered, so there is no duplicate
 * abort and no load-order rule. Use register_kernels() instead only in an
 * executor that links no kernel library.
 *
 * The list is a snapshot of the global registry with every et_copy entry
 * replaced by et-copy's, so each operator of the method resolves in it and
 * the method logs no "kernel not found" line per operator. A kernel
 * registered after the snapshot still resolves through the method's
 * fallback to the global registry; the next call takes a fresh snapshot.
 *
 * Never fails. The span stays valid for the life of the process.
 * Threading: safe to call from any thread; serialised with the functions
 * here, and like them must not race with another library registering.
 */
executorch::runtime::Span<const executorch::runtime::Kernel> method_kernels();

/**
 * Serves DeviceType::CUDA with the process-wide simulated allocator
 * (simulated_device_allocator()) reporting `device_count` devices
 * (1..kMaxDevices, et_copy/limits.h).
 * Idempotent: when it is registered already, only the count changes
 * (kAlreadyOurs). kAlreadyOther, changing nothing, when another allocator
 * holds CUDA; kFailed with `*error` (when given) InvalidArgument for a count
 * outside that range. Python's et_copy.use_simulated_device() is this call.
 * Threading as register_kernels().
 */
ET_NODISCARD Registration use_simulated_device(int device_count = 1, executorch::runtime::Error* error = nullptr);

} // namespace et_copy
