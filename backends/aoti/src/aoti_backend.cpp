#include <et_copy/aoti_backend.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <et_copy/code_trust.h>
#include <et_copy/device_arguments.h>
#include <et_copy/failure_report.h>
#include <et_copy/counting_device_allocator.h>
#include <et_copy/cuda_stream.h>
#include <et_copy/delegate_record.h>
#include <et_copy/device_residency.h>
#include <et_copy/sha256.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

#include "aoti_record.h"
#include "aoti_runtime.h"

namespace et_copy {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;
using executorch::runtime::Span;
namespace et = executorch::runtime::etensor;

namespace {

// What a delegate handle owns. Members go in reverse order: the container
// first, then the device memory it was bound to.
struct Handle final : FrameHandle {       // the record's payload points nowhere after init
  const HostAliasing* aliasing = nullptr; // the server's, target cpu (the model reads the host alias); null on CUDA
  bool simulated = true;                  // target cpu on the host-aliased device, or CUDA
  int threads = kDefaultThreads;
  bool trust_code = false; // the runtime spec "trust_code"
  std::vector<std::shared_ptr<DeviceBlock>> weights;
  std::shared_ptr<StateArena> arena;
  std::unique_ptr<aoti::Container> container;
};

// Logs "AotiDeviceBackend: method 'm': <message>" (BackendFrame::fail) and returns `e`.
ET_NODISCARD Error fail(Error e, const std::string& method, const std::string& message) {
  return aoti_backend().fail(e, method, message);
}

// Who serves CUDA, in words, for refusals.
std::string cuda_server() {
  return allocator_words(executorch::runtime::get_device_allocator(et::DeviceType::CUDA));
}

std::string release_of(const std::string& version) {
  return version.substr(0, version.find('+'));
}

// A view of a tensor argument's memory for the model: the host alias on the
// simulated device, the device pointer on CUDA.
Result<aoti::BlobView> view_of(const Tensor& t, const Handle& h) {
  aoti::BlobView v;
  v.data = t.mutable_data_ptr();
  if (h.simulated && t.nbytes() > 0) {
    auto alias = h.aliasing->host_alias(t.const_data_ptr(), t.nbytes(), h.record.device_index);
    if (!alias.ok()) {
      return alias.error();
    }
    v.data = *alias;
  }
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  v.dtype = static_cast<int32_t>(t.scalar_type());
  v.cuda = !h.simulated;
  v.device_index = h.record.device_index;
  return v;
}

// "input i" / "output j" for argument `i` of a call taking `n_in` inputs (failure messages only).
std::string argument_name(size_t i, size_t n_in) {
  return i < n_in ? "input " + std::to_string(i) : "output " + std::to_string(i - n_in);
}

// The record's layout of `name` over `base` (device memory), as the model binds it.
aoti::BlobView constant_view(const DelegateTensor& t, uint8_t* device, uint8_t* alias, const Handle& h) {
  aoti::BlobView v;
  v.data = h.simulated ? alias : device;
  v.sizes = t.sizes;
  v.strides = t.strides;
  v.dtype = static_cast<int32_t>(t.dtype);
  v.cuda = !h.simulated;
  v.device_index = h.record.device_index;
  return v;
}

ET_NODISCARD Error check_target(Handle& h) {
  const aoti::AotiLines& r = aoti::aoti_lines(h.record);
  auto* alloc = executorch::runtime::get_device_allocator(et::DeviceType::CUDA);
  if (r.target == "cpu") {
    // Compiled for the CPU, the model reads and writes device memory through its host alias.
    h.aliasing = host_aliasing(alloc);
    if (h.aliasing == nullptr) {
      return fail(Error::DelegateInvalidCompatibility, h.method_name,
                  "the model was compiled for target cpu, which runs on et-copy's simulated device only, and cuda is "
                  "served by " +
                      cuda_server() + " (call et_copy::use_simulated_device() before loading)");
    }
    h.simulated = true;
  } else {
    // A GPU: et-copy's CUDA allocator or another library's (upstream's CUDA backend registers its own). The
    // model gets device pointers and computes with CUDA; the residency module allocates and copies through
    // whichever serves.
    if (alloc == nullptr || host_aliasing(alloc) != nullptr) {
      return fail(Error::DelegateInvalidCompatibility, h.method_name,
                  "the model was compiled for target cuda, which needs a GPU serving cuda (et_copy.use_cuda(), or "
                  "another library's CUDA allocator), and cuda is served by " +
                      cuda_server());
    }
    h.simulated = false;
  }
  if (release_of(r.torch_version) != aoti::compiled_torch_version()) {
    return fail(Error::DelegateInvalidCompatibility, h.method_name,
                "the model was compiled by torch " + r.torch_version + ", and this backend runs torch " +
                    aoti::compiled_torch_version() + "'s AOTInductor runtime: recompile it with that torch");
  }
  return Error::Ok;
}

// The payload is the code its digest line names, and that code is trusted
// (code_trust.h). Reads the payload's bytes, and nothing else of it.
ET_NODISCARD Error check_code(const Handle& h) {
  const aoti::AotiLines& r = aoti::aoti_lines(h.record);
  const std::string found = Sha256::hex(Sha256::of(h.record.payload, h.record.payload_nbytes));
  // ExecuTorch cuts a log line at 256 bytes: a digest to a line.
  if (found != r.payload_sha256) {
    ET_LOG(Error, "%s: method '%s': the record's digest line says SHA-256 %s", kAotiDeviceBackend,
           h.method_name.c_str(), r.payload_sha256.c_str());
    return fail(Error::InvalidProgram, h.method_name,
                "the compiled code's SHA-256 is " + found + ": the payload was changed after export, not loaded");
  }
  if (!h.trust_code && !is_trusted_code(found)) {
    ET_LOG(Error, "%s: method '%s': the program carries compiled code (%s, %zu bytes, SHA-256 %s)", kAotiDeviceBackend,
           h.method_name.c_str(), r.target.c_str(), h.record.payload_nbytes, found.c_str());
    return fail(Error::AccessFailed, h.method_name,
                "not compiled here, and loading runs it: pass trust_code=True to et_copy.runtime.load, or "
                "et_copy.backends.aoti.trust(digest) (C++: LoadOptions::trust_code, trust_compiled_code)");
  }
  return Error::Ok;
}

// Uploads the weights, binds the arena, and binds every constant the model reads.
ET_NODISCARD Error bind_constants(Handle& h, BackendInitContext& context) {
  const DelegateRecord& r = h.record;
  std::string what;
  std::vector<aoti::ConstantInfo> constants;
  if (!h.container->constants(&constants, &what)) {
    return fail(Error::DelegateInvalidCompatibility, h.method_name, what);
  }
  const auto* named = context.get_named_data_map();
  std::map<std::string, std::pair<uint8_t*, uint8_t*>> memory; // record name -> (device, alias)
  for (const DelegateWeight& w : r.weights) {
    auto block = aoti_backend().bind_weight(h, w, named);
    if (!block.ok()) {
      return block.error();
    }
    memory[w.fqn] = {static_cast<uint8_t*>((*block)->device()), (*block)->host_alias()};
    h.weights.push_back(std::move(*block));
  }
  if (r.has_arena) {
    auto arena = aoti_backend().bind_arena(h, context, r.arena_nbytes);
    if (!arena.ok()) {
      return arena.error();
    }
    h.arena = std::move(*arena);
    auto* device = static_cast<uint8_t*>(h.arena->block().device());
    uint8_t* alias = h.arena->block().host_alias();
    for (const DelegateState& s : r.states) {
      memory[s.name] = {device + s.offset, alias == nullptr ? nullptr : alias + s.offset};
    }
  }
  std::vector<std::pair<std::string, aoti::BlobView>> bound;
  for (const aoti::ConstantInfo& c : constants) {
    if (c.from_folded) {
      continue; // computed by the model from the others
    }
    const DelegateTensor* t = nullptr;
    for (const DelegateTensor& candidate : r.tensors) {
      if (candidate.name == c.original_fqn || (t == nullptr && candidate.name == c.name)) {
        t = &candidate;
      }
    }
    if (t == nullptr) {
      return fail(Error::DelegateInvalidCompatibility, h.method_name,
                  "the model reads constant '" + c.name + "' (original name '" + c.original_fqn +
                      "'), and the record has no weight or state of that name");
    }
    if (static_cast<int32_t>(t->dtype) != c.dtype) {
      return fail(Error::DelegateInvalidCompatibility, h.method_name,
                  "constant '" + c.original_fqn + "' is dtype " + std::to_string(c.dtype) + " in the model, " +
                      executorch::runtime::toString(t->dtype) + " in the record");
    }
    const auto& [device, alias] = memory.at(t->name);
    bound.emplace_back(c.name, constant_view(*t, device, alias, h));
  }
  if (!h.container->bind_constants(bound, &what)) {
    return fail(Error::DelegateInvalidCompatibility, h.method_name, "binding the weights and state: " + what);
  }
  return Error::Ok;
}

} // namespace

Error AotiDeviceBackend::init_payload(FrameHandle& frame, BackendInitContext& context,
                                      FreeableBuffer& processed) const {
  auto* h = static_cast<Handle*>(&frame);
  const std::string device = device_name(h->record.device_type, h->record.device_index);
  std::optional<int> threads;
  Error e = int_spec(*h, context, kThreadsSpec, &threads);
  if (e != Error::Ok) {
    return e;
  }
  if (threads.has_value() && *threads < 1) {
    return fail(Error::InvalidArgument, h->method_name,
                "runtime spec 'threads' must be at least 1, got " + std::to_string(*threads));
  }
  h->threads = threads.value_or(kDefaultThreads);
  e = flag_spec(*h, context, kTrustCodeSpec, &h->trust_code);
  if (e != Error::Ok) {
    return e;
  }
  e = check_target(*h);
  if (e != Error::Ok) {
    return e;
  }
  // The payload is code: it must be the code the record names, and trusted, before a byte of it is loaded.
  e = check_code(*h);
  if (e != Error::Ok) {
    return e;
  }
  std::string what; // aoti_runtime.h's own reason
  auto library = aoti::load_library(h->record.payload, h->record.payload_nbytes, &what);
  h->record.payload = nullptr; // the bytes go with `processed`
  processed.Free();
  if (library == nullptr) {
    return fail(Error::DelegateInvalidCompatibility, h->method_name, what);
  }
  h->container = aoti::Container::create(std::move(library), h->simulated ? "cpu" : device, &what);
  if (h->container == nullptr) {
    return fail(Error::DelegateInvalidCompatibility, h->method_name, what);
  }
  size_t inputs = 0, outputs = 0;
  if (!h->container->io_counts(&inputs, &outputs, &what)) {
    return fail(Error::DelegateInvalidCompatibility, h->method_name, what);
  }
  const aoti::AotiLines& lines = aoti::aoti_lines(h->record);
  if (inputs != lines.num_inputs || outputs != lines.num_outputs) {
    return fail(Error::DelegateInvalidCompatibility, h->method_name,
                "the model takes " + std::to_string(inputs) + " inputs and gives " + std::to_string(outputs) +
                    " outputs; the record's io line says " + std::to_string(lines.num_inputs) + " and " +
                    std::to_string(lines.num_outputs));
  }
  e = bind_constants(*h, context);
  if (e != Error::Ok) {
    return e;
  }
  return Error::Ok;
}

BackendFrame::Io AotiDeviceBackend::io(const FrameHandle& frame) const {
  const aoti::AotiLines& lines = aoti::aoti_lines(frame.record);
  return Io{lines.num_inputs, lines.num_outputs, "the model"};
}

Error AotiDeviceBackend::execute_payload(FrameHandle& frame, Span<EValue*> args) const {
  Handle& h = static_cast<Handle&>(frame);
  const size_t n_in = aoti::aoti_lines(h.record).num_inputs;
  const size_t n_out = aoti::aoti_lines(h.record).num_outputs;
  // Check every argument before running; messages are built only on failure (this runs per token).
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i]->isTensor()) {
      return fail(Error::NotSupported, h.method_name,
                  argument_name(i, n_in) + " is not a tensor (the model takes tensors only)");
    }
    const Tensor& arg = args[i]->toTensor();
    if (!is_device_argument(arg, arg.nbytes(), h.record.device_type, h.record.device_index)) {
      return fail(Error::InvalidArgument, h.method_name,
                  argument_name(i, n_in) + " " +
                      refuse_device_argument(arg, arg.nbytes(), h.record.device_type, h.record.device_index));
    }
  }
  std::vector<aoti::BlobView> inputs;
  for (size_t i = 0; i < n_in; ++i) {
    auto v = view_of(args[i]->toTensor(), h);
    if (!v.ok()) {
      return fail(v.error(), h.method_name, "input " + std::to_string(i) + ": no host alias");
    }
    inputs.push_back(std::move(*v));
  }
  std::string what;
  // On CUDA with a caller's stream (cuda_stream.h): the run and the output
  // copies are queued on it, behind the h2d copies and before the d2h ones;
  // torch's current stream is that stream until the copies are queued.
  CudaStreamHandle stream = nullptr;
  std::shared_ptr<void> on_stream;
  if (!h.simulated && cuda_stream(h.record.device_index, &stream)) {
    on_stream = h.container->torch_stream_scope(stream, h.record.device_index, &what);
    if (on_stream == nullptr) {
      return fail(Error::NotSupported, h.method_name, "running on the caller's CUDA stream: " + what);
    }
  }
  std::vector<aoti::ModelTensor> results;
  if (!h.container->run(inputs, h.threads, stream, &results, &what)) {
    return fail(Error::Internal, h.method_name, what);
  }
  if (results.size() != n_out) {
    return fail(Error::Internal, h.method_name,
                "the model gave " + std::to_string(results.size()) + " outputs, not " + std::to_string(n_out));
  }
  for (size_t j = 0; j < n_out; ++j) {
    const auto name = [&] { return argument_name(n_in + j, n_in); };
    Tensor& t = args[n_in + j]->toTensor();
    std::vector<int64_t> sizes;
    int32_t dtype = 0;
    if (!results[j].sizes(&sizes, &what) || !results[j].dtype(&dtype, &what)) {
      return fail(Error::Internal, h.method_name, name() + ": " + what);
    }
    if (dtype != static_cast<int32_t>(t.scalar_type())) {
      return fail(Error::InvalidArgument, h.method_name,
                  name() + " has dtype " + executorch::runtime::toString(t.scalar_type()) + ", the model's output " +
                      executorch::runtime::toString(static_cast<ScalarType>(dtype)));
    }
    Error e = executorch::runtime::resize_tensor(t, ArrayRef<int64_t>(sizes.data(), sizes.size()));
    if (e != Error::Ok) {
      return fail(e, h.method_name, name() + " cannot take the model output's shape");
    }
    // The resized extent must still lie in its allocation.
    if (!is_device_argument(t, t.nbytes(), h.record.device_type, h.record.device_index)) {
      return fail(Error::InvalidArgument, h.method_name,
                  name() + " " + refuse_device_argument(t, t.nbytes(), h.record.device_type, h.record.device_index));
    }
    auto v = view_of(t, h);
    if (!v.ok()) {
      return fail(v.error(), h.method_name, name() + ": no host alias");
    }
    if (!results[j].copy_into(*v, &what)) {
      return fail(Error::Internal, h.method_name, name() + ": " + what);
    }
  }
  return Error::Ok;
}

