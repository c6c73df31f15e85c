#pragma once

#include <string>

#include "tensor_view.h"

namespace et_copy::bindings {

/// Runs et-copy's h2d (or d2h) kernel; throws Failure with the kernel's
/// diagnostic.
void run_kernel(bool h2d, TensorView& self, TensorView& out);

/// Runs the kernel ExecuTorch's registry resolves for `op`; throws Failure
/// with OperatorMissing when there is none, or the error it reported.
void run_registered(const std::string& op, TensorView& self, TensorView& out);

} // namespace et_copy::bindings
