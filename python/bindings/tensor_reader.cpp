#include "tensor_reader.h"

#include <pybind11/pybind11.h>
#include <structmember.h>

#include <algorithm>
#include <string>

#include "device_buffer.h"
#include "failure.h"
#include "torch_tensor.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;

// A DeviceTensor's fields, read straight from its __slots__ (an offset each,
// found once) rather than by attribute lookup: the lookups cost more than a
// 4 KiB copy.
enum Field { kBuffer, kDtype, kShape, kDimOrder, kDynamic, kDevice, kCapacity, kNumFields };
constexpr const char* kFieldNames[kNumFields] = {"_buffer", "dtype",  "_shape",   "dim_order",
                                                 "dynamic", "device", "_capacity"};

struct DeviceTensorType {
  PyTypeObject* type = nullptr;
  Py_ssize_t offsets[kNumFields] = {};
};
DeviceTensorType g_device_tensor;

PyObject* field(PyObject* o, Field f) {
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + g_device_tensor.offsets[f]);
}

// Reads a tuple of ints (at most kMaxDims) into `out`; false if it is not one.
bool ints(PyObject* seq, int64_t* out, size_t* n) {
  if (seq == nullptr || !PyTuple_Check(seq)) {
    return false;
  }
  const Py_ssize_t len = PyTuple_GET_SIZE(seq);
  if (static_cast<size_t>(len) > kMaxDims) {
    *n = static_cast<size_t>(len);
    return true; // the caller reports the rank
  }
  for (Py_ssize_t i = 0; i < len; ++i) {
    const long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    out[i] = v;
  }
  *n = static_cast<size_t>(len);
  return true;
}

// The data pointer of a DeviceTensor's buffer, which must be a DeviceBuffer
// (or a slice of one: DeviceBuffer.slice).
ReadProblem buffer_ptr(PyObject* buffer, uintptr_t* ptr) {
  static PyTypeObject* device_buffer_type =
      reinterpret_cast<PyTypeObject*>(py::detail::get_type_handle(typeid(DeviceBuffer), true).ptr());
  if (Py_TYPE(buffer) != device_buffer_type) {
    return ReadProblem::kMalformed;
  }
  const auto& b = py::handle(buffer).cast<const DeviceBuffer&>();
  *ptr = b.ptr();
  return b.freed() ? ReadProblem::kFreed : ReadProblem::kNone;
}

ReadProblem read_device_tensor(PyObject* o, TensorSpec& s) {
  PyObject* f[kNumFields];
  for (int i = 0; i < kNumFields; ++i) {
    f[i] = field(o, static_cast<Field>(i));
    if (f[i] == nullptr) {
      return ReadProblem::kMalformed; // a slot never set
    }
  }
  const ReadProblem p = buffer_ptr(f[kBuffer], &s.data);
  if (p != ReadProblem::kNone) {
    return p;
  }
  s.dtype = torch_dtype_code(f[kDtype]);
  if (s.dtype < 0) {
    return s.dtype == -1 ? ReadProblem::kDtype : ReadProblem::kMalformed;
  }
  size_t rank = 0, order_rank = 0, capacity_rank = 0;
  if (!ints(f[kShape], s.sizes, &rank) || !ints(f[kDimOrder], s.dim_order, &order_rank) ||
      !ints(f[kCapacity], s.capacity, &capacity_rank)) {
    return ReadProblem::kMalformed;
  }
  if (rank > kMaxDims) {
    s.rank = rank;
    return ReadProblem::kTooManyDims;
  }
  s.rank = rank;
  if (order_rank != rank || capacity_rank != rank) {
    return ReadProblem::kMalformed;
  }
  // A negative size is TensorView's to refuse, by name; with none, strides
  // fail only for a dim order that is no permutation or an int64 overflow.
  const bool negative = std::any_of(s.sizes, s.sizes + rank, [](int64_t v) { return v < 0; }) ||
                        std::any_of(s.capacity, s.capacity + rank, [](int64_t v) { return v < 0; });
  if (!negative && !dense_strides(s)) {
    return ReadProblem::kMalformed;
  }
  PyObject* device = f[kDevice];
  if (!PyTuple_Check(device) || PyTuple_GET_SIZE(device) != 2) {
    return ReadProblem::kMalformed;
  }
  const long type = PyLong_AsLong(PyTuple_GET_ITEM(device, 0));
  const long index = PyLong_AsLong(PyTuple_GET_ITEM(device, 1));
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return ReadProblem::kMalformed;
  }
  // ExecuTorch's DeviceType and DeviceIndex are 8-bit: refused here, by
  // argument, rather than narrowed (which could land in range).
  if (type < 0 || type > 127 || index < -128 || index > 127) {
    return ReadProblem::kMalformed;
  }
  s.device_type = static_cast<int>(type);
  s.device_index = static_cast<int>(index);
  s.dynamism = f[kDynamic] == Py_True ? 1 : 0; // DYNAMIC_BOUND : STATIC
  s.has_capacity = true;
  return ReadProblem::kNone;
}

