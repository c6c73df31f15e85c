// et_copy.h2d_copy/d2h_copy and run_registered on torch tensors and
// DeviceTensors. The copies are raw METH_FASTCALL functions: pybind11's
// dispatcher costs more than the rest of a 4 KiB copy's bookkeeping.
#include "copies.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <vector>

#include <et_copy/copy_ops.h>

#include "failure.h"
#include "kernels.h"
#include "tensor_reader.h"
#include "tensor_view.h"
#include "torch_tensor.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;

// Copies this small run faster than the GIL can be released and taken back.
constexpr size_t kReleaseGilFromBytes = 64 * 1024;

// Runs `kernel` on `self` and `out` and gives out the shape the kernel left
// it in. Returns out.
template <typename Kernel>
py::object run(const char* op, PyObject* self, PyObject* out, bool dynamic_out, Kernel kernel) {
  TensorSpec specs[2];
  describe_tensor(self, false, op, "self", specs[0]);
  describe_tensor(out, dynamic_out, op, "out", specs[1]);
  if (dynamic_out) {
    check_takes_shape(out, specs[1]); // a refusal after the kernel would leave out written
  }
  TensorView self_view(specs[0]);
  TensorView out_view(specs[1]);
  const auto sizes = out_view.tensor().sizes(); // a view: follows a resize
  executorch::aten::SizesType before[kMaxTensorDims];
  std::copy(sizes.begin(), sizes.end(), before);
  if (self_view.tensor().nbytes() >= kReleaseGilFromBytes) {
    py::gil_scoped_release release;
    kernel(self_view, out_view);
  } else {
    kernel(self_view, out_view);
  }
  if (!std::equal(sizes.begin(), sizes.end(), before)) {
    out_view.current_shape(specs[1]);
    take_shape(out, specs[1]);
  }
  return py::reinterpret_borrow<py::object>(out);
}

template <bool kH2d>
PyObject* copy_fastcall(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  constexpr const char* op = kH2d ? kH2dCopyOutName : kD2hCopyOutName;
  if (nargs != 3) {
    PyErr_Format(PyExc_TypeError, "%s_copy(self, out, dynamic_out) takes 3 arguments", kH2d ? "h2d" : "d2h");
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    const int dynamic_out = PyObject_IsTrue(args[2]);
    if (dynamic_out < 0) {
      return nullptr;
    }
    return run(op, args[0], args[1], dynamic_out == 1, [](TensorView& s, TensorView& o) { run_kernel(kH2d, s, o); })
        .release()
        .ptr();
  });
}

void check_rank(size_t rank) {
  if (rank > kMaxTensorDims) {
    throw Failure(Error::InvalidArgument, "tensor has " + std::to_string(rank) + " dims; ExecuTorch supports at most " +
                                              std::to_string(kMaxTensorDims));
  }
}

PyMethodDef copy_defs[] = {
    {"h2d_copy", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(copy_fastcall<true>)), METH_FASTCALL,
     "h2d_copy(self, out, dynamic_out): et_copy's kernel; returns out."},
    {"d2h_copy", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(copy_fastcall<false>)), METH_FASTCALL,
     "d2h_copy(self, out, dynamic_out): et_copy's kernel; returns out."},
};

} // namespace

void bind_copies(py::module_& m) {
  for (PyMethodDef& def : copy_defs) {
    PyObject* fn = PyCFunction_NewEx(&def, nullptr, m.attr("__name__").ptr());
    if (fn == nullptr) {
      throw py::error_already_set(); // MemoryError at import
    }
    m.add_object(def.ml_name, py::reinterpret_steal<py::object>(fn));
  }
  m.def(
      "run_registered",
      [](const std::string& op, py::handle self, py::handle out, bool dynamic_out) {
        return run(op.c_str(), self.ptr(), out.ptr(), dynamic_out,
                   [&](TensorView& s, TensorView& o) { run_registered(op, s, o); });
      },
      py::arg("op"), py::arg("self"), py::arg("out"), py::arg("dynamic_out"),
      "Runs the registry's kernel for op on torch tensors / DeviceTensors; returns out.");
  m.def(
      "dense_strides",
      [](const std::vector<int64_t>& sizes, const std::vector<int64_t>& dim_order) {
        TensorSpec s;
        check_rank(sizes.size());
        if (dim_order.size() != sizes.size()) {
          throw py::value_error("dense_strides: sizes and dim_order must have the same length");
        }
        s.rank = sizes.size();
        std::copy(sizes.begin(), sizes.end(), s.sizes);
        std::copy(dim_order.begin(), dim_order.end(), s.dim_order);
        if (!dense_strides(s)) {
          throw py::value_error("dense_strides: dim_order is not a permutation of the dims");
        }
        return std::vector<int64_t>(s.strides, s.strides + s.rank);
      },
      py::arg("sizes"), py::arg("dim_order"), "Element strides of a dense tensor laid out in dim_order.");
  m.def(
      "dim_order_of",
      [](const std::vector<int64_t>& strides) {
        TensorSpec s;
        check_rank(strides.size());
        s.rank = strides.size();
        std::copy(strides.begin(), strides.end(), s.strides);
        dim_order_from_strides(s);
        return std::vector<int64_t>(s.dim_order, s.dim_order + s.rank);
      },
      py::arg("strides"), "The dim order of a layout with these strides (outermost first, ties in natural order).");
  m.def(
      "dtype_codes",
      [] {
        py::dict d;
        for (const int* c = movable_codes(); *c >= 0; ++c) {
          d[py::handle(torch_dtype_for_code(*c))] = *c;
        }
        return d;
      },
      "{torch.dtype: ExecuTorch ScalarType code} for every dtype et_copy moves, by code.");
  m.def(
      "unsupported_dtype_message",
      [](py::handle dtype, const std::string& op, const std::string& arg) {
        return unsupported_dtype_message(op.c_str(), arg.c_str(), dtype.ptr());
      },
      py::arg("dtype"), py::arg("op"), py::arg("arg"),
      "The TypeError text for a dtype et_copy does not move, naming op and arg, with the supported list.");
}

} // namespace et_copy::bindings
