// The AOTInductor runtime through torch's C ABI only (see aoti_runtime.h).
// The container functions come from the model .so (dlsym); their types are
// written here from torch/csrc/inductor/aoti_runtime/interface.h rather than
// taken from it, so that functions a torch lacks (2.11 has no ...Pairs
// variants or AOTInductorGetLastError) are looked up, not compiled against.
#include "aoti_runtime.h"

#include "content_hash.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/version.h>

namespace et_copy::aoti {

namespace {

// interface.h's C ABI, as the model .so exports it.
using RuntimeError = int32_t;               // AOTIRuntimeError
constexpr RuntimeError kRuntimeSuccess = 0; // AOTI_RUNTIME_SUCCESS
using ContainerHandle = void*;              // AOTInductorModelContainerHandle
struct ConstantMapEntry {                   // AOTInductorConstantMapEntry
  const char* name;
  AtenTensorHandle handle;
};
using CreateWithDeviceFn = RuntimeError (*)(ContainerHandle*, size_t, const char*, const char*);
using DeleteFn = RuntimeError (*)(ContainerHandle);
using RunFn = RuntimeError (*)(ContainerHandle, AtenTensorHandle*, size_t, AtenTensorHandle*, size_t, void*, void*);
using GetNumFn = RuntimeError (*)(ContainerHandle, size_t*);
using GetStringFn = RuntimeError (*)(ContainerHandle, size_t, const char**);
using GetBoolFn = RuntimeError (*)(ContainerHandle, size_t, bool*);
using GetInt32Fn = RuntimeError (*)(ContainerHandle, size_t, int32_t*);
using GetSizeFn = RuntimeError (*)(ContainerHandle, size_t, size_t*);
using UpdatePairsFn = RuntimeError (*)(ContainerHandle, const ConstantMapEntry*, size_t, bool, bool);
using UpdateMapFn = RuntimeError (*)(ContainerHandle, void* /* std::unordered_map<std::string, AtenTensorHandle>* */,
                                     bool, bool);
using GetLastErrorFn = RuntimeError (*)(const char**);
// torch's CUDA shims (shim.h, under USE_CUDA): in libtorch_cuda, absent from CPU builds.
using CreateStreamGuardFn = AOTITorchError (*)(void*, int32_t, void**);
using DeleteStreamGuardFn = AOTITorchError (*)(void*);
using SetThreadsFn = void (*)(int); // omp_set_num_threads
using GetMaxThreadsFn = int (*)();  // omp_get_max_threads

bool torch_ok(AOTITorchError e, const char* call, std::string* what) {
  if (e != AOTI_TORCH_SUCCESS) {
    *what = std::string(call) + " failed";
    return false;
  }
  return true;
}

AtenTensorHandle wrap(const BlobView& b, std::string* what) {
  AtenTensorHandle h = nullptr;
  const int32_t device_type = b.cuda ? aoti_torch_device_type_cuda() : aoti_torch_device_type_cpu();
  if (!torch_ok(aoti_torch_create_tensor_from_blob(b.data, static_cast<int64_t>(b.sizes.size()), b.sizes.data(),
                                                   b.strides.data(), 0, b.dtype, device_type,
                                                   b.cuda ? b.device_index : 0, &h),
                "aoti_torch_create_tensor_from_blob", what)) {
    return nullptr;
  }
  return h;
}

bool contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] != 1 && strides[i] != expected) {
      return false;
    }
    expected *= sizes[i];
  }
  return true;
}

