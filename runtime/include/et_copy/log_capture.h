// Collects what ExecuTorch logs while a program or method loads or runs
// (et_copy::LoadedProgram, et_copy::LoadedMethod), so a failure can be
// reported in the runtime's own words (the failing instruction and
// operator, the kernel's diagnostic) instead of an error code.
#pragma once

#include <string>
#include <vector>

namespace et_copy {

/// Installs et-copy's log hook into ExecuTorch's platform layer, unless it
/// is the one there now (a library loaded later may have registered its
/// own over it). Every message still goes to the hook that was there before.
/// It replaces only the PAL's log hook, without register_pal(), so neither
/// this nor a later register_pal() by another library logs a complaint.
void install_log_capture();

/// Installs the hook (as above) and says which lines it passes on to the
/// hook that was there before: all of them (true, the default), or only
/// error and fatal ones, which keeps ExecuTorch's info and debug lines off
/// stderr while the hook is in place. Returns the previous setting. Any
/// thread.
bool set_forwarded_levels(bool info_and_debug);

/// While alive, the error and fatal lines ExecuTorch logs on this thread
/// are also kept in `lines()` (it installs the hook first). An inner scope
/// takes the lines until it ends; the outer one gets them again after.
/// It keeps the first 64 lines and drops the rest, so a runaway loop of
/// errors cannot grow it without bound.
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  const std::vector<std::string>& lines() const {
    return lines_;
  }

 private:
  std::vector<std::string> lines_;
  std::vector<std::string>* outer_ = nullptr;
};

} // namespace et_copy
