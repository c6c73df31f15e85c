// The flatbuffer reader behind every load check (runtime/src/program_reader.h)
// at each bound on the bytes it reads: a read, a field, a vector's count, a
// string's length and a byte range that end exactly at the file's end are
// read; one byte or one element more fails the reader and reads as zero or
// empty, so no walk goes on with what it could not read.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "byte_range.h"
#include "flat_writer.h"
#include "program_reader.h"

namespace {

using et_copy::internal::Reader;

void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  std::memcpy(b.data() + at, &v, 2);
}
void put32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  std::memcpy(b.data() + at, &v, 4);
}

// The root table is at 12, its vtable at 4 (one field, at table + 4), and
// field 0 points at what follows from 20 to the end of the file.
constexpr size_t kTable = 12, kTail = 20;

std::vector<uint8_t> table_then(size_t tail_bytes) {
  std::vector<uint8_t> b(kTail + tail_bytes, 0);
  put32(b, 0, kTable);
  put16(b, 4, 6); // vtable size: one field
  put16(b, 6, 8); // table size
  put16(b, 8, 4); // field 0 at table + 4
  put32(b, kTable, kTable - 4);
  put32(b, kTable + 4, kTail - (kTable + 4));
  return b;
}

// Field 0 is a vector of `stored` int32 (10, 11, ...) ending the file, whose count reads `count`.
std::vector<uint8_t> vector_of(size_t stored, uint32_t count) {
  std::vector<uint8_t> b = table_then(4 + 4 * stored);
  put32(b, kTail, count);
  for (size_t i = 0; i < stored; ++i) {
    put32(b, kTail + 4 + 4 * i, static_cast<uint32_t>(10 + i));
  }
  return b;
}

// Field 0 is a string of `text` ending the file, whose length reads `length`.
std::vector<uint8_t> string_of(const std::string& text, uint32_t length) {
  std::vector<uint8_t> b = table_then(4 + text.size());
  put32(b, kTail, length);
  std::memcpy(b.data() + kTail + 4, text.data(), text.size());
  return b;
}

TEST(ProgramReader, AReadEndingAtTheFilesEndIsReadAndOneBytePastItFailsAndReadsZero) {
  const std::vector<uint8_t> b = vector_of(1, 1); // 28 bytes; the last 4 hold 10
  Reader r(b.data(), b.size());
  EXPECT_EQ(r.read<uint32_t>(b.size() - 4), 10u);
  EXPECT_EQ(r.read<uint8_t>(b.size() - 1), 0u);
  EXPECT_FALSE(r.failed());
  for (const size_t at : {b.size() - 3, b.size(), b.size() + 1, std::numeric_limits<size_t>::max()}) {
    Reader past(b.data(), b.size());
    EXPECT_EQ(past.read<uint32_t>(at), 0u) << at;
    EXPECT_TRUE(past.failed()) << at;
  }
  Reader none(nullptr, 28); // no data has no bytes, whatever the size says
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.read<uint8_t>(0), 0u);
  EXPECT_TRUE(none.failed());
}

