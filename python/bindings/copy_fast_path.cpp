// The fast path of et_copy.h2d_copy/d2h_copy. A 4 KiB copy through the
// dict specs of run_kernel cost ~10x torch's copy_ (python -m et_copy bench):
// building dicts in Python, reading them back by key, and heap-allocated
// metadata. Here the bindings read torch tensors and DeviceTensors
// themselves, or a packed tuple when an object needs Python's help, into
// the same TensorSpec, so checks, errors and results are run_kernel's.
#include "copy_fast_path.h"

#include <algorithm>
#include <string>
#include <vector>

#include <et_copy/copy_ops.h>

#include "failure.h"
#include "kernels.h"
#include "tensor_view.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;

const std::string kH2dOpName = kH2dCopyOutName;
const std::string kD2hOpName = kD2hCopyOutName;

// The packed form of a tensor spec, built by et_copy._ops for speed:
// (data, dtype, sizes, strides, dim_order, dynamism, device_type,
//  device_index, capacity), read with the C API (no dict, no per-key
// string). strides None: dense in dim_order, computed as
// _tensors.contiguous_strides does; dim_order None: derived from strides as
// _tensors.dim_order_of does (by stride, outermost first, ties in natural
// order); capacity None: same as sizes.
int64_t packed_int(PyObject* o) {
  const long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) {
    throw py::error_already_set();
  }
  return v;
}

// Reads a tuple or list of ints into `out`, reusing its capacity.
void packed_ints_into(PyObject* seq, std::vector<int64_t>& out) {
  if (!PyTuple_Check(seq) && !PyList_Check(seq)) {
    throw Failure(Error::InvalidArgument, "packed tensor spec: expected a tuple or list of ints");
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  out.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[i] = packed_int(items[i]);
  }
}

std::vector<int64_t> packed_ints(PyObject* seq) {
  std::vector<int64_t> out;
  packed_ints_into(seq, out);
  return out;
}

void capacity_into(PyObject* seq, TensorSpec& s) {
  if (!s.capacity) {
    s.capacity.emplace();
  }
  packed_ints_into(seq, *s.capacity);
}

// As _tensors.dim_order_of: dims by stride, outermost first, ties in
// natural order.
void dim_order_from_strides(TensorSpec& s) {
  s.dim_order.resize(s.strides.size());
  for (size_t i = 0; i < s.dim_order.size(); ++i) {
    s.dim_order[i] = static_cast<int64_t>(i);
  }
  std::stable_sort(s.dim_order.begin(), s.dim_order.end(),
                   [&](int64_t a, int64_t b) { return s.strides[a] > s.strides[b]; });
}

// As _tensors.contiguous_strides: dense in dim order. Keep the two in step.
void strides_from_dim_order(TensorSpec& s) {
  const size_t rank = s.sizes.size();
  if (s.dim_order.size() != rank) {
    throw Failure(Error::InvalidArgument, "sizes, dim_order, strides and capacity must have one entry per dim");
  }
  s.strides.assign(rank, 0);
  int64_t step = 1;
  for (size_t i = rank; i-- > 0;) {
    const int64_t d = s.dim_order[i];
    if (d < 0 || static_cast<size_t>(d) >= rank) {
      throw Failure(Error::InvalidArgument, "dim_order is not a permutation of the tensor's dims");
    }
    s.strides[d] = step;
    step *= std::max<int64_t>(s.sizes[d], 1); // size-0 dims count as 1, as there
  }
}

} // namespace

TensorSpec packed_spec(const py::tuple& t) {
  if (t.size() != 9) {
    throw Failure(Error::InvalidArgument, "packed tensor spec: expected 9 fields");
  }
  PyObject* const* f = &PyTuple_GET_ITEM(t.ptr(), 0);
  TensorSpec s;
  s.data = static_cast<uintptr_t>(packed_int(f[0]));
  s.dtype = static_cast<int>(packed_int(f[1]));
  s.sizes = packed_ints(f[2]);
  if (f[3] != Py_None) {
    s.strides = packed_ints(f[3]);
  }
  if (f[4] != Py_None) {
    s.dim_order = packed_ints(f[4]);
  } else {
    dim_order_from_strides(s);
  }
  if (f[3] == Py_None) {
    strides_from_dim_order(s);
  }
  s.dynamism = static_cast<int>(packed_int(f[5]));
  s.device_type = static_cast<int>(packed_int(f[6]));
  s.device_index = static_cast<int>(packed_int(f[7]));
  if (f[8] != Py_None) {
    s.capacity = packed_ints(f[8]);
  }
  return s;
}

