// Sessions: several independent sequences on one loaded program.
//
// A SessionPool owns what its sessions share: the scratch, planned buffers
// allocated once per method; each Session owns its state. Where the state
// lives, the program says in its record (program_record.h), or, without
// one, ExecuTorch's own conventions do:
//
// - A program et_copy.export built keeps every piece of mutable state (an
//   LLM's KV caches and recurrent states) inside its device delegates
//   (record: "state\tdelegates"): each delegate binds the session's state
//   arena, laid out by the exporter and read from the delegate record, and
//   every planned buffer of the program itself is scratch. A method of a
//   program with a record that names state of its own is refused
//   (InvalidProgram): et_copy.export keeps none outside its delegates.
// - A program without a record (another exporter's, ExecuTorch's own) whose
//   methods name their state (emit_mutable_buffer_names) and keep all of it
//   in the last planned buffer (as share_mutable_buffers plans it) gets that
//   buffer per session, shared by the session's methods and started at
//   zero through the device's DeviceAllocator (copy_host_to_device,
//   counted like any h2d copy); the other buffers are the pool's scratch.
// - Any other program (no named state, or state outside the last buffer):
//   each session owns all of its methods' planned memory, and reset()
//   reports NotSupported unless the state lives in a device backend.
//
// The runtime never lays state out: offsets come from the program's
// planning and the delegate record (parse_delegate_record refuses overlaps
// and overruns).
//
// Device backends: every method is loaded with the runtime specs
// {"pool": pool id, "session": session id} (process-unique ints) for every
// registered device backend (registered_device_backends(),
// device_backend.h), so a delegate binds the session's state inside the
// backend, shares its scratch with the pool's other sessions, and pins its
// weights in the pool: they stay on the device while the pool lives,
// whatever its sessions do, and go when it is destroyed (each backend's
// release_pool). reset(), state_nbytes() and device_nbytes() include the
// state the backends hold (DeviceBackend::reset_state, state_nbytes).
//
// Threading: the scratch is shared, so one execution at a time per pool.
// Hold execution_lock() from setting a method's inputs until its outputs
// are read (and, with an event tracer, until what it recorded is read). A
// pool must outlive its sessions; the Program, kernels and data map passed
// in must outlive the pool; a method's event tracer must outlive its session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/core/event_tracer.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <et_copy/backend_options.h>
#include <et_copy/device_backend.h>
#include <et_copy/failure_report.h>
#include <et_copy/planned_buffer.h>
#include <et_copy/program_record.h>

namespace et_copy {

class Session;
class LoadedMethod;

/// What a program's sessions share: the Program, the kernels methods are
/// loaded with, and every scratch buffer.
class SessionPool {
 public:
  /// A pool for `program`, loaded from `program_bytes` (the whole .pte).
  /// Before any method loads, the bytes are checked: indices ExecuTorch's
  /// Method would abort on (check_program_indices), and any way the host
  /// would read or write device memory (check_device_access, allowing the
  /// backends of whoever serves the device now: device_backends()). A
  /// refused program gives InvalidProgram, with the refusal in `report`'s
  /// detail (when not null); NotFound instead when no DeviceAllocator is
  /// registered for CUDA yet (nothing may run on an unserved device). `kernels` are passed to each
  /// Program::load_method (et_copy::method_kernels()), and `named_data`
  /// (data kept outside the program, a .ptd file), when not null. The bytes
  /// must outlive the pool: a failed execution's operator is named from
  /// them (LoadedMethod::execute). `options` are passed, opaque, to the
  /// backends they name (backend_options.h) as runtime specs at every
  /// method load, beside the pool's and session's ids.
  ET_NODISCARD static executorch::runtime::Result<std::unique_ptr<SessionPool>> create(
      executorch::runtime::Span<const uint8_t> program_bytes, const executorch::runtime::Program* program,
      executorch::runtime::Span<const executorch::runtime::Kernel> kernels,
      const executorch::runtime::NamedDataMap* named_data = nullptr, FailureReport* report = nullptr,
      const BackendLoadOptions& options = {});
  SessionPool(const SessionPool&) = delete;
  SessionPool& operator=(const SessionPool&) = delete;
  /// Calls release_pool(id()) on every registered device backend (and the
  /// residency module's): the weights the pool's loads pinned are freed
  /// unless another pool or a live delegate holds them. Its sessions must
  /// be gone.
  ~SessionPool();

  /// A new session with no method loaded and no state yet.
  std::unique_ptr<Session> new_session();

  /// Held by callers from setting inputs to reading outputs of an execution.
  std::mutex& execution_lock() {
    return execution_lock_;
  }

  /// Bytes of scratch allocated so far, by all methods, on devices (not CPU).
  size_t device_scratch_nbytes() const;

  const executorch::runtime::Program& program() const {
    return *program_;
  }
  /// The bytes the pool was created from.
  executorch::runtime::Span<const uint8_t> program_bytes() const {
    return program_bytes_;
  }

  /// This pool's process-unique id: the runtime spec "pool" its sessions
  /// pass to device backends.
  int id() const {
    return id_;
  }

 private:
  friend class Session;
  friend class LoadedMethod;
  // Through create(), so that no pool runs a program that was not checked.
  SessionPool(executorch::runtime::Span<const uint8_t> program_bytes, const executorch::runtime::Program* program,
              executorch::runtime::Span<const executorch::runtime::Kernel> kernels,
              const executorch::runtime::NamedDataMap* named_data);
  struct MethodScratch {
    bool has_arena = false;             // no record, named state in the last buffer, which each session owns
    bool all_scratch = false;           // the state is in the delegates: every buffer is shared
    std::vector<PlannedBuffer> buffers; // all but the arena
  };
  // The scratch of `name`, allocated on first use. Fails through `report`.
  ET_NODISCARD executorch::runtime::Result<MethodScratch*> scratch(const std::string& name, FailureReport* report);

