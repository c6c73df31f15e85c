// The Python objects of et_copy.runtime (Program, Session, Method) around
// the C++ core's, shared by the files that bind them: program.cpp (load and
// bind), method_meta.cpp, etdump.cpp and execute.cpp. Each is named Py and
// the Python class it is, never the core type it wraps (et_copy::
// LoadedProgram, Session, LoadedMethod).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <et_copy/failure_report.h>
#include <et_copy/instruction_tracer.h>
#include <et_copy/loaded_method.h>
#include <et_copy/loaded_program.h>
#include <et_copy/sessions.h>
#ifdef ET_COPY_WITH_ETDUMP
#include <executorch/devtools/etdump/etdump_flatcc.h>
#endif
#include <executorch/runtime/executor/program.h>

#include "method_io.h"

namespace et_copy::bindings {

// A loaded program (the core's), and what Python adds: the bytes it was
// handed, ETDump's profiler.
struct PyProgram {
  std::string bytes; // the program, when it was handed over as bytes
#ifdef ET_COPY_WITH_ETDUMP
  std::unique_ptr<executorch::etdump::ETDumpGen> etdump; // enable_etdump: every method's events
  std::vector<uint8_t> debug_storage;                    // holds the debug buffer, 64-byte aligned within it
  executorch::runtime::Span<uint8_t> debug_buffer;       // its debug_buffer_size bytes of logged values
  std::unique_ptr<et_copy::DebugBufferRoom> room;        // what each method's tracer asks before logging a tensor
#endif
  std::unique_ptr<et_copy::LoadedProgram> core; // destroyed first: it reads the bytes, its methods the profiler
  const executorch::runtime::Program& program() const {
    return core->program();
  }
  et_copy::SessionPool& pool() {
    return core->pool();
  }
};

// One session: its state and the methods loaded on it. Holds the program.
struct PySession {
  std::shared_ptr<PyProgram> program;
  std::unique_ptr<et_copy::Session> session;
};

// One loaded method of a session, and its slots as Python checks them.
struct PyMethod {
  std::shared_ptr<PySession> session;
  std::string name;
  et_copy::LoadedMethod* core = nullptr; // the session's
  PyMethodIo io;                         // read once at load, for execute's checks
};

/// Raises a failure of the core (`e` at step `what`, with what ExecuTorch logged) as EtCopyError.
[[noreturn]] void raise_runtime(executorch::runtime::Error e, const std::string& what,
                                const std::vector<std::string>& log);

/// Raises a failure report of the core with `where` before its message; `hint` follows its detail.
[[noreturn]] void raise_report(const std::string& where, et_copy::FailureReport r, const std::string& hint = "");

/// The program's method names as Python strs; a malformed program's bytes decode with U+FFFD.
pybind11::list method_names(const PyProgram& lp);

} // namespace et_copy::bindings
