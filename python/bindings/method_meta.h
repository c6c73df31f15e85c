// Method metadata as Python dicts (_C.pyi's MethodMeta): read from the
// program alone, or from a loaded method's slots.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "program_objects.h"

namespace et_copy::bindings {

/// A method's metadata read from the program alone (nothing loaded), each
/// tensor on the device the program places it on; InvalidArgument naming the
/// methods it has when it has no `name`.
pybind11::dict program_method_meta(PyProgram& lp, const std::string& name);

/// A loaded method's metadata: its inputs and outputs on the devices its
/// slots hold them on, its attributes where the program places them.
pybind11::dict method_meta(const PyMethod& lm);

} // namespace et_copy::bindings
