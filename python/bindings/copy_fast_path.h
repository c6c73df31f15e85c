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

} // namespace et_copy::bindings
