// et_copy._C's CUDA functions. Nothing here runs at import: the CUDA runtime
// is first touched when one of these is called.
#include "cuda.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <pybind11/stl.h>

#include <et_copy/cuda_device_allocator.h>
#include <et_copy/cuda_stream.h>
#include <et_copy/limits.h>
#include <et_copy/registration.h>
#include <executorch/runtime/core/device_allocator.h>

#include "allocators.h"
#include "failure.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;
using executorch::runtime::get_device_allocator;

// The allocator's last message when it has one, else `fallback`.
std::string why(const std::string& fallback) {
  const char* m = CudaDeviceAllocator::last_error_message();
  return (m != nullptr && m[0] != '\0') ? std::string(m) : fallback;
}

void throw_if(Error err, const std::string& what) {
  if (err != Error::Ok) {
    throw Failure(err, why(what));
  }
}

py::dict status_dict() {
  const CudaRuntimeStatus s = cuda_runtime_status();
  py::dict d;
  d["runtime_version"] = s.runtime_version;
  d["driver_version"] = s.driver_version;
  d["device_count"] = s.error == Error::Ok ? py::object(py::int_(s.device_count)) : py::object(py::none());
  d["error"] = s.error == Error::Ok ? py::object(py::none()) : py::object(py::str(error_name(s.error)));
  d["cuda_error"] = s.cuda_error == 0 ? py::object(py::none())
                                      : py::object(py::str(cudaGetErrorName(static_cast<cudaError_t>(s.cuda_error))));
  d["message"] = std::string(s.message);
  return d;
}

