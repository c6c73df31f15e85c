#include <et_copy/simulated_device_backend.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <et_copy/argument_kinds.h>
#include <et_copy/device_arguments.h>
#include <et_copy/failure_report.h>
#include <et_copy/delegate_record.h>
#include <et_copy/device_residency.h>
#include <et_copy/program_check.h>
#include <et_copy/simulated_device_allocator.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/tensor_layout.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/log.h>

#include "content_hash.h"
#include "external_tensors.h"

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
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::NamedDataMap;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;
using executorch::runtime::TensorLayout;
namespace et = executorch::runtime::etensor;

namespace {

constexpr const char* kName = "SimulatedDeviceBackend";

struct Scratch {
  std::vector<uint8_t> program; // the nested program it was planned for (the key's check)
  std::vector<std::unique_ptr<DeviceBlock>> buffers;
};

// The scratch cache, by (pool id, nested program hash), under its own lock.
// Leaked on purpose: handles may be destroyed during static destruction.
struct ScratchCache {
  std::mutex mutex;
  std::map<std::pair<int, uint64_t>, std::weak_ptr<Scratch>> scratch;
};
ScratchCache& scratch_cache() {
  static ScratchCache* c = new ScratchCache();
  return *c;
}

// Serves each weight's FQN as the host alias of its device copy, with the
// layout the nested program declares (Method checks it).
class WeightDataMap final : public NamedDataMap {
 public:
  struct Entry {
    internal::ExternalTensor layout;
    std::shared_ptr<DeviceBlock> block;
  };
  std::map<std::string, Entry, std::less<>> entries;

  ET_NODISCARD Result<const TensorLayout> get_tensor_layout(std::string_view key) const override {
    auto e = find(key);
    if (e == nullptr) {
      return Error::NotFound;
    }
    return TensorLayout::create(Span<const int32_t>(e->layout.sizes.data(), e->layout.sizes.size()),
                                Span<const uint8_t>(e->layout.dim_order.data(), e->layout.dim_order.size()),
                                e->layout.scalar_type);
  }
  ET_NODISCARD Result<FreeableBuffer> get_data(std::string_view key) const override {
    auto e = find(key);
    if (e == nullptr) {
      return Error::NotFound;
    }
    return FreeableBuffer(e->block->host_alias(), e->block->nbytes(), nullptr); // not owned: the handle keeps it
  }
  ET_NODISCARD Error load_data_into(std::string_view key, void* buffer, size_t size) const override {
    auto e = find(key);
    if (e == nullptr) {
      return Error::NotFound;
    }
    if (size != e->block->nbytes()) {
      return Error::InvalidArgument; // not from Method: it asks for the layout's size, which init matched
    }
    std::memcpy(buffer, e->block->host_alias(), size);
    return Error::Ok;
  }
  ET_NODISCARD Result<uint32_t> get_num_keys() const override {
    return static_cast<uint32_t>(entries.size());
  }
  ET_NODISCARD Result<const char*> get_key(uint32_t index) const override {
    if (index >= entries.size()) {
      return Error::InvalidArgument;
    }
    return std::next(entries.begin(), index)->first.c_str();
  }

