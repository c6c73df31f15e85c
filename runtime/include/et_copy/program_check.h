// Index checks on an ExecuTorch program that its own verification leaves
// out and its Method asserts on (aborting the process) instead of failing.
#pragma once

#include <cstddef>
#include <string>

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

} // namespace et_copy