std::string type_name(PyObject* o) {
  return Py_TYPE(o)->tp_name;
}

std::string str_attr(PyObject* o, const char* name) {
  py::object v = py::reinterpret_steal<py::object>(PyObject_GetAttrString(o, name));
  if (!v) {
    PyErr_Clear();
    return "?";
  }
  return py::str(v);
}

} // namespace

ReadProblem read_tensor(PyObject* o, bool dynamic, TensorSpec& s) {
  if (g_device_tensor.type != nullptr && Py_TYPE(o) == g_device_tensor.type) {
    return read_device_tensor(o, s);
  }
  switch (read_torch_tensor(o, s)) {
    case TorchRead::kOk:
      break;
    case TorchRead::kNotATensor:
      return g_device_tensor.type != nullptr && PyObject_TypeCheck(o, g_device_tensor.type) ? read_device_tensor(o, s)
                                                                                            : ReadProblem::kNotATensor;
    case TorchRead::kDevice:
      return ReadProblem::kDevice;
    case TorchRead::kDtype:
      return ReadProblem::kDtype;
    case TorchRead::kTooManyDims:
      return ReadProblem::kTooManyDims;
  }
  s.dynamism = dynamic ? 1 : 0;
  s.has_capacity = dynamic;
  if (dynamic) {
    std::copy(s.sizes, s.sizes + s.rank, s.capacity);
  }
  return ReadProblem::kNone;
}

void describe_tensor(PyObject* o, bool dynamic, const char* op, const char* arg, TensorSpec& s) {
  const ReadProblem p = read_tensor(o, dynamic, s);
  const std::string who = std::string(op) + ": " + arg;
  switch (p) {
    case ReadProblem::kNone:
      return;
    case ReadProblem::kNotATensor:
      throw py::type_error(who + " must be a torch.Tensor or an et_copy.DeviceTensor, got " + type_name(o));
    case ReadProblem::kFreed:
      throw py::value_error(who + " is a DeviceTensor whose memory was freed");
    case ReadProblem::kDevice:
      throw py::value_error(who + " is on " + str_attr(o, "device") + "; et_copy moves CPU and CUDA tensors");
    case ReadProblem::kDtype: {
      py::object dtype = py::reinterpret_steal<py::object>(PyObject_GetAttrString(o, "dtype"));
      if (!dtype) {
        throw py::error_already_set();
      }
      throw py::type_error(unsupported_dtype_message(op, arg, dtype.ptr()));
    }
    case ReadProblem::kTooManyDims:
      throw Failure(Error::InvalidArgument, who + " has " + std::to_string(s.rank) +
                                                " dims; ExecuTorch supports at most " + std::to_string(kMaxDims));
    case ReadProblem::kMalformed:
      throw py::type_error(who +
                           " is a DeviceTensor whose fields were changed by hand (its shape, dim order, "
                           "capacity, device or buffer are not what et_copy made)");
  }
}

void take_shape(PyObject* out, const TensorSpec& s) {
  if (g_device_tensor.type != nullptr && PyObject_TypeCheck(out, g_device_tensor.type)) {
    py::tuple shape(s.rank);
    for (size_t i = 0; i < s.rank; ++i) {
      shape[i] = py::int_(s.sizes[i]);
    }
    PyObject** slot = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(out) + g_device_tensor.offsets[kShape]);
    PyObject* old = *slot;
    *slot = shape.release().ptr();
    Py_XDECREF(old);
    return;
  }
  if (!restride_torch_tensor(out, s)) {
    throw py::error_already_set();
  }
}

void set_device_tensor_type(PyObject* device_tensor) {
  if (!PyType_Check(device_tensor)) {
    throw py::type_error("set_device_tensor_type: expected a type");
  }
  DeviceTensorType t;
  t.type = reinterpret_cast<PyTypeObject*>(device_tensor);
  for (int i = 0; i < kNumFields; ++i) {
    py::object d = py::reinterpret_steal<py::object>(PyObject_GetAttrString(device_tensor, kFieldNames[i]));
    if (!d || Py_TYPE(d.ptr()) != &PyMemberDescr_Type) {
      PyErr_Clear();
      throw py::type_error(std::string("set_device_tensor_type: ") + kFieldNames[i] + " is not a __slots__ field");
    }
    const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(d.ptr())->d_member;
    if (m->type != T_OBJECT_EX) {
      throw py::type_error(std::string("set_device_tensor_type: ") + kFieldNames[i] + " is not an object slot");
    }
    t.offsets[i] = m->offset;
  }
  Py_INCREF(device_tensor); // for the life of the process
  g_device_tensor = t;
}

} // namespace et_copy::bindings
