#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include <et_copy/counting_device_allocator.h>
#include <et_copy/registration.h>

namespace et_copy::bindings {

/// The outcome of et_copy::use_simulated_device()/use_cuda() for Python:
/// "registered" or "already et_copy"; throws Failure for kFailed (`err`,
/// "<op>: <failure>") and for kAlreadyOther (RegistrationAlreadyRegistered,
/// naming who serves CUDA).
std::string registration_result(Registration r, executorch::runtime::Error err, const std::string& op,
                                const std::string& failure);

/// "none", "et_copy's simulated allocator", "et_copy's cuda allocator" or
/// "an allocator from another library": who serves `type`.
std::string describe_allocator(DeviceType type);

/// Adds the allocator functions and the DeviceBuffer class to `m`.
void bind_allocators(pybind11::module_& m);

} // namespace et_copy::bindings
