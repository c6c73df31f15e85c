#pragma once

#include <pybind11/pybind11.h>

namespace et_copy::bindings {

/// Adds et_copy.runtime's core to `m`: load_program(bytes) -> Program
/// (method_names, load_method(name) -> Method (meta(), execute(inputs,
/// outputs))). Methods run with et_copy::method_kernels(); failures raise
/// EtCopyError with the error name, the failing instruction and operator,
/// and what ExecuTorch logged.
void bind_program(pybind11::module_& m);

} // namespace et_copy::bindings
