// et_copy::_d2h_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
#include <et_copy/copy_ops.h>

#include "device_copy.h"

namespace et_copy {

Error d2h_copy(const Tensor& self, Tensor& out, CopyDiagnostic* diag) {
  return internal::device_copy(internal::Direction::kDeviceToHost, self, out, diag);
}

Tensor& d2h_copy_out(KernelRuntimeContext& ctx, const Tensor& self, Tensor& out) {
  return internal::device_copy_out(internal::Direction::kDeviceToHost, ctx, self, out);
}

void d2h_copy_out_boxed(KernelRuntimeContext& ctx, Span<EValue*> stack) {
  internal::device_copy_boxed(internal::Direction::kDeviceToHost, ctx, stack);
}

} // namespace et_copy
