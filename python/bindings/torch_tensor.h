// Reading torch tensors and dtypes straight from their C++ objects. Its
// source is the one file that includes torch's headers, compiled apart
// from ExecuTorch's (whose vendored c10 headers clash with torch's); this
// interface carries neither.
#pragma once

#include <Python.h>

#include <string>

#include "tensor_spec.h"

namespace et_copy::bindings {

enum class TorchRead {
  kOk,
  kNotATensor,  ///< not a torch.Tensor
  kDevice,      ///< on a device et-copy does not move (meta, mps, ...)
  kLayout,      ///< not strided (sparse, mkldnn) or nested: no dense bytes to copy
  kDtype,       ///< a dtype ExecuTorch cannot describe byte for byte
  kTooManyDims, ///< more dims than ExecuTorch's tensors hold
  kNoStorage,   ///< elements but no storage (a batched tensor inside vmap)
};

/// Reads `o` into `s` (data, dtype, sizes, strides, dim order, device;
/// dynamism and capacity are the caller's). On kTooManyDims, s.rank is the
/// tensor's rank.
TorchRead read_torch_tensor(PyObject* o, TensorSpec& s);

/// ExecuTorch's ScalarType code for a torch.dtype, or -1 for a dtype
/// et-copy does not move, or -2 when `dtype` is not a torch.dtype.
int torch_dtype_code(PyObject* dtype);

/// The torch.dtype for a ScalarType code et-copy moves (borrowed), or null.
PyObject* torch_dtype_for_code(int code);

/// The codes et-copy moves, ascending; -1 ends the list.
const int* movable_codes();

/// Bytes per element of a code et-copy moves (torch's dtype.itemsize).
size_t torch_itemsize(int code);

/// A new torch.Size of `rank` sizes, or null with a Python error set.
PyObject* torch_size(const int64_t* sizes, size_t rank);

/// The one wording of a dtype et-copy does not move: "<op>: <arg> has dtype
/// <str(dtype)>, which et_copy does not move (supported: uint8, int8, ...)",
/// the supported list from movable_codes(). et_copy._dtypes raises the same
/// text, through _C.unsupported_dtype_message. Needs the GIL; raises nothing.
std::string unsupported_dtype_message(const char* op, const char* arg, PyObject* dtype);

/// Calls t.as_strided_(sizes, strides) on a torch tensor: a dynamic out
/// keeps its memory and takes the shape it was given. False, with a Python
/// error set, when torch refused.
bool restride_torch_tensor(PyObject* o, const TensorSpec& s);

} // namespace et_copy::bindings
