// The one implementation behind both copy kernels: every check a raw byte
// copy between two buffers assumes, then the copy through the allocator.
#pragma once

#include <et_copy/copy_ops.h>

namespace et_copy {
namespace internal {

enum class Direction { kHostToDevice, kDeviceToHost };

ET_NODISCARD Error device_copy(Direction direction, const Tensor& self, Tensor& out, CopyDiagnostic* diag);

// device_copy's shortcut through its checks: true, with self's byte count
// and whether out already has self's sizes, when the pair is the common
// case (known device types, same dtype, rank 1..kMaxTensorDims and dim
// order, both dense with byte counts that fit 64 bits); false at any doubt,
// and device_copy then runs its checks one by one. Declared here so a test
// can hold it to taking the common case (it is a third of the kernel's cost).
bool common_case(const Tensor& self, const Tensor& out, uint64_t* nbytes, bool* same_shape);

// The kernel-API form: device_copy, logging the diagnostic and failing ctx
// on an error. Returns out.
Tensor& device_copy_out(Direction direction, KernelRuntimeContext& ctx, const Tensor& self, Tensor& out);

// Unboxes [self, out, returned] and runs `direction`'s kernel, failing ctx
// rather than aborting on a malformed stack.
void device_copy_boxed(Direction direction, KernelRuntimeContext& ctx, Span<EValue*> stack);

} // namespace internal
} // namespace et_copy
