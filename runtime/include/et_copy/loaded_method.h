// The one way et-copy runs a method. A LoadedMethod is a method of one
// Session (Session::load), described once at load (its inputs' and outputs'
// slots), and run by execute(): host inputs bound through set_input, caller
// memory bound as outputs where the program allows, the d2h redirect, and a
// failure named by its instruction, operator and ExecuTorch's log. The
// Python bindings (et_copy.runtime's Method.execute), the example executor
// and its --generate mode all run methods here; they only convert values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/portable_type/device.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/executor/method.h>

#include <et_copy/failure_report.h>
#include <et_copy/instruction_tracer.h>
#include <et_copy/tensor_layout.h>

namespace et_copy {

class Session;
class SessionPool;

/// One input or output of a loaded method, as the loaded method holds it.
struct IoSlot {
  bool tensor = false;
  bool planned = false; ///< in the method's planned memory (else its memory is bound per call)
  executorch::aten::ScalarType dtype = executorch::aten::ScalarType::Byte;
  executorch::runtime::etensor::Device device{executorch::runtime::etensor::DeviceType::CPU, 0};
  size_t nbytes = 0; ///< at the planned (upper-bound) shape
  std::string name;
  std::vector<int64_t> sizes; ///< the upper bound, for a dynamic shape
  bool dynamic = false;       ///< its shape may differ per execution (up to `sizes`)
  std::vector<int64_t> dim_order;
  /// Outputs: an et_copy::_d2h_copy.out of et-copy's own fills it first
  /// (outputs_filled_by_d2h_copy), so execute() may point it at the
  /// caller's memory for one execution and let the copy write there.
  bool filled_by_d2h = false;
};

/// A loaded method's inputs and outputs, read once at load.
struct MethodIo {
  std::vector<IoSlot> inputs, outputs;
};

/// Per output of an execute(): the caller's memory for it (in), and the
/// shape or value it ran with (out).
struct MethodOutput {
  /// Memory that receives a tensor output, or nullptr: the output stays in
  /// the method's memory. An output the program does not plan is bound to
  /// it (it must be on the output's device, at least the output's nbytes);
  /// a planned one is written there by the d2h redirect or copied into it
  /// after the run (it must be host memory: a device output is copied with
  /// its DeviceAllocator's d2h copy).
  void* data = nullptr;
  size_t nbytes = 0;
  executorch::runtime::etensor::Device device{executorch::runtime::etensor::DeviceType::CPU, 0};

  /// Written by a successful execute(): a tensor output's shape...
  size_t rank = 0;
  executorch::aten::SizesType sizes[kMaxTensorDims] = {};
  /// ...or any other output's value (its pointers, if any, are the method's).
  executorch::runtime::EValue value;
};

class LoadedMethod {
 public:
  LoadedMethod(const LoadedMethod&) = delete;
  LoadedMethod& operator=(const LoadedMethod&) = delete;

  const std::string& name() const {
    return name_;
  }
  const MethodIo& io() const {
    return io_;
  }
  /// The ExecuTorch method, for what execute() does not cover (its meta).
  /// Hold the pool's execution_lock() while touching its values.
  executorch::runtime::Method& method() {
    return *method_;
  }
  /// The method's event tracer, e.g. to give it a DebugBufferRoom. Touch
  /// it only between executions (under the pool's execution_lock()).
  InstructionTracer& tracer() {
    return tracer_;
  }

  /**
   * Runs the method once. `inputs`: one value per input, in order, tensors
   * on the slot's device with its dtype (set_input copies host data into a
   * planned host input, or binds an unplanned one). `outputs`: one entry per
   * output (MethodOutput says how each is bound); the shapes and values come
   * back in it.
   *
   * Every value is checked against the slots before anything runs: a wrong
   * count, a tensor for a non-tensor slot or the reverse, a dtype or device
   * other than the slot's, output memory on the wrong device or too small,
   * is InvalidArgument with `report` naming the input or output, and the
   * method is untouched. A failure while running gives the step ("setting
   * input 0", "binding output 1", "executing", "copying output 0 ..."),
   * for "executing" the instruction and operator that failed, and what
   * ExecuTorch logged (the kernel's message). A run that logged a tensor
   * the tracer's DebugBufferRoom had no room for fails after it ran with
   * OutOfResources, the bytes needed, and the instruction that logged it
   * (its outputs are not written back). Outputs redirected for the
   * run point at the method's memory again afterwards, whatever happened.
   *
   * Threading: takes the pool's execution_lock() for the run (do not hold
   * it); any thread.
   */
  ET_NODISCARD executorch::runtime::Error execute(executorch::runtime::Span<const executorch::runtime::EValue> inputs,
                                                  executorch::runtime::Span<MethodOutput> outputs,
                                                  FailureReport* report = nullptr);

 private:
  friend class Session;
  LoadedMethod(SessionPool* pool, std::string name, executorch::runtime::EventTracer* profiler)
      : pool_(pool), name_(std::move(name)), tracer_(profiler) {}
  // Reads the slots of the loaded method_ (InvalidProgram if it cannot).
  ET_NODISCARD executorch::runtime::Error describe(FailureReport* report);
  // Checks inputs and outputs against the slots (InvalidArgument).
  ET_NODISCARD executorch::runtime::Error check(executorch::runtime::Span<const executorch::runtime::EValue> inputs,
                                                executorch::runtime::Span<MethodOutput> outputs,
                                                FailureReport* report) const;

  SessionPool* pool_;
  std::string name_;
  InstructionTracer tracer_; // the method's event tracer, outliving it: names the failing instruction
  executorch::runtime::Method* method_ = nullptr;
  MethodIo io_;
  bool described_ = false; // io_ read (Session::load retries a failed read)
};

} // namespace et_copy