 private:
  const Entry* find(std::string_view key) const {
    auto it = entries.find(key);
    return it == entries.end() ? nullptr : &it->second;
  }
};

// What a delegate handle owns. Members are destroyed in reverse order: the
// method first, then what it points into.
struct Handle {
  std::string method_name;
  DelegateRecord record;
  bool verify = false; // the runtime spec "verify_data": weights and state checked by their content keys
  std::vector<uint8_t> program_bytes;
  WeightDataMap weights;
  std::unique_ptr<executorch::extension::BufferDataLoader> loader;
  std::unique_ptr<Program> program;
  std::shared_ptr<StateArena> arena;
  std::shared_ptr<Scratch> scratch;
  executorch::extension::MallocMemoryAllocator method_allocator;
  executorch::extension::MallocMemoryAllocator temp_allocator;
  std::vector<Span<uint8_t>> spans;
  std::unique_ptr<HierarchicalAllocator> planned;
  std::unique_ptr<MemoryManager> memory;
  std::unique_ptr<Method> method;
  std::vector<size_t> output_capacity; // each nested output's planned (upper bound) bytes
};

// Logs "SimulatedDeviceBackend: method 'm': <message>" and returns `e`.
ET_NODISCARD Error fail(Error e, const std::string& method, const std::string& message) {
  ET_LOG(Error, "%s: method '%s': %s", kName, method.c_str(), message.c_str());
  return e;
}

// The bytes of a dense tensor of `t`'s layout, or SIZE_MAX when that does
// not fit a size_t (no record's weight is that large, so it never matches).
// external_tensors() has refused unknown types and negative sizes.
size_t layout_nbytes(const internal::ExternalTensor& t) {
  size_t n = executorch::runtime::elementSize(t.scalar_type);
  for (const int32_t s : t.sizes) {
    if (s != 0 && n > SIZE_MAX / static_cast<size_t>(s)) {
      return SIZE_MAX;
    }
    n *= static_cast<size_t>(s);
  }
  return n;
}

// The weights of `h`, from the residency cache or uploaded from the outer
// named data; pinned in `pool` when it is open.
ET_NODISCARD Error bind_weights(Handle& h, const NamedDataMap* outer, std::optional<int> pool) {
  auto layouts = internal::external_tensors(h.program_bytes.data(), h.program_bytes.size());
  if (!layouts.ok()) {
    return fail(Error::DelegateInvalidCompatibility, h.method_name, "the nested program cannot be read");
  }
  std::map<std::string, const internal::ExternalTensor*> by_fqn;
  for (const auto& t : *layouts) {
    by_fqn[t.fqn] = &t;
  }
  for (const auto& t : *layouts) {
    bool named = false;
    for (const auto& w : h.record.weights) {
      named = named || w.fqn == t.fqn;
    }
    if (!named) {
      return fail(Error::DelegateInvalidCompatibility, h.method_name,
                  "the nested program's external constant '" + t.fqn + "' has no weight line in the record");
    }
  }
  for (const auto& w : h.record.weights) {
    auto layout = by_fqn.find(w.fqn);
    if (layout == by_fqn.end()) {
      return fail(Error::DelegateInvalidCompatibility, h.method_name,
                  "weight '" + w.fqn + "' is not an external constant of the nested program");
    }
    if (layout_nbytes(*layout->second) != w.nbytes) {
      return fail(Error::DelegateInvalidCompatibility, h.method_name,
                  "weight '" + w.fqn + "' is " + std::to_string(w.nbytes) + " bytes in the record, " +
                      std::to_string(layout_nbytes(*layout->second)) + " in the nested program");
    }
    FailureReport report;
    auto block =
        acquire_weight(w.key, h.record.device_type, h.record.device_index, w.nbytes, outer, pool, &report, h.verify);
    if (!block.ok()) {
      return fail(block.error(), h.method_name, "weight '" + w.fqn + "': " + report.detail);
    }
    h.weights.entries[w.fqn] = WeightDataMap::Entry{*layout->second, std::move(*block)};
  }
  return Error::Ok;
}

// The state arena `h` binds: the session's (created on first use), with
// each state line's initial value written once.
ET_NODISCARD Error bind_arena(Handle& h, BackendInitContext& context, size_t arena_size) {
  ArenaKey key{kName, std::nullopt, context.get_named_data_map()};
  auto session = context.get_runtime_spec<int>(kSessionSpec);
  if (session.ok()) {
    key.session = *session;
  } else if (session.error() != Error::NotFound) {
    return fail(Error::InvalidArgument, h.method_name, "runtime spec 'session' must be an int");
  }
  std::vector<ArenaState> states;
  for (const auto& s : h.record.states) {
    states.push_back(ArenaState{s.name, s.offset, s.nbytes, s.initial_key});
  }
  FailureReport report;
  auto arena = acquire_arena(key, h.record.device_type, h.record.device_index, arena_size, states,
                             context.get_named_data_map(), h.method_name, &report, h.verify);
  if (!arena.ok()) {
    return fail(arena.error(), h.method_name, report.detail);
  }
  h.arena = std::move(*arena);
  return Error::Ok;
}

// The scratch of `h`: the pool's for this nested program, or its own.
ET_NODISCARD Error bind_scratch(Handle& h, std::optional<int> pool, const std::vector<size_t>& sizes) {
  ScratchCache& c = scratch_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto key = std::make_pair(pool.value_or(0), internal::fnv1a64(h.program_bytes.data(), h.program_bytes.size()));
  if (pool.has_value()) {
    auto shared = c.scratch[key].lock();
    if (shared != nullptr && shared->program == h.program_bytes) {
      h.scratch = std::move(shared);
      return Error::Ok;
    }
  }
  auto scratch = std::make_shared<Scratch>();
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto block = DeviceBlock::create(h.record.device_type, h.record.device_index, sizes[i]);
    if (!block.ok()) {
      return fail(block.error(), h.method_name,
                  "cannot allocate nested planned buffer " + std::to_string(i) + " (" + std::to_string(sizes[i]) +
                      " bytes) on " + device_name(h.record.device_type, h.record.device_index));
    }
    scratch->buffers.push_back(std::move(*block));
  }
  if (pool.has_value()) {
    scratch->program = h.program_bytes;
    c.scratch[key] = scratch; // a hash collision replaces the entry; the displaced scratch lives on with its handles
  }
  for (auto it = c.scratch.begin(); it != c.scratch.end();) {
    it = it->second.expired() ? c.scratch.erase(it) : std::next(it);
  }
  h.scratch = std::move(scratch);
  return Error::Ok;
}

