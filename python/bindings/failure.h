// The one C++ exception the bindings throw; module.cpp translates it into
// et_copy.EtCopyError carrying the ExecuTorch error name.
#pragma once

#include <stdexcept>
#include <string>

#include <executorch/runtime/core/error.h>

namespace et_copy::bindings {

struct Failure : std::runtime_error {
  Failure(executorch::runtime::Error e, const std::string& message) : std::runtime_error(message), error(e) {}
  executorch::runtime::Error error;
};

/// "InvalidArgument" for Error::InvalidArgument.
const char* error_name(executorch::runtime::Error e);

/// Sets the Python error for `f`: et_copy.EtCopyError with its message and
/// error name (what pybind's translator does; for raw C-API functions).
void set_python_error(const Failure& f);

} // namespace et_copy::bindings
