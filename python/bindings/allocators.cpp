// Allocator registration, counters, and DeviceBuffer: device memory owned by
// a Python object through ExecuTorch's DeviceMemoryBuffer.
#include "allocators.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include <et_copy/counting_device_allocator.h>
#include <et_copy/limits.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_allocator.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/device_memory_buffer.h>

#include "device_buffer.h"
#include "failure.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::DeviceMemoryBuffer;
using executorch::runtime::Error;
using executorch::runtime::get_device_allocator;
using executorch::runtime::etensor::kNumDeviceTypes;

DeviceType checked_device_type(int device_type) {
  if (device_type < 0 || static_cast<size_t>(device_type) >= kNumDeviceTypes) {
    throw Failure(Error::InvalidArgument, "unknown device type " + std::to_string(device_type));
  }
  return static_cast<DeviceType>(device_type);
}

// The device-memory counters, which a counting scope keeps as the whole
// allocator does (ScopeStats, DeviceAllocatorStats).
template <typename Stats>
py::dict memory_dict(const Stats& s) {
  py::dict d;
  d["allocations"] = s.allocations;
  d["deallocations"] = s.deallocations;
  d["live_allocations"] = s.live_allocations;
  d["bytes_outstanding"] = s.bytes_outstanding;
  d["peak_bytes_outstanding"] = s.peak_bytes_outstanding;
  return d;
}

py::dict stats_dict(const DeviceAllocatorStats& s) {
  py::dict d = memory_dict(s);
  d["h2d_copies"] = s.h2d_copies;
  d["h2d_bytes"] = s.h2d_bytes;
  d["d2h_copies"] = s.d2h_copies;
  d["d2h_bytes"] = s.d2h_bytes;
  d["d2d_copies"] = s.d2d_copies;
  d["d2d_bytes"] = s.d2d_bytes;
  d["failed_calls"] = s.failed_calls;
  return d;
}

// et-copy's allocator serving `device_type`, or a Failure naming `op`.
CountingDeviceAllocator& our_allocator(int device_type, const char* op) {
  const DeviceType type = checked_device_type(device_type);
  auto* alloc = get_device_allocator(type);
  if (alloc == nullptr) {
    throw Failure(Error::NotFound, "no DeviceAllocator is registered for this device type");
  }
  auto* counting = as_counting_allocator(alloc);
  if (counting == nullptr) {
    throw Failure(Error::NotSupported, std::string(op) + ": " +
                                           (type == DeviceType::CUDA ? "CUDA" : "this device type") +
                                           " is served by another library's allocator, which keeps no et_copy "
                                           "counters (copies through it still work; only et_copy's own "
                                           "allocators count)");
  }
  return *counting;
}

// The host alias of [ptr, ptr + nbytes) on the simulated device, or a
// Failure naming `op`: what the inspection hooks share.
void* checked_alias(const char* op, uintptr_t ptr, size_t nbytes, int device_index) {
  const auto* p = reinterpret_cast<const void*>(ptr);
  SimulatedDeviceAllocator& sim = simulated_device_allocator();
  const auto count = sim.device_count(); // the simulation's own count: never an error
  const int devices = count.ok() ? *count : 0;
  const bool empty_null = p == nullptr && nbytes == 0;
  // An index past the devices there are names no device, for an empty range too (-1 is device 0).
  if (device_index < -1 || device_index >= devices ||
      (!empty_null && !sim.is_device_memory(p, nbytes, static_cast<DeviceIndex>(device_index)))) {
    char at[32];
    std::snprintf(at, sizeof(at), "%#" PRIxPTR, ptr);
    throw Failure(Error::InvalidArgument, std::string(op) + ": " + std::to_string(nbytes) + " bytes at " + at +
                                              " do not lie inside one live allocation of simulated device " +
                                              std::to_string(device_index));
  }
  auto alias = sim.host_alias(p, nbytes, static_cast<DeviceIndex>(device_index));
  if (!alias.ok()) { // freed by another thread since the check
    throw Failure(alias.error(), std::string(op) + ": the allocation was freed while it was looked up");
  }
  return *alias;
}

} // namespace

std::string registration_result(Registration r, Error err, const std::string& op, const std::string& failure) {
  if (r == Registration::kFailed) {
    throw Failure(err, op + ": " + failure);
  }
  if (r == Registration::kAlreadyOther) {
    throw Failure(Error::RegistrationAlreadyRegistered, op + ": CUDA is already served by " +
                                                            describe_allocator(DeviceType::CUDA) +
                                                            "; ExecuTorch cannot replace a registered allocator");
  }
  return registration_name(r);
}