ET_NODISCARD Result<Handle*> init_handle(BackendInitContext& context, FreeableBuffer* processed,
                                         ArrayRef<CompileSpec> compile_specs) {
  auto h = std::make_unique<Handle>();
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
  if (h->record.payload_kind != PayloadKind::kProgram) {
    return fail(Error::DelegateInvalidCompatibility, h->method_name,
                std::string("the record's payload is '") + payload_kind_name(h->record.payload_kind) + "', and " +
                    kName + " runs '" + kPayloadProgram + "' payloads (a nested program)");
  }
  for (const CompileSpec& spec : compile_specs) {
    if (spec.key != nullptr && std::strcmp(spec.key, "target_device") == 0) {
      const std::string value(static_cast<const char*>(spec.value.buffer), spec.value.nbytes);
      const std::string expected = device_name(h->record.device_type, h->record.device_index);
      if (value != expected && !(value == "cuda" && h->record.device_index == 0)) {
        return fail(Error::DelegateInvalidCompatibility, h->method_name,
                    "compile spec target_device is '" + value + "', the record's device " + expected);
      }
    }
  }
  if (auto* server = executorch::runtime::get_device_allocator(et::DeviceType::CUDA);
      server != &simulated_device_allocator()) {
    return fail(Error::NotSupported, h->method_name,
                "cuda is served by " + allocator_words(server) +
                    ", not the simulated device this backend computes on (through the host: a GPU's memory is "
                    "not host memory); call et_copy::use_simulated_device() before loading");
  }
  // The nested program is small (its constants are external): keep a copy, free the rest.
  h->program_bytes.assign(h->record.payload, h->record.payload + h->record.payload_nbytes);
  h->record.payload = h->program_bytes.data();
  processed->Free();

  auto pool = context.get_runtime_spec<int>(kPoolSpec);
  if (!pool.ok() && pool.error() != Error::NotFound) {
    return fail(Error::InvalidArgument, h->method_name, "runtime spec 'pool' must be an int");
  }
  const std::optional<int> pool_id = pool.ok() ? std::optional<int>(*pool) : std::nullopt;
  auto verify = runtime_flag(context, kVerifyDataSpec);
  if (!verify.ok()) {
    return fail(Error::InvalidArgument, h->method_name, "runtime spec 'verify_data' must be a bool");
  }
  h->verify = *verify;
  Error e = bind_weights(*h, context.get_named_data_map(), pool_id);
  if (e != Error::Ok) {
    return e;
  }
  // The nested program is as untrusted as the outer one: the checks that keep ExecuTorch from aborting on it.
  const std::string nested = "nested program of a delegate in method '" + h->method_name + "'";
  FailureReport refusal;
  e = check_program_indices(h->program_bytes.data(), h->program_bytes.size(), &refusal);
  if (e == Error::Ok) {
    e = check_argument_kinds(h->program_bytes.data(), h->program_bytes.size(), nested, &refusal);
  } else {
    refusal.detail = nested + ": " + refusal.detail;
  }
  if (e != Error::Ok) {
    return fail(e, h->method_name, refusal.detail);
  }
  h->loader =
      std::make_unique<executorch::extension::BufferDataLoader>(h->program_bytes.data(), h->program_bytes.size());
  auto program = Program::load(h->loader.get(), Program::Verification::InternalConsistency);
  if (!program.ok()) {
    return fail(Error::DelegateInvalidCompatibility, h->method_name, "the nested program does not load");
  }
  h->program = std::make_unique<Program>(std::move(*program));
  if (h->program->num_methods() != 1) {
    return fail(Error::DelegateInvalidCompatibility, h->method_name,
                "the nested program has " + std::to_string(h->program->num_methods()) + " methods, not 1");
  }
  const char* nested_name = *h->program->get_method_name(0);
  auto meta = h->program->method_meta(nested_name);
  if (!meta.ok()) {
    return fail(Error::DelegateInvalidCompatibility, h->method_name, "the nested method has no metadata");
  }
  const size_t n = meta->num_memory_planned_buffers();
  std::vector<size_t> sizes;
  for (size_t i = 0; i < n; ++i) {
    auto size = meta->memory_planned_buffer_size(i);
    if (!size.ok() || *size < 0) {
      return fail(Error::DelegateInvalidCompatibility, h->method_name,
                  "nested planned buffer " + std::to_string(i) + " has no valid size");
    }
    if (!h->record.has_arena || i != h->record.arena_buffer) {
      sizes.push_back(static_cast<size_t>(*size));
    }
  }
  if (h->record.has_arena) {
    if (h->record.arena_buffer >= n ||
        static_cast<size_t>(*meta->memory_planned_buffer_size(h->record.arena_buffer)) != h->record.arena_nbytes) {
      return fail(Error::DelegateInvalidCompatibility, h->method_name,
                  "the arena line names nested buffer " + std::to_string(h->record.arena_buffer) + " of " +
                      std::to_string(h->record.arena_nbytes) + " bytes; the nested method has " + std::to_string(n) +
                      " planned buffers" +
                      (h->record.arena_buffer < n
                           ? ", that one of " +
                                 std::to_string(*meta->memory_planned_buffer_size(h->record.arena_buffer)) + " bytes"
                           : std::string()));
    }
    e = bind_arena(*h, context, h->record.arena_nbytes);
    if (e != Error::Ok) {
      return e;
    }
  }
  e = bind_scratch(*h, pool_id, sizes);
  if (e != Error::Ok) {
    return e;
  }
  for (size_t i = 0, s = 0; i < n; ++i) {
    if (h->record.has_arena && i == h->record.arena_buffer) {
      h->spans.emplace_back(h->arena->block().host_alias(), h->arena->block().nbytes());
    } else {
      const auto& b = h->scratch->buffers[s++];
      h->spans.emplace_back(b->host_alias(), b->nbytes());
    }
  }
  // The nested program is CPU-planned: its buffers are host aliases of device memory.
  h->planned = std::make_unique<HierarchicalAllocator>(Span<Span<uint8_t>>(h->spans.data(), h->spans.size()));
  h->memory = std::make_unique<MemoryManager>(&h->method_allocator, h->planned.get(), &h->temp_allocator);
  auto method = h->program->load_method(nested_name, h->memory.get(), nullptr, &h->weights);
  if (!method.ok()) {
    return fail(method.error(), h->method_name, std::string("loading the nested method '") + nested_name + "' failed");
  }
  h->method = std::make_unique<Method>(std::move(*method));
  // Inputs and outputs are bound by pointer in execute: none may be planned.
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    auto t = meta->input_tensor_meta(i);
    if (t.ok() && t->is_memory_planned()) {
      return fail(Error::DelegateInvalidCompatibility, h->method_name,
                  "nested input " + std::to_string(i) + " is planned (export it with alloc_graph_input=False)");
    }
  }
  for (size_t i = 0; i < meta->num_outputs(); ++i) {
    auto t = meta->output_tensor_meta(i);
    h->output_capacity.push_back(t.ok() ? t->nbytes() : 0);
    if (t.ok() && t->is_memory_planned()) {
      return fail(Error::DelegateInvalidCompatibility, h->method_name,
                  "nested output " + std::to_string(i) +
                      " is planned or a constant (export it with alloc_graph_output=False, and return no state)");
    }
  }
  return h.release();
}