const char* aoti_torch_version() {
  return aoti::compiled_torch_version();
}

const char* AotiDeviceBackend::payload_kind() const {
  return kPayloadAoti;
}

const char* AotiDeviceBackend::payload_words() const {
  return "an AOTInductor model";
}

std::unique_ptr<FrameHandle> AotiDeviceBackend::new_handle() const {
  return std::make_unique<Handle>();
}

AotiDeviceBackend& aoti_backend() {
  static AotiDeviceBackend* instance = new AotiDeviceBackend(); // the registry keeps the pointer
  return *instance;
}

const char* AotiDeviceBackend::id() const {
  return kAotiDeviceBackend;
}

bool AotiDeviceBackend::runs_on(const executorch::runtime::DeviceAllocator& server) const {
  // Compiled for the CPU, it runs on the simulated device's host alias; compiled for CUDA, on a GPU, whoever's
  // allocator serves it (check_target matches the record's target to the server at init).
  return server.device_type() == et::DeviceType::CUDA; // a host-aliasing server (cpu) or a GPU's (cuda)
}

namespace {

// What the runtime learns of this backend, in one value: the backend, its
// payload kind's rules (so its records parse) and how to register it (so a
// load check's refusal can say so).
DeviceBackendDefinition definition() {
  return {&aoti_backend(), aoti::record_rules(), "et_copy.use_aoti_backend()", "et_copy::register_aoti_backend()",
          "et-copy's simulated device (target cpu) and GPUs (target cuda)"};
}

// Run when the library loads: a program that holds aoti delegates may be
// checked (and refused) before register_aoti_backend() is called. Touches
// none of ExecuTorch's registries.
[[maybe_unused]] const Error kDescribed = describe_device_backend(definition());

} // namespace

Registration register_aoti_backend(Error* error) {
  return register_device_backend(definition(), error); // kFailed only when another "aoti" kind is known
}

} // namespace et_copy
