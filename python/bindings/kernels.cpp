// Runs a copy kernel on TensorViews: et-copy's own, or whatever the
// ExecuTorch registry resolves for an op name.
#include "kernels.h"

#include <string>

#include <et_copy/copy_ops.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include "failure.h"

namespace et_copy::bindings {

namespace {
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
} // namespace

void run_kernel(bool h2d, TensorView& self, TensorView& out) {
  CopyDiagnostic diag;
  const Error err = h2d ? h2d_copy(self.tensor(), out.tensor(), &diag) : d2h_copy(self.tensor(), out.tensor(), &diag);
  if (err != Error::Ok) {
    throw Failure(err, diag.message);
  }
}

void run_registered(const std::string& op, TensorView& self, TensorView& out) {
  auto fn = executorch::runtime::get_op_function_from_registry(op.c_str());
  if (!fn.ok()) {
    throw Failure(Error::OperatorMissing, op + ": no kernel is registered under this name");
  }
  EValue self_value(self.tensor());
  EValue out_value(out.tensor());
  EValue result;
  EValue* stack[3] = {&self_value, &out_value, &result};
  KernelRuntimeContext ctx;
  (*fn)(ctx, {stack, 3});
  const Error err = ctx.failure_state();
  if (err != Error::Ok) {
    throw Failure(err, op + ": the registered kernel failed with " + error_name(err));
  }
}

} // namespace et_copy::bindings
