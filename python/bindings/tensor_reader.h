// The one way a tensor crosses from Python into the bindings: a torch.Tensor
// (read through at::Tensor) or an et_copy.DeviceTensor (the bindings' own
// type, device_tensor.h), described as a TensorSpec. Used by the copies, the registry
// runner and et_copy.runtime alike.
#pragma once

#include <Python.h>

#include <string>

#include "tensor_spec.h"

namespace et_copy::bindings {

enum class ReadProblem {
  kNone,
  kNotATensor,  ///< neither a torch.Tensor nor a DeviceTensor
  kFreed,       ///< a DeviceTensor whose memory was freed
  kDevice,      ///< a torch tensor on a device et-copy does not move
  kLayout,      ///< a torch tensor that is not strided (sparse, mkldnn) or is nested
  kDtype,       ///< a dtype et-copy does not move
  kTooManyDims, ///< more than kMaxTensorDims (ExecuTorch's limit)
  kNoStorage,   ///< a torch tensor with elements but no storage (inside torch.func.vmap)
};

/// Reads `o` into `s`. `dynamic`: a torch tensor's shape is a capacity the
/// copy may shrink (a DeviceTensor says so itself). Raises nothing: on a
/// problem `s` is meaningless and any Python error is cleared.
ReadProblem read_tensor(PyObject* o, bool dynamic, TensorSpec& s);

/// As read_tensor, but throws for a problem: pybind11's TypeError or
/// ValueError, or Failure, each naming `op` and `arg`.
void describe_tensor(PyObject* o, bool dynamic, const char* op, const char* arg, TensorSpec& s);

/// Gives `out` (a torch tensor or DeviceTensor just read) the shape in `s`
/// after a kernel resized it. Throws pybind11::error_already_set when torch
/// refused.
void take_shape(PyObject* out, const TensorSpec& s);

/// Throws pybind11::error_already_set if torch refuses to give `out` (as
/// read into `s`) a shape at all, such as a leaf that requires grad: asked
/// with the shape it has, before a kernel writes a byte of it.
void check_takes_shape(PyObject* out, const TensorSpec& s);

} // namespace et_copy::bindings
