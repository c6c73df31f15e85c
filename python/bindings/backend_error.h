// For a device backend's own extension module (backends/<name>/bindings):
// how it raises et_copy.EtCopyError, the one exception every et_copy failure
// raises. The type is et_copy._C's (module.cpp), one per process; a
// backend's module takes it from there, so callers catch one class whichever
// extension raised it.
#pragma once

#include <string>

#include <pybind11/pybind11.h>

#include <et_copy/failure_report.h>
#include <et_copy/registration.h>
#include <executorch/runtime/core/error.h>

namespace et_copy::bindings {

/// Raises et_copy.EtCopyError(message, error=<the ExecuTorch error's name>)
/// by setting the Python error and throwing pybind11::error_already_set.
/// Needs the GIL.
[[noreturn]] inline void raise_et_copy_error(executorch::runtime::Error error, const std::string& message) {
  pybind11::object type = pybind11::module_::import("et_copy._C").attr("EtCopyError");
  pybind11::object exc = type(message, pybind11::arg("error") = et_copy::error_name(error));
  PyErr_SetObject(type.ptr(), exc.ptr());
  throw pybind11::error_already_set();
}

/// What a backend's registration binding returns for the outcome `r` of
/// registering backend `id` (`error`: the call's error, for kFailed): the
/// outcome's name ("registered", "already et_copy"), or EtCopyError naming
/// `op` when the registry refused the backend or another library holds its
/// id. Needs the GIL.
inline std::string registration_answer(Registration r, executorch::runtime::Error error, const std::string& op,
                                       const char* id) {
  if (r == Registration::kFailed) {
    raise_et_copy_error(error, op + ": ExecuTorch's backend registry refused " + id);
  }
  if (r == Registration::kAlreadyOther) {
    raise_et_copy_error(
        executorch::runtime::Error::RegistrationAlreadyRegistered,
        op + ": another library registered a backend named " + id + "; ExecuTorch cannot replace a registered backend");
  }
  return registration_name(r);
}

} // namespace et_copy::bindings
