#include <et_copy/failure_report.h>

#include <cstring>

namespace et_copy {

const char* error_name(executorch::runtime::Error e) {
  const char* full = executorch::runtime::to_string(e);
  constexpr char kPrefix[] = "Error::";
  return std::strncmp(full, kPrefix, sizeof(kPrefix) - 1) == 0 ? full + sizeof(kPrefix) - 1 : full;
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
