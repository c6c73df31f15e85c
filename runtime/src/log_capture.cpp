#include <et_copy/log_capture.h>

#include <atomic>
#include <mutex>

#include <executorch/runtime/platform/platform.h>

namespace et_copy {

namespace {

using executorch::runtime::PalImpl;

std::atomic<pal_emit_log_message_method> previous_emit{nullptr};
// Whether info and debug lines go on to the previous hook (et_copy._quiet).
std::atomic<bool> forward_info_and_debug{true};
thread_local std::vector<std::string>* active_lines = nullptr;
// A hook installed over ours that forwards to it would bring the message
// back here: forward each message once.
thread_local bool in_emit = false;
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
  const pal_emit_log_message_method previous = previous_emit.load();
  // The levels are letters ('D', 'I', 'E', 'F'), not an order: name them.
  const bool chatter = level == kInfo || level == kDebug;
  if (previous != nullptr && !in_emit && (!chatter || forward_info_and_debug.load())) {
    in_emit = true;
    previous(timestamp, level, filename, function, line, message, length);
    in_emit = false;
  }
}

} // namespace

namespace {

bool installed() {
  const PalImpl* current = executorch::runtime::get_pal_impl();
  return current != nullptr && current->emit_log_message == &emit;
}

} // namespace

void install_log_capture() {
  if (installed()) {
    return;
  }
  // Not yet, or another library (executorch's pybindings, when a later
  // import loads them) registered its own over ours: wrap whatever is there.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (installed()) {
    return;
  }
  // Only the log hook changes, in the table register_pal() itself writes
  // (get_pal_impl() returns that non-const global). register_pal() would
  // log "register_pal() called multiple times" whenever any PAL had been
  // registered before (executorch's pybindings register one when loaded),
  // and would mark the PAL overridden, so their later registration would
  // log it too: noise on every run that uses both runtimes.
  auto* table = const_cast<PalImpl*>(executorch::runtime::get_pal_impl());
  if (table == nullptr) {
    return;
  }
  previous_emit.store(table->emit_log_message);
  table->emit_log_message = &emit;
}

bool set_forwarded_levels(bool info_and_debug) {
  install_log_capture();
  return forward_info_and_debug.exchange(info_and_debug);
}

LogCapture::LogCapture() {
  install_log_capture();
  outer_ = active_lines;
  active_lines = &lines_;
}

LogCapture::~LogCapture() {
  active_lines = outer_;
}

} // namespace et_copy
