// et_copy._C.loops: timing loops for `python -m et_copy bench`, the C++
// side of the call overhead and throughput figures, run with no Python in
// the loop, and the probes tests and benchmarks use on device memory. A
// submodule of _C rather than an extension of its own, so the process holds
// one copy of et-copy's runtime: one registry lock, one served() cache, and
// one h2d_copy_out_boxed for "is this kernel ours" to compare against.
#include "loops.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/counting_device_allocator.h>
#include <et_copy/failure_report.h>
#include <et_copy/limits.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>

#ifdef ET_COPY_WITH_CUDA
#include <cuda_runtime_api.h>
#include <et_copy/cuda_device_allocator.h>
#endif

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::DeviceMemoryBuffer;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::OpFunction;
using executorch::runtime::Span;
namespace et = executorch::runtime::etensor;
using Clock = std::chrono::steady_clock;

// Keeps the compiler from dropping or merging copies whose result is unread.
inline void clobber(const void* p) {
  asm volatile("" : : "r"(p) : "memory");
}

// Runs `body(iters)` `repeats` times; returns nanoseconds per iteration of
// each repeat. The GIL is released: the loops never touch Python.
template <typename Body>
std::vector<double> time_repeats(int64_t iters, int repeats, Body body) {
  if (iters < 1 || repeats < 1) {
    throw py::value_error("iters and repeats must be at least 1");
  }
  std::vector<double> ns;
  ns.reserve(repeats);
  py::gil_scoped_release release;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    body(iters);
    const auto stop = Clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(stop - start).count() / static_cast<double>(iters));
  }
  return ns;
}

// A 1-d uint8 tensor over `data` on `device`: the shape a byte copy of
// `nbytes` has, whatever dtype the caller had in mind.
struct ByteTensor {
  ByteTensor(void* data, size_t nbytes, et::DeviceType device)
      : size(static_cast<executorch::aten::SizesType>(nbytes)),
        impl(executorch::aten::ScalarType::Byte, 1, &size, data, &dim_order, &stride,
             executorch::runtime::TensorShapeDynamism::STATIC, device, 0),
        tensor(&impl) {}
  executorch::aten::SizesType size;
  executorch::aten::DimOrderType dim_order = 0;
  executorch::aten::StridesType stride = 1;
  et::TensorImpl impl;
  executorch::aten::Tensor tensor;
};

using BoxedKernel = void (*)(KernelRuntimeContext&, Span<EValue*>);

// Resolves what `kind` names: et_copy's boxed kernel, called directly, or
// the kernel ExecuTorch's registry holds for the op name.
OpFunction resolve(const std::string& kind, bool* h2d) {
  const bool registry = kind.rfind("registry_", 0) == 0;
  const std::string direction = registry ? kind.substr(9) : kind.substr(kind.rfind('_') + 1);
  if ((kind != "et_copy_h2d" && kind != "et_copy_d2h" && !registry) || (direction != "h2d" && direction != "d2h")) {
    throw py::value_error(
        "bench_kernel: kind must be memcpy, et_copy_h2d, et_copy_d2h, registry_h2d or registry_d2h, got '" + kind +
        "'");
  }
  *h2d = direction == "h2d";
  if (!registry) {
    return *h2d ? static_cast<BoxedKernel>(h2d_copy_out_boxed) : static_cast<BoxedKernel>(d2h_copy_out_boxed);
  }
  const char* name = *h2d ? kH2dCopyOutName : kD2hCopyOutName;
  auto fn = executorch::runtime::get_op_function_from_registry(name);
  if (!fn.ok()) {
    throw std::runtime_error(std::string("bench_kernel: no kernel is registered for ") + name);
  }
  return *fn;
}

