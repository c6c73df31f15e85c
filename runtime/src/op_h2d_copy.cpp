// et_copy::_h2d_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
#include <et_copy/copy_ops.h>

#include "device_copy.h"

namespace et_copy {

Error h2d_copy(const Tensor& self, Tensor& out, CopyDiagnostic* diag) {
  return internal::device_copy(internal::Direction::kHostToDevice, self, out, diag);
}

Tensor& h2d_copy_out(KernelRuntimeContext& ctx, const Tensor& self, Tensor& out) {
  return internal::device_copy_out(internal::Direction::kHostToDevice, ctx, self, out);
}

void h2d_copy_out_boxed(KernelRuntimeContext& ctx, Span<EValue*> stack) {
  internal::device_copy_boxed(internal::Direction::kHostToDevice, ctx, stack);
}

} // namespace et_copy
