#include "tensor_reader.h"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <string>

#include "device_tensor.h"
#include "failure.h"
#include "torch_tensor.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;

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
  // A DeviceTensor first: asking torch about a non-tensor costs more.
  if (is_device_tensor(o)) {
    return read_device_tensor(o, s) ? ReadProblem::kNone : ReadProblem::kFreed;
  }
  switch (read_torch_tensor(o, s)) {
    case TorchRead::kOk:
      break;
    case TorchRead::kNotATensor:
      return ReadProblem::kNotATensor;
    case TorchRead::kDevice:
      return ReadProblem::kDevice;
    case TorchRead::kLayout:
      return ReadProblem::kLayout;
    case TorchRead::kDtype:
      return ReadProblem::kDtype;
    case TorchRead::kTooManyDims:
      return ReadProblem::kTooManyDims;
    case TorchRead::kNoStorage:
      return ReadProblem::kNoStorage;
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
    case ReadProblem::kLayout:
      if (str_attr(o, "is_nested") == "True") {
        throw py::value_error(who + " is a nested tensor; et_copy moves strided tensors (to_padded_tensor() first)");
      }
      throw py::value_error(who + " has layout " + str_attr(o, "layout") +
                            "; et_copy moves strided tensors (to_dense() first)");
    case ReadProblem::kDtype: {
      py::object dtype = py::reinterpret_steal<py::object>(PyObject_GetAttrString(o, "dtype"));
      if (!dtype) {
        throw py::error_already_set();
      }
      throw py::type_error(unsupported_dtype_message(op, arg, dtype.ptr()));
    }
    case ReadProblem::kTooManyDims:
      throw Failure(Error::InvalidArgument, who + " has " + std::to_string(s.rank) +
                                                " dims; ExecuTorch supports at most " + std::to_string(kMaxTensorDims));
    case ReadProblem::kNoStorage:
      throw py::value_error(who +
                            " has elements but no storage (such as a batched tensor inside torch.func.vmap); "
                            "et_copy moves tensors whose memory torch holds");
  }
}

void check_takes_shape(PyObject* out, const TensorSpec& s) {
  if (!is_device_tensor(out) && !restride_torch_tensor(out, s)) {
    throw py::error_already_set();
  }
}

void take_shape(PyObject* out, const TensorSpec& s) {
  if (is_device_tensor(out)) {
    set_device_tensor_shape(out, s);
    return;
  }
  if (!restride_torch_tensor(out, s)) {
    throw py::error_already_set();
  }
}

} // namespace et_copy::bindings