std::string describe_allocator(DeviceType type) {
  auto* alloc = get_device_allocator(type);
  if (alloc == nullptr) {
    return "none";
  }
  auto* counting = as_counting_allocator(alloc);
  return counting != nullptr ? std::string("et_copy's ") + counting->name() + " allocator"
                             : "an allocator from another library";
}

DeviceBuffer::DeviceBuffer(size_t nbytes, int device_type, int device_index, size_t alignment) {
  const DeviceType type = checked_device_type(device_type);
  if (type == DeviceType::CPU) {
    throw Failure(Error::InvalidArgument, "device memory cannot be on the CPU device");
  }
  if (device_index < -1 || device_index > kMaxDeviceIndex) {
    throw Failure(Error::InvalidArgument, "device index " + std::to_string(device_index) + " is out of range");
  }
  if (get_device_allocator(type) == nullptr) {
    throw Failure(
        Error::NotFound,
        "no DeviceAllocator is registered for CUDA: call et_copy.use_simulated_device() or et_copy.use_cuda() first");
  }
  auto buffer = DeviceMemoryBuffer::create(nbytes, type, static_cast<DeviceIndex>(device_index), alignment);
  if (!buffer.ok()) {
    throw Failure(buffer.error(),
                  "could not allocate " + std::to_string(nbytes) + " bytes on device " + std::to_string(device_index));
  }
  buffer_ = std::move(*buffer);
  index_ = device_index;
}

DeviceBuffer::DeviceBuffer(const DeviceBuffer& parent, size_t offset, size_t nbytes) {
  if (parent.freed()) {
    throw Failure(Error::InvalidArgument, "cannot slice a freed DeviceBuffer");
  }
  if (offset > parent.nbytes() || nbytes > parent.nbytes() - offset) {
    throw Failure(Error::InvalidArgument, std::to_string(nbytes) + " bytes at offset " + std::to_string(offset) +
                                              " lie outside a " + std::to_string(parent.nbytes()) + "-byte buffer");
  }
  parent_ = parent.parent_ != nullptr ? parent.parent_ : &parent;
  offset_ = (parent.parent_ != nullptr ? parent.offset_ : 0) + offset;
  nbytes_ = nbytes;
}

