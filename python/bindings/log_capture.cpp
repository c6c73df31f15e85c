#include "log_capture.h"

#include <mutex>

#include <executorch/runtime/platform/platform.h>

namespace et_copy::bindings {

namespace {

using executorch::runtime::PalImpl;

pal_emit_log_message_method previous_emit = nullptr;
thread_local std::vector<std::string>* active_lines = nullptr;
// A runaway loop logging errors must not grow a capture without bound.
constexpr size_t kMaxLines = 64;

void emit(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename, const char* function, size_t line,
          const char* message, size_t length) {
  if (active_lines != nullptr && (level == kError || level == kFatal) && active_lines->size() < kMaxLines) {
    std::string text(message, length);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
      text.pop_back();
    }
    // A malformed program's strings reach the log as they are: keep the
    // text printable ASCII, so it always makes a valid Python str.
    for (char& c : text) {
      if (static_cast<unsigned char>(c) >= 0x7f || (static_cast<unsigned char>(c) < 0x20 && c != '\t')) {
        c = '?';
      }
    }
    active_lines->push_back(std::move(text));
  }
  if (previous_emit != nullptr) {
    previous_emit(timestamp, level, filename, function, line, message, length);
  }
}

} // namespace

void install_log_capture() {
  static std::once_flag once;
  std::call_once(once, [] {
    const PalImpl* current = executorch::runtime::get_pal_impl();
    previous_emit = current != nullptr ? current->emit_log_message : nullptr;
    executorch::runtime::register_pal(PalImpl::create(&emit, __FILE__));
  });
}

LogCapture::LogCapture() {
  active_lines = &lines_;
}

LogCapture::~LogCapture() {
  active_lines = nullptr;
}

} // namespace et_copy::bindings
