#pragma once

#include <pybind11/pybind11.h>

namespace et_copy::bindings {

/// Adds the allocator functions and the DeviceBuffer class to `m`.
void bind_allocators(pybind11::module_& m);

} // namespace et_copy::bindings