TEST(ProgramReader, AVectorCountUpToTheFilesSizeIsTakenAsStoredAndOneMoreReadsAsEmptyAndFails) {
  {
    const std::vector<uint8_t> b = vector_of(3, 3);
    Reader r(b.data(), b.size());
    const auto [count, at] = r.vector(kTable, 0);
    ASSERT_EQ(count, 3u);
    EXPECT_EQ(at, kTail + 4);
    EXPECT_EQ(r.read<int32_t>(at), 10);
    EXPECT_EQ(r.read<int32_t>(at + 8), 12); // the last element ends the file
    EXPECT_FALSE(r.failed());
    std::vector<int64_t> values;
    r.append_values(kTable, 0, &values);
    EXPECT_EQ(values, (std::vector<int64_t>{10, 11, 12}));
    EXPECT_FALSE(r.failed());
  }
  const uint32_t size = static_cast<uint32_t>(vector_of(3, 0).size());
  {
    // As many elements as the file has bytes: not refused by the count; each element's read is checked.
    const std::vector<uint8_t> b = vector_of(3, size);
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.vector(kTable, 0).count, size);
    EXPECT_FALSE(r.failed());
    std::vector<int64_t> values;
    r.append_values(kTable, 0, &values); // the walk stops at the first read past the end
    EXPECT_TRUE(r.failed());
  }
  for (const uint32_t count : {size + 1, std::numeric_limits<uint32_t>::max()}) {
    const std::vector<uint8_t> b = vector_of(3, count);
    Reader r(b.data(), b.size());
    const Reader::Vector v = r.vector(kTable, 0);
    EXPECT_EQ(v.count, 0u) << count;
    EXPECT_EQ(v.elements, 0u) << count; // read as empty: no elements to walk
    EXPECT_TRUE(r.failed()) << count;
    Reader again(b.data(), b.size());
    std::vector<int64_t> values;
    again.append_values(kTable, 0, &values);
    EXPECT_TRUE(values.empty()) << count;
    EXPECT_TRUE(again.failed()) << count;
  }
}

TEST(ProgramReader, AFieldPastItsVtableIsAbsentAndAVtableBeforeTheFileFails) {
  std::vector<uint8_t> b = vector_of(1, 1);
  {
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.field(kTable, 0), kTable + 4); // its entry ends the vtable
    EXPECT_EQ(r.field(kTable, 1), 0u);         // no entry: absent, not corrupt
    const Reader::Vector v = r.vector(kTable, 1);
    EXPECT_EQ(v.count, 0u);
    EXPECT_EQ(v.elements, 0u);
    EXPECT_EQ(r.int_field(kTable, 1), 0);
    EXPECT_FALSE(r.failed());
  }
  put16(b, 4, 5); // the vtable ends inside field 0's entry
  {
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.field(kTable, 0), 0u);
    EXPECT_FALSE(r.failed());
  }
  put32(b, kTable, kTable); // a vtable at the file's first byte (the root offset, 12, read as its size)
  {
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.field(kTable, 0), kTable + 5); // its entry for field 0: bytes 4 and 5, which hold 5
    EXPECT_FALSE(r.failed());
  }
  put32(b, kTable, kTable + 1); // the vtable would start before the file
  {
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.field(kTable, 0), 0u);
    EXPECT_TRUE(r.failed());
  }
}

// The one bound behind the reader's reads, a session's state-in-its-arena
// check and the simulated device's lookup: both sides of each edge, and
// values whose sum would wrap.
TEST(ByteRange, ARangeEndingAtTheBuffersEndIsInsideAndOneByteMoreOrOneLaterIsNot) {
  using et_copy::internal::range_within;
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  EXPECT_TRUE(range_within(0, 16, 16));
  EXPECT_TRUE(range_within(4, 12, 16));
  EXPECT_FALSE(range_within(4, 13, 16));
  EXPECT_FALSE(range_within(5, 12, 16));
  EXPECT_TRUE(range_within(16, 0, 16)); // nothing, at the end
  EXPECT_FALSE(range_within(17, 0, 16));
  EXPECT_TRUE(range_within(0, 0, 0));
  EXPECT_FALSE(range_within(0, 1, 0));
  EXPECT_FALSE(range_within(8, kMax, 16)); // 8 + kMax wraps to 7
  EXPECT_FALSE(range_within(kMax, 2, 16));
  EXPECT_TRUE(range_within(kMax - 1, 1, kMax));
  EXPECT_FALSE(range_within(kMax, 1, kMax));
}

