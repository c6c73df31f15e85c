// For a device backend's own extension module (backends/<name>/bindings):
// how it raises et_copy.EtCopyError, the one exception every et_copy failure
// raises. The type is et_copy._C's (module.cpp), one per process; a
// backend's module takes it from there, so callers catch one class whichever
// extension raised it.
#pragma once

#include <string>

#include <pybind11/pybind11.h>

#include <et_copy/failure_report.h>
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

} // namespace et_copy::bindings
