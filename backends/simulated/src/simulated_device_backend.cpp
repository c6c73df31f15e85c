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

// Its processor reads device memory through the host alias: it runs where the allocator serving CUDA has
// that capability (the simulated device), and a GPU's memory is not host memory.
bool runs_on_server(const executorch::runtime::DeviceAllocator* server) {
  return server != nullptr && server->device_type() == et::DeviceType::CUDA && host_aliasing(server) != nullptr;
}

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
struct Handle final : FrameHandle {
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

// Logs "SimulatedDeviceBackend: method 'm': <message>" (BackendFrame::fail) and returns `e`.
ET_NODISCARD Error fail(Error e, const std::string& method, const std::string& message) {
  return simulated_device_backend().fail(e, method, message);
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

// The weights of `h`, each checked against the nested program's layout,
// from the residency cache or uploaded from the outer named data.
ET_NODISCARD Error bind_weights(Handle& h, const NamedDataMap* outer) {
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
    auto block = simulated_device_backend().bind_weight(h, w, outer);
    if (!block.ok()) {
      return block.error();
    }
    h.weights.entries[w.fqn] = WeightDataMap::Entry{*layout->second, std::move(*block)};
  }
  return Error::Ok;
}

// The scratch of `h`: the pool's for this nested program, or its own.
ET_NODISCARD Error bind_scratch(Handle& h, const std::vector<size_t>& sizes) {
  const std::optional<int> pool = h.pool;
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

} // namespace

Error SimulatedDeviceBackend::init_payload(FrameHandle& frame, BackendInitContext& context,
                                           FreeableBuffer& processed) const {
  auto* h = static_cast<Handle*>(&frame);
  // Its processor reads device memory through the host: the server must have that capability.
  if (auto* server = executorch::runtime::get_device_allocator(et::DeviceType::CUDA); !runs_on_server(server)) {
    return fail(Error::NotSupported, h->method_name,
                "cuda is served by " + allocator_words(server) +
                    ", not the simulated device this backend computes on (through the host: a GPU's memory is "
                    "not host memory); call et_copy::use_simulated_device() before loading");
  }
  // The nested program is small (its constants are external): keep a copy, free the rest.
  h->program_bytes.assign(h->record.payload, h->record.payload + h->record.payload_nbytes);
  h->record.payload = h->program_bytes.data();
  processed.Free();

  Error e = bind_weights(*h, context.get_named_data_map());
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
    auto arena = bind_arena(*h, context, h->record.arena_nbytes);
    if (!arena.ok()) {
      return arena.error();
    }
    h->arena = std::move(*arena);
  }
  e = bind_scratch(*h, sizes);
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
  return Error::Ok;
}

BackendFrame::Io SimulatedDeviceBackend::io(const FrameHandle& frame) const {
  const Method& m = *static_cast<const Handle&>(frame).method;
  return Io{m.inputs_size(), m.outputs_size(), "the nested method"};
}

Error SimulatedDeviceBackend::execute_payload(FrameHandle& frame, Span<EValue*> args) const {
  Handle& h = static_cast<Handle&>(frame);
  Method& m = *h.method;
  const size_t n_in = m.inputs_size();
  const size_t n_out = m.outputs_size();
  const HostAliasing& sim = simulated_device_allocator();
  // Check every argument before binding any.
  for (size_t i = 0; i < args.size(); ++i) {
    const bool input = i < n_in;
    const size_t index = input ? i : i - n_in;
    const std::string name = (input ? "input " : "output ") + std::to_string(index);
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

SimulatedDeviceBackend& simulated_device_backend() {
  static SimulatedDeviceBackend* instance = new SimulatedDeviceBackend(); // the registry keeps the pointer
  return *instance;
}

const char* SimulatedDeviceBackend::id() const {
  return kSimulatedDeviceBackend;
}

bool SimulatedDeviceBackend::runs_on(const executorch::runtime::DeviceAllocator& server) const {
  return runs_on_server(&server);
}

const char* SimulatedDeviceBackend::payload_kind() const {
  return kPayloadProgram;
}

const char* SimulatedDeviceBackend::payload_words() const {
  return "a nested program";
}

std::unique_ptr<FrameHandle> SimulatedDeviceBackend::new_handle() const {
  return std::make_unique<Handle>();
}

Error reset_simulated_device_state(int session) {
  return simulated_device_backend().reset_state(session);
}

size_t simulated_device_state_nbytes(int session) {
  return simulated_device_backend().state_nbytes(session);
}

namespace {

// A nested ExecuTorch program's own lines: none. Its state lives in a nested
// planned buffer, and the program itself says every layout.
std::string check_program(const DelegateRecord& r, const RecordLines& lines, size_t* line) {
  if (!r.tensors.empty() || !lines.other_kinds.empty()) {
    *line = !r.tensors.empty() ? lines.tensors[0] : lines.other_kinds[0].number;
    return std::string("a ") + kPayloadProgram + " payload has no tensor, target, io or digest line";
  }
  if (r.has_arena && !r.has_arena_buffer) {
    *line = lines.arena;
    return std::string("a ") + kPayloadProgram + " payload's arena names its nested planned buffer, not -";
  }
  return "";
}

DeviceBackendDefinition definition() {
  PayloadRules rules{kPayloadProgram, &check_program};
  rules.payload_is_program = true;
  return {&simulated_device_backend(), rules, "et_copy.use_simulated_device()",
          "et_copy::register_simulated_device_backend()",
          "et-copy's simulated device only (its processor reads device memory through the host, and a GPU's memory "
          "is not host memory)"};
}

// Run when the library loads, as every backend library does: records of
// its kind parse, and a load check's refusal names its registration, before
// anything registers it.
[[maybe_unused]] const Error kDescribed = describe_simulated_device_backend();

} // namespace

Error describe_simulated_device_backend() {
  return describe_device_backend(definition());
}

Registration register_simulated_device_backend(Error* error) {
  return register_device_backend(definition(), error); // kFailed only when another "program" kind is known
}

} // namespace et_copy
