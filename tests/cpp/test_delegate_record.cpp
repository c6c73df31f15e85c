// et_copy::parse_delegate_record on good records, every truncation, every
// one-byte change and the malformed lines. The two payload kinds' rules and
// readers are registered first, program then aoti, as their libraries do
// when they load (describe_simulated_device_backend, and aoti's record_rules
// from backends/aoti/src/aoti_record.cpp); no backend is registered.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <et_copy/delegate_record.h>
#include <et_copy/simulated_device_backend.h>

#include "aoti_record.h"

namespace {

using et_copy::DelegateRecord;
using et_copy::parse_delegate_record;
using executorch::runtime::Error;
using executorch::runtime::Result;

const std::string kProgram = std::string("PTE\0bytes\n\tmore", 15);

std::string good_record() {
  static const bool described = et_copy::describe_simulated_device_backend() == Error::Ok;
  EXPECT_TRUE(described);
  return "et_copy.delegate 2\n"
         "device\tcuda\t0\n"
         "weight\tlinear.weight\tet_copy.weight:00ff\t64\n"
         "weight\tlinear.bias\tet_copy.weight:0a0b\t16\n"
         "state\tacc\t0\t16\tet_copy.state:0c0d\n"
         "state\tcount\t16\t8\t-\n"
         "arena\t2\t32\n"
         "payload\tprogram\t15\n" +
         kProgram;
}

// An aoti record: lines 0..6 as above but the arena, then tensor lines
// (7..10), target (11), io (12), digest (13), payload (14).
std::string good_aoti_record() {
  good_record(); // program first: the refusals list the kinds in registration order
  static const bool registered = et_copy::register_payload_kind(et_copy::aoti::record_rules()) == Error::Ok;
  EXPECT_TRUE(registered);
  return "et_copy.delegate 2\n"
         "device\tcuda\t1\n"
         "weight\tlinear.weight\tet_copy.weight:00ff\t64\n"
         "weight\tlinear.bias\tet_copy.weight:0a0b\t16\n"
         "state\tacc\t0\t16\tet_copy.state:0c0d\n"
         "state\tcount\t16\t8\t-\n"
         "arena\t-\t32\n"
         "tensor\tlinear.weight\t6\t4,4\t4,1\n"
         "tensor\tlinear.bias\t6\t4\t1\n"
         "tensor\tacc\t6\t2,2\t1,2\n"
         "tensor\tcount\t4\t\t\n"
         "target\tcpu\t2.13.0+cpu\n"
         "io\t2\t3\n"
         "digest\tsha256\t0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
         "payload\taoti\t15\n" +
         kProgram;
}

Result<DelegateRecord> parse(const std::string& bytes, et_copy::FailureReport* report = nullptr) {
  return parse_delegate_record(bytes.data(), bytes.size(), report);
}

// The record with line `n` (0-based) replaced by `text` (without its '\n').
std::string with_line(size_t n, const std::string& text, std::string r = good_record()) {
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    start = r.find('\n', start) + 1;
  }
  const size_t end = r.find('\n', start);
  return r.substr(0, start) + text + r.substr(end);
}

void expect_refused(const std::string& bytes, const std::string& expected_in_message) {
  et_copy::FailureReport report;
  auto r = parse(bytes, &report);
  ASSERT_FALSE(r.ok()) << "accepted: " << bytes;
  EXPECT_EQ(r.error(), Error::DelegateInvalidCompatibility);
  EXPECT_NE(report.detail.find(expected_in_message), std::string::npos) << "message: " << report.detail;
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
  EXPECT_EQ(r->states[0].initial_key, "et_copy.state:0c0d");
  EXPECT_EQ(r->states[1].name, "count");
  EXPECT_EQ(r->states[1].offset, 16u);
  EXPECT_EQ(r->states[1].nbytes, 8u);
  EXPECT_EQ(r->states[1].initial_key, "") << "'-' is no initial value";
  EXPECT_TRUE(r->has_arena);
  EXPECT_EQ(r->arena_buffer, 2u);
  EXPECT_EQ(r->arena_nbytes, 32u);
  EXPECT_TRUE(r->has_arena_buffer);
  EXPECT_TRUE(r->tensors.empty());
  EXPECT_EQ(r->payload_word, "program");
  EXPECT_TRUE(r->payload_is_program);
  EXPECT_EQ(r->payload_lines, nullptr) << "the program kind reads no lines of its own";
  ASSERT_EQ(r->payload_nbytes, kProgram.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r->payload), r->payload_nbytes), kProgram);
  EXPECT_EQ(reinterpret_cast<const char*>(r->payload), bytes.data() + bytes.size() - kProgram.size())
      << "a view, not a copy";
}

