// The limits et-copy's core enforces, each defined once here. The kernels,
// the allocators, the bindings (which expose them to Python as
// et_copy._C.MAX_TENSOR_DIMS, MAX_DEVICES, MIN_DEVICE_INDEX,
// MAX_DEVICE_INDEX, DEVICE_ALIGNMENT and TENSOR_ALIGNMENT) and the Python package read them
// from here instead of spelling the numbers again.
//
// Plain constants with no ExecuTorch include, so that the one bindings
// source compiled against torch's headers (whose c10 clashes with
// ExecuTorch's) can use them too; tensor_layout.h and
// simulated_device_allocator.cpp check at compile time that they equal
// ExecuTorch's own.
#pragma once

#include <cstddef>

namespace et_copy {

/// The most dims a tensor may have: ExecuTorch's kTensorDimensionLimit.
inline constexpr size_t kMaxTensorDims = 16;

/// The device indices ExecuTorch's DeviceIndex (int8_t) can hold. -1 means
/// "the current device" to an allocator; other negative indices are
/// refused by the allocators, not by the type.
inline constexpr int kMinDeviceIndex = -128;
inline constexpr int kMaxDeviceIndex = 127;

/// How many devices an allocator may report: 1..kMaxDevices (the simulated
/// device's device_count), so every index below the count fits DeviceIndex.
inline constexpr int kMaxDevices = kMaxDeviceIndex;

/// The alignment of et-copy's device allocations: what cudaMalloc
/// guarantees, and what the CUDA allocator accepts at most. The simulated
/// device accepts more but is asked for this, so code that tests well on it
/// behaves the same on a GPU.
inline constexpr size_t kDeviceAlignment = 256;

/// The alignment of a tensor's data inside a larger buffer: a device
/// backend's state tensors in their arena, and the named data (weights,
/// initial state) export writes into a program. 16 bytes is what a GPU
/// kernel's widest vector load (16 B, e.g. float4) needs.
inline constexpr size_t kTensorAlignment = 16;
static_assert(kDeviceAlignment % kTensorAlignment == 0, "an allocation's start is a tensor's start");

/// How many device backends et-copy's table holds (register_device_backend,
/// device_backend.h): a Session passes its runtime specs to each through one
/// ExecuTorch LoadBackendOptionsMap, which holds 8 backends (its private
/// kMaxBackends; a test fills one to pin the number).
inline constexpr size_t kMaxDeviceBackends = 8;

/// The longest backend id (in chars, without the terminating NUL) that map
/// takes (its private kMaxBackendIdLength is 64, with the NUL).
inline constexpr size_t kMaxDeviceBackendIdLength = 63;

} // namespace et_copy