  executorch::runtime::Span<const uint8_t> program_bytes_;
  const executorch::runtime::Program* program_;
  executorch::runtime::Span<const executorch::runtime::Kernel> kernels_;
  // kernels_ serve _d2h_copy.out with et-copy's kernel, which checks `out`'s
  // capacity: only then may LoadedMethod point an output at caller memory.
  bool d2h_kernel_is_ours_ = false;
  const executorch::runtime::NamedDataMap* named_data_;
  const int id_;
  BackendLoadOptions options_; // the backends' options its sessions pass
  std::map<std::string, MethodScratch> scratch_;
  std::mutex execution_lock_;
  ProgramRecord record_; // what the program says of itself (read_program_record)
};

/// One sequence: its state and the methods loaded on it.
class Session {
 public:
  Session(const Session&) = delete; // backend_options_ points into backend_specs_
  Session& operator=(const Session&) = delete;
  ~Session();

  /// The method `name` ready to run through LoadedMethod::execute
  /// (et_copy/loaded_method.h), loaded on first use into this session's
  /// state (which is then initialised, if it was not) with an
  /// InstructionTracer of its own that forwards to `profiler` (e.g.
  /// ExecuTorch's ETDumpGen; nullptr for none), and described once. The
  /// LoadedMethod lives as long as the session; LoadedMethod::method() is
  /// the raw executorch::runtime::Method. On failure returns the error with
  /// `report` saying what failed and what ExecuTorch logged: the method's
  /// error when it does not load, InvalidArgument when it was loaded before
  /// with another profiler, and InvalidProgram when its inputs and outputs
  /// cannot be read. Takes the pool's execution_lock() (loading may write
  /// the state): do not hold it.
  ET_NODISCARD executorch::runtime::Result<LoadedMethod*> load(const std::string& name,
                                                               executorch::runtime::EventTracer* profiler = nullptr,
                                                               FailureReport* report = nullptr);

  /// Puts the state back to its start through the device's h2d copy: in
  /// each device backend that holds state of this session
  /// (DeviceBackend::reset_state), and zeros over the session's own state
  /// buffer (a program without a record). NotSupported for a program with
  /// neither; no-op before any method is loaded. Fails through `report`.
  ET_NODISCARD executorch::runtime::Error reset(FailureReport* report = nullptr);

  /// Bytes of the session's state: its own state buffer plus the device
  /// backends' (DeviceBackend::state_nbytes; 0 before a method with state is loaded).
  size_t state_nbytes() const;
  /// Device bytes this session owns: its state, plus all of its methods'
  /// planned memory for programs whose state has no buffer of its own.
  size_t device_nbytes() const;

  /// This session's process-unique id: the runtime spec "session" it passes
  /// to device backends (DeviceBackend::reset_state takes it).
  int id() const {
    return id_;
  }

 private:
  friend class SessionPool;
  // The tracer's tests attach their own EventTracer to a raw Method, which
  // load() wraps in the LoadedMethod's tracer (tests/cpp/test_instruction_tracer.cpp).
  friend struct SessionTestAccess;
  explicit Session(SessionPool* pool);
  // The method `name`, loaded on first use into this session's state
  // (which is then initialised, if it was not); load() is the one public
  // way in. On failure returns the error, saying what failed in `report`.
  //
  // `event_tracer` is the method's event tracer, passed to
  // Program::load_method when this call loads the method; the method keeps
  // it for its life, which ends with the session. Once the method is
  // loaded, nullptr returns it whatever tracer it has, and another tracer
  // fails with InvalidArgument: a loaded method's tracer cannot change.
  ET_NODISCARD executorch::runtime::Result<executorch::runtime::Method*> method(
      const std::string& name, FailureReport* report, executorch::runtime::EventTracer* event_tracer);
  struct Loaded {
    // A program without an arena: all the method's planned memory, this session's (first: destroyed last).
    std::vector<std::unique_ptr<PlannedBuffer>> owned;
    executorch::extension::MallocMemoryAllocator method_allocator;
    executorch::extension::MallocMemoryAllocator temp_allocator;
    std::vector<executorch::runtime::Span<uint8_t>> spans;
    std::vector<executorch::runtime::etensor::Device> devices;
    std::unique_ptr<executorch::runtime::HierarchicalAllocator> planned;
    std::unique_ptr<executorch::runtime::MemoryManager> memory;
    std::unique_ptr<executorch::runtime::Method> method;
  };
  // Gives every registered device backend, and every backend the pool's
  // options name, its runtime specs in backend_options_. InvalidArgument,
  // named in `report`, when they name more backends than the map holds.
  ET_NODISCARD executorch::runtime::Error set_backend_specs(FailureReport* report);
  // Writes zeros over arena_ through the device's h2d copy.
  ET_NODISCARD executorch::runtime::Error zero_state(FailureReport* report);

  SessionPool* pool_;
  const int id_;
  // The runtime specs every load_method passes; the map points into the options, both outlive the methods.
  std::map<std::string, std::vector<executorch::runtime::BackendOption>> backend_specs_; // by backend id
  executorch::runtime::LoadBackendOptionsMap backend_options_;
  std::unique_ptr<PlannedBuffer> arena_;
  // load()'s methods; destroyed after methods_, since each holds its method's event tracer.
  std::map<std::string, std::unique_ptr<LoadedMethod>> loaded_;
  std::map<std::string, std::unique_ptr<Loaded>> methods_;
  bool state_zeroed_ = false; // arena_ holds its start (or what the methods made of it)
};

} // namespace et_copy
