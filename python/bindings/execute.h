// Running a loaded method from Python: its inputs and outputs read and
// checked (method_io.h), the core's execute, the outputs handed back.
#pragma once

#include <pybind11/pybind11.h>

#include "program_objects.h"

namespace et_copy::bindings {

/// Runs the method. `inputs`: a list or tuple of torch tensors, DeviceTensors
/// (read by tensor_reader.h) or Python scalars, in order. `outputs`: per
/// output, None (not a tensor), or the tensor that receives it: bound as the
/// output's memory when the program does not plan it, copied into after the
/// run when it does, and given the shape the output ran with. Every value is
/// checked (method_io.h) before anything runs. Returns a list: per tensor
/// output None, per other output its value.
pybind11::list execute(PyMethod& lm, const pybind11::handle& inputs, const pybind11::handle& outputs);

} // namespace et_copy::bindings
