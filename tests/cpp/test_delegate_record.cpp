// et_copy::parse_delegate_record on good records, every truncation, every
// one-byte change and the malformed lines; nothing is registered.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <et_copy/delegate_record.h>

namespace {

using et_copy::DelegateRecord;
using et_copy::parse_delegate_record;
using executorch::runtime::Error;
using executorch::runtime::Result;

const std::string kProgram = std::string("PTE\0bytes\n\tmore", 15);

std::string good_record() {
  return "et_copy.delegate 1\n"
         "device\tcuda\t0\n"
         "weight\tlinear.weight\tet_copy.weight:00ff\t64\n"
         "weight\tlinear.bias\tet_copy.weight:0a0b\t16\n"
         "state\tacc\t0\t16\tet_copy.initial_state:acc\n"
         "state\tcount\t16\t8\t-\n"
         "arena\t2\t32\n"
         "program\t15\n" +
         kProgram;
}

Result<DelegateRecord> parse(const std::string& bytes, std::string* what = nullptr) {
  return parse_delegate_record(bytes.data(), bytes.size(), what);
}

// The record with line `n` (0-based) replaced by `text` (without its '\n').
std::string with_line(size_t n, const std::string& text) {
  std::string r = good_record();
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    start = r.find('\n', start) + 1;
  }
  const size_t end = r.find('\n', start);
  return r.substr(0, start) + text + r.substr(end);
}

void expect_refused(const std::string& bytes, const std::string& expected_in_message) {
  std::string what;
  auto r = parse(bytes, &what);
  ASSERT_FALSE(r.ok()) << "accepted: " << bytes;
  EXPECT_EQ(r.error(), Error::DelegateInvalidCompatibility);
  EXPECT_NE(what.find(expected_in_message), std::string::npos) << "message: " << what;
}

TEST(DelegateRecord, ParsesEveryKindOfLine) {
  const std::string bytes = good_record();
  auto r = parse(bytes);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->device_type, executorch::runtime::etensor::DeviceType::CUDA);
  EXPECT_EQ(r->device_index, 0);
  ASSERT_EQ(r->weights.size(), 2u);
  EXPECT_EQ(r->weights[0].fqn, "linear.weight");
  EXPECT_EQ(r->weights[0].key, "et_copy.weight:00ff");
  EXPECT_EQ(r->weights[0].nbytes, 64u);
  ASSERT_EQ(r->states.size(), 2u);
  EXPECT_EQ(r->states[0].initial_key, "et_copy.initial_state:acc");
  EXPECT_EQ(r->states[1].name, "count");
  EXPECT_EQ(r->states[1].offset, 16u);
  EXPECT_EQ(r->states[1].nbytes, 8u);
  EXPECT_EQ(r->states[1].initial_key, "") << "'-' is no initial value";
  EXPECT_TRUE(r->has_arena);
  EXPECT_EQ(r->arena_buffer, 2u);
  EXPECT_EQ(r->arena_nbytes, 32u);
  ASSERT_EQ(r->program_nbytes, kProgram.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r->program), r->program_nbytes), kProgram);
  EXPECT_EQ(reinterpret_cast<const char*>(r->program), bytes.data() + bytes.size() - kProgram.size())
      << "a view, not a copy";
}

TEST(DelegateRecord, MinimalRecordHasNoWeightsNoStateAndAnEmptyProgram) {
  auto r = parse("et_copy.delegate 1\ndevice\tcuda\t3\nprogram\t0\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->device_index, 3);
  EXPECT_TRUE(r->weights.empty());
  EXPECT_FALSE(r->has_arena);
  EXPECT_EQ(r->program_nbytes, 0u);
}

TEST(DelegateRecord, EveryTruncationIsRefused) {
  const std::string bytes = good_record();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = parse_delegate_record(bytes.data(), n);
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes accepted";
    EXPECT_EQ(r.error(), Error::DelegateInvalidCompatibility) << n;
  }
}

TEST(DelegateRecord, TrailingBytesAfterTheProgramAreRefused) {
  expect_refused(good_record() + "x", "the program is 15 bytes, and 16 bytes follow its line");
}

TEST(DelegateRecord, EveryOneByteChangeParsesOrIsRefusedWithoutReadingOutside) {
  // Run under ASan to see reads outside; here it must not crash and must
  // answer Ok or DelegateInvalidCompatibility.
  const std::string good = good_record();
  for (size_t i = 0; i < good.size(); ++i) {
    for (const int b : {0x00, 0x09, 0x0a, 0x2d, 0x30, 0x39, 0x7f, 0xff}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(b);
      std::vector<uint8_t> exact(bytes.begin(), bytes.end()); // no NUL after the end to lean on
      auto r = parse_delegate_record(exact.data(), exact.size());
      if (!r.ok()) {
        EXPECT_EQ(r.error(), Error::DelegateInvalidCompatibility) << i << " " << b;
      }
    }
  }
}

TEST(DelegateRecord, RandomGarbageIsRefused) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes(rng() % 256);
    for (auto& b : bytes) {
      b = static_cast<uint8_t>(rng());
    }
    auto r = parse_delegate_record(bytes.data(), bytes.size());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), Error::DelegateInvalidCompatibility);
  }
  EXPECT_EQ(parse_delegate_record(nullptr, 0).error(), Error::DelegateInvalidCompatibility);
}

TEST(DelegateRecord, AnotherMagicOrVersionIsRefused) {
  expect_refused(with_line(0, "et_copy.delegate 2"), "line 1 ('et_copy.delegate 2'): expected 'et_copy.delegate 1'");
  expect_refused(with_line(0, "et_copy.delegate 1 "), "line 1");
  expect_refused(with_line(0, "ExecutorBackend"), "line 1");
}