// ---- DLPack (legacy, unversioned: every consumer accepts it) ------------
// Layouts from the DLPack ABI, which is stable; declared here rather than
// vendoring dlpack.h.
struct DLDevice {
  int32_t device_type; // kDLCUDA = 2
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; // in elements
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

constexpr int32_t kDLCUDA = 2;
constexpr char kCapsuleName[] = "dltensor";

// Owns the metadata and a reference to the Python object whose memory the
// capsule exports, so the memory lives as long as the consumer's tensor.
struct Export {
  DLManagedTensor managed{};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  PyObject* owner = nullptr;
};

void export_deleter(DLManagedTensor* m) {
  auto* e = static_cast<Export*>(m->manager_ctx);
  // Consumers may free from any thread, with or without the GIL; after
  // interpreter shutdown the reference is simply dropped.
  if (Py_IsInitialized()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_XDECREF(e->owner);
    PyGILState_Release(gil);
  }
  delete e;
}

void capsule_destructor(PyObject* capsule) {
  // A consumer renames the capsule when it takes ownership; only an unused
  // capsule still owns its tensor.
  if (PyCapsule_IsValid(capsule, kCapsuleName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
    if (m != nullptr && m->deleter != nullptr) {
      m->deleter(m);
    }
  } else {
    PyErr_Clear();
  }
}

py::object dlpack_capsule(py::object owner, uintptr_t ptr, int device, std::vector<int64_t> shape,
                          std::vector<int64_t> strides, int code, int bits) {
  if (shape.size() != strides.size()) {
    throw Failure(Error::InvalidArgument, "__dlpack__: shape and strides differ in length");
  }
  auto* e = new Export();
  e->shape = std::move(shape);
  e->strides = std::move(strides);
  e->owner = owner.inc_ref().ptr();
  DLTensor& t = e->managed.dl_tensor;
  t.data = reinterpret_cast<void*>(ptr);
  t.device = {kDLCUDA, device};
  t.ndim = static_cast<int32_t>(e->shape.size());
  t.dtype = {static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = &export_deleter;
  PyObject* capsule = PyCapsule_New(&e->managed, kCapsuleName, &capsule_destructor);
  if (capsule == nullptr) {
    export_deleter(&e->managed);
    throw py::error_already_set(); // MemoryError
  }
  return py::reinterpret_steal<py::object>(capsule);
}

} // namespace

void bind_cuda(py::module_& m) {
  m.attr("WITH_CUDA") = true;

  m.def("cuda_status", &status_dict,
        "CUDA runtime and driver versions and the device count, or why there is none. Registers nothing.");

  m.def(
      "cuda_device_properties",
      [](int index) {
        auto p = cuda_device_properties(index);
        throw_if(p.ok() ? Error::Ok : p.error(), "cannot read the properties of CUDA device " + std::to_string(index));
        py::dict d;
        d["index"] = index;
        d["name"] = std::string(p->name);
        d["compute_capability"] = py::make_tuple(p->major, p->minor);
        d["total_memory"] = p->total_memory;
        d["pci_bus_id"] = std::string(p->pci_bus_id);
        return d;
      },
      py::arg("index"));

  m.def(
      "use_cuda",
      [] {
        Error err = Error::Ok;
        const Registration r = et_copy::use_cuda(&err);
        if (r == Registration::kAlreadyOther) {
          return std::string(registration_name(r)); // another library's GPU allocator: used as it is
        }
        if (r == Registration::kFailed && err == Error::RegistrationAlreadyRegistered) {
          // The simulated device holds the slot: the same words as any allocator registration refused.
          return registration_result(Registration::kAlreadyOther, err, "et_copy.use_cuda", "");
        }
        return registration_result(r, err, "et_copy.use_cuda",
                                   r == Registration::kFailed ? cuda_runtime_status().message : "");
      },
      "et_copy::use_cuda: 'registered', 'already et_copy' or 'already other' (another library's CUDA allocator, "
      "which et_copy uses); raises EtCopyError otherwise.");

  m.def("cuda_copy_config", [] {
    const CudaCopyConfig c = cuda_device_allocator().copy_config();
    py::dict d;
    d["pageable"] = c.pageable == PageableCopy::kStaged ? "staged" : "direct";
    d["staging_threshold"] = c.staging_threshold;
    d["chunk_bytes"] = c.chunk_bytes;
    return d;
  });

  m.def(
      "set_cuda_copy_config",
      [](const std::string& pageable, int64_t staging_threshold, int64_t chunk_bytes) {
        CudaCopyConfig c;
        if (pageable == "staged") {
          c.pageable = PageableCopy::kStaged;
        } else if (pageable == "direct") {
          c.pageable = PageableCopy::kDirect;
        } else {
          throw Failure(Error::InvalidArgument, "pageable must be 'staged' or 'direct', got '" + pageable + "'");
        }
        if (staging_threshold < 0 || chunk_bytes < 0) {
          throw Failure(Error::InvalidArgument, "staging_threshold and chunk_bytes must not be negative, got " +
                                                    std::to_string(staging_threshold) + " and " +
                                                    std::to_string(chunk_bytes));
        }
        c.staging_threshold = static_cast<size_t>(staging_threshold);
        c.chunk_bytes = static_cast<size_t>(chunk_bytes); // its range is the allocator's to check
        throw_if(cuda_device_allocator().set_copy_config(c), "invalid CUDA copy configuration");
      },
      py::arg("pageable"), py::arg("staging_threshold"), py::arg("chunk_bytes"));

  m.def(
      "cuda_register_host",
      [](uintptr_t ptr, size_t nbytes) {
        throw_if(cuda_device_allocator().register_host_memory(reinterpret_cast<void*>(ptr), nbytes),
                 "cudaHostRegister failed");
      },
      py::arg("ptr"), py::arg("nbytes"), "Page-locks long-lived host memory (cudaHostRegister).");

  m.def(
      "cuda_unregister_host",
      [](uintptr_t ptr) {
        throw_if(cuda_device_allocator().unregister_host_memory(reinterpret_cast<void*>(ptr)),
                 "cudaHostUnregister failed");
      },
      py::arg("ptr"));

  m.def(
      "set_cuda_stream",
      [](int64_t device, std::optional<uintptr_t> stream) {
        if (device < 0 || device > kMaxDeviceIndex) {
          throw Failure(Error::InvalidArgument, "device " + std::to_string(device) +
                                                    " is not a CUDA device index (0.." +
                                                    std::to_string(kMaxDeviceIndex) + ")");
        }
        const auto index = static_cast<DeviceIndex>(device);
        throw_if(stream.has_value() ? set_cuda_stream(index, reinterpret_cast<CudaStreamHandle>(*stream))
                                    : clear_cuda_stream(index),
                 "cannot set the CUDA stream");
      },
      py::arg("device"), py::arg("stream"),
      "et_copy::set_cuda_stream for the calling thread (None: clear_cuda_stream).");

  m.def(
      "cuda_stream",
      [](int64_t device) -> std::optional<uintptr_t> {
        CudaStreamHandle stream = nullptr;
        if (device < 0 || device > kMaxDeviceIndex ||
            !et_copy::cuda_stream(static_cast<DeviceIndex>(device), &stream)) {
          return std::nullopt;
        }
        return reinterpret_cast<uintptr_t>(stream);
      },
      py::arg("device"), "The calling thread's CUDA stream for `device`, or None.");

  m.def(
      "cuda_pointer_device",
      [](uintptr_t ptr) {
        const auto d = cuda_pointer_device(reinterpret_cast<const void*>(ptr));
        throw_if(d.ok() ? Error::Ok : d.error(), "cannot ask the CUDA runtime about the pointer");
        return *d;
      },
      py::arg("ptr"),
      "The CUDA device owning ptr (device or managed memory), -1 for host memory; EtCopyError (NotFound with no "
      "driver) when the CUDA runtime cannot say.");

  m.def("cuda_dlpack", &dlpack_capsule, py::arg("owner"), py::arg("ptr"), py::arg("device"), py::arg("shape"),
        py::arg("strides"), py::arg("code"), py::arg("bits"),
        "A DLPack capsule over CUDA memory that keeps `owner` alive until the consumer frees it.");
}

} // namespace et_copy::bindings
