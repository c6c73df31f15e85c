// ETDump profiles: the profiler and debug buffer a program is loaded with,
// and writing what they recorded.
#include "etdump.h"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>

#include "failure.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;

#ifdef ET_COPY_WITH_ETDUMP
// ETDumpGen::set_debug_buffer's BufferDataSink starts each tensor at the next
// address aligned to this (its default alignment).
constexpr size_t kDebugBufferAlignment = 64;

// The room left in a program's debug buffer, by the ETDumpGen's data sink.
// ETDumpGen aborts the process on a tensor its sink cannot take, so every
// method's InstructionTracer asks this first.
class EtdumpRoom final : public et_copy::DebugBufferRoom {
 public:
  EtdumpRoom(executorch::etdump::ETDumpGen& etdump, executorch::runtime::Span<uint8_t> buffer)
      : etdump_(etdump), buffer_(buffer) {}
  size_t size() const override {
    return buffer_.size();
  }
  size_t used() const override {
    const auto* sink = etdump_.get_data_sink();
    return sink != nullptr ? sink->get_used_bytes() : buffer_.size(); // no sink: no room
  }
  size_t end_after(size_t offset, size_t nbytes) const override {
    const auto base = reinterpret_cast<uintptr_t>(buffer_.data());
    const uintptr_t start = (base + offset + kDebugBufferAlignment - 1) & ~uintptr_t{kDebugBufferAlignment - 1};
    return static_cast<size_t>(start - base) + nbytes;
  }

 private:
  executorch::etdump::ETDumpGen& etdump_;
  executorch::runtime::Span<uint8_t> buffer_;
};

// Starts a new, empty profile. ETDumpGen::get_etdump_data finishes its
// builder and leaves it finished: a second call, with no event block in
// between, builds on the finished buffer and corrupts the heap (executorch
// 1.5.1), and ETDumpGen::reset drops the debug buffer. So after every
// get_etdump_data the profile starts again here, with its debug buffer.
void start_profile(PyProgram& lp) {
  lp.etdump->reset();
  if (!lp.debug_buffer.empty()) {
    auto set = lp.etdump->set_debug_buffer(lp.debug_buffer);
    if (!set.ok()) {
      throw Failure(set.error(), "et_copy.runtime: enable_etdump: ETDump refused the debug buffer of " +
                                     std::to_string(lp.debug_buffer.size()) + " bytes");
    }
  }
}
#endif

void write_file(const std::string& path, const void* data, size_t size, const std::string& what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) {
    throw Failure(Error::AccessFailed, what + ": cannot write " + path);
  }
}

} // namespace

void enable_etdump(PyProgram& lp, size_t debug_buffer_size, const std::string& what) {
#ifdef ET_COPY_WITH_ETDUMP
  lp.etdump = std::make_unique<executorch::etdump::ETDumpGen>();
  if (debug_buffer_size > SIZE_MAX / 2) {
    throw Failure(Error::InvalidArgument,
                  what + ": debug_buffer_size " + std::to_string(debug_buffer_size) + " is too large");
  }
  if (debug_buffer_size > 0) {
    // As executorch.runtime: a debug buffer means intermediate outputs are
    // logged into it (host tensors only: InstructionTracer never hands a
    // device tensor's memory to the profiler).
    // Aligned as the sink aligns each tensor, so the buffer a run needs
    // does not depend on where the allocator put it.
    lp.debug_storage.resize(debug_buffer_size + kDebugBufferAlignment - 1);
    const auto at = reinterpret_cast<uintptr_t>(lp.debug_storage.data());
    const size_t pad = (kDebugBufferAlignment - at % kDebugBufferAlignment) % kDebugBufferAlignment;
    lp.debug_buffer = {lp.debug_storage.data() + pad, debug_buffer_size};
    lp.etdump->set_event_tracer_debug_level(executorch::runtime::EventTracerDebugLogLevel::kIntermediateOutputs);
    lp.room = std::make_unique<EtdumpRoom>(*lp.etdump, lp.debug_buffer);
  }
  start_profile(lp);
#else
  throw Failure(Error::NotSupported, what + ": enable_etdump: this et_copy was built without ExecuTorch's etdump");
#endif
}

const et_copy::DebugBufferRoom* debug_buffer_room(PyProgram& lp) {
#ifdef ET_COPY_WITH_ETDUMP
  return lp.room.get();
#else
  (void)lp;
  return nullptr;
#endif
}

executorch::runtime::EventTracer* profiler(PyProgram& lp) {
#ifdef ET_COPY_WITH_ETDUMP
  return lp.etdump.get();
#else
  (void)lp;
  return nullptr;
#endif
}

void write_etdump(PyProgram& lp, const std::string& path, const std::optional<std::string>& debug_buffer_path) {
  const std::string what = "et_copy.runtime: write_etdump_result_to_file";
#ifdef ET_COPY_WITH_ETDUMP
  if (!lp.etdump) {
    throw Failure(Error::InvalidState, what + ": the program was loaded without enable_etdump=True");
  }
  executorch::etdump::ETDumpResult result{nullptr, 0};
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(lp.pool().execution_lock()); // the profiler records every method's events
    result = lp.etdump->get_etdump_data();
    start_profile(lp); // whatever happens to the file: never get_etdump_data twice on one profile
  }
  const std::unique_ptr<void, void (*)(void*)> owned(result.buf, std::free);
  if (result.buf == nullptr || result.size == 0) {
    throw Failure(Error::NotFound, what + ": nothing was recorded (load and execute a method first)");
  }
  write_file(path, result.buf, result.size, what);
  if (debug_buffer_path && !lp.debug_buffer.empty()) {
    write_file(*debug_buffer_path, lp.debug_buffer.data(), lp.debug_buffer.size(), what);
  }
#else
  (void)lp, (void)path, (void)debug_buffer_path;
  throw Failure(Error::NotSupported, what + ": this et_copy was built without ExecuTorch's etdump");
#endif
}

} // namespace et_copy::bindings