TEST(DelegateRecord, UnknownLineIsRefusedNamingIt) {
  expect_refused(with_line(2, "bias\tb\t4"), "line 3 ('bias\\tb\\t4'): unknown kind of line 'bias'");
  expect_refused(with_line(2, ""), "line 3 (''): unknown kind of line ''");
  expect_refused(with_line(2, "weight"), "line 3 ('weight'): a weight line has 4 fields");
}

TEST(DelegateRecord, WrongFieldCountsAreRefused) {
  expect_refused(with_line(1, "device\tcuda"), "line 2 ('device\\tcuda'): a device line has 3 fields");
  expect_refused(with_line(2, "weight\tw\tk\t4\textra"), "a weight line has 4 fields");
  expect_refused(with_line(4, "state\tacc\t0\t16"), "a state line has 5 fields");
  expect_refused(with_line(6, "arena\t2"), "an arena line has 3 fields");
  expect_refused(with_line(7, "program\t15\t0"), "a program line has 2 fields");
}

TEST(DelegateRecord, NumbersMustBePlainDecimalWithoutOverflow) {
  for (const char* n : {"-1", "+4", " 4", "4 ", "0x10", "", "1e3", "99999999999999999999999"}) {
    expect_refused(with_line(2, std::string("weight\tw\tk\t") + n), "line 3");
  }
  expect_refused(with_line(2, "weight\tw\tk\t18446744073709551616"), "line 3"); // SIZE_MAX + 1
}

TEST(DelegateRecord, EmptyNamesAndKeysAreRefused) {
  expect_refused(with_line(2, "weight\t\tk\t4"), "a weight needs a name, a key");
  expect_refused(with_line(2, "weight\tw\t\t4"), "a weight needs a name, a key");
  expect_refused(with_line(4, "state\t\t0\t16\t-"), "a state needs a name");
  expect_refused(with_line(4, "state\tacc\t0\t16\t"), "a state needs a name");
}

TEST(DelegateRecord, DeviceMustBeCudaWithAnIndexUpTo127) {
  expect_refused(with_line(1, "device\tcpu\t0"), "device type 'cpu' is not one this backend serves");
  expect_refused(with_line(1, "device\tcuda\t128"), "device index is not in 0..127");
  EXPECT_TRUE(parse(with_line(1, "device\tcuda\t127")).ok());
  expect_refused("et_copy.delegate 1\nprogram\t0\n", "no device line");
}

TEST(DelegateRecord, DuplicatesAreRefused) {
  expect_refused(with_line(2, "device\tcuda\t0"), "line 3 ('device\\tcuda\\t0'): a second device line");
  expect_refused(with_line(3, "weight\tlinear.weight\tother\t4"), "line 4 ('weight");
  expect_refused(with_line(3, "weight\tlinear.weight\tother\t4"), "a second weight named 'linear.weight'");
  expect_refused(with_line(5, "state\tacc\t16\t8\t-"), "a second state named 'acc'");
  expect_refused(with_line(5, "arena\t2\t32"), "a second arena line");
}

TEST(DelegateRecord, StateMustLieInsideAnArena) {
  expect_refused(with_line(6, "arena\t2\t23"), "line 6: state 'count' (8 bytes at 16) is outside the arena (23 bytes)");
  expect_refused(with_line(5, "state\tcount\t18446744073709551615\t8\t-"), "outside the arena");
  expect_refused("et_copy.delegate 1\ndevice\tcuda\t0\nstate\ts\t0\t4\t-\nprogram\t0\n", "outside the arena (none)");
}

TEST(DelegateRecord, StateMustStartOnATensorAlignmentBoundary) {
  // A GPU kernel's 16-byte vector loads fault on a state tensor at offset 8.
  expect_refused(with_line(5, "state\tcount\t8\t8\t-"),
                 "line 6: state 'count' is at offset 8, not a multiple of 16 bytes");
  EXPECT_TRUE(parse(with_line(5, "state\tcount\t16\t8\t-")).ok());
}

TEST(DelegateRecord, ProgramSizeMustMatchTheBytesThatFollow) {
  expect_refused(with_line(7, "program\t14"), "line 8 ('program\\t14'): the program is 14 bytes, and 15 bytes follow");
  expect_refused(with_line(7, "program\t16"), "the program is 16 bytes");
  expect_refused("et_copy.delegate 1\ndevice\tcuda\t0\n", "the record ends before its program line");
  expect_refused("et_copy.delegate 1\ndevice\tcuda\t0\nprogr", "line 3 ('progr'): the line has no end");
}

TEST(DelegateRecord, MessagesShowControlBytesEscapedAndLongLinesCut) {
  std::string what;
  const std::string junk = std::string("\x01\xff", 2) + std::string(500, 'a');
  ASSERT_FALSE(parse(with_line(2, junk), &what).ok());
  EXPECT_NE(what.find("\\x01\\xff"), std::string::npos) << what;
  EXPECT_LT(what.size(), 300u) << what;
}

// A shown line is cut at exactly 80 bytes: a line of 80 is shown whole, one
// of 81 shows its first 80 and "...".
TEST(DelegateRecord, ShownLinesAreCutAtEightyBytes) {
  const std::string eighty = "x" + std::string(79, 'b');
  expect_refused(with_line(2, eighty), "line 3 ('" + eighty + "'): unknown kind of line");
  expect_refused(with_line(2, eighty + "c"), "line 3 ('" + eighty + "...'): unknown kind of line");
}

} // namespace
