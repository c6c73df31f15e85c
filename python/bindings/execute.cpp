// Running a loaded method from Python (execute.h).
#include "execute.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "failure.h"
#include "method_io.h"
#include "tensor_reader.h"
#include "tensor_view.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;
using executorch::runtime::EValue;
namespace et = executorch::runtime::etensor;

// A non-tensor method output as a Python value.
py::object output_value(const EValue& v) {
  if (v.isInt()) {
    return py::int_(v.toInt());
  }
  if (v.isDouble()) {
    return py::float_(v.toDouble());
  }
  if (v.isBool()) {
    return py::bool_(v.toBool());
  }
  if (v.isNone()) {
    return py::none();
  }
  throw Failure(Error::NotSupported, "et_copy.runtime: an output of an unsupported type (tag " +
                                         std::to_string(static_cast<int>(v.tag)) + ")");
}

} // namespace

py::list execute(PyMethod& lm, const py::handle& inputs, const py::handle& outputs) {
  const PyMethodIo& io = lm.io;
  if (!PyList_Check(inputs.ptr()) && !PyTuple_Check(inputs.ptr())) {
    throw py::type_error(io.where + ": inputs must be a list or tuple, got " + Py_TYPE(inputs.ptr())->tp_name);
  }
  if (!PyList_Check(outputs.ptr()) && !PyTuple_Check(outputs.ptr())) {
    throw py::type_error(io.where + ": outputs= must be a list or tuple, got " + Py_TYPE(outputs.ptr())->tp_name);
  }
  const auto in = py::reinterpret_borrow<py::sequence>(inputs);
  const auto out = py::reinterpret_borrow<py::sequence>(outputs);
  if (in.size() != io.inputs.size()) {
    throw py::value_error(io.where + ": takes " + std::to_string(io.inputs.size()) + " inputs, got " +
                          std::to_string(in.size()));
  }
  if (out.size() != io.outputs.size()) {
    throw py::value_error(io.where + ": has " + std::to_string(io.outputs.size()) + " outputs, got " +
                          std::to_string(out.size()) + " in outputs=");
  }
  std::vector<std::unique_ptr<TensorView>> views;
  views.reserve(io.inputs.size());
  std::vector<EValue> values(io.inputs.size());
  TensorSpec spec;
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    if (read_input(io, i, in[i].ptr(), spec, values[i])) {
      views.push_back(std::make_unique<TensorView>(spec));
      values[i] = EValue(views.back()->tensor());
    }
  }
  // Per tensor output, the tensor as read (its layout takes the output's
  // final shape); read_output checked it holds the output's nbytes.
  std::vector<std::optional<TensorSpec>> targets(io.outputs.size());
  for (size_t i = 0; i < io.outputs.size(); ++i) {
    if (read_output(io, i, out[i].ptr(), spec)) {
      targets[i] = spec;
    }
  }
  std::vector<et_copy::MethodOutput> bound(io.outputs.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i]) { // read_output checked it holds the output's nbytes, on its device
      if (io.outputs[i].dynamic) {
        check_takes_shape(out[i].ptr(),
                          *targets[i]); // torch refusing the run's shape afterwards would leave out written
      }
      bound[i].data = reinterpret_cast<void*>(targets[i]->data);
      bound[i].nbytes = io.outputs[i].nbytes;
      bound[i].device = et::Device(static_cast<et::DeviceType>(targets[i]->device_type),
                                   static_cast<et::DeviceIndex>(targets[i]->device_index));
    }
  }
  et_copy::FailureReport report;
  Error err = Error::Ok;
  {
    py::gil_scoped_release release;
    err = lm.core->execute({values.data(), values.size()}, {bound.data(), bound.size()}, &report);
  }
  if (err != Error::Ok) {
    // The debug buffer's shortfall (not another failure): say which load argument answers it.
    const bool out_of_debug_buffer = report.debug_buffer_full;
    raise_report(io.where, std::move(report),
                 out_of_debug_buffer ? "; load the program with enable_etdump=True and a larger debug_buffer_size "
                                       "(it fills across executions until write_etdump_result_to_file empties it)"
                                     : "");
  }
  py::list result;
  for (size_t i = 0; i < io.outputs.size(); ++i) {
    if (targets[i]) {
      // A dynamic shape: the given tensor keeps its memory and takes the size it ran with.
      TensorSpec& s = *targets[i];
      const auto& got = bound[i];
      if (!std::equal(got.sizes, got.sizes + got.rank, s.sizes)) { // same rank: its dim order matched above
        std::copy(got.sizes, got.sizes + got.rank, s.sizes);
        dense_strides(s); // in the dim order checked against the output's above
        take_shape(out[i].ptr(), s);
      }
      result.append(py::none());
    } else {
      result.append(output_value(bound[i].value));
    }
  }
  return result;
}

} // namespace et_copy::bindings
