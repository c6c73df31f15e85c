#include "method_io.h"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include "failure.h"
#include "tensor_reader.h"
#include "torch_tensor.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;
using executorch::runtime::EValue;

int dtype_code(const IoSlot& s) {
  return static_cast<int>(s.dtype);
}
int device_type(const IoSlot& s) {
  return static_cast<int>(s.device.type());
}
int device_index(const IoSlot& s) {
  return static_cast<int>(s.device.index());
}

std::string dtype_str(int code) {
  PyObject* dtype = torch_dtype_for_code(code);
  return dtype != nullptr ? py::str(dtype).cast<std::string>() : "ScalarType " + std::to_string(code);
}

std::string type_name(PyObject* o) {
  return Py_TYPE(o)->tp_name;
}

template <typename T>
std::string list_str(const T* values, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) {
    s += (i ? ", " : "") + std::to_string(values[i]);
  }
  return s + "]";
}

std::string input_arg(const PyMethodIo& io, size_t i) {
  const std::string& name = io.inputs[i].name;
  return "input " + std::to_string(i) + (name.empty() ? "" : " (" + name + ")");
}

} // namespace

PyMethodIo read_method_io(const et_copy::LoadedMethod& m) {
  PyMethodIo io;
  static_cast<et_copy::MethodIo&>(io) = m.io();
  io.where = "et_copy.runtime: method '" + m.name() + "'";
  for (size_t i = 0; i < io.outputs.size(); ++i) {
    const IoSlot& s = io.outputs[i];
    if (!s.tensor) {
      continue;
    }
    const std::string arg = io.where + ": output " + std::to_string(i);
    if (torch_dtype_for_code(dtype_code(s)) == nullptr) {
      throw Failure(Error::NotSupported,
                    arg + " has a dtype torch cannot represent (" + dtype_str(dtype_code(s)) + ")");
    }
    if (device_type(s) != 0 && s.planned) {
      // Its memory is the method's, overwritten by the next call, and only a
      // device copy could hand it out.
      throw Failure(Error::NotSupported, arg + " is memory-planned on " + device_name(device_type(s), device_index(s)) +
                                             "; et_copy.runtime returns device outputs in memory the caller owns: "
                                             "export with alloc_graph_output=False");
    }
  }
  return io;
}

