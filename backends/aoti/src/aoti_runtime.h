// The AOTInductor runtime as AotiDeviceBackend uses it: a model .so loaded
// from bytes, one model container, tensors wrapped over caller memory. Plain
// C++ types only: aoti_runtime.cpp, the one source that includes torch's
// headers, is compiled apart from ExecuTorch's (whose include path carries a
// vendored copy of torch's header-only library that clashes with torch's).
// Only torch's C ABI is used (interface.h, the aoti_torch_* shims), so the
// same code builds against any torch that has them (written for 2.11 and
// 2.13; built and run with 2.13 only so far).
//
// Every call reports failure as false with the reason in `*what`, which must
// not be null; AOTI runtime errors carry AOTInductorGetLastError's message
// when the model .so exports it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace et_copy::aoti {

/// The torch release the library was compiled against (TORCH_VERSION,
/// e.g. "2.13.0": no local suffix such as "+cpu").
const char* compiled_torch_version();

/// Memory the caller owns, seen as a strided tensor. `dtype` is a c10
/// ScalarType value (ExecuTorch's numbering is the same); `cuda` false means
/// CPU memory (the simulated device's host alias).
struct BlobView {
  void* data = nullptr;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int32_t dtype = 0;
  bool cuda = false;
  int32_t device_index = 0;
};

/// A tensor the model allocated (an output): deleted with this object.
class ModelTensor {
 public:
  explicit ModelTensor(void* handle) : handle_(handle) {}
  ~ModelTensor();
  ModelTensor(ModelTensor&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  ModelTensor& operator=(ModelTensor&&) = delete;
  ModelTensor(const ModelTensor&) = delete;

  bool sizes(std::vector<int64_t>* out, std::string* what) const;
  bool dtype(int32_t* out, std::string* what) const;
  /// Copies this tensor into `dst`, which must have its shape and dtype: one
  /// memcpy when both are dense on the CPU, else aoti_torch_copy_ (on CUDA
  /// queued on torch's current stream: see Container::torch_stream_scope).
  bool copy_into(const BlobView& dst, std::string* what) const;

 private:
  void* handle_; // AtenTensorHandle
};

/// One model .so, dlopen'ed from an anonymous file (memfd) and never closed.
class Library;

/**
 * The library holding `so[0, nbytes)`: loaded once per content (by a 128-bit
 * hash and the size) and kept for the life of the process, since code of a
 * closed library may still be referenced by torch's registries. Thread-safe.
 */
std::shared_ptr<Library> load_library(const uint8_t* so, size_t nbytes, std::string* what);

/// A constant the model reads (AOTInductorModelContainerGetConstant*).
struct ConstantInfo {
  std::string name;         ///< the container's key (e.g. "fc1_weight")
  std::string original_fqn; ///< the module's name for it (e.g. "fc1.weight")
  int32_t dtype = 0;
  size_t nbytes = 0;
  bool from_folded = false; ///< made by constant folding: the model computes it, nobody binds it
};

/// One AOTInductorModelContainer with one model. Runs must be serialized
/// by the caller; create and destroy may run on any thread.
class Container {
 public:
  /// `device` is "cpu" or "cuda:N" (AOTInductorModelContainerCreateWithDevice).
  static std::unique_ptr<Container> create(std::shared_ptr<Library> library, const std::string& device,
                                           std::string* what);
  ~Container();
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  bool constants(std::vector<ConstantInfo>* out, std::string* what) const;
  bool io_counts(size_t* inputs, size_t* outputs, std::string* what) const;

  /**
   * Binds `by_name` (container constant name -> caller memory) as
   * user-managed constants: the model reads and writes that memory in place
   * from the next run on; nothing is copied. The memory must outlive this
   * container. Uses UpdateUserManagedConstantBufferPairs, or the older
   * UpdateUserManagedConstantBuffer where the .so lacks it; asks the
   * container to check that every constant is bound.
   */
  bool bind_constants(const std::vector<std::pair<std::string, BlobView>>& by_name, std::string* what);

  /// Runs the model on `inputs` (wrapped, not copied) on `stream` (a
  /// cudaStream_t the model queues its work on, which it also makes torch's
  /// current stream for the run; nullptr: the legacy default stream; ignored
  /// by a CPU model), with the calling thread's OpenMP thread count set to
  /// `threads` (at least 1) for the run and restored after; `outputs`
  /// receives the tensors the model allocated. On CUDA the run is queued,
  /// not waited for.
  bool run(const std::vector<BlobView>& inputs, int threads, void* stream, std::vector<ModelTensor>* outputs,
           std::string* what);

  /**
   * Makes `stream` torch's current CUDA stream on `device` until the
   * returned object is destroyed (then the previous one is current again),
   * so ModelTensor::copy_into queues its copies there, after the run. Null,
   * with `*what` set, where the torch running has no CUDA (its
   * aoti_torch_create_cuda_stream_guard is looked up at load, not linked).
   */
  std::shared_ptr<void> torch_stream_scope(void* stream, int32_t device, std::string* what) const;

 private:
  Container(std::shared_ptr<Library> library, void* handle) : library_(std::move(library)), handle_(handle) {}
  std::shared_ptr<Library> library_;
  void* handle_; // AOTInductorModelContainerHandle
  std::vector<void*> bound_;
};

} // namespace et_copy::aoti
