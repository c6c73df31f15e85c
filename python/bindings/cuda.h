// Bindings of et-copy's CUDA allocator (built only with the CUDA toolkit).
#pragma once

#include <pybind11/pybind11.h>

namespace et_copy::bindings {

/// Adds use_cuda, cuda_status, cuda_device_properties, the copy tuning, host
/// memory registration, the raw cudaMemcpy baseline and DLPack export to `m`.
void bind_cuda(pybind11::module_& m);

} // namespace et_copy::bindings
