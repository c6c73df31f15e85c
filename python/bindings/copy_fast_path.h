#pragma once

#include <pybind11/pybind11.h>

#include "tensor_view.h"

namespace et_copy::bindings {

/// Adds the fast path of et_copy.h2d_copy/d2h_copy to `m`:
/// run_kernel_objects (reads torch tensors and DeviceTensors directly),
/// run_kernel_packed (packed tuple specs) and set_fast_path_types. Same
/// checks, errors and results as run_kernel with dict specs; measured by
/// `python -m et_copy bench` (the dict specs cost ~10x a torch copy_).
void bind_copy_fast_path(pybind11::module_& m);

/// Reads a packed tensor spec, as built by et_copy._ops._packed. Throws
/// Failure(InvalidArgument) for a malformed one.
TensorSpec packed_spec(const pybind11::tuple& t);

/// Reads a torch.Tensor or et_copy.DeviceTensor into `s` without Python's
/// help (as _ops._packed would describe it). Returns false, with `s`
/// meaningless, for anything unusual (another type, a freed or sliced
/// DeviceTensor, a dtype or device et_copy does not move): the caller then
/// leaves the object to Python, which raises the right error.
bool read_object(PyObject* o, bool dynamic_out, TensorSpec& s);

} // namespace et_copy::bindings