ET_NODISCARD Error execute_handle(Handle& h, Span<EValue*> args) {
  Method& m = *h.method;
  const size_t n_in = m.inputs_size();
  const size_t n_out = m.outputs_size();
  if (args.size() != n_in + n_out) {
    return fail(Error::InvalidArgument, h.method_name,
                std::to_string(args.size()) + " arguments, the nested method takes " + std::to_string(n_in) +
                    " inputs and " + std::to_string(n_out) + " outputs");
  }
  SimulatedDeviceAllocator& sim = simulated_device_allocator();
  // Check every argument before binding any.
  for (size_t i = 0; i < args.size(); ++i) {
    const bool input = i < n_in;
    const size_t index = input ? i : i - n_in;
    const std::string name = (input ? "input " : "output ") + std::to_string(index);
    if (args[i] == nullptr) {
      return fail(Error::InvalidArgument, h.method_name, name + " is missing");
    }
    if (!input && !args[i]->isTensor()) {
      return fail(Error::InvalidArgument, h.method_name, name + " is not a tensor");
    }
    if (!args[i]->isTensor()) {
      continue; // ints, bools, scalars pass through
    }
    const Tensor& t = args[i]->toTensor();
    const size_t nbytes = input ? t.nbytes() : h.output_capacity[index];
    if (!is_device_argument(t, nbytes, h.record.device_type, h.record.device_index)) {
      return fail(Error::InvalidArgument, h.method_name,
                  name + " " + refuse_device_argument(t, nbytes, h.record.device_type, h.record.device_index));
    }
    if (!input && t.scalar_type() != m.get_output(index).toTensor().scalar_type()) {
      return fail(Error::InvalidArgument, h.method_name,
                  name + " has dtype " + executorch::runtime::toString(t.scalar_type()) + ", the nested output " +
                      executorch::runtime::toString(m.get_output(index).toTensor().scalar_type()));
    }
  }
  for (size_t i = 0; i < n_in; ++i) {
    if (!args[i]->isTensor()) {
      const Error e = m.set_input(*args[i], i);
      if (e != Error::Ok) {
        return fail(e, h.method_name, "input " + std::to_string(i) + " does not match the nested input");
      }
      continue;
    }
    const Tensor& t = args[i]->toTensor();
    auto alias = sim.host_alias(t.const_data_ptr(), t.nbytes(), h.record.device_index);
    if (!alias.ok()) {
      return fail(alias.error(), h.method_name, "input " + std::to_string(i) + ": no host alias");
    }
    // A view over the alias; set_input shares the pointer (the nested input is unplanned) and copies the sizes.
    std::vector<executorch::aten::SizesType> sizes(t.sizes().begin(), t.sizes().end());
    std::vector<executorch::aten::DimOrderType> dim_order(t.dim_order().begin(), t.dim_order().end());
    std::vector<executorch::aten::StridesType> strides(t.strides().begin(), t.strides().end());
    executorch::aten::TensorImpl view(t.scalar_type(), t.dim(), sizes.data(), *alias, dim_order.data(), strides.data(),
                                      executorch::aten::TensorShapeDynamism::STATIC);
    const Error e = m.set_input(EValue(Tensor(&view)), i);
    if (e != Error::Ok) {
      return fail(e, h.method_name, "input " + std::to_string(i) + " does not fit the nested input");
    }
  }
  for (size_t j = 0; j < n_out; ++j) {
    const Tensor& t = args[n_in + j]->toTensor();
    auto alias = sim.host_alias(t.const_data_ptr(), h.output_capacity[j], h.record.device_index);
    if (!alias.ok()) {
      return fail(alias.error(), h.method_name, "output " + std::to_string(j) + ": no host alias");
    }
    const Error e = m.set_output_data_ptr(*alias, h.output_capacity[j], j);
    if (e != Error::Ok) {
      return fail(e, h.method_name, "output " + std::to_string(j) + " cannot be bound");
    }
  }
  Error e = m.execute();
  if (e != Error::Ok) {
    return fail(e, h.method_name, "the nested method failed");
  }
  for (size_t j = 0; j < n_out; ++j) {
    Tensor& t = args[n_in + j]->toTensor();
    e = executorch::runtime::resize_tensor(t, m.get_output(j).toTensor().sizes());
    if (e != Error::Ok) {
      return fail(e, h.method_name, "output " + std::to_string(j) + " cannot take the nested output's shape");
    }
  }
  return Error::Ok;
}

} // namespace

