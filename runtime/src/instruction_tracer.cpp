#include <et_copy/instruction_tracer.h>

#include <cstring>

namespace et_copy {

using executorch::runtime::AllocatorID;
using executorch::runtime::ArrayRef;
using executorch::runtime::ChainID;
using executorch::runtime::DebugHandle;
using executorch::runtime::DelegateDebugIdType;
using executorch::runtime::DelegateDebugIntId;
using executorch::runtime::EValue;
using executorch::runtime::EventTracer;
using executorch::runtime::EventTracerEntry;
using executorch::runtime::EventTracerFilterBase;
using executorch::runtime::EventTracerProfilingLevel;
using executorch::runtime::kUnsetChainId;
using executorch::runtime::kUnsetDebugHandle;
using executorch::runtime::LoggedEValueType;
using executorch::runtime::Result;

namespace {

// The scopes Method::execute_instruction opens only above kProfileMethodOnly.
bool is_instruction_scope(const char* name) {
  if (name == nullptr) {
    return false;
  }
  for (const char* s : {"OPERATOR_CALL", "DELEGATE_CALL", "JF_CALL", "MOVE_CALL", "FREE_CALL"}) {
    if (std::strcmp(name, s) == 0) {
      return true;
    }
  }
  return false;
}

} // namespace

InstructionTracer::InstructionTracer(EventTracer* inner) {
  set_inner(inner);
}

std::optional<InstructionLocation> InstructionTracer::last_instruction() const {
  if (last_chain_ == kUnsetChainId) {
    return std::nullopt;
  }
  return InstructionLocation{static_cast<size_t>(last_chain_), static_cast<size_t>(last_instruction_)};
}

void InstructionTracer::clear() {
  last_chain_ = kUnsetChainId;
  last_instruction_ = kUnsetDebugHandle;
  shortfall_.reset();
}

bool InstructionTracer::room_for(ArrayRef<executorch::aten::Tensor> tensors) {
  if (room_ == nullptr) {
    return true;
  }
  // After a shortfall, count on from what the block needed so far, so the
  // shortfall grows to what the whole block needs.
  size_t end = shortfall_ ? shortfall_->needed : room_->used();
  for (const auto& t : tensors) {
    if (t.nbytes() > 0) { // an empty tensor is not written
      end = room_->end_after(end, t.nbytes());
    }
  }
  if (!shortfall_ && end <= room_->size()) {
    return true;
  }
  if (!shortfall_) {
    // Method sets the chain only while an instruction runs; it logs its outputs after.
    shortfall_ = DebugBufferShortfall{end, room_->size(), std::nullopt};
    if (chain_id_ != kUnsetChainId) {
      shortfall_->instruction = InstructionLocation{static_cast<size_t>(chain_id_), static_cast<size_t>(debug_handle_)};
    }
  }
  shortfall_->needed = end;
  return false;
}

void InstructionTracer::set_inner(EventTracer* inner) {
  inner_ = inner;
  mirror_inner_settings();
}

void InstructionTracer::mirror_inner_settings() {
  if (inner_ == nullptr) {
    // What a tracer alone defaults to: Method logs no values.
    set_event_tracer_debug_level(executorch::runtime::EventTracerDebugLogLevel::kNoLogging);
    log_intermediate_tensors_ = false;
    return;
  }
  set_event_tracer_debug_level(inner_->event_tracer_debug_level());
  log_intermediate_tensors_ = inner_->intermediate_outputs_logging_status();
}

EventTracer* InstructionTracer::synced_inner() {
  if (inner_ != nullptr) {
    inner_->set_chain_debug_handle(chain_id_, debug_handle_);
    inner_->set_bundled_input_index(bundled_input_index_);
  }
  return inner_;
}

void InstructionTracer::create_event_block(const char* name) {
  clear();
  mirror_inner_settings();
  if (EventTracer* inner = synced_inner()) {
    inner->create_event_block(name);
  }
}

EventTracerEntry InstructionTracer::start_profiling(const char* name, ChainID chain_id, DebugHandle debug_handle) {
  // Method sets the chain (never kUnsetChainId) before each instruction and
  // unsets it after; instruction 0's handle equals kUnsetDebugHandle.
  if (chain_id_ != kUnsetChainId) {
    last_chain_ = chain_id_;
    last_instruction_ = debug_handle_;
  }
  if (inner_ != nullptr && !(inner_->event_tracer_profiling_level() == EventTracerProfilingLevel::kProfileMethodOnly &&
                             is_instruction_scope(name))) {
    return synced_inner()->start_profiling(name, chain_id, debug_handle);
  }
  EventTracerEntry entry{};
  entry.event_id = kNotForwarded;
  entry.chain_id = chain_id == kUnsetChainId ? chain_id_ : chain_id;
  entry.debug_handle = chain_id == kUnsetChainId ? debug_handle_ : debug_handle;
  entry.delegate_event_id_type = DelegateDebugIdType::kNone;
  return entry;
}

void InstructionTracer::end_profiling(EventTracerEntry prof_entry) {
  if (inner_ != nullptr && prof_entry.event_id != kNotForwarded) {
    synced_inner()->end_profiling(prof_entry);
  }
}

EventTracerEntry InstructionTracer::start_profiling_delegate(const char* name,
                                                             DelegateDebugIntId delegate_debug_index) {
  if (EventTracer* inner = synced_inner()) {
    return inner->start_profiling_delegate(name, delegate_debug_index);
  }
  EventTracerEntry entry{};
  entry.event_id = kNotForwarded;
  entry.chain_id = chain_id_;
  entry.debug_handle = debug_handle_;
  entry.delegate_event_id_type = DelegateDebugIdType::kInt;
  return entry;
}

void InstructionTracer::end_profiling_delegate(EventTracerEntry event_tracer_entry, const void* metadata,
                                               size_t metadata_len) {
  if (inner_ != nullptr && event_tracer_entry.event_id != kNotForwarded) {
    synced_inner()->end_profiling_delegate(event_tracer_entry, metadata, metadata_len);
  }
}

void InstructionTracer::log_profiling_delegate(const char* name, DelegateDebugIntId delegate_debug_index,
                                               et_timestamp_t start_time, et_timestamp_t end_time, const void* metadata,
                                               size_t metadata_len) {
  if (EventTracer* inner = synced_inner()) {
    inner->log_profiling_delegate(name, delegate_debug_index, start_time, end_time, metadata, metadata_len);
  }
}

void InstructionTracer::track_allocation(AllocatorID id, size_t size) {
  if (EventTracer* inner = synced_inner()) {
    inner->track_allocation(id, size);
  }
}

AllocatorID InstructionTracer::track_allocator(const char* name) {
  EventTracer* inner = synced_inner();
  return inner != nullptr ? inner->track_allocator(name) : 0;
}

namespace {

// A tracer that logs a value copies its bytes with a host memcpy, which
// device memory (a CUDA pointer) would crash.
bool on_a_device(const EValue& v) {
  if (v.isTensor()) {
    return v.toTensor().unsafeGetTensorImpl()->device_type() != executorch::runtime::etensor::DeviceType::CPU;
  }
  if (v.isTensorList()) {
    for (const auto& t : v.toTensorList()) {
      if (t.unsafeGetTensorImpl()->device_type() != executorch::runtime::etensor::DeviceType::CPU) {
        return true;
      }
    }
  }
  return false;
}

} // namespace

Result<bool> InstructionTracer::log_evalue(const EValue& evalue, LoggedEValueType evalue_type) {
  EventTracer* inner = synced_inner();
  // A device tensor is not logged (false: not logged), rather than read from the host.
  if (inner == nullptr || on_a_device(evalue)) {
    return false;
  }
  if (evalue.isTensor() && !room_for({&evalue.toTensor(), 1})) {
    return false;
  }
  if (evalue.isTensorList() && !room_for(evalue.toTensorList())) {
    return false;
  }
  return inner->log_evalue(evalue, evalue_type);
}

namespace {

// Whether the delegate filter drops the named output (the inner tracer then
// writes nothing, so needs no room); a filter's error counts as kept.
bool filtered_out(EventTracerFilterBase* filter, const char* name, DelegateDebugIntId index) {
  if (filter == nullptr) {
    return false;
  }
  auto dropped = filter->filter(name, index);
  return dropped.ok() && *dropped;
}

} // namespace

Result<bool> InstructionTracer::log_intermediate_output_delegate(const char* name,
                                                                 DelegateDebugIntId delegate_debug_index,
                                                                 const executorch::aten::Tensor& output) {
  EventTracer* inner = synced_inner();
  if (inner == nullptr || (!filtered_out(filter_, name, delegate_debug_index) && !room_for({&output, 1}))) {
    return false;
  }
  return inner->log_intermediate_output_delegate(name, delegate_debug_index, output);
}

Result<bool> InstructionTracer::log_intermediate_output_delegate(const char* name,
                                                                 DelegateDebugIntId delegate_debug_index,
                                                                 const ArrayRef<executorch::aten::Tensor> output) {
  EventTracer* inner = synced_inner();
  if (inner == nullptr || (!filtered_out(filter_, name, delegate_debug_index) && !room_for(output))) {
    return false;
  }
  return inner->log_intermediate_output_delegate(name, delegate_debug_index, output);
}

Result<bool> InstructionTracer::log_intermediate_output_delegate(const char* name,
                                                                 DelegateDebugIntId delegate_debug_index,
                                                                 const int& output) {
  EventTracer* inner = synced_inner();
  return inner != nullptr ? inner->log_intermediate_output_delegate(name, delegate_debug_index, output)
                          : Result<bool>(false);
}

Result<bool> InstructionTracer::log_intermediate_output_delegate(const char* name,
                                                                 DelegateDebugIntId delegate_debug_index,
                                                                 const bool& output) {
  EventTracer* inner = synced_inner();
  return inner != nullptr ? inner->log_intermediate_output_delegate(name, delegate_debug_index, output)
                          : Result<bool>(false);
}

Result<bool> InstructionTracer::log_intermediate_output_delegate(const char* name,
                                                                 DelegateDebugIntId delegate_debug_index,
                                                                 const double& output) {
  EventTracer* inner = synced_inner();
  return inner != nullptr ? inner->log_intermediate_output_delegate(name, delegate_debug_index, output)
                          : Result<bool>(false);
}

void InstructionTracer::set_delegation_intermediate_output_filter(EventTracerFilterBase* event_tracer_filter) {
  filter_ = event_tracer_filter;
  if (EventTracer* inner = synced_inner()) {
    inner->set_delegation_intermediate_output_filter(event_tracer_filter);
  }
}

} // namespace et_copy
