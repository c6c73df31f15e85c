#pragma once

#include <pybind11/pybind11.h>

namespace et_copy::bindings {

/// Adds the benchmark timing loops (bench_memcpy, bench_kernel) to `m`.
/// They time C++ loops with no Python inside, for `python -m et_copy bench`.
void bind_bench(pybind11::module_& m);

} // namespace et_copy::bindings
