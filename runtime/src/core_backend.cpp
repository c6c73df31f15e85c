#include "core_backend.h"

#include <string>

#include <et_copy/simulated_device_backend.h>

namespace et_copy::internal {

namespace {

// A nested ExecuTorch program's own lines: its state lives in a nested
// planned buffer, and the program itself says every layout.
std::string check_program(const DelegateRecord& r, const RecordLines& lines, size_t* line) {
  if (!r.tensors.empty() || lines.target != 0 || lines.io != 0 || lines.digest != 0) {
    *line = !r.tensors.empty()  ? lines.tensors[0]
            : lines.target != 0 ? lines.target
            : lines.io != 0     ? lines.io
                                : lines.digest;
    return std::string("a ") + kPayloadProgram + " payload has no tensor, target, io or digest line";
  }
  if (r.has_arena && !r.has_arena_buffer) {
    *line = lines.arena;
    return std::string("a ") + kPayloadProgram + " payload's arena names its nested planned buffer, not -";
  }
  return "";
}

} // namespace

PayloadRules program_payload_rules() {
  return {kPayloadProgram, &check_program};
}

DeviceBackendHelp simulated_backend_help() {
  return {&simulated_device_backend(), "et_copy.use_simulated_device()", "et_copy::register_simulated_device_backend()",
          "et-copy's simulated device only (its processor reads device memory through the host, and a GPU's memory "
          "is not host memory)"};
}

} // namespace et_copy::internal