// Copies `src` into `dst` with one memcpy when both are dense CPU tensors of
// the same shape and dtype; *done says whether it did (false: the caller
// takes the general path). aoti_torch_copy_ goes through ATen's dispatcher
// and TensorIterator: microseconds per call for a decode step's 8-byte token.
bool copy_dense_on_cpu(AtenTensorHandle src, const BlobView& dst, bool* done, std::string* what) {
  *done = false;
  int32_t device_type = 0, dtype = 0;
  bool dense = false;
  int64_t dim = 0, numel = 0;
  int64_t* sizes = nullptr;
  void* data = nullptr;
  if (!torch_ok(aoti_torch_get_device_type(src, &device_type), "aoti_torch_get_device_type", what) ||
      !torch_ok(aoti_torch_get_dtype(src, &dtype), "aoti_torch_get_dtype", what) ||
      !torch_ok(aoti_torch_is_contiguous(src, &dense), "aoti_torch_is_contiguous", what) ||
      !torch_ok(aoti_torch_get_dim(src, &dim), "aoti_torch_get_dim", what)) {
    return false;
  }
  if (device_type != aoti_torch_device_type_cpu() || dtype != dst.dtype || !dense ||
      static_cast<size_t>(dim) != dst.sizes.size() || !contiguous(dst.sizes, dst.strides)) {
    return true;
  }
  if (!torch_ok(aoti_torch_get_sizes(src, &sizes), "aoti_torch_get_sizes", what) ||
      !torch_ok(aoti_torch_get_numel(src, &numel), "aoti_torch_get_numel", what) ||
      !torch_ok(aoti_torch_get_data_ptr(src, &data), "aoti_torch_get_data_ptr", what)) {
    return false;
  }
  if (!std::equal(dst.sizes.begin(), dst.sizes.end(), sizes)) {
    return true;
  }
  const size_t nbytes = static_cast<size_t>(numel) * aoti_torch_dtype_element_size(dtype);
  if (nbytes > 0) {
    std::memcpy(dst.data, data, nbytes);
  }
  *done = true;
  return true;
}

// A 128-bit content key for the library cache (its bytes are not kept to
// compare): FNV-1a, and a second hash that folds in its high bits.
std::pair<uint64_t, uint64_t> content_hash(const uint8_t* p, size_t n) {
  uint64_t b = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; ++i) {
    b = (b ^ p[i]) * 0x100000001b3ull + (b >> 29);
  }
  return {internal::fnv1a64(p, n), b};
}

} // namespace

const char* compiled_torch_version() {
  return TORCH_VERSION;
}

class Library {
 public:
  void* dl = nullptr;
  CreateWithDeviceFn create = nullptr;
  DeleteFn destroy = nullptr;
  RunFn run = nullptr;
  GetNumFn num_constants = nullptr;
  GetStringFn constant_name = nullptr;
  GetStringFn constant_fqn = nullptr;
  GetBoolFn constant_from_folded = nullptr;
  GetInt32Fn constant_dtype = nullptr;
  GetSizeFn constant_nbytes = nullptr;
  GetNumFn num_inputs = nullptr;
  GetNumFn num_outputs = nullptr;
  UpdatePairsFn update_pairs = nullptr; // absent from older .so files
  UpdateMapFn update_map = nullptr;
  GetLastErrorFn last_error = nullptr; // absent from older .so files
  // The OpenMP runtime the model's parallel regions use (null when the model links none).
  SetThreadsFn set_threads = nullptr;
  GetMaxThreadsFn max_threads = nullptr;
  // torch's CUDA stream guard (null when the torch running has no CUDA).
  CreateStreamGuardFn create_stream_guard = nullptr;
  DeleteStreamGuardFn delete_stream_guard = nullptr;

  // "<call> failed (AOTI error N: <last error>)".
  bool ok(RuntimeError e, const char* call, std::string* what) const {
    if (e == kRuntimeSuccess) {
      return true;
    }
    *what = std::string(call) + " failed (AOTI error " + std::to_string(e);
    const char* message = nullptr;
    if (last_error != nullptr && last_error(&message) == kRuntimeSuccess && message != nullptr && *message != '\0') {
      *what += ": " + std::string(message);
    }
    *what += ")";
    return false;
  }
};

