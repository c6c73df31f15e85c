#include <et_copy/sessions.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <string_view>

#include <et_copy/failure_report.h>
#include <et_copy/copy_ops.h>
#include <et_copy/loaded_method.h>
#include <et_copy/argument_kinds.h>
#include <et_copy/program_check.h>
#include <et_copy/program_record.h>
#include <et_copy/device_backend.h>
#include <et_copy/device_residency.h>
#include <et_copy/limits.h>

#include <executorch/runtime/core/device_allocator.h>

#include "byte_range.h"

namespace et_copy {

using executorch::runtime::DeviceMemoryBuffer;
using executorch::runtime::Error;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::Result;
using executorch::runtime::Span;
namespace et = executorch::runtime::etensor;

namespace {

// Host bytes into `dst` on `device`: the DeviceAllocator's counted h2d copy
// for a device, memcpy for the host.
ET_NODISCARD Error copy_in(et::Device device, void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) {
    return Error::Ok;
  }
  if (device.type() == et::DeviceType::CPU) {
    std::memcpy(dst, src, nbytes);
    return Error::Ok;
  }
  auto* allocator = executorch::runtime::get_device_allocator(device.type());
  if (allocator == nullptr) {
    return Error::NotFound;
  }
  return allocator->copy_host_to_device(dst, src, nbytes, device.index());
}

} // namespace

namespace {
// Process-unique ids for pools and sessions (device backends key their caches by them).
int next_id() {
  static std::atomic<int> next{1};
  return next.fetch_add(1);
}
} // namespace

SessionPool::SessionPool(Span<const uint8_t> program_bytes, const executorch::runtime::Program* program,
                         Span<const executorch::runtime::Kernel> kernels,
                         const executorch::runtime::NamedDataMap* named_data)
    : program_bytes_(program_bytes), program_(program), kernels_(kernels), named_data_(named_data), id_(next_id()) {
  open_pool(id_); // weights loaded with this pool's id stay until the pool goes
  // A method resolves an operator in its list first: the first entry of the name serves it.
  for (const auto& k : kernels) {
    if (k.name_ != nullptr && std::strcmp(k.name_, kD2hCopyOutName) == 0) {
      d2h_kernel_is_ours_ = k.op_ == &d2h_copy_out_boxed;
      break;
    }
  }
}

SessionPool::~SessionPool() {
  for (DeviceBackend* b : registered_device_backends()) {
    b->release_pool(id_);
  }
  et_copy::release_pool(id_); // the residency module's pins, whatever the backends did
}

Session::~Session() = default; // LoadedMethod is complete here

Session::Session(SessionPool* pool) : pool_(pool), id_(next_id()) {}

Error Session::set_backend_specs(FailureReport* report) {
  // Each device backend gets the pool's and session's ids and its options; a backend the options name that is
  // no device backend of et-copy's (another library's) gets its options alone.
  std::vector<std::string> ids;
  for (const DeviceBackend* b : registered_device_backends()) {
    ids.emplace_back(b->id());
  }
  const size_t device_backends = ids.size();
  for (const std::string& id : pool_->options_.backend_ids()) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
      ids.push_back(id);
    }
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<executorch::runtime::BackendOption> specs = pool_->options_.options_for(ids[i]);
    if (i < device_backends) {
      // The core's own two (kPoolSpec, kSessionSpec): BackendLoadOptions refuses those keys.
      executorch::runtime::BackendOptions<2> core;
      (void)core.set_option("pool", pool_->id_);
      (void)core.set_option("session", id_);
      specs.insert(specs.begin(), core.view().begin(), core.view().end());
    }
    std::vector<executorch::runtime::BackendOption>& kept = backend_specs_[ids[i]];
    kept = std::move(specs);
    const Error e = backend_options_.set_options(
        ids[i].c_str(), executorch::runtime::Span<executorch::runtime::BackendOption>(kept.data(), kept.size()));
    if (e != Error::Ok) {
      return fail(report, e,
                  "passing load options to backend '" + ids[i] + "': one load passes options to at most " +
                      std::to_string(kMaxDeviceBackends) +
                      " backends (the device backends and those the options name)");
    }
  }
  return Error::Ok;
}

