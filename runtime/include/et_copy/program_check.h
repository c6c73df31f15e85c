// Index checks on an ExecuTorch program that its own verification leaves
// out and its Method asserts on (aborting the process) instead of failing,
// what an instruction calls, read from the same tables, and the load check
// that keeps the host off device memory. One source file per job, over one
// bounds-checked reader (runtime/src/program_reader.h): program_check.cpp
// (indices), instruction_operator.cpp, d2h_filled_outputs.cpp,
// device_access.cpp (with method_io_devices), delegate_backend_ids.cpp,
// and device_backend.cpp (device_backends).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/portable_type/device.h>

#include <et_copy/failure_report.h>

namespace et_copy {

/**
 * Checks that every index an execution plan holds is in range: method
 * inputs and outputs, chain inputs and outputs, kernel and delegate call
 * arguments, list items, move/free/jump operands (value indices); operator
 * and delegate indices; jump destinations; planned-buffer device entries.
 * ExecuTorch 1.5.1's Program::load(InternalConsistency) verifies the
 * flatbuffer's structure but not these, and Method::set_input/execute
 * abort the process (ET_CHECK) on one out of range.
 *
 * `data` is the whole .pte (the flatbuffer at its start). Every read is
 * bounds-checked, so any bytes are safe to pass. Returns Error::Ok, or
 * Error::InvalidProgram with `report` (when given; see fail()) naming the
 * plan and the index in its detail. Threading: pure function of its
 * arguments.
 */
ET_NODISCARD executorch::runtime::Error check_program_indices(const void* data, size_t size,
                                                              FailureReport* report = nullptr);

/**
 * What instruction `instruction` of chain `chain` of method `method_name`
 * calls, for naming a failed instruction (see InstructionTracer):
 *  - a kernel call: its operator as the kernel registry names it, "name" or
 *    "name.overload" when the overload is not empty, e.g.
 *    "et_copy::_d2h_copy.out". (ExecuTorch's "KernelCall failed ... in
 *    operator" log line prints the same, except that it leaves a trailing
 *    "." for an empty overload.)
 *  - a delegate call: "delegate:" and the backend's id, e.g.
 *    "delegate:XnnpackBackend" ("" when the id is empty).
 *  - "" for any other instruction (move, jump, free), a method, chain or
 *    instruction that does not exist, or an operator or delegate index out
 *    of range.
 *
 * `data` is the whole .pte, as for check_program_indices; every read is
 * bounds-checked, so any bytes are safe. A name ends at its first NUL byte,
 * as ExecuTorch reads it. Threading: pure function of its arguments.
 */
std::string instruction_operator(const void* data, size_t size, const char* method_name, size_t chain,
                                 size_t instruction);

/**
 * Per output of method `method_name`: whether its value is filled by an
 * et_copy::_d2h_copy.out before anything else reads or writes it. Then the
 * memory it holds between executions is never read, so a runtime may point
 * the output at the caller's tensor for one execution and let the copy
 * write there, saving the copy out of planned memory. True only when the
 * method has one chain and no jump, the value is no method input nor an
 * item of any list, and the first instruction that names it is a
 * _d2h_copy.out kernel call with it as `out` and not as `self`.
 *
 * A runtime doing so must still check, after the execution, that the output
 * points at the caller's memory (a later instruction may re-point it, as
 * ExecuTorch's et_view does). Empty for a method that does not exist or bytes
 * that do not read as a program. Threading: pure function of its arguments.
 */
std::vector<bool> outputs_filled_by_d2h_copy(const void* data, size_t size, const char* method_name);

/// Where a method's inputs and outputs live (method_io_devices).
struct MethodIoDevices {
  std::vector<executorch::runtime::etensor::Device> inputs, outputs;
  /// Per attribute, in ExecuTorch's MethodMeta::attribute_tensor_meta
  /// order: each tensor value whose extra_tensor_info has a fully
  /// qualified name.
  std::vector<executorch::runtime::etensor::Device> attributes;
};

/**
 * The device each input, output and attribute of method `method_name`
 * lives on, as the program places it, by check_device_access's rule: a
 * planned tensor on its planned buffer's device, an unplanned one on the
 * device its tensor metadata (extra_tensor_info) names; CPU for a constant
 * and for a value that is not a tensor. This is the device a loaded
 * method's tensor carries, read without loading the method (et_copy.
 * runtime's Program.metadata). All lists are empty for a method that does
 * not exist or bytes that do not read as a program; every read is
 * bounds-checked. Threading: pure function of its arguments.
 */
MethodIoDevices method_io_devices(const void* data, size_t size, const char* method_name);

/**
 * The backend ids the delegates of every method of the program name, each
 * once, in plan then delegate order; a delegate with an empty id is left
 * out, and an id ends at its first NUL byte, as ExecuTorch reads it. What
 * an executor registers before loading: ExecuTorch resolves each delegate's
 * backend by this id when the method loads. Empty for bytes that do not read
 * as a program (every read is bounds-checked; any bytes are safe).
 * Threading: pure function of its arguments.
 */
std::vector<std::string> delegate_backend_ids(const void* data, size_t size);

/// The backend id of upstream ExecuTorch's CUDA (AOTInductor) backend.
inline constexpr const char* kCudaBackendId = "CudaBackend";

/**
 * The ids of the delegate backends that may read and write memory of
 * devices of type `type`, as whoever serves that device allows: the
 * DeviceAllocator registered for `type` (executorch::runtime::
 * get_device_allocator). They are the registered device backends
 * (registered_device_backends(), device_backend.h) whose runs_on accepts
 * that allocator (et-copy's or another library's), in registration order,
 * and kCudaBackendId when `type` is CUDA and a GPU serves it: et-copy's
 * CudaDeviceAllocator ("cuda") or another library's allocator (upstream's
 * CUDA backend registers its own), not the simulated device. Empty for CPU
 * and when no allocator is registered for `type`.
 *
 * Threading: reads the allocator registry and et-copy's backend table;
 * any thread.
 */
std::vector<std::string> device_backends(
    executorch::runtime::etensor::DeviceType type = executorch::runtime::etensor::DeviceType::CUDA);

/**
 * Refuses a program in which the host would read or write device memory.
 * In a device program only et-copy's copy kernels (through the
 * DeviceAllocator), a delegate whose backend runs on that device, and the
 * allocator may touch device memory; on a GPU anything else faults.
 *
 * A *device tensor* is a Tensor value planned (allocation_info present) in
 * a memory id whose buffer `non_const_buffer_device` puts on a device that
 * is not the CPU (memory id m is non_const_buffer_sizes[m], the entry with
 * buffer_idx m, as ExecuTorch's tensor parser and MethodMeta map them), or
 * an unplanned tensor (its memory given at run time) whose tensor metadata
 * (extra_tensor_info) names such a device. A *host tensor* is one planned
 * on the CPU, or a constant (its data in the program or its named data).
 * Items of TensorList and OptionalTensorList arguments count as arguments.
 * For every method, refused:
 *  1. a kernel call of any operator other than et_copy::_h2d_copy.out and
 *     et_copy::_d2h_copy.out with a device tensor argument: a CPU kernel
 *     cannot read device memory. Prim ops too: et_view would make an alias
 *     of device memory that this check could no longer see.
 *  2. a copy kernel whose host side (h2d `self`, d2h `out`) is a device
 *     tensor, or whose device side (h2d `out`, d2h `self`) a host tensor;
 *  3. a delegate call with a device tensor argument whose backend id is not
 *     in `allowed_backends` (device_backends(), or the caller's own list);
 *  4. a method input that is a device tensor planned in memory: Method::
 *     set_input copies host bytes into planned inputs with memcpy;
 *  5. a device tensor with an initial value that method load writes with a
 *     host memcpy: one in the program's mutable data (`et_init_buffer`,
 *     data_buffer_idx > 0) or external data (location EXTERNAL, loaded
 *     through NamedDataMap::load_data_into);
 *  6. a jump_false whose condition is a device tensor: Method::execute reads
 *     the condition's elements on the host;
 *  7. a move between values on different devices, one of them a device
 *     tensor: the destination would then hold memory its planning says is
 *     elsewhere, which the checks above would misjudge.
 *
 * `data` is the whole .pte; check_program_indices runs first (its error and
 * report are returned as they are), and every read is bounds-checked, so
 * any bytes are safe. Returns Error::Ok, or Error::InvalidProgram (the
 * contents of the program are at fault, as for a bad index) with `report`'s
 * detail (when given) naming the method, the instruction ("chain:index"), the
 * operator (as instruction_operator names it, "delegate:<id>" for a
 * delegate), the argument position and value, and the device ("cuda:0"):
 * the first refusal in method, input, value, instruction order, followed by
 * how many more were found. Threading: pure function of its arguments.
 */
ET_NODISCARD executorch::runtime::Error check_device_access(const void* data, size_t size,
                                                            const std::vector<std::string>& allowed_backends,
                                                            FailureReport* report = nullptr);

} // namespace et_copy
