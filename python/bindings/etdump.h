// ETDump profiles of et_copy.runtime's programs (load_program's
// enable_etdump and debug_buffer_size), when the extension is built with
// ExecuTorch's etdump.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <executorch/runtime/core/event_tracer.h>

#include "program_objects.h"

namespace et_copy::bindings {

/// Gives `lp` a profiler, and a debug buffer of `debug_buffer_size` bytes
/// (0: none) for intermediate outputs; `what` names the load in errors.
/// NotSupported without etdump; InvalidArgument for a size past SIZE_MAX / 2.
void enable_etdump(PyProgram& lp, size_t debug_buffer_size, const std::string& what);

/// What the program's methods ask before logging a tensor, or null.
const et_copy::DebugBufferRoom* debug_buffer_room(PyProgram& lp);

/// The program's ETDump profiler, or null.
executorch::runtime::EventTracer* profiler(PyProgram& lp);

/// Writes what the program's profiler recorded since it was last written
/// (executorch.runtime's Program.write_etdump_result_to_file): the ETDump to
/// `path`, and the debug buffer's bytes to `debug_buffer_path` when the
/// program was loaded with one.
void write_etdump(PyProgram& lp, const std::string& path, const std::optional<std::string>& debug_buffer_path);

} // namespace et_copy::bindings