TEST(DelegateRecord, ParsesAnAotiRecord) {
  const std::string bytes = good_aoti_record();
  et_copy::FailureReport report;
  auto r = parse(bytes, &report);
  ASSERT_TRUE(r.ok()) << report.detail;
  EXPECT_EQ(r->device_index, 1);
  EXPECT_TRUE(r->has_arena);
  EXPECT_FALSE(r->has_arena_buffer);
  EXPECT_EQ(r->arena_nbytes, 32u);
  ASSERT_EQ(r->tensors.size(), 4u);
  EXPECT_EQ(r->tensors[0].name, "linear.weight");
  EXPECT_EQ(r->tensors[0].dtype, executorch::runtime::etensor::ScalarType::Float);
  EXPECT_EQ(r->tensors[0].sizes, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(r->tensors[0].strides, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(r->tensors[2].strides, (std::vector<int64_t>{1, 2})) << "any strides whose span fits";
  EXPECT_EQ(r->tensors[3].dtype, executorch::runtime::etensor::ScalarType::Long);
  EXPECT_TRUE(r->tensors[3].sizes.empty()) << "empty sizes: a 0-d tensor";
  // The aoti kind's own lines, read by its reader.
  const et_copy::aoti::AotiLines& own = et_copy::aoti::aoti_lines(*r);
  EXPECT_EQ(own.target, "cpu");
  EXPECT_EQ(own.torch_version, "2.13.0+cpu");
  EXPECT_EQ(own.num_inputs, 2u);
  EXPECT_EQ(own.num_outputs, 3u);
  EXPECT_EQ((std::vector<size_t>{own.target_line, own.io_line, own.digest_line}), (std::vector<size_t>{12, 13, 14}));
  EXPECT_EQ(r->payload_word, "aoti");
  EXPECT_FALSE(r->payload_is_program);
  EXPECT_EQ(reinterpret_cast<const char*>(r->payload), bytes.data() + bytes.size() - kProgram.size());
  EXPECT_TRUE(parse(with_line(11, "target\tcuda\t2.11.0+cu130", good_aoti_record())).ok());
}

void expect_aoti_refused(size_t line, const std::string& text, const std::string& expected_in_message) {
  expect_refused(with_line(line, text, good_aoti_record()), expected_in_message);
}

TEST(DelegateRecord, TensorLinesAreChecked) {
  expect_aoti_refused(7, "tensor\tlinear.weight\t6\t4,4",
                      "line 8 ('tensor\\tlinear.weight\\t6\\t4,4'): a tensor line has 5 fields");
  expect_aoti_refused(7, "tensor\t\t6\t4,4\t4,1", "a tensor needs a name");
  for (const char* dtype : {"-1", "99", "128", "x", ""}) {
    expect_aoti_refused(7, std::string("tensor\tlinear.weight\t") + dtype + "\t4,4\t4,1",
                        "is not an ExecuTorch ScalarType");
  }
  for (const char* sizes : {"4,", ",4", "4,,4", "-4,4", "4;4", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"}) {
    expect_aoti_refused(7, std::string("tensor\tlinear.weight\t6\t") + sizes + "\t4,1", "comma-separated decimals");
  }
  expect_aoti_refused(7, "tensor\tlinear.weight\t6\t16\t1,1", "1 sizes and 2 strides");
  expect_aoti_refused(8, "tensor\tlinear.weight\t6\t4\t1",
                      "line 9 ('tensor\\tlinear.weight\\t6\\t4\\t1'): a second tensor line for 'linear.weight'");
  expect_aoti_refused(7, "tensor\tlinear.wait\t6\t4,4\t4,1", "line 8: tensor 'linear.wait' names no weight or state");
}

TEST(DelegateRecord, ATensorSpanMustFitItsWeightOrState) {
  // 64 bytes of weight: 4x4 float32 fits; 4x5, or strides reaching byte 68, or float64 do not.
  EXPECT_TRUE(parse(with_line(7, "tensor\tlinear.weight\t6\t16\t1", good_aoti_record())).ok());
  EXPECT_TRUE(parse(with_line(7, "tensor\tlinear.weight\t6\t2,2\t8,2", good_aoti_record())).ok()) << "span 11 floats";
  EXPECT_TRUE(parse(with_line(7, "tensor\tlinear.weight\t6\t0,1000\t1000,1", good_aoti_record())).ok()) << "empty";
  EXPECT_TRUE(parse(with_line(7, "tensor\tlinear.weight\t6\t1000\t0", good_aoti_record())).ok()) << "broadcast";
  expect_aoti_refused(7, "tensor\tlinear.weight\t6\t4,5\t5,1",
                      "line 8: tensor 'linear.weight' reaches 80 bytes, and 'linear.weight' has 64");
  expect_aoti_refused(7, "tensor\tlinear.weight\t6\t2,2\t15,1", "reaches 68 bytes");
  expect_aoti_refused(7, "tensor\tlinear.weight\t7\t4,4\t4,1", "reaches 128 bytes");
  expect_aoti_refused(10, "tensor\tcount\t4\t2\t1", "tensor 'count' reaches 16 bytes, and 'count' has 8");
  expect_aoti_refused(7, "tensor\tlinear.weight\t6\t2,2\t9223372036854775807,9223372036854775807",
                      "reaches too many bytes");
}

TEST(DelegateRecord, AnAotiPayloadNeedsOneTargetOneIoAndATensorLinePerWeightAndState) {
  expect_aoti_refused(11, "weight\tw\tk\t0", "line 15: an aoti payload needs a target, an io and a digest line");
  expect_aoti_refused(12, "weight\tw\tk\t0", "line 15: an aoti payload needs a target, an io and a digest line");
  expect_aoti_refused(13, "weight\tw\tk\t0", "line 15: an aoti payload needs a target, an io and a digest line");
  expect_aoti_refused(7, "state\tz\t32\t0\t-", "an aoti payload needs a tensor line for weight 'linear.weight'");
  expect_aoti_refused(10, "state\tz\t32\t0\t-", "an aoti payload needs a tensor line for state 'count'");
  expect_aoti_refused(6, "arena\t2\t32", "line 7: an aoti payload's arena is -");
  expect_aoti_refused(11, "target\tcpu", "a target line has 3 fields");
  expect_aoti_refused(11, "target\tmps\t2.13.0", "target 'mps' is not cpu or cuda");
  expect_aoti_refused(11, "target\tcpu\t", "a target needs the torch version");
  expect_aoti_refused(12, "target\tcpu\t2.13.0", "line 13 ('target\\tcpu\\t2.13.0'): a second target line");
  expect_aoti_refused(11, "io\t1\t1", "line 13 ('io\\t2\\t3'): a second io line");
  expect_aoti_refused(12, "io\t2", "an io line has 3 fields");
  expect_aoti_refused(12, "io\t2\t-1", "inputs and outputs are decimal counts");
  expect_aoti_refused(12, "io\t2\t2000000", "inputs and outputs are decimal counts");
}

TEST(DelegateRecord, TheDigestLineIsSha256InLowercaseHexOnce) {
  auto r = parse(good_aoti_record());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(et_copy::aoti::aoti_lines(*r).payload_sha256,
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  const std::string digits(64, 'a');
  EXPECT_TRUE(parse(with_line(13, "digest\tsha256\t" + digits, good_aoti_record())).ok());
  for (const std::string& bad :
       {"digest\tsha256\t" + digits.substr(1), "digest\tsha256\t" + digits + "a",
        "digest\tsha256\t" + std::string(64, 'A'), "digest\tsha256\t" + std::string(63, 'a') + "g",
        "digest\tsha1\t" + digits, "digest\t" + digits, "digest\tsha256\t" + digits + "\tx"}) {
    expect_aoti_refused(13, bad, "a digest line has 3 fields: digest, sha256, 64 lowercase hex digits");
  }
  expect_aoti_refused(12, "digest\tsha256\t" + digits, "line 14 ('digest\\tsha256\\t0123");
  expect_aoti_refused(12, "digest\tsha256\t" + digits, "a second digest line");
}

TEST(DelegateRecord, AProgramPayloadHasNoAotiLinesAndItsArenaNamesABuffer) {
  expect_refused(with_line(6, "arena\t-\t32"), "line 7: a program payload's arena names its nested");
  expect_refused(with_line(5, "tensor\tacc\t6\t4\t1"), "line 6: a program payload has no tensor");
  expect_refused(with_line(5, "target\tcpu\t2.13.0"),
                 "line 6: a program payload has no tensor, target, io or digest line");
  expect_refused(with_line(5, "io\t1\t1"), "line 6: a program payload has no");
  expect_refused(with_line(5, "digest\tsha256\t0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
                 "line 6: a program payload has no");
}

TEST(DelegateRecord, PayloadKindMustBeProgramOrAoti) {
  good_aoti_record(); // registers the aoti kind: the refusal lists the known kinds
  expect_refused(with_line(7, "payload\tpte\t15"),
                 "line 8 ('payload\\tpte\\t15'): payload kind 'pte' is not program or aoti");
  expect_refused(with_line(7, "payload\t15"), "a payload line has 3 fields");
  expect_refused(with_line(7, "program\t15"), "unknown kind of line 'program'");
}

TEST(DelegateRecord, MinimalRecordHasNoWeightsNoStateAndAnEmptyProgram) {
  auto r = parse("et_copy.delegate 2\ndevice\tcuda\t3\npayload\tprogram\t0\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->device_index, 3);
  EXPECT_TRUE(r->weights.empty());
  EXPECT_FALSE(r->has_arena);
  EXPECT_EQ(r->payload_nbytes, 0u);
}

TEST(DelegateRecord, EveryTruncationIsRefused) {
  for (const std::string& bytes : {good_record(), good_aoti_record()}) {
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto r = parse_delegate_record(bytes.data(), n);
      ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes accepted";
      EXPECT_EQ(r.error(), Error::DelegateInvalidCompatibility) << n;
    }
  }
}

TEST(DelegateRecord, TrailingBytesAfterTheProgramAreRefused) {
  expect_refused(good_record() + "x", "the payload is 15 bytes, and 16 bytes follow its line");
}

TEST(DelegateRecord, EveryOneByteChangeParsesOrIsRefusedWithoutReadingOutside) {
  // Run under ASan to see reads outside; here it must not crash and must
  // answer Ok or DelegateInvalidCompatibility.
  for (const std::string& good : {good_record(), good_aoti_record()}) {
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

// Null data is refused before anything is read when it claims bytes,
// naming how many; null and empty is an empty record, refused as one.
TEST(DelegateRecord, NullDataWithBytesIsAnInvalidArgumentNamingTheSize) {
  et_copy::FailureReport report;
  auto r = parse_delegate_record(nullptr, 5, &report);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), Error::InvalidArgument);
  EXPECT_EQ(report.detail, "delegate record: null data of 5 bytes");
  EXPECT_EQ(parse_delegate_record(nullptr, 1).error(), Error::InvalidArgument);
  report = {};
  EXPECT_EQ(parse_delegate_record(nullptr, 0, &report).error(), Error::DelegateInvalidCompatibility);
  EXPECT_EQ(report.detail.find("null data"), std::string::npos) << report.detail;
}

TEST(DelegateRecord, AnotherMagicOrVersionIsRefused) {
  expect_refused(with_line(0, "et_copy.delegate 1"), "line 1 ('et_copy.delegate 1'): expected 'et_copy.delegate 2'");
  expect_refused(with_line(0, "et_copy.delegate 3"), "expected 'et_copy.delegate 2'");
  expect_refused(with_line(0, "et_copy.delegate 2 "), "line 1");
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
  expect_refused(with_line(7, "payload\tprogram\t15\t0"), "a payload line has 3 fields");
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
  expect_refused("et_copy.delegate 2\npayload\tprogram\t0\n", "no device line");
}

TEST(DelegateRecord, DuplicatesAreRefused) {
  expect_refused(with_line(2, "device\tcuda\t0"), "line 3 ('device\\tcuda\\t0'): a second device line");
  expect_refused(with_line(3, "weight\tlinear.weight\tother\t4"), "line 4 ('weight");
  expect_refused(with_line(3, "weight\tlinear.weight\tother\t4"), "a second weight named 'linear.weight'");
  expect_refused(with_line(5, "state\tacc\t16\t8\t-"), "a second state named 'acc'");
  expect_refused(with_line(5, "arena\t2\t32"), "a second arena line");
  expect_refused(with_line(5, "arena\t-\t32", good_aoti_record()), "a second arena line");
  expect_refused(with_line(6, "arena\tx\t32"), "an arena needs a decimal buffer index or -");
}

TEST(DelegateRecord, StateMustLieInsideAnArena) {
  expect_refused(with_line(6, "arena\t2\t23"), "line 6: state 'count' (8 bytes at 16) is outside the arena (23 bytes)");
  expect_refused(with_line(5, "state\tcount\t18446744073709551615\t8\t-"), "outside the arena");
  expect_refused("et_copy.delegate 2\ndevice\tcuda\t0\nstate\ts\t0\t4\t-\npayload\tprogram\t0\n",
                 "outside the arena (none)");
}

TEST(DelegateRecord, StateMustStartOnATensorAlignmentBoundary) {
  // A GPU kernel's 16-byte vector loads fault on a state tensor at offset 8.
  expect_refused(with_line(5, "state\tcount\t8\t8\t-"),
                 "line 6: state 'count' is at offset 8, not a multiple of 16 bytes");
  EXPECT_TRUE(parse(with_line(5, "state\tcount\t16\t8\t-")).ok());
}

TEST(DelegateRecord, PayloadSizeMustMatchTheBytesThatFollow) {
  expect_refused(with_line(7, "payload\tprogram\t14"),
                 "line 8 ('payload\\tprogram\\t14'): the payload is 14 bytes, and 15 bytes follow");
  expect_refused(with_line(7, "payload\tprogram\t16"), "the payload is 16 bytes");
  expect_refused(with_line(13, "payload\taoti\t16", good_aoti_record()), "the payload is 16 bytes");
  expect_refused("et_copy.delegate 2\ndevice\tcuda\t0\n", "the record ends before its payload line");
  expect_refused("et_copy.delegate 2\ndevice\tcuda\t0\npaylo", "line 3 ('paylo'): the line has no end");
}

TEST(DelegateRecord, MessagesShowControlBytesEscapedAndLongLinesCut) {
  et_copy::FailureReport report;
  const std::string junk = std::string("\x01\xff", 2) + std::string(500, 'a');
  ASSERT_FALSE(parse(with_line(2, junk), &report).ok());
  EXPECT_NE(report.detail.find("\\x01\\xff"), std::string::npos) << report.detail;
  EXPECT_LT(report.detail.size(), 300u) << report.detail;
}

// A shown line is cut at exactly 80 bytes: a line of 80 is shown whole, one
// of 81 shows its first 80 and "...".
TEST(DelegateRecord, ShownLinesAreCutAtEightyBytes) {
  const std::string eighty = "x" + std::string(79, 'b');
  expect_refused(with_line(2, eighty), "line 3 ('" + eighty + "'): unknown kind of line");
  expect_refused(with_line(2, eighty + "c"), "line 3 ('" + eighty + "...'): unknown kind of line");
}

// Bytes from space to '~' are shown as they are, but the backslash; the
// ones below space and from DEL up as \xNN.
TEST(DelegateRecord, ShownBytesArePrintableFromSpaceToTildeAndEscapedOutside) {
  const std::string shown = "\\x1f ~\\x7f\\x5c";
  expect_refused(with_line(2, "\x1f ~\x7f\\"), "line 3 ('" + shown + "'): unknown kind of line '" + shown + "'");
}

// What a message says when there is no line to name, and when it names the
// line read last.
TEST(DelegateRecord, AMessageNamesALineOnlyOnceOneIsRead) {
  et_copy::FailureReport report;
  EXPECT_FALSE(parse("", &report).ok());
  EXPECT_EQ(report.detail, "delegate record: the record has no version line (0 bytes)");
  report = {};
  EXPECT_FALSE(parse("et_copy.delegate 2\npayload\tprogram\t0\n", &report).ok());
  EXPECT_EQ(report.detail, "delegate record: line 2: the record has no device line");
}

// A state may end at the arena's end, and one of 0 bytes may start there;
// a byte more, or a start past it, is outside.
TEST(DelegateRecord, AStateMayEndExactlyAtTheArenasEnd) {
  EXPECT_TRUE(parse(with_line(6, "arena\t2\t24")).ok());
  EXPECT_TRUE(parse(with_line(5, "state\tcount\t32\t0\t-")).ok());
  expect_refused(with_line(5, "state\tcount\t48\t0\t-"), "state 'count' (0 bytes at 48) is outside the arena");
  expect_refused(with_line(5, "state\tcount\t16\t17\t-"), "state 'count' (17 bytes at 16) is outside the arena");
}

// An io line counts up to 2**20 inputs and outputs, each; one more is refused.
TEST(DelegateRecord, InputsAndOutputsCountUpToTwoToTheTwentieth) {
  EXPECT_TRUE(parse(with_line(12, "io\t1048576\t1048576", good_aoti_record())).ok());
  expect_aoti_refused(12, "io\t1048577\t2", "inputs and outputs are decimal counts up to 1048576");
  expect_aoti_refused(12, "io\t2\t1048577", "inputs and outputs are decimal counts up to 1048576");
}

// A number is at most 20 digits (SIZE_MAX's), leading zeros counted, and a
// size or stride at most INT64_MAX.
TEST(DelegateRecord, ANumberHasAtMostTwentyDigitsAndASizeFitsInt64) {
  auto r = parse(with_line(2, "weight\tw\tk\t00000000000000000064"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weights[0].nbytes, 64u);
  expect_refused(with_line(2, "weight\tw\tk\t000000000000000000064"), "line 3");
  expect_aoti_refused(7, "tensor\tlinear.weight\t6\t16\t9223372036854775808", "comma-separated decimals");
  expect_aoti_refused(7, "tensor\tlinear.weight\t6\t9223372036854775808\t1", "comma-separated decimals");
}

// A span whose byte count would be 2**64 or more is too many bytes, not a
// count wrapped to a small one; one element less is counted.
TEST(DelegateRecord, ASpanOfTwoToTheSixtyFourBytesIsTooManyNotZero) {
  expect_aoti_refused(7, "tensor\tlinear.weight\t6\t2\t4611686018427387903",
                      "tensor 'linear.weight' reaches too many bytes");
  expect_aoti_refused(7, "tensor\tlinear.weight\t6\t2\t4611686018427387902",
                      "tensor 'linear.weight' reaches 18446744073709551612 bytes, and 'linear.weight' has 64");
}

// A kind registered last (it joins the kinds the refusals above list): a
// reader of its own "count" lines.
class CountLines final : public et_copy::PayloadLines {
 public:
  std::string read(const std::vector<std::string_view>& f, size_t number) override {
    if (f.size() != 2) {
      return "a count line has 2 fields";
    }
    numbers.push_back(number);
    return "";
  }
  std::vector<size_t> numbers;
};

std::unique_ptr<et_copy::PayloadLines> new_count_lines() {
  return std::make_unique<CountLines>();
}

std::string accept_all(const DelegateRecord&, const et_copy::RecordLines&, size_t*) {
  return "";
}

TEST(DelegateRecord, AKindsOwnLinesGoToItsReaderAndNoKindClaimsACommonLineOrAnothersLine) {
  good_aoti_record();
  static const char* const count_lines[] = {"count", nullptr};
  const et_copy::PayloadRules counted{"counted", &accept_all, count_lines, &new_count_lines};
  ASSERT_EQ(et_copy::register_payload_kind(counted), Error::Ok);
  EXPECT_EQ(et_copy::register_payload_kind(counted), Error::Ok) << "idempotent";
  const std::string head = "et_copy.delegate 2\ndevice\tcuda\t0\ncount\t1\n";
  et_copy::FailureReport report;
  auto r = parse(head + "count\t2\npayload\tcounted\t0\n", &report);
  ASSERT_TRUE(r.ok()) << report.detail;
  ASSERT_NE(r->payload_lines, nullptr);
  EXPECT_EQ(static_cast<const CountLines&>(*r->payload_lines).numbers, (std::vector<size_t>{3, 4}));
  auto none = parse("et_copy.delegate 2\ndevice\tcuda\t0\npayload\tcounted\t0\n", &report);
  ASSERT_TRUE(none.ok()) << report.detail;
  ASSERT_NE(none->payload_lines, nullptr) << "a kind with lines always gets its reader, though it read none";
  EXPECT_TRUE(static_cast<const CountLines&>(*none->payload_lines).numbers.empty());
  // Its lines are read by its reader whatever the payload's kind, then the payload kind's rules judge them.
  expect_refused(head + "count\npayload\tprogram\t0\n", "line 4 ('count'): a count line has 2 fields");
  expect_refused(head + "payload\tprogram\t0\n", "line 3: a program payload has no tensor, target, io or digest line");

  // What registration refuses: a common line's word, another kind's, words without a reader or the reverse,
  // a word a line cannot start with, and the kind's word with another reader.
  static const char* const common[] = {"weight", nullptr};
  static const char* const aotis[] = {"digest", nullptr};
  static const char* const spaced[] = {"two words", nullptr};
  static const char* const other[] = {"other", nullptr};
  EXPECT_EQ(et_copy::register_payload_kind({"x1", &accept_all, common, &new_count_lines}), Error::InvalidArgument);
  EXPECT_EQ(et_copy::register_payload_kind({"x2", &accept_all, aotis, &new_count_lines}), Error::InvalidState);
  EXPECT_EQ(et_copy::register_payload_kind({"x3", &accept_all, other, nullptr}), Error::InvalidArgument);
  EXPECT_EQ(et_copy::register_payload_kind({"x4", &accept_all, nullptr, &new_count_lines}), Error::InvalidArgument);
  EXPECT_EQ(et_copy::register_payload_kind({"x5", &accept_all, spaced, &new_count_lines}), Error::InvalidArgument);
  EXPECT_EQ(et_copy::register_payload_kind({"counted", &accept_all}), Error::InvalidState);
  expect_refused("et_copy.delegate 2\ndevice\tcuda\t0\nother\t1\npayload\tcounted\t0\n",
                 "line 3 ('other\\t1'): unknown kind of line 'other'");
}

} // namespace
