// The checks a Python value must pass to be an input or output of a loaded
// method (et_copy::LoadedMethod's slots): the one place et_copy.runtime's
// execute rules for Python values live. Each check raises the error that says why (TypeError, ValueError,
// or EtCopyError for what the program cannot do) before anything runs.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <et_copy/loaded_method.h>
#include <executorch/runtime/core/evalue.h>

#include "tensor_spec.h"

namespace et_copy::bindings {

using IoSlot = et_copy::IoSlot;

/// A loaded method's inputs and outputs (the core's, read once at load),
/// and the name errors start with.
struct PyMethodIo : et_copy::MethodIo {
  std::string where; ///< "et_copy.runtime: method 'NAME'", what errors start with
};

/// The slots of `m`. Throws Failure(NotSupported) for an output
/// et_copy.runtime cannot hand back: a dtype torch lacks, or a device
/// output in memory the method owns.
PyMethodIo read_method_io(const et_copy::LoadedMethod& m);

/// Input `i`: a tensor for a tensor slot (read into `spec`, returns true),
/// else a Python scalar (written to `value`, returns false). Throws for a
/// value the slot cannot take: a tensor of another dtype or device, or one
/// whose bytes are not dense in the slot's dim order (`spec` then takes that
/// dim order and its dense strides).
bool read_input(const PyMethodIo& io, size_t i, PyObject* o, TensorSpec& spec, executorch::runtime::EValue& value);

/// Output `i`'s tensor (read into `spec`; false for a non-tensor output,
/// which must be given None). Throws unless the tensor holds the output as
/// the program lays it out: its dtype, device, dim order, dense, with the
/// output's upper-bound shape as its capacity.
bool read_output(const PyMethodIo& io, size_t i, PyObject* o, TensorSpec& spec);

} // namespace et_copy::bindings