// Times `kind` moving `nbytes` between a host buffer and a buffer from the
// allocator registered for CUDA: "memcpy" (a plain std::memcpy between the
// caller's two buffers, the device one given as its host alias: the baseline), "et_copy_h2d"/"et_copy_d2h" (et_copy's
// boxed kernel) or "registry_h2d"/"registry_d2h" (the registry's kernel,
// resolved once). Kernels get prebuilt EValues and one KernelRuntimeContext,
// as an executor's loop gives them. The buffers are fresh ones, or the
// caller's (`host` and `device`, both non-zero: the device one must come
// from the registered allocator, or the kernel rejects every call).
std::vector<double> bench_kernel(const std::string& kind, size_t nbytes, int64_t iters, int repeats,
                                 uintptr_t host_buffer, uintptr_t device_buffer) {
  if (nbytes == 0 || nbytes > (size_t{1} << 31) - 1) {
    throw py::value_error("bench_kernel: nbytes must be in 1..2^31-1");
  }
  if (executorch::runtime::get_device_allocator(et::DeviceType::CUDA) == nullptr) {
    throw std::runtime_error(
        "bench_kernel: no DeviceAllocator is registered for CUDA: call et_copy.use_simulated_device() first");
  }
  if ((host_buffer == 0) != (device_buffer == 0)) {
    throw py::value_error("bench_kernel: give both buffers or neither");
  }
  if (kind == "memcpy" && device_buffer == 0) {
    // A fresh device buffer may be host-unreadable: a memcpy into it faults.
    throw py::value_error("bench_kernel: memcpy needs the caller's buffers (the device one as its host alias)");
  }
  DeviceMemoryBuffer device;
  std::vector<uint8_t> host;
  void* device_ptr = reinterpret_cast<void*>(device_buffer);
  void* host_ptr = reinterpret_cast<void*>(host_buffer);
  if (device_ptr == nullptr) {
    auto fresh = DeviceMemoryBuffer::create(nbytes, et::DeviceType::CUDA, 0, 256);
    if (!fresh.ok()) {
      throw std::runtime_error("bench_kernel: could not allocate " + std::to_string(nbytes) + " device bytes");
    }
    device = std::move(*fresh);
    device_ptr = device.data();
    host.assign(nbytes, 0x5A);
    host_ptr = host.data();
  }

  if (kind == "memcpy") {
    return time_repeats(iters, repeats, [&](int64_t n) {
      for (int64_t i = 0; i < n; ++i) { // the same bytes to the same place: only the time tells a copy more
        std::memcpy(device_ptr, host_ptr, nbytes);
        clobber(device_ptr);
      }
    });
  }
  bool h2d = true;
  OpFunction fn = resolve(kind, &h2d);
  ByteTensor host_tensor(host_ptr, nbytes, et::DeviceType::CPU);
  ByteTensor device_tensor(device_ptr, nbytes, et::DeviceType::CUDA);
  EValue self(h2d ? host_tensor.tensor : device_tensor.tensor);
  EValue out(h2d ? device_tensor.tensor : host_tensor.tensor);
  EValue result;
  EValue* stack[3] = {&self, &out, &result};
  KernelRuntimeContext ctx;
  auto ns = time_repeats(iters, repeats, [&](int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      fn(ctx, {stack, 3});
    }
  });
  if (ctx.failure_state() != Error::Ok) {
    throw std::runtime_error("bench_kernel: the " + kind + " kernel failed with " +
                             executorch::runtime::to_string(ctx.failure_state()));
  }
  return ns;
}

// Times std::memcpy(dst, src, nbytes) on memory the caller owns (torch
// tensors): the single-threaded baseline of the throughput table.
std::vector<double> bench_memcpy(uintptr_t dst, uintptr_t src, size_t nbytes, int64_t iters, int repeats) {
  if (dst == 0 || src == 0) {
    throw py::value_error("bench_memcpy: null pointer");
  }
  void* d = reinterpret_cast<void*>(dst);
  const void* s = reinterpret_cast<const void*>(src);
  return time_repeats(iters, repeats, [&](int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(d, s, nbytes);
      clobber(d);
    }
  });
}