std::shared_ptr<Library> load_library(const uint8_t* so, size_t nbytes, std::string* what) {
  static std::mutex mutex;
  static auto* loaded = new std::map<std::pair<std::pair<uint64_t, uint64_t>, size_t>, std::shared_ptr<Library>>();
  const auto key = std::make_pair(content_hash(so, nbytes), nbytes);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded->find(key);
  if (it != loaded->end()) {
    return it->second;
  }
  // An anonymous file: nothing on disk for another user to swap, nothing to clean up.
  const int fd = memfd_create("et_copy_aoti_model", MFD_CLOEXEC);
  if (fd < 0) {
    *what = std::string("memfd_create failed: ") + std::strerror(errno);
    return nullptr;
  }
  for (size_t done = 0; done < nbytes;) {
    const ssize_t n = write(fd, so + done, nbytes - done);
    if (n <= 0) {
      *what = std::string("writing the model .so to an anonymous file failed: ") + std::strerror(errno);
      close(fd);
      return nullptr;
    }
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  // The fd stays open for good, like the library: glibc knows a loaded
  // library by the path it was opened with, so a closed fd's number reused
  // for the next model would make dlopen hand back the previous model.
  void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) {
    close(fd);
    const char* e = dlerror();
    *what = std::string("dlopen of the model .so failed: ") + (e != nullptr ? e : "unknown error");
    return nullptr;
  }
  auto lib = std::make_shared<Library>();
  lib->dl = dl;
  std::string missing;
  auto need = [&](const char* name) {
    void* f = dlsym(dl, name);
    if (f == nullptr) {
      missing += (missing.empty() ? "" : ", ") + std::string(name);
    }
    return f;
  };
  lib->create = reinterpret_cast<CreateWithDeviceFn>(need("AOTInductorModelContainerCreateWithDevice"));
  lib->destroy = reinterpret_cast<DeleteFn>(need("AOTInductorModelContainerDelete"));
  lib->run = reinterpret_cast<RunFn>(need("AOTInductorModelContainerRun"));
  lib->num_constants = reinterpret_cast<GetNumFn>(need("AOTInductorModelContainerGetNumConstants"));
  lib->constant_name = reinterpret_cast<GetStringFn>(need("AOTInductorModelContainerGetConstantName"));
  lib->constant_fqn = reinterpret_cast<GetStringFn>(need("AOTInductorModelContainerGetConstantOriginalFQN"));
  lib->constant_from_folded = reinterpret_cast<GetBoolFn>(need("AOTInductorModelContainerGetConstantFromFolded"));
  lib->constant_dtype = reinterpret_cast<GetInt32Fn>(need("AOTInductorModelContainerGetConstantDtype"));
  lib->constant_nbytes = reinterpret_cast<GetSizeFn>(need("AOTInductorModelContainerGetConstantDataSize"));
  lib->num_inputs = reinterpret_cast<GetNumFn>(need("AOTInductorModelContainerGetNumInputs"));
  lib->num_outputs = reinterpret_cast<GetNumFn>(need("AOTInductorModelContainerGetNumOutputs"));
  lib->update_pairs =
      reinterpret_cast<UpdatePairsFn>(dlsym(dl, "AOTInductorModelContainerUpdateUserManagedConstantBufferPairs"));
  lib->update_map =
      reinterpret_cast<UpdateMapFn>(dlsym(dl, "AOTInductorModelContainerUpdateUserManagedConstantBuffer"));
  lib->last_error = reinterpret_cast<GetLastErrorFn>(dlsym(dl, "AOTInductorGetLastError"));
  // Looked up through the model's own dependencies: the libgomp its kernels
  // call (torch's), whichever copy that is.
  lib->set_threads = reinterpret_cast<SetThreadsFn>(dlsym(dl, "omp_set_num_threads"));
  lib->max_threads = reinterpret_cast<GetMaxThreadsFn>(dlsym(dl, "omp_get_max_threads"));
  // Through the model's dependencies, else in a libtorch_cuda already loaded (never loaded here).
  void* torch_cuda = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
  for (void* where : {dl, torch_cuda}) {
    if (where != nullptr && lib->create_stream_guard == nullptr) {
      lib->create_stream_guard =
          reinterpret_cast<CreateStreamGuardFn>(dlsym(where, "aoti_torch_create_cuda_stream_guard"));
      lib->delete_stream_guard =
          reinterpret_cast<DeleteStreamGuardFn>(dlsym(where, "aoti_torch_delete_cuda_stream_guard"));
    }
  }
  if (lib->create_stream_guard == nullptr || lib->delete_stream_guard == nullptr) {
    lib->create_stream_guard = nullptr;
    lib->delete_stream_guard = nullptr;
  }
  if ((lib->set_threads == nullptr) != (lib->max_threads == nullptr)) {
    lib->set_threads = nullptr;
    lib->max_threads = nullptr;
  }
  if (lib->update_pairs == nullptr && lib->update_map == nullptr) {
    missing += (missing.empty() ? "" : ", ") + std::string("AOTInductorModelContainerUpdateUserManagedConstantBuffer");
  }
  if (!missing.empty()) {
    // Left loaded (never dlclose: see load_library's comment); the entry is not cached, so a retry fails the same way.
    *what = "the model .so does not export " + missing + " (not an AOTInductor model of a supported torch)";
    return nullptr;
  }
  loaded->emplace(key, lib);
  return lib;
}

