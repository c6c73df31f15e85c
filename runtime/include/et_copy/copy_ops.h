// The et_copy device copy kernels: et_copy::_h2d_copy.out and
// et_copy::_d2h_copy.out, out-variant, against ExecuTorch's kernel API.
#pragma once

#include <cstddef>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>

namespace et_copy {

using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Span;

/// Operator names, exactly as ExecuTorch programs spell them.
inline constexpr const char kH2dCopyOutName[] = "et_copy::_h2d_copy.out";
inline constexpr const char kD2hCopyOutName[] = "et_copy::_d2h_copy.out";

/// Why a copy was rejected, in words that name the op, the argument and the
/// problem. Empty when the copy succeeded.
struct CopyDiagnostic {
  // Only the terminator is set: zeroing all 320 bytes was a sixth of a
  // kernel call (python -m et_copy bench, C++ kernel overhead).
  CopyDiagnostic() {
    message[0] = '\0';
  }
  char message[320];
};

/**
 * Copies host tensor `self` into device tensor `out`.
 *
 * The device comes from `out`'s metadata; the bytes move through the
 * DeviceAllocator ExecuTorch's registry holds for that device type. `out` is
 * resized to `self`'s shape when its dynamism and capacity allow.
 *
 * Returns Error::Ok, or (with `diag` filled when given):
 *  - InvalidArgument: wrong direction (self not on CPU, out on CPU), dtype,
 *    rank or dim-order mismatch, a tensor that is not dense in its dim
 *    order, a negative size, a null data pointer, self larger than out's
 *    capacity, a device index the allocator does not have;
 *  - NotFound: no DeviceAllocator registered for out's device type;
 *  - whatever the allocator's copy returned.
 * On any error, `out`'s data and shape are exactly as they were.
 *
 * Threading: safe to call concurrently on distinct `out` tensors.
 */
ET_NODISCARD Error h2d_copy(const Tensor& self, Tensor& out, CopyDiagnostic* diag = nullptr);

/// The mirror of h2d_copy: device tensor `self` (device from its metadata)
/// into host tensor `out`. Same errors, same guarantees, same threading.
ET_NODISCARD Error d2h_copy(const Tensor& self, Tensor& out, CopyDiagnostic* diag = nullptr);

/// Kernel-API forms: run h2d_copy / d2h_copy; on failure they log the
/// diagnostic (ET_LOG Error) and fail `ctx` with its Error. Always return
/// `out`. Threading as h2d_copy.
Tensor& h2d_copy_out(KernelRuntimeContext& ctx, const Tensor& self, Tensor& out);
Tensor& d2h_copy_out(KernelRuntimeContext& ctx, const Tensor& self, Tensor& out);

/// Boxed forms, as the ExecuTorch registry calls them: stack is
/// [self, out, returned]. A stack of the wrong length or with non-tensor
/// values fails `ctx` with InvalidProgram instead of aborting; otherwise
/// the kernel-API form runs and the result slot is set to `out`. These are
/// what register_kernels() puts in the registry. Threading as h2d_copy.
void h2d_copy_out_boxed(KernelRuntimeContext& ctx, Span<EValue*> stack);
void d2h_copy_out_boxed(KernelRuntimeContext& ctx, Span<EValue*> stack);

} // namespace et_copy
