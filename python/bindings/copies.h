#pragma once

#include <pybind11/pybind11.h>

namespace et_copy::bindings {

/// Adds the copies to `m`: h2d_copy/d2h_copy(self, out, dynamic_out) (et-
/// copy's kernels), run_registered(op, self, out, dynamic_out) (whatever
/// the registry resolves), and the layout rules and dtype table they use.
/// Every tensor is read by tensor_reader.h.
void bind_copies(pybind11::module_& m);

} // namespace et_copy::bindings