namespace {

// The Python types the object reader recognises, set once by _ops at
// import. Strong references, kept for the life of the process.
struct FastPathTypes {
  PyObject* device_tensor = nullptr;
  PyObject* device_buffer = nullptr;
  PyTypeObject* torch_tensor = nullptr;
  PyObject* dtype_codes = nullptr; // dict: torch.dtype -> ScalarType code
};
FastPathTypes g_types;

// Attribute names, interned once.
struct Names {
  PyObject *buffer, *ptr, *dtype, *private_shape, *shape, *dim_order, *dynamic, *device, *capacity, *is_cpu, *is_cuda,
      *get_device, *stride, *data_ptr;
};
const Names& names() {
  static const Names n = {PyUnicode_InternFromString("_buffer"),   PyUnicode_InternFromString("ptr"),
                          PyUnicode_InternFromString("dtype"),     PyUnicode_InternFromString("_shape"),
                          PyUnicode_InternFromString("shape"),     PyUnicode_InternFromString("dim_order"),
                          PyUnicode_InternFromString("dynamic"),   PyUnicode_InternFromString("device"),
                          PyUnicode_InternFromString("_capacity"), PyUnicode_InternFromString("is_cpu"),
                          PyUnicode_InternFromString("is_cuda"),   PyUnicode_InternFromString("get_device"),
                          PyUnicode_InternFromString("stride"),    PyUnicode_InternFromString("data_ptr")};
  return n;
}

// New references, released on scope exit; null (with the error cleared)
// when the attribute or call failed: the caller then leaves it to Python.
py::object attr(PyObject* o, PyObject* name) {
  PyObject* r = PyObject_GetAttr(o, name);
  if (r == nullptr) {
    PyErr_Clear();
  }
  return py::reinterpret_steal<py::object>(r);
}

py::object call(PyObject* o, PyObject* name) {
  PyObject* r = PyObject_CallMethodNoArgs(o, name);
  if (r == nullptr) {
    PyErr_Clear();
  }
  return py::reinterpret_steal<py::object>(r);
}

bool dtype_code(PyObject* dtype, int* code) {
  PyObject* c = dtype == nullptr ? nullptr : PyDict_GetItemWithError(g_types.dtype_codes, dtype);
  if (c == nullptr) {
    PyErr_Clear();
    return false;
  }
  *code = static_cast<int>(packed_int(c));
  return true;
}

} // namespace

// Reads `o` as _ops._packed would. Returns false, having read nothing
// that matters, for anything unusual (a freed or sliced DeviceTensor, a
// dtype or device et_copy does not move, another type): Python's path
// then handles it and raises its error.
bool read_object(PyObject* o, bool dynamic_out, TensorSpec& s) {
  const Names& n = names();
  if (reinterpret_cast<PyObject*>(Py_TYPE(o)) == g_types.device_tensor) {
    py::object buffer = attr(o, n.buffer);
    if (!buffer || reinterpret_cast<PyObject*>(Py_TYPE(buffer.ptr())) != g_types.device_buffer) {
      return false;
    }
    py::object ptr = attr(buffer.ptr(), n.ptr);
    py::object dtype = attr(o, n.dtype);
    py::object shape = attr(o, n.private_shape);
    py::object order = attr(o, n.dim_order);
    py::object dynamic = attr(o, n.dynamic);
    py::object device = attr(o, n.device);
    py::object capacity = attr(o, n.capacity);
    if (!ptr || !shape || !order || !dynamic || !device || !capacity || !PyTuple_Check(device.ptr()) ||
        PyTuple_GET_SIZE(device.ptr()) != 2 || !dtype_code(dtype.ptr(), &s.dtype)) {
      return false;
    }
    s.data = static_cast<uintptr_t>(packed_int(ptr.ptr()));
    if (s.data == 0) {
      return false; // freed: DeviceBuffer.freed is "no data pointer"
    }
    packed_ints_into(shape.ptr(), s.sizes);
    packed_ints_into(order.ptr(), s.dim_order);
    strides_from_dim_order(s);
    s.dynamism = PyObject_IsTrue(dynamic.ptr()) == 1 ? 1 : 0; // DYNAMIC_BOUND : STATIC
    s.device_type = static_cast<int>(packed_int(PyTuple_GET_ITEM(device.ptr(), 0)));
    s.device_index = static_cast<int>(packed_int(PyTuple_GET_ITEM(device.ptr(), 1)));
    capacity_into(capacity.ptr(), s);
    return true;
  }
  if (g_types.torch_tensor == nullptr || !PyObject_TypeCheck(o, g_types.torch_tensor)) {
    return false;
  }
  py::object is_cpu = attr(o, n.is_cpu);
  if (!is_cpu) {
    return false;
  }
  if (is_cpu.ptr() == Py_True) {
    s.device_type = 0;
    s.device_index = 0;
  } else {
    py::object is_cuda = attr(o, n.is_cuda);
    py::object index = is_cuda && is_cuda.ptr() == Py_True ? call(o, n.get_device) : py::object();
    if (!index) {
      return false;
    }
    s.device_type = 1;
    s.device_index = static_cast<int>(packed_int(index.ptr()));
  }
  py::object dtype = attr(o, n.dtype);
  if (!dtype_code(dtype.ptr(), &s.dtype)) {
    return false;
  }
  py::object shape = attr(o, n.shape);
  py::object strides = call(o, n.stride);
  py::object data = call(o, n.data_ptr);
  if (!shape || !strides || !data) {
    return false;
  }
  s.data = static_cast<uintptr_t>(packed_int(data.ptr()));
  packed_ints_into(shape.ptr(), s.sizes);
  packed_ints_into(strides.ptr(), s.strides);
  dim_order_from_strides(s);
  s.dynamism = dynamic_out ? 1 : 0;
  if (dynamic_out) {
    capacity_into(shape.ptr(), s);
  } else {
    s.capacity.reset();
  }
  return true;
}