ModelTensor::~ModelTensor() {
  if (handle_ != nullptr) {
    (void)aoti_torch_delete_tensor_object(static_cast<AtenTensorHandle>(handle_));
  }
}

bool ModelTensor::sizes(std::vector<int64_t>* out, std::string* what) const {
  auto h = static_cast<AtenTensorHandle>(handle_);
  int64_t dim = 0;
  int64_t* sizes = nullptr;
  if (!torch_ok(aoti_torch_get_dim(h, &dim), "aoti_torch_get_dim", what) ||
      !torch_ok(aoti_torch_get_sizes(h, &sizes), "aoti_torch_get_sizes", what)) {
    return false;
  }
  out->assign(sizes, sizes + dim);
  return true;
}

bool ModelTensor::dtype(int32_t* out, std::string* what) const {
  return torch_ok(aoti_torch_get_dtype(static_cast<AtenTensorHandle>(handle_), out), "aoti_torch_get_dtype", what);
}

bool ModelTensor::copy_into(const BlobView& dst, std::string* what) const {
  if (!dst.cuda) {
    bool done = false;
    if (!copy_dense_on_cpu(static_cast<AtenTensorHandle>(handle_), dst, &done, what)) {
      return false;
    }
    if (done) {
      return true;
    }
  }
  AtenTensorHandle d = wrap(dst, what);
  if (d == nullptr) {
    return false;
  }
  const bool copied =
      torch_ok(aoti_torch_copy_(d, static_cast<AtenTensorHandle>(handle_), 0), "aoti_torch_copy_", what);
  (void)aoti_torch_delete_tensor_object(d);
  return copied;
}

std::unique_ptr<Container> Container::create(std::shared_ptr<Library> library, const std::string& device,
                                             std::string* what) {
  ContainerHandle h = nullptr;
  if (!library->ok(library->create(&h, 1, device.c_str(), nullptr), "AOTInductorModelContainerCreateWithDevice",
                   what)) {
    return nullptr;
  }
  return std::unique_ptr<Container>(new Container(std::move(library), h));
}

Container::~Container() {
  // Deleting a container frees what the model allocated; the user-managed
  // constants are ours, and go after it.
  (void)library_->destroy(handle_);
  for (void* h : bound_) {
    (void)aoti_torch_delete_tensor_object(static_cast<AtenTensorHandle>(h));
  }
}

bool Container::constants(std::vector<ConstantInfo>* out, std::string* what) const {
  const Library& l = *library_;
  size_t n = 0;
  if (!l.ok(l.num_constants(handle_, &n), "AOTInductorModelContainerGetNumConstants", what)) {
    return false;
  }
  out->clear();
  for (size_t i = 0; i < n; ++i) {
    ConstantInfo c;
    const char* name = nullptr;
    const char* fqn = nullptr;
    if (!l.ok(l.constant_name(handle_, i, &name), "AOTInductorModelContainerGetConstantName", what) ||
        !l.ok(l.constant_fqn(handle_, i, &fqn), "AOTInductorModelContainerGetConstantOriginalFQN", what) ||
        !l.ok(l.constant_from_folded(handle_, i, &c.from_folded), "AOTInductorModelContainerGetConstantFromFolded",
              what) ||
        !l.ok(l.constant_dtype(handle_, i, &c.dtype), "AOTInductorModelContainerGetConstantDtype", what) ||
        !l.ok(l.constant_nbytes(handle_, i, &c.nbytes), "AOTInductorModelContainerGetConstantDataSize", what)) {
      return false;
    }
    c.name = name != nullptr ? name : "";
    c.original_fqn = fqn != nullptr ? fqn : "";
    out->push_back(std::move(c));
  }
  return true;
}

bool Container::io_counts(size_t* inputs, size_t* outputs, std::string* what) const {
  return library_->ok(library_->num_inputs(handle_, inputs), "AOTInductorModelContainerGetNumInputs", what) &&
         library_->ok(library_->num_outputs(handle_, outputs), "AOTInductorModelContainerGetNumOutputs", what);
}