Result<std::unique_ptr<SessionPool>> SessionPool::create(Span<const uint8_t> program_bytes,
                                                         const executorch::runtime::Program* program,
                                                         Span<const executorch::runtime::Kernel> kernels,
                                                         const executorch::runtime::NamedDataMap* named_data,
                                                         FailureReport* report, const BackendLoadOptions& options) {
  if (program == nullptr) {
    return fail(report, Error::InvalidArgument, "SessionPool::create: no program");
  }
  FailureReport refusal;
  const Error e = check_device_access(program_bytes.data(), program_bytes.size(), device_backends(),
                                      report != nullptr ? &refusal : nullptr);
  if (e != Error::Ok) {
    // With nothing serving the device, no backend can be allowed on it: that, not the program, is what to fix.
    const bool unserved = executorch::runtime::get_device_allocator(et::DeviceType::CUDA) == nullptr;
    return fail(report, unserved ? Error::NotFound : e,
                unserved ? "no DeviceAllocator is registered for cuda, where this program plans memory, so nothing "
                           "may run there yet; register one before loading (" +
                               refusal.detail + ")"
                         : std::move(refusal.detail));
  }
  // Indices are in range now; a kernel argument of the wrong kind would abort in EValue's accessors.
  if (const Error kinds = check_argument_kinds(program_bytes.data(), program_bytes.size(), "", report);
      kinds != Error::Ok) {
    return kinds;
  }
  auto data = program->get_named_data_map();
  auto record = read_program_record(data.ok() ? *data : nullptr, report);
  if (!record.ok()) {
    return record.error();
  }
  auto pool = std::unique_ptr<SessionPool>(new SessionPool(program_bytes, program, kernels, named_data));
  pool->record_ = *record;
  pool->options_ = options;
  return pool;
}

std::unique_ptr<Session> SessionPool::new_session() {
  return std::unique_ptr<Session>(new Session(this));
}

size_t SessionPool::device_scratch_nbytes() const {
  size_t n = 0;
  for (const auto& [name, scratch] : scratch_) {
    for (const auto& b : scratch.buffers) {
      n += b.device().type() == et::DeviceType::CPU ? 0 : b.span().size();
    }
  }
  return n;
}

Result<SessionPool::MethodScratch*> SessionPool::scratch(const std::string& name, FailureReport* report) {
  auto found = scratch_.find(name);
  if (found != scratch_.end()) {
    return &found->second;
  }
  auto meta = program_->method_meta(name.c_str());
  if (!meta.ok()) {
    return fail(report, meta.error(), "the program has no method '" + name + "'");
  }
  MethodScratch s;
  const size_t n = meta->num_memory_planned_buffers();
  // The program's record says its state lives in its device delegates: every
  // planned buffer is scratch. Without a record, named state in the last buffer
  // is each session's (Session::method checks where it lies after loading).
  s.all_scratch = record_.state_in_delegates;
  if (record_.present && meta->num_attributes() > 0) {
    // et_copy.export keeps state only in device delegates (an older export kept it in the program, with
    // starts this runtime no longer reads): shared as scratch it would be every session's. Refuse, not guess.
    return fail(report, Error::InvalidProgram,
                "method '" + name + "' names " + std::to_string(meta->num_attributes()) +
                    " state tensors of its own, but a program et_copy.export built keeps its state in its device "
                    "delegates (export the program again, with a device backend)");
  }
  s.has_arena = !s.all_scratch && n > 0 && meta->num_attributes() > 0;
  for (size_t i = 0; (s.all_scratch || s.has_arena) && i + (s.has_arena ? 1 : 0) < n; ++i) {
    auto b = planned_buffer(*meta, i, report);
    if (!b.ok()) {
      return b.error();
    }
    s.buffers.push_back(std::move(*b));
  }
  return &scratch_.emplace(name, std::move(s)).first->second;
}

