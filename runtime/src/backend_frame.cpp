#include <et_copy/backend_frame.h>

#include <cstring>
#include <vector>

#include <et_copy/failure_report.h>
#include <et_copy/program_check.h>
#include <executorch/runtime/platform/log.h>

namespace et_copy {

using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::NamedDataMap;
using executorch::runtime::Result;
using executorch::runtime::Span;

Error BackendFrame::fail(Error e, const std::string& method, const std::string& message) const {
  ET_LOG(Error, "%s: method '%s': %s", id(), method.c_str(), message.c_str());
  return e;
}

Result<DelegateHandle*> BackendFrame::init(BackendInitContext& context, FreeableBuffer* processed,
                                           ArrayRef<CompileSpec> compile_specs) const {
  std::unique_ptr<FrameHandle> h = new_handle();
  h->method_name = context.get_method_name() != nullptr ? context.get_method_name() : "?";
  if (processed == nullptr) {
    return fail(Error::InvalidArgument, h->method_name, "no processed bytes");
  }
  FailureReport report;
  auto record = parse_delegate_record(processed->data(), processed->size(), &report);
  if (!record.ok()) {
    return fail(record.error(), h->method_name, report.detail);
  }
  h->record = std::move(*record);
  if (h->record.payload_word != payload_kind()) {
    return fail(Error::DelegateInvalidCompatibility, h->method_name,
                "the record's payload is '" + h->record.payload_word + "', and " + id() + " runs '" + payload_kind() +
                    "' payloads (" + payload_words() + ")");
  }
  const std::string device = device_name(h->record.device_type, h->record.device_index);
  for (const CompileSpec& spec : compile_specs) {
    if (spec.key != nullptr && std::strcmp(spec.key, "target_device") == 0) {
      const std::string value(static_cast<const char*>(spec.value.buffer), spec.value.nbytes);
      if (value != device && !(value == "cuda" && h->record.device_index == 0)) {
        return fail(Error::DelegateInvalidCompatibility, h->method_name,
                    "compile spec target_device is '" + value + "', the record's device " + device);
      }
    }
  }
  Error e = int_spec(*h, context, kPoolSpec, &h->pool);
  if (e == Error::Ok) {
    e = flag_spec(*h, context, kVerifyDataSpec, &h->verify);
  }
  if (e == Error::Ok) {
    e = init_payload(*h, context, *processed);
  }
  if (e != Error::Ok) {
    return e;
  }
  return static_cast<DelegateHandle*>(h.release()); // destroy() takes it back as a FrameHandle
}

Error BackendFrame::execute(BackendExecutionContext& /*context*/, DelegateHandle* handle, Span<EValue*> args) const {
  if (handle == nullptr) {
    ET_LOG(Error, "%s: execute without a handle", id());
    return Error::InvalidArgument;
  }
  auto& h = *static_cast<FrameHandle*>(handle);
  const Io n = io(h);
  if (args.size() != n.inputs + n.outputs) {
    return fail(Error::InvalidArgument, h.method_name,
                std::to_string(args.size()) + " arguments, " + n.payload + " takes " + std::to_string(n.inputs) +
                    " inputs and " + std::to_string(n.outputs) + " outputs");
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == nullptr) {
      return fail(
          Error::InvalidArgument, h.method_name,
          (i < n.inputs ? "input " + std::to_string(i) : "output " + std::to_string(i - n.inputs)) + " is missing");
    }
  }
  return execute_payload(h, args);
}

void BackendFrame::destroy(DelegateHandle* handle) const {
  delete static_cast<FrameHandle*>(handle); // the backend's objects, then the weights and arena they point into
}

Error BackendFrame::int_spec(const FrameHandle& h, const BackendInitContext& context, const char* key,
                             std::optional<int>* out) const {
  auto value = context.get_runtime_spec<int>(key);
  if (value.ok()) {
    *out = *value;
  } else if (value.error() != Error::NotFound) {
    return fail(Error::InvalidArgument, h.method_name, std::string("runtime spec '") + key + "' must be an int");
  }
  return Error::Ok;
}

Error BackendFrame::flag_spec(const FrameHandle& h, const BackendInitContext& context, const char* key,
                              bool* out) const {
  auto value = runtime_flag(context, key);
  if (!value.ok()) {
    return fail(Error::InvalidArgument, h.method_name, std::string("runtime spec '") + key + "' must be a bool");
  }
  *out = *value;
  return Error::Ok;
}

Result<std::shared_ptr<DeviceBlock>> BackendFrame::bind_weight(const FrameHandle& h, const DelegateWeight& w,
                                                               const NamedDataMap* named) const {
  FailureReport report;
  auto block =
      acquire_weight(w.key, h.record.device_type, h.record.device_index, w.nbytes, named, h.pool, &report, h.verify);
  if (!block.ok()) {
    return fail(block.error(), h.method_name, "weight '" + w.fqn + "': " + report.detail);
  }
  return block;
}

Result<std::shared_ptr<StateArena>> BackendFrame::bind_arena(const FrameHandle& h, BackendInitContext& context,
                                                             size_t nbytes) const {
  ArenaKey key{id(), std::nullopt, context.get_named_data_map()};
  const Error e = int_spec(h, context, kSessionSpec, &key.session);
  if (e != Error::Ok) {
    return e;
  }
  FailureReport report;
  auto arena = acquire_arena(key, h.record.device_type, h.record.device_index, nbytes, h.record.states,
                             context.get_named_data_map(), h.method_name, &report, h.verify);
  if (!arena.ok()) {
    return fail(arena.error(), h.method_name, report.detail);
  }
  return arena;
}

} // namespace et_copy
