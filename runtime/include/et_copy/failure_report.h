// What failed when a program or method loaded or ran, in the runtime's own
// words: the one shape in which et-copy's C++ functions say why they failed
// (each takes a `FailureReport* report`, null for none, and fills it through
// fail()), and the one place its message is composed (the Python bindings
// prefix it and raise it as EtCopyError).
#pragma once

#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/portable_type/device.h>

namespace et_copy {

struct FailureReport {
  executorch::runtime::Error error = executorch::runtime::Error::Ok;
  /// What was being done: "loading the program", "setting input 0",
  /// "executing", ...
  std::string step;
  /// et-copy's own sentence on what failed (a refused program, a method's
  /// missing allocator), or empty.
  std::string detail;
  /// A failed execution's instruction ("chain:instruction") and what it
  /// called (an operator, e.g. "et_copy::_d2h_copy.out", or
  /// "delegate:<backend id>"); empty when it stopped before any instruction.
  std::string instruction, op;
  /// The error and fatal lines ExecuTorch logged meanwhile: a kernel's own
  /// diagnostic, the failing instruction and operator (et_copy/log_capture.h).
  std::vector<std::string> log;
  /// An execution that failed only because its values did not fit the
  /// ETDump debug buffer (LoadedMethod::execute, OutOfResources): a larger
  /// debug buffer at load answers it, which callers may say.
  bool debug_buffer_full = false;

  /// "<step> failed with <Error name>", then one indented line for the
  /// detail and for each log line, except the "arg N with type id T" lines
  /// ExecuTorch writes after a failed kernel call (they stay in `log`).
  std::string message() const;
};

/**
 * How et-copy's C++ functions fail: returns `error` and, when `report` is
 * not null, makes it describe this failure alone: `error`, `detail` and
 * `step`, with instruction, op, log and debug_buffer_full cleared. A function that does not
 * know the step leaves it empty; the caller that does (LoadedProgram,
 * LoadedMethod) sets it, and the log and instruction when it has them.
 */
ET_NODISCARD executorch::runtime::Error fail(FailureReport* report, executorch::runtime::Error error,
                                             std::string detail, std::string step = {});

/// "InvalidArgument" for Error::InvalidArgument: ExecuTorch's to_string
/// without its "Error::" prefix.
const char* error_name(executorch::runtime::Error e);

/// How et-copy names a device in messages and metadata: "cpu" (whatever the
/// index), "cuda:<index>", or "device type <type>:<index>" for a type
/// ExecuTorch knows and et-copy does not serve. Takes the codes as ints so
/// values read from a program or from Python need no cast first. Python's
/// et_copy Device prints through this (et_copy._C.device_name).
std::string device_name(int device_type, int device_index);
inline std::string device_name(executorch::runtime::etensor::DeviceType type,
                               executorch::runtime::etensor::DeviceIndex index) {
  return device_name(static_cast<int>(type), static_cast<int>(index));
}
inline std::string device_name(executorch::runtime::etensor::Device device) {
  return device_name(device.type(), device.index());
}

} // namespace et_copy
