// et_copy._C.DeviceTensor: device memory (an et_copy._C.DeviceBuffer, or a
// slice of one) with the metadata the kernels see: dtype, shape, capacity,
// dim order, dynamism and device. A CPython type the bindings own, checked
// once when it is made and read-only after (a dynamic one's shape changes
// only when a copy resizes it), so the tensor reader reads a C++ struct.
// et_copy.DeviceTensor is a thin Python subclass that adds what needs
// Python (cpu(), the DLPack and CUDA array exports).
//
// Every function here needs the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include "tensor_spec.h"

namespace et_copy::bindings {

/// Whether `o` is a DeviceTensor (of any subclass).
bool is_device_tensor(PyObject* o);

/// Reads DeviceTensor `o` (is_device_tensor) into `s`: the memory's address,
/// dtype code, sizes, dense strides, dim order, capacity, dynamism and
/// device. False when its memory was freed (s.data is then 0). Raises
/// nothing.
bool read_device_tensor(PyObject* o, TensorSpec& s);

/// Gives DeviceTensor `o` the sizes and strides in `s`, the shape a kernel
/// resized it to within its capacity (same rank).
void set_device_tensor_shape(PyObject* o, const TensorSpec& s);

/// Adds the DeviceTensor type to `m`.
void bind_device_tensor(pybind11::module_& m);

} // namespace et_copy::bindings