namespace {

// Copies this small run faster than the GIL can be released and taken back.
constexpr size_t kReleaseGilFromBytes = 64 * 1024;

// The fast path of et_copy.h2d_copy/d2h_copy: et_copy's kernel on packed
// specs. Returns None when out kept its sizes, else out's new (sizes,
// strides). Same checks and errors as run_kernel.
py::object run_specs(bool h2d, const TensorSpec& self, const TensorSpec& out) {
  TensorView self_view(self);
  TensorView out_view(out);
  const std::string& op = h2d ? kH2dOpName : kD2hOpName;
  const auto sizes = out_view.tensor().sizes(); // a view: follows a resize
  executorch::aten::SizesType before[executorch::runtime::kTensorDimensionLimit];
  std::copy(sizes.begin(), sizes.end(), before);
  if (self_view.tensor().nbytes() >= kReleaseGilFromBytes) {
    py::gil_scoped_release release;
    run_kernel(op, self_view, out_view);
  } else {
    run_kernel(op, self_view, out_view);
  }
  if (std::equal(sizes.begin(), sizes.end(), before)) {
    return py::none();
  }
  return py::make_tuple(out_view.sizes(), out_view.strides());
}

py::object run_kernel_packed(bool h2d, const py::tuple& self, const py::tuple& out) {
  return run_specs(h2d, packed_spec(self), packed_spec(out));
}

// As run_kernel_packed on the objects themselves; NotImplemented when
// either needs Python's path (see read_object).
py::object run_kernel_objects(bool h2d, PyObject* self, PyObject* out, bool dynamic_out) {
  // Specs reused per thread, so their vectors keep their capacity; a
  // nested call (an attribute read that runs Python) gets fresh ones.
  thread_local TensorSpec reused[2];
  thread_local bool in_use = false;
  TensorSpec fresh[2];
  TensorSpec* specs = in_use ? fresh : reused;
  struct Claim {
    bool* flag;
    bool was;
    ~Claim() {
      *flag = was;
    }
  } claim{&in_use, in_use};
  in_use = true;
  if (g_types.dtype_codes == nullptr || !read_object(self, false, specs[0]) ||
      !read_object(out, dynamic_out, specs[1])) {
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
  return run_specs(h2d, specs[0], specs[1]);
}

// run_kernel_objects as a raw METH_FASTCALL function: pybind's dispatcher
// costs more than the rest of a 4 KiB copy's bookkeeping.
PyObject* run_kernel_objects_fastcall(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "run_kernel_objects(h2d, self, out, dynamic_out) takes 4 arguments");
    return nullptr;
  }
  try {
    const int h2d = PyObject_IsTrue(args[0]);
    const int dynamic_out = PyObject_IsTrue(args[3]);
    if (h2d < 0 || dynamic_out < 0) {
      return nullptr;
    }
    return run_kernel_objects(h2d == 1, args[1], args[2], dynamic_out == 1).release().ptr();
  } catch (const Failure& f) {
    set_python_error(f);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyMethodDef run_kernel_objects_def = {
    "run_kernel_objects", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(run_kernel_objects_fastcall)),
    METH_FASTCALL,
    "run_kernel_objects(h2d, self, out, dynamic_out): et_copy's kernel on torch tensors / DeviceTensors; "
    "None, out's new (sizes, strides), or NotImplemented."};

} // namespace

void bind_copy_fast_path(py::module_& m) {
  m.def("run_kernel_packed", &run_kernel_packed, py::arg("h2d"), py::arg("self"), py::arg("out"),
        "et_copy's kernel on packed specs; returns None, or out's new (sizes, strides).");
  PyObject* fn = PyCFunction_NewEx(&run_kernel_objects_def, nullptr, m.attr("__name__").ptr());
  if (fn == nullptr) {
    throw py::error_already_set();
  }
  m.add_object("run_kernel_objects", py::reinterpret_steal<py::object>(fn));
  m.def(
      "set_fast_path_types",
      [](py::object device_tensor, py::object device_buffer, py::object torch_tensor, py::dict dtype_codes) {
        if (!PyType_Check(torch_tensor.ptr())) {
          throw Failure(Error::InvalidArgument, "set_fast_path_types: torch_tensor must be a type");
        }
        g_types.device_tensor = device_tensor.release().ptr();
        g_types.device_buffer = device_buffer.release().ptr();
        g_types.torch_tensor = reinterpret_cast<PyTypeObject*>(torch_tensor.release().ptr());
        g_types.dtype_codes = dtype_codes.release().ptr();
      },
      "Tells run_kernel_objects which types are DeviceTensor, DeviceBuffer and torch.Tensor, and the dtype codes.");
}

} // namespace et_copy::bindings
