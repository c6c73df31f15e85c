// et_copy::parse_program_record and read_program_record: the facts a program
// states, every truncation, another version and unknown lines refused, each
// refusal naming the line (its number and its first 64 bytes) exactly.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <et_copy/program_record.h>

namespace {

using et_copy::parse_program_record;
using executorch::runtime::Error;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::NamedDataMap;
using executorch::runtime::Result;

// The refusal's whole detail, or "ok".
std::string refusal(const std::string& text) {
  et_copy::FailureReport report;
  auto r = parse_program_record(text.data(), text.size(), &report);
  if (r.ok()) {
    return "ok";
  }
  EXPECT_EQ(r.error(), Error::InvalidProgram) << text;
  return report.detail;
}

const std::string kGood = "et_copy.program 1\nstate\tdelegates\n";

TEST(ProgramRecord, StatesThatTheStateIsInTheDelegates) {
  auto r = parse_program_record(kGood.data(), kGood.size());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->state_in_delegates);
  const std::string bare = "et_copy.program 1\n";
  auto none = parse_program_record(bare.data(), bare.size());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->state_in_delegates);
  // A record with no facts is still a record: the exporter's rules hold.
  EXPECT_TRUE(r->present && none->present);
}

TEST(ProgramRecord, AnotherVersionIsRefusedNamingBoth) {
  const std::string v2 = "et_copy.program 2\nstate\tdelegates\n";
  et_copy::FailureReport report;
  auto r = parse_program_record(v2.data(), v2.size(), &report);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), Error::InvalidProgram);
  EXPECT_NE(report.detail.find("version '2'; this runtime reads version 1"), std::string::npos) << report.detail;
}

TEST(ProgramRecord, UnknownRepeatedAndUnterminatedLinesAreRefused) {
  for (const std::string& bad : {
           std::string("et_copy.program 1\nstate\tarena\n"),
           std::string("et_copy.program 1\nstate\tdelegates\nstate\tdelegates\n"),
           std::string("et_copy.program 1\nstate\tdelegates"),
           std::string("et_copy.delegate 1\n"),
           std::string(""),
       }) {
    et_copy::FailureReport report;
    auto r = parse_program_record(bad.data(), bad.size(), &report);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error(), Error::InvalidProgram) << bad;
    EXPECT_EQ(report.detail.rfind("et_copy program record: ", 0), 0u) << report.detail;
  }
}

TEST(ProgramRecord, EveryTruncationIsRefusedOrAPrefixOfTheFacts) {
  for (size_t n = 0; n < kGood.size(); ++n) {
    auto r = parse_program_record(kGood.data(), n);
    // Only whole lines parse: the bare header is a record with no facts.
    if (r.ok()) {
      EXPECT_EQ(n, std::string("et_copy.program 1\n").size());
      EXPECT_FALSE(r->state_in_delegates);
    }
  }
  EXPECT_FALSE(parse_program_record(nullptr, 5).ok());
}

TEST(ProgramRecord, ARefusalNamesTheLineByItsNumberFromOne) {
  const std::string prefix = "et_copy program record: ";
  EXPECT_EQ(refusal("et_copy.program 1"), prefix + "line 1 does not end with a newline");
  EXPECT_EQ(refusal("et_copy.program 1\nstate\tdelegates"), prefix + "line 2 does not end with a newline");
  EXPECT_EQ(refusal("et_copy.program 1\nstate\tdelegates\nx"), prefix + "line 3 does not end with a newline");
  EXPECT_EQ(refusal("et_copy.program 1\nstate\tarena\n"), prefix + "line 2 ('state\tarena') is unknown or repeated");
  EXPECT_EQ(refusal("et_copy.program 1\nstate\tdelegates\nstate\tdelegates\n"),
            prefix + "line 3 ('state\tdelegates') is unknown or repeated");
  EXPECT_EQ(refusal("et_copy.program 1\n\n"), prefix + "line 2 ('') is unknown or repeated");
  EXPECT_EQ(refusal(""), prefix + "it is empty");
}

TEST(ProgramRecord, AnUnknownLineIsQuotedUpToItsFirst64Bytes) {
  const std::string prefix = "et_copy program record: line 2 ('";
  for (const size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{200}}) {
    std::string line;
    for (size_t i = 0; i < n; ++i) {
      line += static_cast<char>('a' + i % 26);
    }
    EXPECT_EQ(refusal("et_copy.program 1\n" + line + "\n"), prefix + line.substr(0, 64) + "') is unknown or repeated")
        << n << " bytes";
  }
}

TEST(ProgramRecord, TheHeaderIsTheKeyASpaceAndTheVersionExactly) {
  const std::string not_a_record = "et_copy program record: it does not start with 'et_copy.program <version>'";
  EXPECT_EQ(refusal("et_copy.program1\n"), not_a_record);
  EXPECT_EQ(refusal("Xt_copy.program 1\n"), not_a_record);
  EXPECT_EQ(refusal("et_copy.prograM 1\n"), not_a_record);
  EXPECT_EQ(refusal("\net_copy.program 1\n"), not_a_record);
  EXPECT_EQ(refusal("et_copy.program 1\n"), "ok");
  for (const std::string& version : std::vector<std::string>{"", "0", "10", "01", "1 ", " 1"}) {
    EXPECT_EQ(
        refusal("et_copy.program " + version + "\n"),
        "et_copy program record: version '" + version + "'; this runtime reads version 1 (export the program again)")
        << "'" << version << "'";
  }
}

// A program's named data holding `entries` (key, bytes).
using Entries = std::vector<std::pair<std::string, std::string>>;
class Blobs final : public NamedDataMap {
 public:
  explicit Blobs(Entries entries) : entries_(std::move(entries)) {}
  Result<const executorch::runtime::TensorLayout> get_tensor_layout(std::string_view) const override {
    return Error::NotFound;
  }
  Result<FreeableBuffer> get_data(std::string_view key) const override {
    for (const auto& [k, v] : entries_) {
      if (k == key) {
        return FreeableBuffer(v.data(), v.size(), nullptr);
      }
    }
    return Error::NotFound;
  }
  Error load_data_into(std::string_view, void*, size_t) const override {
    return Error::NotSupported;
  }
  Result<uint32_t> get_num_keys() const override {
    return static_cast<uint32_t>(entries_.size());
  }
  Result<const char*> get_key(uint32_t i) const override {
    return i < entries_.size() ? Result<const char*>(entries_[i].first.c_str()) : Error::InvalidArgument;
  }

 private:
  Entries entries_;
};

TEST(ProgramRecord, NamedDataWithTheKeyIsParsedAndWithoutItIsNoRecord) {
  const Blobs with(Entries{{"weights", "xx"}, {et_copy::kProgramRecordKey, kGood}});
  auto r = et_copy::read_program_record(&with);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->present);
  EXPECT_TRUE(r->state_in_delegates);

  const Blobs without(Entries{{"weights", kGood}});
  auto none = et_copy::read_program_record(&without);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->present);
  EXPECT_FALSE(none->state_in_delegates);

  const Blobs bad(Entries{{et_copy::kProgramRecordKey, "et_copy.program 2\n"}});
  et_copy::FailureReport report;
  auto refused = et_copy::read_program_record(&bad, &report);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), Error::InvalidProgram);
  EXPECT_NE(report.detail.find("version '2'"), std::string::npos) << report.detail;
}

TEST(ProgramRecord, AProgramWithoutNamedDataHasNoFacts) {
  auto r = et_copy::read_program_record(nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->state_in_delegates);
  EXPECT_FALSE(r->present);
}

} // namespace
