// et_copy._C: the bindings. They translate Python values into the C++
// core's types and its failures into et_copy.EtCopyError, and do no more.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include <et_copy/copy_ops.h>

#include "allocators.h"
#include "bench.h"
#include "copy_fast_path.h"
#ifdef ET_COPY_WITH_CUDA
#include "cuda.h"
#endif
#include "failure.h"
#include "kernels.h"
#include "program.h"
#include "tensor_view.h"

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

namespace {

TensorSpec to_spec(const py::dict& d) {
  TensorSpec s;
  s.data = d["data"].cast<uintptr_t>();
  s.dtype = d["dtype"].cast<int>();
  s.sizes = d["sizes"].cast<std::vector<int64_t>>();
  s.dim_order = d["dim_order"].cast<std::vector<int64_t>>();
  s.strides = d["strides"].cast<std::vector<int64_t>>();
  s.dynamism = d["dynamism"].cast<int>();
  s.device_type = d["device_type"].cast<int>();
  s.device_index = d["device_index"].cast<int>();
  if (d.contains("capacity") && !d["capacity"].is_none()) {
    s.capacity = d["capacity"].cast<std::vector<int64_t>>();
  }
  return s;
}

// Runs `fn` on views of two tensor specs and returns out's new (sizes,
// strides). The GIL is released around the copy: it may be long.
template <typename Fn>
py::tuple call(Fn fn, const std::string& op, const py::dict& self, const py::dict& out) {
  TensorView self_view(to_spec(self));
  TensorView out_view(to_spec(out));
  {
    py::gil_scoped_release release;
    fn(op, self_view, out_view);
  }
  return py::make_tuple(out_view.sizes(), out_view.strides());
}

} // namespace

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
  m.def(
      "run_kernel",
      [](const std::string& op, const py::dict& self, const py::dict& out) { return call(run_kernel, op, self, out); },
      py::arg("op"), py::arg("self"), py::arg("out"), "Runs et_copy's kernel; returns out's (sizes, strides).");
  m.def(
      "run_registered",
      [](const std::string& op, const py::dict& self, const py::dict& out) {
        return call(run_registered, op, self, out);
      },
      py::arg("op"), py::arg("self"), py::arg("out"),
      "Runs the registry's kernel for op; returns out's (sizes, strides).");
  bind_allocators(m);
  bind_bench(m);
  bind_copy_fast_path(m);
  bind_program(m);
#ifdef ET_COPY_WITH_CUDA
  bind_cuda(m);
#endif
}