bool SimulatedDeviceBackend::is_available() const {
  return true;
}

Result<DelegateHandle*> SimulatedDeviceBackend::init(BackendInitContext& context, FreeableBuffer* processed,
                                                     ArrayRef<CompileSpec> compile_specs) const {
  auto h = init_handle(context, processed, compile_specs);
  if (!h.ok()) {
    return h.error();
  }
  return static_cast<DelegateHandle*>(*h);
}

Error SimulatedDeviceBackend::execute(BackendExecutionContext& /*context*/, DelegateHandle* handle,
                                      Span<EValue*> args) const {
  if (handle == nullptr) {
    ET_LOG(Error, "%s: execute without a handle", kName);
    return Error::InvalidArgument;
  }
  return execute_handle(*static_cast<Handle*>(handle), args);
}

void SimulatedDeviceBackend::destroy(DelegateHandle* handle) const {
  delete static_cast<Handle*>(handle); // weights, arena and scratch go with their last handle
}

SimulatedDeviceBackend& simulated_device_backend() {
  static SimulatedDeviceBackend* instance = new SimulatedDeviceBackend(); // the registry keeps the pointer
  return *instance;
}

const char* SimulatedDeviceBackend::id() const {
  return kSimulatedDeviceBackend;
}

bool SimulatedDeviceBackend::runs_on(const executorch::runtime::DeviceAllocator& server) const {
  return &server == &simulated_device_allocator(); // its processor reads device memory through the host alias
}

Error reset_device_state(int session) {
  return simulated_device_backend().reset_state(session);
}

size_t device_state_nbytes(int session) {
  return simulated_device_backend().state_nbytes(session);
}

} // namespace et_copy