TEST(ByteRange, BytesAreWithinABufferFromItsFirstByteToItsEndAndNotBeforeOrAfter) {
  using et_copy::internal::bytes_within;
  alignas(16) uint8_t buffer[48] = {};
  const uint8_t* base = buffer + 16; // 32 bytes, with memory on either side
  EXPECT_TRUE(bytes_within(base, 32, base, 32));
  EXPECT_TRUE(bytes_within(base + 31, 1, base, 32));
  EXPECT_TRUE(bytes_within(base + 32, 0, base, 32));
  EXPECT_FALSE(bytes_within(base + 31, 2, base, 32));
  EXPECT_FALSE(bytes_within(base + 32, 1, base, 32)); // just after
  EXPECT_FALSE(bytes_within(base + 33, 0, base, 32)); // past the end, however small
  EXPECT_FALSE(bytes_within(base - 1, 1, base, 32));  // just before
  EXPECT_FALSE(bytes_within(base - 1, 2, base, 32));  // before, and ending inside
  EXPECT_FALSE(bytes_within(base + 8, std::numeric_limits<size_t>::max(), base, 32));
}

// Flatbuffers leaves out a scalar equal to its default, so every absent
// scalar field reads as the default its caller names, and a stored one as
// stored, whatever the default.
TEST(ProgramReader, AStoredScalarReadsAsStoredAndAnAbsentOneAsTheDefaultItsCallerNames) {
  std::vector<uint8_t> b = table_then(4); // field 0 stores 4 (its offset to kTail), then four zero bytes
  put32(b, kTail, 0xA5A5A5A5u);
  {
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.scalar<uint8_t>(kTable, 0, 9), 4u);
    EXPECT_EQ(r.scalar<int32_t>(kTable, 0, -1), 4);
    EXPECT_EQ(r.scalar<uint64_t>(kTable, 0, 9), 4u | (uint64_t{0xA5A5A5A5u} << 32));
    EXPECT_EQ(r.scalar<uint8_t>(kTable, 1, 9), 9u); // no vtable entry
    EXPECT_EQ(r.scalar<int8_t>(kTable, 1, -3), -3);
    EXPECT_EQ(r.scalar<uint32_t>(kTable, 1), 0u); // the default default: the schema's 0
    EXPECT_EQ(r.union_type(kTable), 4u);
    EXPECT_EQ(r.int_field(kTable, 1), 0);
    EXPECT_FALSE(r.failed());
  }
  put16(b, 8, 0); // field 0's entry holds 0: left out
  {
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.scalar<uint32_t>(kTable, 0, 7), 7u);
    EXPECT_EQ(r.union_type(kTable), 0u);
    EXPECT_EQ(r.int_field(kTable, 0), 0);
    EXPECT_FALSE(r.failed());
  }
  b = table_then(0); // field 0's last four bytes would lie past the file
  {
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.scalar<uint64_t>(kTable, 0, 7), 0u); // a failed read reads zero, not the default
    EXPECT_TRUE(r.failed());
  }
}

TEST(ProgramReader, AStringEndingAtTheFilesEndIsReadAndOneByteLongerReadsAsEmptyAndFails) {
  const std::string text("ab\0cd", 5);
  {
    const std::vector<uint8_t> b = string_of(text, 5);
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.string(kTable, 0), "ab");       // up to its first NUL, as c_str() reads it
    EXPECT_EQ(r.whole_string(kTable, 0), text); // every byte its length covers
    EXPECT_EQ(r.whole_string(kTable, 1), "");   // absent
    EXPECT_FALSE(r.failed());
  }
  for (const uint32_t length : {6u, std::numeric_limits<uint32_t>::max()}) {
    const std::vector<uint8_t> b = string_of(text, length);
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.whole_string(kTable, 0), "") << length;
    EXPECT_TRUE(r.failed()) << length;
    Reader again(b.data(), b.size());
    EXPECT_EQ(again.string(kTable, 0), "") << length;
    EXPECT_TRUE(again.failed()) << length;
  }
}

