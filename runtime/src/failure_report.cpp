#include <et_copy/failure_report.h>

#include <cstring>

#include <executorch/runtime/core/portable_type/device.h>

namespace et_copy {

const char* error_name(executorch::runtime::Error e) {
  const char* full = executorch::runtime::to_string(e);
  constexpr char kPrefix[] = "Error::";
  return std::strncmp(full, kPrefix, sizeof(kPrefix) - 1) == 0 ? full + sizeof(kPrefix) - 1 : full;
}

executorch::runtime::Error fail(FailureReport* report, executorch::runtime::Error error, std::string detail,
                                std::string step) {
  if (report != nullptr) {
    report->error = error;
    report->step = std::move(step);
    report->detail = std::move(detail);
    report->instruction.clear();
    report->op.clear();
    report->log.clear();
    report->debug_buffer_full = false;
  }
  return error;
}

std::string device_name(int device_type, int device_index) {
  const std::string index = std::to_string(device_index);
  if (device_type == static_cast<int>(executorch::runtime::etensor::DeviceType::CPU)) {
    return "cpu";
  }
  if (device_type == static_cast<int>(executorch::runtime::etensor::DeviceType::CUDA)) {
    return "cuda:" + index;
  }
  return "device type " + std::to_string(device_type) + ":" + index;
}

std::string FailureReport::message() const {
  std::string m = step + " failed with " + error_name(error);
  if (!detail.empty()) {
    m += "\n  " + detail;
  }
  for (const auto& line : log) {
    // ExecuTorch follows a failed kernel call with one line per argument: noise in a message.
    if (line.rfind("arg ", 0) != 0 || line.find(" with type id ") == std::string::npos) {
      m += "\n  " + line;
    }
  }
  return m;
}

} // namespace et_copy
