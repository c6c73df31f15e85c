// et_copy::parse_program_record and read_program_record: the facts a program
// states, every truncation, another version and unknown lines refused.
#include <gtest/gtest.h>

#include <string>

#include <et_copy/program_record.h>

namespace {

using et_copy::parse_program_record;
using executorch::runtime::Error;

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
  for (const std::string bad : {
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

TEST(ProgramRecord, AProgramWithoutNamedDataHasNoFacts) {
  auto r = et_copy::read_program_record(nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->state_in_delegates);
  EXPECT_FALSE(r->present);
}

} // namespace
