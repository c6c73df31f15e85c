// What each input and output of a loaded method is, and the checks a Python
// value must pass to be one: the one place et_copy.runtime's execute rules
// live. Each check raises the error that says why (TypeError, ValueError,
// or EtCopyError for what the program cannot do) before anything runs.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/executor/method.h>

#include "tensor_spec.h"

namespace et_copy::bindings {

struct IoSlot {
  bool tensor = false;
  bool planned = false; ///< in the method's planned memory (else bound per call)
  int dtype = 0;        ///< ExecuTorch ScalarType code
  int device_type = 0;
  int device_index = 0;
  size_t nbytes = 0; ///< at the planned (upper-bound) shape
  std::string name;
  std::vector<int64_t> sizes; ///< the upper bound, for a dynamic shape
  std::vector<int64_t> dim_order;
};

/// A loaded method's inputs and outputs, read once at load.
struct MethodIo {
  std::string where; ///< "et_copy.runtime: method 'NAME'", what errors start with
  std::vector<IoSlot> inputs, outputs;
};

/// Reads the slots of `m` (loaded as `name`). Throws Failure(NotSupported)
/// for an output et_copy.runtime cannot hand back: a dtype torch lacks, or
/// a device output in memory the method owns.
MethodIo read_method_io(executorch::runtime::Method& m, const std::string& name);

/// "cpu" or "cuda:N".
std::string device_str(int device_type, int device_index);

/// Input `i`: a tensor for a tensor slot (read into `spec`, returns true),
/// else a Python scalar (written to `value`, returns false). Throws for a
/// value the slot cannot take.
bool read_input(const MethodIo& io, size_t i, PyObject* o, TensorSpec& spec, executorch::runtime::EValue& value);

/// Output `i`'s tensor (read into `spec`; false for a non-tensor output,
/// which must be given None). Throws unless the tensor holds the output as
/// the program lays it out: its dtype, device, dim order, dense, with the
/// output's upper-bound shape as its capacity.
bool read_output(const MethodIo& io, size_t i, PyObject* o, TensorSpec& spec);

} // namespace et_copy::bindings