void bind_allocators(py::module_& m) {
  m.def(
      "register_kernels",
      [] {
        py::list out;
        for (const auto& r : register_kernels()) {
          out.append(py::make_tuple(r.op_name, registration_name(r.outcome), error_name(r.error)));
        }
        return out;
      },
      "Registers et_copy's two kernels where the registry lacks them; returns (op, outcome, error) per op.");

  m.def(
      "kernel_owner", [](const std::string& op) { return std::string(registration_name(kernel_owner(op.c_str()))); },
      "'already et_copy', 'already other' or 'absent' for an op name.");

  m.def(
      "use_simulated_device",
      [](int64_t device_count, std::optional<bool> host_readable) {
        const std::string op = "et_copy.use_simulated_device";
        Error err = Error::Ok;
        // Saturated, not wrapped: a count beyond int is refused by the core like any other.
        const Registration r =
            use_simulated_device(static_cast<int>(std::clamp<int64_t>(device_count, INT_MIN, INT_MAX)), &err);
        if (r == Registration::kFailed && err == Error::InvalidArgument) { // the core's range check
          throw py::value_error(op + ": device_count must be in 1.." + std::to_string(kMaxDevices) + ", got " +
                                std::to_string(device_count));
        }
        std::string outcome = registration_result(r, err, op, "ExecuTorch refused the simulated allocator");
        if (host_readable.has_value()) { // only once the allocator is the one serving CUDA
          simulated_device_allocator().set_host_readable(*host_readable);
        }
        return outcome;
      },
      py::arg("device_count"), py::arg("host_readable"),
      "et_copy::use_simulated_device, then the mode of later allocations when host_readable is not None: "
      "'registered' or 'already et_copy'; raises EtCopyError otherwise.");

  m.attr("SIMULATED_DEVICE_DEFAULT_HOST_READABLE") = SimulatedDeviceAllocator::kDefaultHostReadable;

  // The inspection hook: device bytes read and written through the host
  // alias, as a debugger reads a GPU. Not copies: the counters see nothing.
  m.def(
      "simulated_device_host_alias",
      [](uintptr_t ptr, size_t nbytes, int device_index) {
        return reinterpret_cast<uintptr_t>(
            checked_alias("et_copy._C.simulated_device_host_alias", ptr, nbytes, device_index));
      },
      py::arg("ptr"), py::arg("nbytes"), py::arg("device_index"),
      "The host-readable address of simulated device bytes [ptr, ptr + nbytes) (valid while the allocation "
      "lives); EtCopyError('InvalidArgument') unless they lie inside one live allocation of that device.");
  m.def(
      "simulated_device_read",
      [](uintptr_t ptr, size_t nbytes, int device_index) {
        const void* alias = checked_alias("et_copy._C.simulated_device_read", ptr, nbytes, device_index);
        return py::bytearray(static_cast<const char*>(alias), nbytes);
      },
      py::arg("ptr"), py::arg("nbytes"), py::arg("device_index"),
      "A copy of simulated device bytes [ptr, ptr + nbytes), read through the host alias and counted nowhere; "
      "EtCopyError('InvalidArgument') unless they lie inside one live allocation of that device.");
  m.def(
      "simulated_device_write",
      [](uintptr_t ptr, const py::buffer& data, int device_index) {
        py::buffer_info info = data.request();
        if (!PyBuffer_IsContiguous(info.view(), 'C')) {
          throw Failure(Error::InvalidArgument, "et_copy._C.simulated_device_write: data is not contiguous");
        }
        const size_t nbytes = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
        void* alias = checked_alias("et_copy._C.simulated_device_write", ptr, nbytes, device_index);
        if (nbytes > 0) {
          std::memcpy(alias, info.ptr, nbytes);
        }
      },
      py::arg("ptr"), py::arg("data"), py::arg("device_index"),
      "Writes the bytes of `data` (a contiguous buffer) to simulated device memory at ptr through the host "
      "alias, counted nowhere; EtCopyError('InvalidArgument') unless they fit inside one live allocation of "
      "that device.");

  m.def(
      "describe_allocator", [](int device_type) { return describe_allocator(checked_device_type(device_type)); },
      py::arg("device_type"), "Who serves a device type, in words.");

  m.def(
      "allocator_info",
      [](int device_type) -> py::object {
        auto* alloc = get_device_allocator(checked_device_type(device_type));
        if (alloc == nullptr) {
          return py::none();
        }
        py::dict d;
        auto* counting = as_counting_allocator(alloc);
        d["owner"] = counting != nullptr ? "et_copy" : "other";
        d["name"] = allocator_name(alloc); // "foreign" for another library's
        d["device_count"] = py::none();
        d["device_count_error"] = py::none();
        // The simulated device's mode for new allocations; None for others.
        d["host_readable"] = py::none();
        if (counting == &simulated_device_allocator()) {
          d["host_readable"] = simulated_device_allocator().host_readable();
        }
        if (counting != nullptr) {
          auto count = counting->device_count();
          if (count.ok()) {
            d["device_count"] = *count;
          } else {
            d["device_count_error"] = error_name(count.error());
          }
        }
        return d;
      },
      py::arg("device_type"), "Who serves a device type: None, or owner/name/device_count/host_readable.");

  m.def(
      "allocator_stats",
      [](int device_type) { return stats_dict(our_allocator(device_type, "et_copy.allocator_stats").stats()); },
      py::arg("device_type"), "Counters of et_copy's allocator for a device type.");
  m.def(
      "open_counting_scope",
      [](int device_type) { return our_allocator(device_type, "et_copy.counting").open_scope(); },
      py::arg("device_type"), "Opens a counting scope on et_copy's allocator for a device type; returns its id.");
  m.def(
      "counting_scope_stats",
      [](int device_type, uint64_t scope) {
        return memory_dict(our_allocator(device_type, "et_copy.counting").scope_stats(scope));
      },
      py::arg("device_type"), py::arg("scope"),
      "A counting scope's counts so far: only allocations made since it opened, and their frees.");
  m.def(
      "close_counting_scope",
      [](int device_type, uint64_t scope) {
        return memory_dict(our_allocator(device_type, "et_copy.counting").close_scope(scope));
      },
      py::arg("device_type"), py::arg("scope"), "Closes a counting scope and returns its final counts.");

  py::class_<DeviceBuffer>(m, "DeviceBuffer")
      .def(py::init<size_t, int, int, size_t>(), py::arg("nbytes"), py::arg("device_type"), py::arg("device_index"),
           py::arg("alignment"))
      .def_property_readonly("ptr", &DeviceBuffer::ptr)
      .def_property_readonly("nbytes", &DeviceBuffer::nbytes)
      .def_property_readonly("device_index", &DeviceBuffer::device_index)
      .def_property_readonly("freed", &DeviceBuffer::freed)
      .def("free", &DeviceBuffer::free)
      .def(
          "slice",
          [](const DeviceBuffer& self, size_t offset, size_t nbytes) {
            return std::make_unique<DeviceBuffer>(self, offset, nbytes);
          },
          py::arg("offset"), py::arg("nbytes"), py::keep_alive<0, 1>(),
          "A DeviceBuffer over bytes [offset, offset + nbytes) of this one: it keeps this buffer alive, is freed "
          "when it is, and its own free() does nothing.");
}

} // namespace et_copy::bindings
