// AotiDeviceBackend's registration and the delegate record's names, for Python.
#pragma once

#include <pybind11/pybind11.h>

namespace et_copy::bindings {

void bind_aoti(pybind11::module_& m);

} // namespace et_copy::bindings