TEST(ProgramReader, AByteRangeEndingAtTheFilesEndIsInsideItAndOneMoreIsNot) {
  const std::vector<uint8_t> b = vector_of(1, 1);
  const Reader r(b.data(), b.size());
  EXPECT_EQ(r.bytes(0, b.size()), b.data());
  EXPECT_EQ(r.bytes(b.size() - 1, 1), b.data() + b.size() - 1);
  EXPECT_EQ(r.bytes(b.size(), 0), b.data() + b.size());
  EXPECT_EQ(r.bytes(0, b.size() + 1), nullptr);
  EXPECT_EQ(r.bytes(b.size() - 1, 2), nullptr);
  EXPECT_EQ(r.bytes(b.size() + 1, 0), nullptr);
  EXPECT_EQ(r.bytes(1, std::numeric_limits<size_t>::max()), nullptr);
}

// A program whose plans vector counts `counted` of the plans named `names`
// (the rest lie past its count); `bad_name`: the first name's length runs
// past the end of the file.
std::vector<uint8_t> plans_named(const std::vector<std::string>& names, uint32_t counted, bool bad_name = false) {
  et_copy_test::FlatWriter f;
  const size_t program = f.table(2);
  f.root(program);
  const size_t plans = f.vector(program, 1, static_cast<uint32_t>(names.size()));
  f.count(plans, counted);
  size_t first_name = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const size_t plan = f.table(1);
    f.link(plans + 4 * i, plan);
    if (i == 0) {
      first_name = f.bytes().size();
    }
    f.string(plan, 0, names[i]);
  }
  std::vector<uint8_t> b = f.bytes();
  if (bad_name) {
    put32(b, first_name, static_cast<uint32_t>(b.size()));
  }
  return b;
}

TEST(ProgramReader, APlanIsFoundByItsWholeNameFromTheFirstToTheLastCountedAndNoFurther) {
  const std::vector<uint8_t> b = plans_named({"forward", "decode", "past"}, 2);
  Reader r(b.data(), b.size());
  const auto [plans, plans_at] = r.plans();
  ASSERT_EQ(plans, 2u);
  EXPECT_EQ(r.find_plan("forward"), r.table_at(plans_at, 0));
  EXPECT_EQ(r.find_plan("decode"), r.table_at(plans_at, 1));
  EXPECT_NE(r.find_plan("decode"), 0u);
  for (const char* other : {"past", "missing", "forwar", ""}) {
    EXPECT_EQ(r.find_plan(other), 0u) << other;
  }
  EXPECT_FALSE(r.failed());
}

TEST(ProgramReader, APlanWhoseNameCannotBeReadIsNotFoundEvenAskedForTheEmptyName) {
  const std::vector<uint8_t> b = plans_named({"forward"}, 1, true);
  for (const char* name : {"", "forward"}) {
    Reader r(b.data(), b.size());
    EXPECT_EQ(r.find_plan(name), 0u) << name;
    EXPECT_TRUE(r.failed()) << name;
  }
}

TEST(ProgramReader, AKernelCallWithNoArgumentsTableNamesNothing) {
  // One operator, "ns::op.out"; instruction 0 calls it, instruction 1 is a
  // kernel call whose arguments table is absent.
  et_copy_test::FlatWriter f;
  const size_t plan = f.table(7);
  f.root(plan);
  const size_t ops = f.vector(plan, 6, 1);
  const size_t op = f.table(2);
  f.link(ops, op);
  f.string(op, 0, "ns::op");
  f.string(op, 1, "out");
  const size_t with_args = f.table(2);
  f.scalar(with_args, 0, 1);
  const size_t call = f.table(2);
  f.link(f.field(with_args, 1), call);
  f.scalar(call, 0, 0);
  const size_t without = f.table(2);
  f.scalar(without, 0, 1);
  const std::vector<uint8_t> b = f.bytes();
  Reader r(b.data(), b.size());
  EXPECT_EQ(r.call_name(plan, with_args), "ns::op.out");
  EXPECT_EQ(r.call_name(plan, without), "");
  EXPECT_FALSE(r.failed());
}

} // namespace
