// Index checks on an ExecuTorch program that its own verification leaves
// out and its Method asserts on (aborting the process) instead of failing,
// and what an instruction calls, read from the same tables.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>

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
 * Error::InvalidProgram with `message` (when given) naming the plan and
 * the index. Threading: pure function of its arguments.
 */
executorch::runtime::Error check_program_indices(const void* data, size_t size, std::string* message = nullptr);

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

} // namespace et_copy
