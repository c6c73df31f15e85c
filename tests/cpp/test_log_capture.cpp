// et_copy::LogCapture (et_copy/log_capture.h): which lines a capture keeps
// (error and fatal, on its own thread, inside its scope, the first 64), how
// it cleans them (trailing newlines gone, every byte outside printable ASCII
// and tab a '?'), and what it passes on to the hook that was there before
// (every level, or only error and fatal when info and debug are quieted;
// each message once, even through a hook that forwards back to ours).
//
// Registry state: none. Before any test, the environment below puts a
// recording hook into ExecuTorch's PAL, as another library would; et-copy's
// hook then wraps it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <et_copy/log_capture.h>
#include <executorch/runtime/platform/log.h>
#include <executorch/runtime/platform/platform.h>
#include <executorch/runtime/platform/runtime.h>

namespace {

using executorch::runtime::PalImpl;

// What reached the hook that was there before et-copy's: (level, text).
std::mutex forwarded_mutex;
std::vector<std::pair<char, std::string>> forwarded;

void recorder(et_timestamp_t, et_pal_log_level_t level, const char*, const char*, size_t, const char* message,
              size_t length) {
  std::lock_guard<std::mutex> lock(forwarded_mutex);
  forwarded.emplace_back(static_cast<char>(level), std::string(message, length));
}

PalImpl* pal() {
  return const_cast<PalImpl*>(executorch::runtime::get_pal_impl());
}

class RecorderFirst : public ::testing::Environment {
 public:
  void SetUp() override {
    executorch::runtime::runtime_init();
    ASSERT_NE(pal(), nullptr);
    pal()->emit_log_message = &recorder;
    et_copy::install_log_capture();
    ASSERT_NE(pal()->emit_log_message, &recorder); // wrapped
  }
};
const auto* const env = ::testing::AddGlobalTestEnvironment(new RecorderFirst);

// Sends `text` at `level` through the PAL, as ET_LOG does (without its level filter).
void emit(et_pal_log_level_t level, const std::string& text) {
  executorch::runtime::pal_emit_log_message(0, level, __FILE__, "emit", __LINE__, text.data(), text.size());
}

std::vector<std::pair<char, std::string>> take_forwarded() {
  std::lock_guard<std::mutex> lock(forwarded_mutex);
  return std::exchange(forwarded, {});
}

using Lines = std::vector<std::string>;
using Forwarded = std::vector<std::pair<char, std::string>>;

TEST(LogCapture, KeepsErrorAndFatalLinesAndForwardsEveryLevelByDefault) {
  take_forwarded();
  et_copy::LogCapture capture;
  emit(kDebug, "d");
  emit(kInfo, "i");
  emit(kError, "e");
  emit(kFatal, "f");
  emit(kUnknown, "u");
  EXPECT_EQ(capture.lines(), (Lines{"e", "f"}));
  EXPECT_EQ(take_forwarded(), (Forwarded{{'D', "d"}, {'I', "i"}, {'E', "e"}, {'F', "f"}, {'?', "u"}}));
}

TEST(LogCapture, QuietingInfoAndDebugStillForwardsErrorFatalAndUnknownLines) {
  take_forwarded();
  EXPECT_TRUE(et_copy::set_forwarded_levels(false)); // the default was on
  emit(kDebug, "d");
  emit(kInfo, "i");
  emit(kError, "e");
  emit(kFatal, "f");
  emit(kUnknown, "u");
  EXPECT_FALSE(et_copy::set_forwarded_levels(true));
  EXPECT_EQ(take_forwarded(), (Forwarded{{'E', "e"}, {'F', "f"}, {'?', "u"}}));
  emit(kInfo, "i again");
  EXPECT_EQ(take_forwarded(), (Forwarded{{'I', "i again"}}));
}

TEST(LogCapture, KeepsTheFirst64ErrorLinesAndDropsTheRest) {
  et_copy::LogCapture capture;
  for (int i = 0; i < 65; ++i) {
    ET_LOG(Error, "captured line %d", i);
  }
  ASSERT_EQ(capture.lines().size(), 64u);
  EXPECT_NE(capture.lines().front().find("captured line 0"), std::string::npos) << capture.lines().front();
  EXPECT_NE(capture.lines().back().find("captured line 63"), std::string::npos) << capture.lines().back();
}

TEST(LogCapture, AnInnerScopeTakesTheLinesUntilItEndsAndAnotherThreadsAreNotKept) {
  et_copy::LogCapture outer;
  emit(kError, "1");
  {
    et_copy::LogCapture inner;
    emit(kError, "2");
    EXPECT_EQ(inner.lines(), (Lines{"2"}));
  }
  emit(kError, "3");
  EXPECT_EQ(outer.lines(), (Lines{"1", "3"}));
  // Another thread's lines are its own.
  std::thread([] { emit(kError, "elsewhere"); }).join();
  EXPECT_EQ(outer.lines(), (Lines{"1", "3"}));
}

TEST(LogCapture, TrailingNewlinesAndCarriageReturnsAreDroppedAndOnlyThose) {
  et_copy::LogCapture capture;
  emit(kError, "a\n");
  emit(kError, "b\r\n\n\r");
  emit(kError, "\n");
  emit(kError, "");
  emit(kError, "c\nd");
  emit(kError, " e ");
  EXPECT_EQ(capture.lines(), (Lines{"a", "b", "", "", "c?d", " e "}));
}

TEST(LogCapture, EveryByteOutsidePrintableAsciiAndTabBecomesAQuestionMark) {
  et_copy::LogCapture capture;
  std::string all;
  for (int b = 0; b < 256; ++b) {
    all += static_cast<char>(b);
  }
  all += "x"; // so no byte of the 256 is trailing
  emit(kError, all);
  ASSERT_EQ(capture.lines().size(), 1u);
  const std::string& kept = capture.lines()[0];
  ASSERT_EQ(kept.size(), 257u);
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x20 && b <= 0x7e) || b == '\t';
    EXPECT_EQ(kept[b], printable ? static_cast<char>(b) : '?') << "byte 0x" << std::hex << b;
  }
}

pal_emit_log_message_method ours = nullptr;
int theirs_calls = 0;

// Another library's hook over ours that forwards to ours.
void theirs(et_timestamp_t t, et_pal_log_level_t level, const char* file, const char* function, size_t line,
            const char* message, size_t length) {
  ++theirs_calls;
  ours(t, level, file, function, line, message, length);
}

// Exits 0 when each message reached their hook once and the hook before it as expected.
void hooks_over_each_other() {
  ours = pal()->emit_log_message;
  pal()->emit_log_message = &theirs;
  take_forwarded();
  emit(kError, "over ours");
  {
    et_copy::LogCapture capture; // installs ours over theirs
    emit(kError, "under ours again");
  }
  // The recorder was the hook before ours only until ours went over theirs.
  std::exit(theirs_calls == 2 && take_forwarded() == Forwarded{{'E', "over ours"}} ? 0 : 1);
}

TEST(LogCapture, AHookThatForwardsBackToOursGetsEachMessageOnce) {
  // Another library puts its hook over ours and forwards to it; a later
  // capture installs ours over theirs, which is then the hook before ours.
  // Each message reaches their hook once and nothing loops. In a child
  // process: the hooks stay as the test leaves them.
  EXPECT_EXIT(hooks_over_each_other(), ::testing::ExitedWithCode(0), "");
}

} // namespace
