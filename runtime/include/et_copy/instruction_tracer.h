// An EventTracer that remembers which instruction a method was running, so a
// failed Method::execute() can name it without parsing ExecuTorch's log, and
// that passes every event on to another tracer (an ETDump profile), so one
// tracer per method serves both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <executorch/runtime/core/event_tracer.h>

namespace et_copy {

/// An instruction of a method: its chain, and its index in that chain. The
/// pair ExecuTorch's log prints as "instruction C:I".
struct InstructionLocation {
  size_t chain = 0;
  size_t instruction = 0;
};

/// The room left in the buffer an inner tracer copies logged tensors into
/// (ETDumpGen's debug buffer), asked before a tensor is forwarded: ETDumpGen
/// aborts the process when a tensor does not fit, rather than failing.
class DebugBufferRoom {
 public:
  virtual ~DebugBufferRoom() = default;
  /// The buffer's size in bytes.
  virtual size_t size() const = 0;
  /// The bytes of it written so far.
  virtual size_t used() const = 0;
  /// Where `nbytes` (> 0) written after `offset` used bytes would end,
  /// alignment padding included.
  virtual size_t end_after(size_t offset, size_t nbytes) const = 0;
};

/// A tensor an InstructionTracer kept from its inner tracer because the
/// debug buffer had no room for it: the buffer size the event block's
/// logged tensors needed (up to and including the last one kept), the
/// buffer's size, and the instruction whose value was the first one kept
/// (empty for a value logged outside any, e.g. the method's outputs).
struct DebugBufferShortfall {
  size_t needed = 0;
  size_t size = 0;
  std::optional<InstructionLocation> instruction;
};

/**
 * Give it to Program::load_method as the method's event tracer
 * (Session::load gives each LoadedMethod one of its own). ExecuTorch, built
 * with ET_EVENT_TRACER_ENABLED as the 1.5.1 wheel is, sets the chain and
 * instruction on the tracer before each instruction and opens a profiling
 * scope around it ("OPERATOR_CALL", "DELEGATE_CALL", ...).
 * This tracer records the instruction whenever such a scope starts, so after
 * a failed execute() last_instruction() is the instruction that failed: the
 * run stops there. Each event block (load_method and each execute() open one)
 * clears it, so a failure before any instruction ran (an input not set)
 * leaves it empty.
 *
 * Forwarding: every EventTracer call also goes to `inner` when it is not
 * null (e.g. executorch::etdump::ETDumpGen), with this tracer's chain and
 * instruction, and bundled input index, copied into it first (ExecuTorch sets
 * those on this tracer through non-virtual setters the inner would not see).
 * The inner's debug level and intermediate-output setting are copied into
 * this tracer at construction, set_inner() and each event block, because
 * Method reads them from this tracer to decide what to log. Its profiling
 * level is not copied: this tracer always profiles all events, or it would
 * not see instructions start; when the inner is at kProfileMethodOnly, the
 * five instruction scopes Method opens (OPERATOR_CALL, DELEGATE_CALL,
 * JF_CALL, MOVE_CALL, FREE_CALL) are kept from it, so it records what it
 * would record alone. A kernel or delegate that checks the profiling level
 * itself sees kProfileAllEvents, and its events do reach the inner. Entries
 * kept from the inner carry event_id INT64_MIN, which the inner must not use
 * itself (ETDumpGen's ids are 32-bit).
 *
 * Debug buffer: with set_debug_buffer_room(), each host tensor (or tensor
 * list) a log_evalue or log_intermediate_output_delegate call carries is
 * forwarded only when the room says it fits. Once one does not, no tensor
 * is forwarded until the next event block (each execute() opens one), and
 * shortfall() says how many bytes the block's tensors needed: the caller
 * fails the execute() with it.
 *
 * Cost without an inner tracer: per instruction, two virtual calls that
 * neither allocate nor lock.
 *
 * Threading: like the Method it traces, one thread at a time. Read
 * last_instruction() and call clear() or set_inner() only between executions
 * (e.g. under SessionPool::execution_lock()). The inner tracer must outlive
 * this one, or be replaced first.
 */
class InstructionTracer final : public executorch::runtime::EventTracer {
 public:
  explicit InstructionTracer(executorch::runtime::EventTracer* inner = nullptr);

  /// The instruction whose run began last since the last clear() or event
  /// block; empty when none did. After a failed execute(), the failing one.
  std::optional<InstructionLocation> last_instruction() const;
  /// Forgets the recorded instruction and shortfall (execute() also does, as it starts).
  void clear();