bool Container::bind_constants(const std::vector<std::pair<std::string, BlobView>>& by_name, std::string* what) {
  std::vector<AtenTensorHandle> handles;
  for (const auto& [name, view] : by_name) {
    AtenTensorHandle h = wrap(view, what);
    if (h == nullptr) {
      *what = "constant '" + name + "': " + *what;
      for (AtenTensorHandle made : handles) {
        (void)aoti_torch_delete_tensor_object(made);
      }
      return false;
    }
    handles.push_back(h);
  }
  bool ok = false;
  if (library_->update_pairs != nullptr) {
    std::vector<ConstantMapEntry> pairs;
    for (size_t i = 0; i < handles.size(); ++i) {
      pairs.push_back({by_name[i].first.c_str(), handles[i]});
    }
    ok = library_->ok(library_->update_pairs(handle_, pairs.data(), pairs.size(), false, true),
                      "AOTInductorModelContainerUpdateUserManagedConstantBufferPairs", what);
  } else {
    // The older entry point takes the map itself across the .so boundary:
    // both sides are built with this process's libstdc++ (the .so by the torch that runs it).
    std::unordered_map<std::string, AtenTensorHandle> map;
    for (size_t i = 0; i < handles.size(); ++i) {
      map.emplace(by_name[i].first, handles[i]);
    }
    ok = library_->ok(library_->update_map(handle_, &map, false, true),
                      "AOTInductorModelContainerUpdateUserManagedConstantBuffer", what);
  }
  // The container keeps the handles (not owning them) whether or not it took them all: keep them as long as it lives.
  bound_.insert(bound_.end(), handles.begin(), handles.end());
  return ok;
}

namespace {

// The calling thread's OpenMP thread count (an ICV OpenMP keeps per thread)
// set for one scope; the caller's is restored after.
class ThreadCount {
 public:
  ThreadCount(const Library& l, int threads) : l_(l) {
    if (l_.set_threads != nullptr) {
      saved_ = l_.max_threads();
      if (saved_ != threads) {
        l_.set_threads(threads);
      }
    }
  }
  ~ThreadCount() {
    if (l_.set_threads != nullptr && l_.max_threads() != saved_) {
      l_.set_threads(saved_);
    }
  }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  const Library& l_;
  int saved_ = 0;
};

} // namespace

std::shared_ptr<void> Container::torch_stream_scope(void* stream, int32_t device, std::string* what) const {
  const Library& l = *library_;
  if (l.create_stream_guard == nullptr) {
    *what = "the torch running has no CUDA stream guard (aoti_torch_create_cuda_stream_guard): not a CUDA build";
    return nullptr;
  }
  void* guard = nullptr;
  if (!torch_ok(l.create_stream_guard(stream, device, &guard), "aoti_torch_create_cuda_stream_guard", what)) {
    return nullptr;
  }
  const DeleteStreamGuardFn del = l.delete_stream_guard;
  return std::shared_ptr<void>(guard, [del](void* g) { (void)del(g); });
}

bool Container::run(const std::vector<BlobView>& inputs, int threads, void* stream, std::vector<ModelTensor>* outputs,
                    std::string* what) {
  if (threads < 1) {
    *what = "threads must be at least 1, got " + std::to_string(threads);
    return false;
  }
  size_t n_out = 0;
  if (!library_->ok(library_->num_outputs(handle_, &n_out), "AOTInductorModelContainerGetNumOutputs", what)) {
    return false;
  }
  std::vector<AtenTensorHandle> in;
  for (const BlobView& b : inputs) {
    AtenTensorHandle h = wrap(b, what);
    if (h == nullptr) {
      for (AtenTensorHandle made : in) {
        (void)aoti_torch_delete_tensor_object(made);
      }
      return false;
    }
    in.push_back(h);
  }
  std::vector<AtenTensorHandle> out(n_out, nullptr);
  ThreadCount scope(*library_, threads);
  // The model steals the input handles (it deletes them, on failure too); the outputs are ours.
  if (!library_->ok(library_->run(handle_, in.data(), in.size(), out.data(), out.size(), stream, nullptr),
                    "AOTInductorModelContainerRun", what)) {
    for (AtenTensorHandle h : out) {
      if (h != nullptr) {
        (void)aoti_torch_delete_tensor_object(h);
      }
    }
    return false;
  }
  outputs->clear();
  for (AtenTensorHandle h : out) {
    outputs->emplace_back(h);
  }
  return true;
}

} // namespace et_copy::aoti