bool read_input(const PyMethodIo& io, size_t i, PyObject* o, TensorSpec& spec, EValue& value) {
  const IoSlot& slot = io.inputs[i];
  const ReadProblem p = read_tensor(o, false, spec);
  if (!slot.tensor) {
    if (p != ReadProblem::kNotATensor) {
      throw py::type_error(io.where + ": input " + std::to_string(i) + " is not a tensor input, got a tensor");
    }
    if (PyBool_Check(o)) {
      value = EValue(o == Py_True);
    } else if (PyLong_Check(o)) {
      value = EValue(py::handle(o).cast<int64_t>());
    } else if (PyFloat_Check(o)) {
      value = EValue(PyFloat_AS_DOUBLE(o));
    } else if (o == Py_None) {
      value = EValue();
    } else {
      throw py::type_error(io.where + ": input " + std::to_string(i) + " must be an int, float, bool or None, got " +
                           type_name(o));
    }
    return false;
  }
  if (p != ReadProblem::kNone) {
    describe_tensor(o, false, io.where.c_str(), input_arg(io, i).c_str(), spec); // throws, in the reader's words
  }
  if (spec.dtype != dtype_code(slot)) {
    throw py::type_error(io.where + ": " + input_arg(io, i) + " must have dtype " + dtype_str(dtype_code(slot)) +
                         ", got " + dtype_str(spec.dtype));
  }
  if (spec.device_type != device_type(slot) || spec.device_index != device_index(slot)) {
    const std::string planned = device_name(device_type(slot), device_index(slot));
    const std::string hint =
        device_type(slot) == 0 ? "pass a CPU torch tensor"
                               : "pass an et_copy.DeviceTensor on " + planned +
                                     " (et_copy.h2d_copy(x)); a host tensor would be copied into device memory with a "
                                     "host memcpy";
    throw py::value_error(io.where + ": " + input_arg(io, i) + " is planned on " + planned + ", got a tensor on " +
                          device_name(spec.device_type, spec.device_index) + ": " + hint);
  }
  // ExecuTorch copies or binds an input's bytes as they lie, in the dim
  // order the method planned: a transposed view would be read in the wrong
  // order, an expanded one past its memory's end. Only dims of more than one
  // element place bytes, so only their strides must be the planned ones. (A
  // rank the method does not take is ExecuTorch's to refuse.)
  if (spec.rank == slot.dim_order.size()) {
    TensorSpec planned = spec;
    std::copy(slot.dim_order.begin(), slot.dim_order.end(), planned.dim_order);
    bool laid_out = dense_strides(planned);
    for (size_t d = 0; laid_out && d < spec.rank; ++d) {
      laid_out = spec.sizes[d] == 1 || spec.strides[d] == planned.strides[d];
    }
    if (!laid_out) {
      throw py::value_error(io.where + ": " + input_arg(io, i) + " must be dense in dim order " +
                            list_str(slot.dim_order.data(), slot.dim_order.size()) + ", got sizes " +
                            list_str(spec.sizes, spec.rank) + " with strides " + list_str(spec.strides, spec.rank));
    }
    std::copy(planned.dim_order, planned.dim_order + spec.rank, spec.dim_order);
    std::copy(planned.strides, planned.strides + spec.rank, spec.strides);
  }
  if (slot.planned && device_type(slot) != 0) {
    throw Failure(Error::NotSupported, io.where + ": " + input_arg(io, i) + " is memory-planned on " +
                                           device_name(device_type(slot), device_index(slot)) +
                                           ", which ExecuTorch fills with a host memcpy; export with "
                                           "alloc_graph_input=False");
  }
  return true;
}

bool read_output(const PyMethodIo& io, size_t i, PyObject* o, TensorSpec& spec) {
  const IoSlot& slot = io.outputs[i];
  const std::string arg = "outputs[" + std::to_string(i) + "]";
  if (!slot.tensor) {
    if (o != Py_None) {
      throw py::value_error(io.where + ": output " + std::to_string(i) + " is not a tensor; pass None for it");
    }
    return false;
  }
  if (read_tensor(o, true, spec) != ReadProblem::kNone) {
    describe_tensor(o, true, io.where.c_str(), arg.c_str(), spec); // throws, in the reader's words
  }
  if (spec.dtype != dtype_code(slot) || spec.device_type != device_type(slot) ||
      spec.device_index != device_index(slot)) {
    throw py::value_error(io.where + ": " + arg + " must be " + dtype_str(dtype_code(slot)) + " on " +
                          device_name(device_type(slot), device_index(slot)) + ", got " + dtype_str(spec.dtype) +
                          " on " + device_name(spec.device_type, spec.device_index));
  }
  // Dense in its dim order, sized for the output's upper bound: what a kernel
  // writing the output as the program lays it out may fill.
  TensorSpec dense = spec;
  const bool is_dense = dense_strides(dense) && std::equal(spec.strides, spec.strides + spec.rank, dense.strides);
  const int64_t* capacity = spec.has_capacity ? spec.capacity : spec.sizes;
  if (!is_dense || spec.rank != slot.sizes.size() || !std::equal(slot.sizes.begin(), slot.sizes.end(), capacity) ||
      !std::equal(slot.dim_order.begin(), slot.dim_order.end(), spec.dim_order)) {
    throw py::value_error(io.where + ": " + arg + " must be dense with capacity " +
                          list_str(slot.sizes.data(), slot.sizes.size()) + " in dim order " +
                          list_str(slot.dim_order.data(), slot.dim_order.size()) + ", got " +
                          list_str(capacity, spec.rank) + " in " + list_str(spec.dim_order, spec.rank) +
                          (is_dense ? "" : " (not dense)"));
  }
  return true;
}

} // namespace et_copy::bindings