  /// The tracer events are forwarded to, or nullptr.
  executorch::runtime::EventTracer* inner() const {
    return inner_;
  }
  /// Forwards from now on to `inner` (nullptr: to none), and copies its
  /// debug level and intermediate-output setting.
  void set_inner(executorch::runtime::EventTracer* inner);
  /// Checks each logged tensor against `room` (nullptr: none) before
  /// forwarding it. `room` must outlive this tracer, or be replaced first.
  void set_debug_buffer_room(const DebugBufferRoom* room) {
    room_ = room;
  }
  /// Set when a logged tensor was kept from the inner tracer for want of
  /// room since the last event block or clear(); empty otherwise.
  std::optional<DebugBufferShortfall> shortfall() const {
    return shortfall_;
  }

  // executorch::runtime::EventTracer: recorded, and forwarded to inner().
  void create_event_block(const char* name) override;
  executorch::runtime::EventTracerEntry start_profiling(
      const char* name, executorch::runtime::ChainID chain_id = executorch::runtime::kUnsetChainId,
      executorch::runtime::DebugHandle debug_handle = executorch::runtime::kUnsetDebugHandle) override;
  void end_profiling(executorch::runtime::EventTracerEntry prof_entry) override;
  executorch::runtime::EventTracerEntry start_profiling_delegate(
      const char* name, executorch::runtime::DelegateDebugIntId delegate_debug_index) override;
  void end_profiling_delegate(executorch::runtime::EventTracerEntry event_tracer_entry, const void* metadata = nullptr,
                              size_t metadata_len = 0) override;
  void log_profiling_delegate(const char* name, executorch::runtime::DelegateDebugIntId delegate_debug_index,
                              et_timestamp_t start_time, et_timestamp_t end_time, const void* metadata = nullptr,
                              size_t metadata_len = 0) override;
  void track_allocation(executorch::runtime::AllocatorID id, size_t size) override;
  executorch::runtime::AllocatorID track_allocator(const char* name) override;
  /// Not forwarded (returns false) for a tensor, or tensor list, on a
  /// device: a tracer copies a logged tensor's bytes with a host memcpy.
  /// Nor for one the debug buffer room has no room for (see shortfall()).
  ET_NODISCARD executorch::runtime::Result<bool> log_evalue(const executorch::runtime::EValue& evalue,
                                                            executorch::runtime::LoggedEValueType evalue_type) override;
  ET_NODISCARD executorch::runtime::Result<bool> log_intermediate_output_delegate(
      const char* name, executorch::runtime::DelegateDebugIntId delegate_debug_index,
      const executorch::aten::Tensor& output) override;
  ET_NODISCARD executorch::runtime::Result<bool> log_intermediate_output_delegate(
      const char* name, executorch::runtime::DelegateDebugIntId delegate_debug_index,
      const executorch::runtime::ArrayRef<executorch::aten::Tensor> output) override;
  ET_NODISCARD executorch::runtime::Result<bool> log_intermediate_output_delegate(
      const char* name, executorch::runtime::DelegateDebugIntId delegate_debug_index, const int& output) override;
  ET_NODISCARD executorch::runtime::Result<bool> log_intermediate_output_delegate(
      const char* name, executorch::runtime::DelegateDebugIntId delegate_debug_index, const bool& output) override;
  ET_NODISCARD executorch::runtime::Result<bool> log_intermediate_output_delegate(
      const char* name, executorch::runtime::DelegateDebugIntId delegate_debug_index, const double& output) override;
  void set_delegation_intermediate_output_filter(
      executorch::runtime::EventTracerFilterBase* event_tracer_filter) override;

  /// The event_id of an entry this tracer kept from its inner tracer.
  static constexpr int64_t kNotForwarded = INT64_MIN;

 private:
  // The inner tracer with this tracer's chain, instruction and bundled
  // input index copied in, or nullptr.
  executorch::runtime::EventTracer* synced_inner();
  // Copies the inner's debug level and intermediate-output setting.
  void mirror_inner_settings();
  // Whether `tensors` may be forwarded: room_ (if any) has room for them
  // after what it holds, and no tensor of this block was kept from it; if
  // not, records (or grows) the shortfall.
  bool room_for(executorch::runtime::ArrayRef<executorch::aten::Tensor> tensors);

  const DebugBufferRoom* room_ = nullptr;
  std::optional<DebugBufferShortfall> shortfall_;
  executorch::runtime::EventTracerFilterBase* filter_ = nullptr; // the inner's delegate filter, also asked here

  executorch::runtime::EventTracer* inner_ = nullptr;
  executorch::runtime::ChainID last_chain_ = executorch::runtime::kUnsetChainId;
  executorch::runtime::DebugHandle last_instruction_ = executorch::runtime::kUnsetDebugHandle;
};

} // namespace et_copy