// Copies nbytes between two buffers of one device through the allocator
// ExecuTorch's registry holds for CUDA, which must be et-copy's (simulated
// or CUDA): its device-to-device path, counted in et_copy.allocator_stats().
// RuntimeError "<Error name>: <why>" when the allocator refuses.
void device_to_device(uintptr_t dst, uintptr_t src, size_t nbytes, int device_index) {
  if (device_index < -1 || device_index > kMaxDeviceIndex) {
    throw py::value_error("device index " + std::to_string(device_index) + " is out of range");
  }
  // The cast refuses anyone else's allocator.
  auto* alloc =
      dynamic_cast<et_copy::CountingDeviceAllocator*>(executorch::runtime::get_device_allocator(et::DeviceType::CUDA));
  if (alloc == nullptr) {
    throw std::runtime_error("NotFound: no et-copy allocator is registered for CUDA");
  }
  Error err;
  {
    py::gil_scoped_release release;
    err = alloc->copy_device_to_device(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), nbytes,
                                       static_cast<et::DeviceIndex>(device_index));
  }
  if (err != Error::Ok) {
    throw std::runtime_error(std::string(error_name(err)) +
                             ": device-to-device copy failed: " + alloc->failure_message());
  }
}

#ifdef ET_COPY_WITH_CUDA
// The CUDA device owning ptr, or -1 for host memory (et_copy::cuda_pointer_device).
int cuda_pointer_device(uintptr_t ptr) {
  const auto d = et_copy::cuda_pointer_device(reinterpret_cast<const void*>(ptr));
  if (!d.ok()) {
    throw std::runtime_error(std::string(error_name(d.error())) +
                             ": cannot query the pointer: " + et_copy::CudaDeviceAllocator::last_error_message());
  }
  return *d;
}

// The CUDA baseline: one synchronous cudaMemcpy, nothing else.
void cuda_raw_memcpy(uintptr_t dst, uintptr_t src, size_t nbytes, const std::string& kind) {
  cudaMemcpyKind k;
  if (kind == "h2d") {
    k = cudaMemcpyHostToDevice;
  } else if (kind == "d2h") {
    k = cudaMemcpyDeviceToHost;
  } else if (kind == "d2d") {
    k = cudaMemcpyDeviceToDevice;
  } else {
    throw py::value_error("kind must be 'h2d', 'd2h' or 'd2d', got '" + kind + "'");
  }
  cudaError_t e;
  {
    py::gil_scoped_release release;
    e = cudaMemcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), nbytes, k);
  }
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string("cudaMemcpy failed: ") + cudaGetErrorString(e));
  }
}
#endif

// The kernel bench_kernel(kind) runs: its address, so a test can tell the
// registry's entry from the kernel this module links (one runtime, one
// address).
uintptr_t kernel_address(const std::string& kind) {
  bool h2d = true;
  return reinterpret_cast<uintptr_t>(resolve(kind, &h2d));
}

} // namespace

void bind_loops(py::module_& m) {
  m.doc() = "Timing loops of python -m et_copy bench, and device probes for tests (not part of et_copy's API).";
  m.def("bench_kernel", &bench_kernel, py::arg("kind"), py::arg("nbytes"), py::arg("iters"), py::arg("repeats"),
        py::arg("host") = 0, py::arg("device") = 0,
        "ns per call, per repeat, of a C++ loop: memcpy, et_copy_h2d/d2h (boxed kernel) or registry_h2d/d2h.");
  m.def("bench_memcpy", &bench_memcpy, py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::arg("iters"),
        py::arg("repeats"), "ns per call, per repeat, of std::memcpy between caller-owned buffers (single thread).");
  m.def("device_to_device", &device_to_device, py::arg("dst"), py::arg("src"), py::arg("nbytes"),
        py::arg("device_index"),
        "Copies nbytes between two buffers of one device through et-copy's allocator registered for CUDA.");
  m.def("kernel_address", &kernel_address, py::arg("kind"),
        "The address of the kernel bench_kernel(kind) runs: et_copy_h2d/d2h or registry_h2d/d2h.");
#ifdef ET_COPY_WITH_CUDA
  m.def("cuda_raw_memcpy", &cuda_raw_memcpy, py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::arg("kind"),
        "One synchronous cudaMemcpy (the CUDA baseline).");
  m.def("cuda_pointer_device", &cuda_pointer_device, py::arg("ptr"),
        "The CUDA device owning ptr, or -1 for host memory.");
#endif
}

} // namespace et_copy::bindings
