// et_copy::check_program_indices on bytes no program should hold: an index
// out of range is named, and garbage of any length is rejected without a
// read outside the buffer (the sanitizer build runs this too).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <et_copy/program_check.h>

namespace {

using executorch::runtime::Error;

void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  std::memcpy(b.data() + at, &v, 2);
}
void put32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  std::memcpy(b.data() + at, &v, 4);
}

// A hand-built flatbuffer: Program { execution_plan: [ExecutionPlan {
// inputs: [input] }] } with no values, so any input index is out of range.
std::vector<uint8_t> plan_with_input(int32_t input) {
  std::vector<uint8_t> b(60, 0);
  put32(b, 0, 12); // root table
  put16(b, 4, 8);  // Program vtable: size, table size, version (absent), execution_plan at +4
  put16(b, 6, 8);
  put16(b, 10, 4);
  put32(b, 12, 8);  // Program table: vtable at 12 - 8
  put32(b, 16, 4);  // execution_plan -> vector at 20
  put32(b, 20, 1);  // one plan
  put32(b, 24, 20); // -> plan table at 44
  put16(b, 28, 14); // plan vtable: 5 fields, only inputs (slot 3) present, at +4
  put16(b, 30, 8);
  put16(b, 38, 4);
  put32(b, 44, 16); // plan table: vtable at 44 - 16
  put32(b, 48, 4);  // inputs -> vector at 52
  put32(b, 52, 1);
  std::memcpy(b.data() + 56, &input, 4);
  return b;
}

TEST(ProgramCheck, NamesAMethodInputIndexOutOfRange) {
  const auto b = plan_with_input(5);
  std::string message;
  EXPECT_EQ(et_copy::check_program_indices(b.data(), b.size(), &message), Error::InvalidProgram);
  EXPECT_EQ(message, "execution plan 0: method input value 5 is out of range (0)");
}

TEST(ProgramCheck, RejectsEmptyAndTinyBuffers) {
  const uint8_t bytes[3] = {1, 2, 3};
  EXPECT_EQ(et_copy::check_program_indices(nullptr, 0), Error::InvalidProgram);
  EXPECT_EQ(et_copy::check_program_indices(bytes, sizeof(bytes)), Error::InvalidProgram);
}

TEST(ProgramCheck, SurvivesEveryTruncationAndRandomBytes) {
  const auto b = plan_with_input(5);
  for (size_t n = 0; n < b.size(); ++n) {
    // A copy of exactly n bytes, so a read past it is caught by ASan.
    std::vector<uint8_t> cut(b.begin(), b.begin() + n);
    EXPECT_NE(et_copy::check_program_indices(cut.data(), cut.size()), Error::Ok) << n;
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> junk(rng() % 256);
    for (auto& x : junk) {
      x = static_cast<uint8_t>(rng());
    }
    (void)et_copy::check_program_indices(junk.data(), junk.size());
  }
}

} // namespace
