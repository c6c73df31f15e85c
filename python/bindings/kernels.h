#pragma once

#include <string>

#include "tensor_view.h"

namespace et_copy::bindings {

/// Runs et-copy's kernel for `op` ("et_copy::_h2d_copy.out" or
/// "et_copy::_d2h_copy.out"); throws Failure with the kernel's diagnostic.
void run_kernel(const std::string& op, TensorView& self, TensorView& out);

/// Runs the kernel ExecuTorch's registry resolves for `op`; throws Failure
/// with OperatorMissing when there is none, or the error it reported.
void run_registered(const std::string& op, TensorView& self, TensorView& out);

} // namespace et_copy::bindings
