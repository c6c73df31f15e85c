// et_copy._C: the bindings. They translate Python values into the C++
// core's types and its failures into et_copy.EtCopyError, and do no more.
#include <pybind11/pybind11.h>

#include <cstring>

#include <et_copy/copy_ops.h>

#include "allocators.h"
#include "copies.h"
#ifdef ET_COPY_WITH_CUDA
#include "cuda.h"
#endif
#include "failure.h"
#include "program.h"

namespace py = pybind11;

namespace et_copy::bindings {

const char* error_name(executorch::runtime::Error e) {
  const char* full = executorch::runtime::to_string(e);
  constexpr char kPrefix[] = "Error::";
  return std::strncmp(full, kPrefix, sizeof(kPrefix) - 1) == 0 ? full + sizeof(kPrefix) - 1 : full;
}

void set_python_error(const Failure& f) {
  py::object cls = py::module_::import("et_copy._errors").attr("EtCopyError");
  py::object exc = cls(f.what(), py::arg("error") = error_name(f.error));
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

} // namespace et_copy::bindings

PYBIND11_MODULE(_C, m) {
  using namespace et_copy::bindings;
  m.doc() = "et_copy's C++ core. Use the et_copy package, not this module.";

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) {
        std::rethrow_exception(p);
      }
    } catch (const Failure& f) {
      set_python_error(f);
    }
  });

  m.attr("H2D_COPY_OUT") = et_copy::kH2dCopyOutName;
  m.attr("D2H_COPY_OUT") = et_copy::kD2hCopyOutName;
  bind_allocators(m);
  bind_copies(m);
  bind_program(m);
#ifdef ET_COPY_WITH_CUDA
  bind_cuda(m);
#endif
}
