// The one C++ exception the bindings throw, and et_copy.EtCopyError, the
// Python exception every et_copy failure raises: module.cpp defines it and
// translates Failure into it, carrying the ExecuTorch error name.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include <et_copy/failure_report.h>
#include <executorch/runtime/core/error.h>

namespace et_copy::bindings {

struct Failure : std::runtime_error {
  Failure(executorch::runtime::Error e, const std::string& message) : std::runtime_error(message), error(e) {}
  executorch::runtime::Error error;
};

/// "InvalidArgument" for Error::InvalidArgument (the core's, et_copy/failure_report.h).
using et_copy::error_name;

/// Sets the Python error for `f`: et_copy.EtCopyError with its message and
/// error name (what pybind's translator does; for raw C-API functions).
/// Needs the GIL.
void set_python_error(const Failure& f);

/// Raises et_copy.EtCopyError with every field: `message`, `error` (an
/// ExecuTorch Error name, error_name()), and for a failed program the
/// failing `instruction` ("chain:instruction") and operator `op` when
/// ExecuTorch named them and the `log` lines it wrote. Sets the Python error
/// and throws pybind11::error_already_set. Needs the GIL.
[[noreturn]] void raise_error(const std::string& message, const char* error,
                              const std::optional<std::string>& instruction = std::nullopt,
                              const std::optional<std::string>& op = std::nullopt,
                              const std::vector<std::string>& log = {});

/// Runs `f` (which returns a new reference, or null with a Python error
/// set) for a raw C-API entry point: a C++ exception becomes the Python
/// error it stands for (Failure: EtCopyError; pybind11's own; anything else
/// a RuntimeError), and null is returned.
template <typename F>
PyObject* guarded(F&& f) {
  try {
    return f();
  } catch (const Failure& e) {
    set_python_error(e);
  } catch (pybind11::builtin_exception& e) {
    e.set_error();
  } catch (pybind11::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

} // namespace et_copy::bindings