Result<Method*> Session::method(const std::string& name, FailureReport* report,
                                executorch::runtime::EventTracer* event_tracer) {
  auto found = methods_.find(name);
  if (found != methods_.end()) {
    Method* m = found->second->method.get();
    if (event_tracer != nullptr && m->get_event_tracer() != event_tracer) {
      return fail(report, Error::InvalidArgument,
                  "method '" + name + "' is already loaded with another event tracer, which it keeps");
    }
    return m;
  }
  auto scratch = pool_->scratch(name, report);
  if (!scratch.ok()) {
    return scratch.error();
  }
  auto meta = pool_->program_->method_meta(name.c_str());
  const size_t n = meta->num_memory_planned_buffers();
  auto loaded = std::make_unique<Loaded>();
  for (const auto& b : (*scratch)->buffers) {
    loaded->spans.push_back(b.span());
    loaded->devices.push_back(b.device());
  }
  for (size_t i = 0; !(*scratch)->has_arena && !(*scratch)->all_scratch && i < n; ++i) {
    // No arena: nothing tells state from scratch, so all of it is this session's.
    auto b = planned_buffer(*meta, i, report);
    if (!b.ok()) {
      return b.error();
    }
    loaded->owned.push_back(std::make_unique<PlannedBuffer>(std::move(*b))); // a failed load drops it
    loaded->spans.push_back(loaded->owned.back()->span());
    loaded->devices.push_back(loaded->owned.back()->device());
  }
  if ((*scratch)->has_arena) {
    const auto size = meta->memory_planned_buffer_size(n - 1);
    const auto device = meta->memory_planned_buffer_device(n - 1);
    if (!size.ok() || !device.ok() || *size < 0) {
      return fail(report, Error::InvalidProgram, "the state buffer has no valid size or device");
    }
    if (arena_ == nullptr) {
      auto b = PlannedBuffer::create(static_cast<size_t>(*size), *device);
      if (!b.ok()) {
        return fail(report, b.error(), not_allocated("the state", *size, *device));
      }
      arena_ = std::make_unique<PlannedBuffer>(std::move(*b));
    } else if (arena_->span().size() != static_cast<size_t>(*size) || arena_->device().type() != device->type() ||
               arena_->device().index() != device->index()) {
      return fail(report, Error::InvalidProgram,
                  "method '" + name + "' plans its state as " + std::to_string(*size) + " bytes on " +
                      device_name(*device) + ", another method as " + std::to_string(arena_->span().size()) +
                      " bytes on " + device_name(arena_->device()) + ": methods of one program must agree");
    }
    loaded->spans.push_back(arena_->span());
    loaded->devices.push_back(arena_->device());
  }
  loaded->planned =
      std::make_unique<HierarchicalAllocator>(Span<Span<uint8_t>>(loaded->spans.data(), loaded->spans.size()),
                                              Span<const et::Device>(loaded->devices.data(), loaded->devices.size()));
  loaded->memory =
      std::make_unique<MemoryManager>(&loaded->method_allocator, loaded->planned.get(), &loaded->temp_allocator);
  // Backends registered since the last load get their specs too.
  if (const Error e = set_backend_specs(report); e != Error::Ok) {
    return e;
  }
  auto result = pool_->program_->load_method(name.c_str(), loaded->memory.get(), event_tracer, pool_->named_data_,
                                             &backend_options_, pool_->kernels_);
  if (!result.ok()) {
    return fail(report, result.error(), "loading method '" + name + "'");
  }
  loaded->method = std::make_unique<Method>(std::move(*result));
  if ((*scratch)->has_arena) {
    // Every named state tensor must lie inside the arena, or sessions would share it through the scratch.
    const uint8_t* base = arena_->span().data();
    const size_t size = arena_->span().size();
    for (size_t i = 0; i < meta->num_attributes(); ++i) {
      auto info = meta->attribute_tensor_meta(i);
      auto t = info.ok() ? loaded->method->get_attribute(std::string_view(info->name().data(), info->name().size()))
                         : Result<executorch::aten::Tensor>(info.error());
      if (!t.ok()) {
        return fail(report, Error::InvalidProgram,
                    "method '" + name + "': cannot read its state tensor " + std::to_string(i));
      }
      if (!internal::bytes_within(t->const_data_ptr(), t->nbytes(), base, size)) {
        // Named state that lives in the scratch: load it again with memory of its own.
        loaded.reset();
        (*scratch)->has_arena = false;
        (*scratch)->buffers.clear();
        if (methods_.empty()) {
          arena_.reset();
        }
        return method(name, report, event_tracer);
      }
    }
  }
  Method* m = loaded->method.get();
  methods_.emplace(name, std::move(loaded));
  if ((*scratch)->has_arena && !state_zeroed_) {
    // After the load, whatever it wrote: the state starts at zero, once, whichever method comes first.
    const Error e = zero_state(report);
    if (e != Error::Ok) {
      methods_.erase(name);
      return e;
    }
  }
  return m;
}

Error Session::zero_state(FailureReport* report) {
  std::vector<uint8_t> zeros(arena_->span().size(), 0);
  const Error e = copy_in(arena_->device(), arena_->span().data(), zeros.data(), zeros.size());
  if (e != Error::Ok) {
    return fail(report, e, "writing the initial (zero) state to " + device_name(arena_->device()));
  }
  state_zeroed_ = true;
  return Error::Ok;
}

Error Session::reset(FailureReport* report) {
  if (methods_.empty()) {
    return Error::Ok;
  }
  std::vector<DeviceBackend*> holding; // the device backends that hold state of this session
  for (DeviceBackend* b : registered_device_backends()) {
    if (b->state_nbytes(id_) > 0) {
      holding.push_back(b);
    }
  }
  if (arena_ == nullptr && holding.empty()) {
    return fail(report, Error::NotSupported,
                "the program does not keep its state in a buffer of its own, so it cannot be reset (export it "
                "with et_copy.export, or load the program again)");
  }
  for (DeviceBackend* b : holding) {
    const Error e = b->reset_state(id_);
    if (e != Error::Ok) {
      return fail(report, e, std::string("resetting the state in the device backend ") + b->id());
    }
  }
  return arena_ == nullptr ? Error::Ok : zero_state(report);
}

namespace {

// Bytes of the state the device backends hold for `session`.
size_t backend_state_nbytes(int session) {
  size_t n = 0;
  for (const DeviceBackend* b : registered_device_backends()) {
    n += b->state_nbytes(session);
  }
  return n;
}

} // namespace

size_t Session::state_nbytes() const {
  return (arena_ == nullptr ? 0 : arena_->span().size()) + backend_state_nbytes(id_);
}

size_t Session::device_nbytes() const {
  size_t n = arena_ != nullptr && arena_->device().type() != et::DeviceType::CPU ? arena_->span().size() : 0;
  n += backend_state_nbytes(id_);
  for (const auto& [name, loaded] : methods_) {
    for (const auto& b : loaded->owned) {
      n += b->device().type() == et::DeviceType::CPU ? 0 : b->span().size();
    }
  }
  return n;
}

} // namespace et_copy
