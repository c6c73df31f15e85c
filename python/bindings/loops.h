#pragma once

#include <pybind11/pybind11.h>

namespace et_copy::bindings {

/// Fills `m` (et_copy._C.loops) with the benchmark's C++ timing loops
/// (bench_kernel, bench_memcpy), kernel_address, and the device probes of
/// tests and benchmarks (device_to_device; cuda_raw_memcpy and
/// cuda_pointer_device in a CUDA build). Not part of et_copy's API.
void bind_loops(pybind11::module_& m);

} // namespace et_copy::bindings
