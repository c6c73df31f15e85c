// et_copy::check_argument_kinds on real programs (tests/cpp/programs) and on
// copies whose kernel arguments were retagged to another kind of value, the
// way a flipped byte does it; and LoadedProgram refusing such a program at
// load. Registry state: the simulated device, for the load test.
#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <et_copy/argument_kinds.h>
#include <et_copy/delegate_record.h>
#include <et_copy/failure_report.h>
#include <et_copy/loaded_program.h>
#include <et_copy/program_check.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_backend.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>

#include "argument_kinds_table.h"
#include "flat_writer.h"
#include "program_bytes.h"

namespace {

using executorch::runtime::Error;

const std::string kPrograms = ET_COPY_TEST_PROGRAMS;

// The program payload kind, whose payload is a nested program the checks
// walk into: its library describes it (no backend is registered here).
const bool kProgramKind = et_copy::describe_simulated_device_backend() == Error::Ok;

std::vector<uint8_t> read_file(const std::string& name) {
  std::ifstream f(kPrograms + "/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// The first instruction of linear_relu_linear.pte calling `op`.
size_t instruction_calling(const std::vector<uint8_t>& b, const std::string& op) {
  for (size_t i = 0; i < 64; ++i) {
    if (et_copy::instruction_operator(b.data(), b.size(), "forward", 0, i) == op) {
      return i;
    }
  }
  ADD_FAILURE() << "no " << op;
  return 0;
}

std::string refusal(const std::vector<uint8_t>& b, const std::string& program = "") {
  et_copy::FailureReport report;
  const Error e = et_copy::check_argument_kinds(b.data(), b.size(), program, &report);
  return e == Error::Ok ? "ok" : report.detail;
}

constexpr uint8_t kNull = 1, kInt = 2, kDouble = 4, kTensor = 5, kIntList = 7, kTensorList = 10,
                  kOptionalTensorList = 11;

TEST(ArgumentKinds, TheTableHoldsTheOperatorsOfTheCommittedPrograms) {
  EXPECT_GT(et_copy::argument_kinds_operator_count(), 200u);
  for (const char* op : {"aten::addmm.out", "aten::permute_copy.out", "aten::relu.out", "et_copy::_h2d_copy.out",
                         "et_copy::_d2h_copy.out", "executorch_prim::et_view.default", "aten::sym_size.int"}) {
    EXPECT_TRUE(et_copy::has_argument_kinds(op)) << op;
  }
  EXPECT_FALSE(et_copy::has_argument_kinds("aten::addmm"));
  EXPECT_FALSE(et_copy::has_argument_kinds(""));
}

TEST(ArgumentKinds, AcceptsEveryCommittedProgramAndNestedProgram) {
  ASSERT_TRUE(kProgramKind);
  for (const char* name :
       {"linear_relu_linear.pte", "roundtrip.pte", "add_relu_xnnpack.pte", "d2h_fails.pte", "device_input.pte"}) {
    EXPECT_EQ(refusal(read_file(name)), "ok") << name;
  }
  for (const char* name : {"linear.record", "acc.record", "acc8.record"}) {
    const auto record = read_file(name);
    auto r = et_copy::parse_delegate_record(record.data(), record.size());
    ASSERT_TRUE(r.ok()) << name;
    const std::vector<uint8_t> nested(r->payload, r->payload + r->payload_nbytes);
    EXPECT_EQ(refusal(nested), "ok") << name;
  }
}

// linear.record with an Int item of its nested program's permute_copy dims
// retagged Double (`tamper`), or as committed.
std::vector<uint8_t> linear_record(bool tamper) {
  std::vector<uint8_t> record = read_file("linear.record");
  auto r = et_copy::parse_delegate_record(record.data(), record.size());
  EXPECT_TRUE(r.ok());
  const size_t at = static_cast<size_t>(r->payload - record.data());
  std::vector<uint8_t> nested(r->payload, r->payload + r->payload_nbytes);
  if (tamper) {
    et_copy_test::Flat f{nested};
    const int32_t dims = f.argument(instruction_calling(nested, "aten::permute_copy.out"), 1);
    nested[f.value_type(static_cast<size_t>(et_copy_test::first_int_list_item(f, static_cast<size_t>(dims))))] =
        kDouble;
  }
  std::copy(nested.begin(), nested.end(), record.begin() + static_cast<std::ptrdiff_t>(at));
  return record;
}

// The DataSegment table of add_relu_xnnpack.pte's one delegate.
size_t delegate_segment(std::vector<uint8_t>& b) {
  et_copy_test::Flat f{b};
  const size_t ref = f.follow(f.field(f.element(f.follow(f.field(f.plan(), 7)), 0), 1));
  EXPECT_EQ(b[f.field(ref, 0)], 1); // in a segment
  const size_t index = f.field(ref, 1) == 0 ? 0 : f.u32(f.field(ref, 1));
  return f.element(f.follow(f.field(f.u32(0), 4)), index);
}

// add_relu_xnnpack.pte cut at its delegate's segment, and `record` appended
// there as that segment, its size set to the record's plus `extra`. Whatever
// followed the segment (the program record's named data) is cut with it: the
// argument-kind check reads the delegates alone.
std::vector<uint8_t> in_the_delegates_segment(const std::vector<uint8_t>& record, uint64_t extra) {
  std::vector<uint8_t> b = read_file("add_relu_xnnpack.pte");
  et_copy_test::Flat f{b};
  const size_t segment = delegate_segment(b);
  uint64_t base = 0, offset = 0;
  std::memcpy(&base, b.data() + 24, 8); // the extended header's segment base
  if (f.field(segment, 0) != 0) {
    std::memcpy(&offset, b.data() + f.field(segment, 0), 8);
  }
  EXPECT_LE(base + offset + 464, b.size()) << "the delegate's 464 bytes lie in the file";
  const uint64_t size = record.size() + extra;
  std::memcpy(b.data() + f.field(segment, 1), &size, 8);
  b.resize(base + offset);
  b.insert(b.end(), record.begin(), record.end());
  return b;
}

TEST(ArgumentKinds, ANestedProgramInASegmentIsCheckedAsOneInlineWhenItsBytesEndWithinTheFile) {
  const std::string nested = "nested program of delegate 0 in method 'forward': ";
  EXPECT_EQ(refusal(in_the_delegates_segment(linear_record(false), 0)), "ok");
  EXPECT_EQ(refusal(in_the_delegates_segment(linear_record(true), 0)).rfind(nested, 0), 0u);
  // One byte past the file: ExecuTorch's loader refuses the delegate; there is nothing to check.
  EXPECT_EQ(refusal(in_the_delegates_segment(linear_record(true), 1)), "ok");
}

// Segments are found through the extended header ("eh00" at byte 8): a
// file whose magic differs, in its last byte alone, has no segments to
// read, and ExecuTorch's loader refuses its delegate (nothing to check).
TEST(ArgumentKinds, ASegmentIsReadOnlyThroughAnExtendedHeaderWhoseMagicIsEh00) {
  std::vector<uint8_t> b = in_the_delegates_segment(linear_record(true), 0);
  ASSERT_EQ(std::string(b.begin() + 8, b.begin() + 12), "eh00");
  ASSERT_NE(refusal(b), "ok");
  b[11] = '1';
  EXPECT_EQ(refusal(b), "ok");
}

// add_relu_xnnpack.pte with its delegate referring to segment 2 (the one
// segment there whose offset is written out, 512), `record` placed there as
// that segment and ending the file; `offset_at` gets where the offset is.
std::vector<uint8_t> in_segment_two(const std::vector<uint8_t>& record, size_t* offset_at) {
  std::vector<uint8_t> b = read_file("add_relu_xnnpack.pte");
  et_copy_test::Flat f{b};
  const size_t ref = f.follow(f.field(f.element(f.follow(f.field(f.plan(), 7)), 0), 1));
  const uint32_t two = 2;
  std::memcpy(b.data() + f.field(ref, 1), &two, 4);
  const size_t segment = f.element(f.follow(f.field(f.u32(0), 4)), 2);
  *offset_at = f.field(segment, 0);
  EXPECT_NE(*offset_at, 0u);
  uint64_t base = 0, offset = 0;
  std::memcpy(&base, b.data() + 24, 8); // the extended header's segment base
  std::memcpy(&offset, b.data() + *offset_at, 8);
  EXPECT_EQ(offset, 512u);
  const uint64_t size = record.size();
  std::memcpy(b.data() + f.field(segment, 1), &size, 8);
  b.resize(base + offset);
  b.insert(b.end(), record.begin(), record.end());
  return b;
}

// The segment's bytes lie at base + offset only when neither leaves the
// file: a base or an offset that wraps around size_t to the same place is
// not followed (ExecuTorch's loader refuses that delegate; nothing to check).
TEST(ArgumentKinds, ASegmentIsReadOnlyWhenItsBaseAndOffsetEachLieInTheFile) {
  size_t offset_at = 0;
  const std::vector<uint8_t> b = in_segment_two(linear_record(true), &offset_at);
  uint64_t base = 0, offset = 0;
  std::memcpy(&base, b.data() + 24, 8);
  std::memcpy(&offset, b.data() + offset_at, 8);
  const uint64_t at = base + offset, size = b.size(), half = uint64_t{1} << 63;
  const auto placed = [&](uint64_t new_base, uint64_t new_offset) {
    std::vector<uint8_t> c = b;
    std::memcpy(c.data() + 24, &new_base, 8);
    std::memcpy(c.data() + offset_at, &new_offset, 8);
    return refusal(c);
  };
  const std::string nested = "nested program of delegate 0 in method 'forward': ";
  EXPECT_EQ(placed(base, offset).rfind(nested, 0), 0u) << "as placed: the bytes end at the file's end";
  EXPECT_EQ(placed(at, 0).rfind(nested, 0), 0u) << "all in the base";
  EXPECT_EQ(placed(0, at).rfind(nested, 0), 0u) << "all in the offset";
  EXPECT_EQ(placed(base + half, offset + half), "ok") << "a base past the file";
  EXPECT_EQ(placed(size + 1, at - size - 1), "ok") << "a base one past the file";
  EXPECT_EQ(placed(size, at - size), "ok") << "a base at the file's end, an offset wrapping back";
  EXPECT_EQ(placed(base, offset + (size - at) + 1), "ok") << "an offset one past the file";
}

// A program of one method, 'forward', calling one delegate,
// SimulatedDeviceBackend: the program's and the delegate's tables.
std::pair<size_t, size_t> one_delegate_program(et_copy_test::FlatWriter& f) {
  const size_t program = f.table(5);
  f.root(program);
  const size_t plans = f.vector(program, 1, 1);
  const size_t plan = f.table(8);
  f.link(plans, plan);
  f.string(plan, 0, "forward");
  const size_t delegates = f.vector(plan, 7, 1);
  const size_t delegate = f.table(2);
  f.link(delegates, delegate);
  f.string(delegate, 0, "SimulatedDeviceBackend");
  return {program, delegate};
}

// A program of one method, 'forward', with one delegate whose processed
// bytes are entry `index` of the program's inline delegate data: entry 0 is
// not a record, entry 1 is `record`. With `index` < 0 the reference's
// location and index are left out (their defaults: inline, entry 0), and
// `record` is entry 0.
std::vector<uint8_t> with_inline_delegate(const std::vector<uint8_t>& record, int32_t index) {
  et_copy_test::FlatWriter f;
  const auto [program, delegate] = one_delegate_program(f);
  const size_t ref = f.table(2);
  f.link(f.field(delegate, 1), ref);
  if (index >= 0) {
    f.scalar(ref, 0, 0); // DataLocation::INLINE
    f.scalar(ref, 1, index);
  }
  const size_t entries = f.vector(program, 3, 2);
  const size_t other = f.table(1);
  f.link(entries + (index >= 0 ? 0 : 4), other);
  f.values<uint8_t>(other, 0, {1, 2, 3, 4}); // a multiple of 4: what follows stays aligned
  const size_t ours = f.table(1);
  f.link(entries + (index >= 0 ? 4 : 0), ours);
  f.values<uint8_t>(ours, 0, record);
  return f.bytes();
}

// A delegate with no processed data has nothing to check (ExecuTorch's
// loader refuses it), whatever else is wrong in the file.
TEST(ArgumentKinds, ADelegateWithNoProcessedDataIsLeftToTheLoader) {
  et_copy_test::FlatWriter f;
  one_delegate_program(f);
  EXPECT_EQ(refusal(f.bytes()), "ok");
}

// `program` with `n` zero bytes after its root offset, which grows by n: the
// flatbuffer's other offsets are relative, so it reads the same.
std::vector<uint8_t> shifted(std::vector<uint8_t> program, uint32_t n) {
  uint32_t root = 0;
  std::memcpy(&root, program.data(), 4);
  root += n;
  std::memcpy(program.data(), &root, 4);
  program.insert(program.begin() + 4, n, 0);
  return program;
}

// A delegate reference that leaves its location and index out means inline
// entry 0 (the schema's defaults), whatever the file's first bytes hold.
TEST(ArgumentKinds, ADelegateReferenceWithNoLocationOrIndexIsInlineEntryZero) {
  const std::string nested = "nested program of delegate 0 in method 'forward': ";
  EXPECT_EQ(refusal(with_inline_delegate(linear_record(false), -1)), "ok");
  const auto tampered = with_inline_delegate(linear_record(true), -1);
  EXPECT_EQ(refusal(tampered).rfind(nested, 0), 0u) << refusal(tampered);
  // The root offset's first byte 1 (DataLocation::SEGMENT): still inline entry 0.
  uint32_t root = 0;
  std::memcpy(&root, tampered.data(), 4);
  const auto odd = shifted(tampered, (257 - root % 256) % 256);
  ASSERT_EQ(odd[0], 1);
  EXPECT_EQ(refusal(odd).rfind(nested, 0), 0u) << refusal(odd);
}

TEST(ArgumentKinds, ANestedProgramInInlineDelegateDataIsCheckedByItsIndex) {
  const std::string nested = "nested program of delegate 0 in method 'forward': ";
  EXPECT_EQ(refusal(with_inline_delegate(linear_record(false), 1)), "ok");
  EXPECT_EQ(refusal(with_inline_delegate(linear_record(true), 1)).rfind(nested, 0), 0u)
      << refusal(with_inline_delegate(linear_record(true), 1));
  EXPECT_EQ(refusal(with_inline_delegate(linear_record(true), 0)), "ok") << "entry 0 is not a record";
  EXPECT_EQ(refusal(with_inline_delegate(linear_record(true), 2)), "ok") << "past the last entry: nothing to read";
}

// `program` as a delegate record's nested program.
std::vector<uint8_t> as_record(const std::vector<uint8_t>& program) {
  const std::string head =
      "et_copy.delegate 2\ndevice\tcuda\t0\npayload\tprogram\t" + std::to_string(program.size()) + "\n";
  std::vector<uint8_t> record(head.begin(), head.end());
  record.insert(record.end(), program.begin(), program.end());
  return record;
}

// Nested programs are checked 4 deep, the 4th included; a 5th is refused by
// name (each level is a program whose one delegate holds the next).
TEST(ArgumentKinds, NestedProgramsAreCheckedFourDeepAndAFifthIsRefused) {
  const auto linear = read_file("linear.record");
  auto r = et_copy::parse_delegate_record(linear.data(), linear.size());
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> program(r->payload, r->payload + r->payload_nbytes);
  for (int depth = 1; depth <= 4; ++depth) {
    program = with_inline_delegate(as_record(program), 1);
    EXPECT_EQ(refusal(program), "ok") << depth << " deep";
  }
  const std::string refused = refusal(with_inline_delegate(as_record(program), 1));
  EXPECT_NE(refused.find(": nested more than 4 deep"), std::string::npos) << refused;
  EXPECT_EQ(refused.rfind("nested program of delegate 0 in method 'forward': ", 0), 0u) << refused;
}

// addmm's tensor argument `self` retagged: an Int is named as one; a kind tag
// past OptionalTensorList (11), whatever it is, is refused as a value of
// unknown kind (tags of 16 and more are no bit of the schema's kinds).
TEST(ArgumentKinds, NamesATensorArgumentThatBecameAnIntOrAValueOfUnknownKind) {
  const std::pair<uint8_t, std::string> retags[] = {
      {kInt, "an Int"},
      {12, "a value of unknown kind"},
      {15, "a value of unknown kind"},
      {16, "a value of unknown kind"},
      {37, "a value of unknown kind"},
      {255, "a value of unknown kind"},
  };
  for (const auto& [tag, kind] : retags) {
    auto b = read_file("linear_relu_linear.pte");
    et_copy_test::Flat f{b};
    const size_t i = instruction_calling(b, "aten::addmm.out");
    const int32_t self = f.argument(i, 0);
    b[f.value_type(self)] = tag;
    EXPECT_EQ(refusal(b), "method 'forward', instruction 0:" + std::to_string(i) +
                              ", operator aten::addmm.out: argument 0 'self' is value " + std::to_string(self) + ", " +
                              kind + "; the schema takes a Tensor")
        << int{tag};
  }
}

// A call whose operator index is outside the method's operators is left to
// check_program_indices: its arguments are not checked against any schema.
TEST(ArgumentKinds, LeavesACallToAnOperatorIndexOutsideTheListUnchecked) {
  auto b = read_file("linear_relu_linear.pte");
  et_copy_test::Flat f{b};
  const size_t i = instruction_calling(b, "aten::addmm.out");
  b[f.value_type(f.argument(i, 0))] = kInt;
  const size_t op_at = f.field(f.call(i), 0);
  ASSERT_NE(op_at, 0u) << "addmm is not operator 0";
  const size_t ops = f.u32(f.follow(f.field(f.plan(), 6)));
  for (const int64_t index : {int64_t{-1}, static_cast<int64_t>(ops), static_cast<int64_t>(ops) + 7}) {
    auto c = b;
    const int32_t v = static_cast<int32_t>(index);
    std::memcpy(c.data() + op_at, &v, 4);
    EXPECT_EQ(refusal(c), "ok") << index;
  }
  // Operators 0 and ops - 1 are in the list: the call is checked as theirs.
  for (const int32_t index : {0, static_cast<int32_t>(ops) - 1}) {
    auto c = b;
    std::memcpy(c.data() + op_at, &index, 4);
    const std::string op = et_copy::instruction_operator(c.data(), c.size(), "forward", 0, i);
    EXPECT_NE(refusal(c).find(", operator " + op + ": "), std::string::npos) << refusal(c);
  }
}

TEST(ArgumentKinds, NamesAScalarArgumentThatBecameATensor) {
  auto b = read_file("linear_relu_linear.pte");
  et_copy_test::Flat f{b};
  const size_t i = instruction_calling(b, "aten::addmm.out");
  const int32_t beta = f.argument(i, 3);
  ASSERT_EQ(b[f.value_type(beta)], kInt);
  b[f.value_type(beta)] = kTensor;
  EXPECT_EQ(refusal(b, "nested program of a delegate in method 'decode'"),
            "nested program of a delegate in method 'decode': method 'forward', instruction 0:" + std::to_string(i) +
                ", operator aten::addmm.out: argument 3 'beta' is value " + std::to_string(beta) +
                ", a Tensor; the schema takes an Int or a Bool or a Double");
}

// A refusal names every kind the schema takes, None (an optional argument's)
// first, in the KernelTypes order.
TEST(ArgumentKinds, TheKindsARefusalNamesRunFromNoneToAnOptionalTensorList) {
  EXPECT_EQ(et_copy::internal::kinds_text((1u << kNull) | (1u << kTensor)), "None or a Tensor");
  EXPECT_EQ(et_copy::internal::kinds_text(1u << kNull), "None");
  EXPECT_EQ(et_copy::internal::kinds_text((1u << kInt) | (1u << kOptionalTensorList)),
            "an Int or an OptionalTensorList");
  EXPECT_EQ(et_copy::internal::kinds_text(0), "");
}

TEST(ArgumentKinds, NamesAnIntListThatBecameATensorAndAListItemOfTheWrongKind) {
  auto b = read_file("linear_relu_linear.pte");
  et_copy_test::Flat f{b};
  const size_t i = instruction_calling(b, "aten::permute_copy.out");
  const int32_t dims = f.argument(i, 1);
  const size_t at = f.value_type(dims);
  ASSERT_EQ(b[at], 7); // an IntList
  auto retagged = b;
  retagged[at] = kTensor;
  EXPECT_NE(refusal(retagged).find("operator aten::permute_copy.out: argument 1 'dims' is value " +
                                   std::to_string(dims) + ", a Tensor; the schema takes an IntList"),
            std::string::npos)
      << refusal(retagged);
  // The list's first item (an Int value) retagged: ExecuTorch reads items with toInt.
  const size_t list = f.follow(f.field(f.element(f.follow(f.field(f.plan(), 2)), dims), 1));
  int64_t item;
  std::memcpy(&item, b.data() + f.follow(f.field(list, 0)) + 4, 8);
  b[f.value_type(static_cast<size_t>(item))] = kTensor;
  EXPECT_EQ(refusal(b), "method 'forward', value " + std::to_string(dims) + " (an IntList) item 0 is value " +
                            std::to_string(item) + ", a Tensor, not an Int");
}

// The one execution plan, named 'forward', of the program `f` writes: a
// table of `fields` fields, for the caller to fill.
size_t forward_plan(et_copy_test::FlatWriter& f, int fields) {
  const size_t program = f.table(2);
  f.root(program);
  const size_t plans = f.vector(program, 1, 1);
  const size_t plan = f.table(fields);
  f.link(plans, plan);
  f.string(plan, 0, "forward");
  return plan;
}

// A program of one method, 'forward', whose values are `values`: each a
// KernelTypes tag and, for a list, the value indices it holds. Lists whose
// index is in `tableless` keep their tag and lose their list table.
std::vector<uint8_t> with_values(const std::vector<std::pair<uint8_t, std::vector<int64_t>>>& values,
                                 const std::vector<size_t>& tableless = {}) {
  et_copy_test::FlatWriter f;
  const size_t plan = forward_plan(f, 3);
  const size_t at = f.vector(plan, 2, static_cast<uint32_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& [tag, items] = values[i];
    const size_t e = f.table(2);
    f.link(at + 4 * i, e);
    f.scalar(e, 0, tag);
    const bool table = std::find(tableless.begin(), tableless.end(), i) == tableless.end();
    if (table && (tag == kIntList || tag == kTensorList || tag == kOptionalTensorList)) {
      const size_t list = f.table(1);
      f.link(f.field(e, 1), list);
      if (tag == kIntList) {
        f.values<int64_t>(list, 0, items);
      } else {
        f.values<int32_t>(list, 0, std::vector<int32_t>(items.begin(), items.end()));
      }
    }
  }
  return f.bytes();
}

// Values 0 a Tensor, 1 None, 2 an Int, then `list` as value 3. An item
// outside the values (-1 is an optional list's None) is check_program_indices'.
std::string list_refusal(uint8_t tag, std::vector<int64_t> items) {
  return refusal(with_values({{kTensor, {}}, {kNull, {}}, {kInt, {}}, {tag, std::move(items)}}));
}

TEST(ArgumentKinds, AnOptionalTensorListTakesTensorsAndNoneAndNothingElse) {
  EXPECT_EQ(list_refusal(kOptionalTensorList, {0, 1, -1, 0}), "ok");
  EXPECT_EQ(list_refusal(kOptionalTensorList, {0, 2}),
            "method 'forward', value 3 (an OptionalTensorList) item 1 is value 2, an Int, not a Tensor or None");
  EXPECT_EQ(list_refusal(kOptionalTensorList, {3}),
            "method 'forward', value 3 (an OptionalTensorList) item 0 is value 3, an OptionalTensorList, not a "
            "Tensor or None");
}

// Every value is looked at, from the first to the last: a wrong list as value
// 0, then as the last value, beside a list that is right.
TEST(ArgumentKinds, ListsAreCheckedFromTheFirstValueToTheLast) {
  EXPECT_EQ(refusal(with_values({{kIntList, {1}}, {kTensor, {}}, {kInt, {}}, {kIntList, {2}}})),
            "method 'forward', value 0 (an IntList) item 0 is value 1, a Tensor, not an Int");
  EXPECT_EQ(refusal(with_values({{kIntList, {2}}, {kTensor, {}}, {kInt, {}}, {kIntList, {1}}})),
            "method 'forward', value 3 (an IntList) item 0 is value 1, a Tensor, not an Int");
  EXPECT_EQ(refusal(with_values({{kIntList, {2}}, {kTensor, {}}, {kInt, {}}, {kIntList, {2}}})), "ok");
}

TEST(ArgumentKinds, ATensorListTakesTensorsAndAnIntListInts) {
  EXPECT_EQ(list_refusal(kTensorList, {0, 0}), "ok");
  EXPECT_EQ(list_refusal(kTensorList, {0, 1}),
            "method 'forward', value 3 (a TensorList) item 1 is value 1, None, not a Tensor");
  EXPECT_EQ(list_refusal(kTensorList, {2}),
            "method 'forward', value 3 (a TensorList) item 0 is value 2, an Int, not a Tensor");
  EXPECT_EQ(list_refusal(kTensorList, {0, -1, 4}), "ok") << "items outside the values";
  EXPECT_EQ(list_refusal(kIntList, {2, 2}), "ok");
  EXPECT_EQ(list_refusal(kIntList, {2, 1}),
            "method 'forward', value 3 (an IntList) item 1 is value 1, None, not an Int");
  EXPECT_EQ(list_refusal(kIntList, {0}),
            "method 'forward', value 3 (an IntList) item 0 is value 0, a Tensor, not an Int");
  EXPECT_EQ(list_refusal(kIntList, {}), "ok");
}

// ExecuTorch's method load refuses a list with no list table ("Missing
// list"): the check leaves it to that, and goes on to the next value.
TEST(ArgumentKinds, AListWithNoListTableIsLeftToMethodLoadAndTheNextListIsChecked) {
  for (uint8_t tag : {kIntList, kTensorList, kOptionalTensorList}) {
    EXPECT_EQ(refusal(with_values({{kTensor, {}}, {kNull, {}}, {kInt, {}}, {tag, {}}}, {3})), "ok") << int(tag);
    EXPECT_EQ(refusal(with_values({{tag, {}}, {kTensor, {}}, {kInt, {}}, {kIntList, {1}}}, {0})),
              "method 'forward', value 3 (an IntList) item 0 is value 1, a Tensor, not an Int")
        << int(tag);
  }
}

// A program of one method, 'forward', whose values are `tags` (no list
// tables) and whose one instruction calls operator `op` ("name.overload")
// with `args`.
std::vector<uint8_t> with_call(const std::vector<uint8_t>& tags, const std::string& op,
                               const std::vector<int32_t>& args, bool call_table = true) {
  et_copy_test::FlatWriter f;
  const size_t plan = forward_plan(f, 7);
  const size_t values = f.vector(plan, 2, static_cast<uint32_t>(tags.size()));
  for (size_t i = 0; i < tags.size(); ++i) {
    const size_t e = f.table(2);
    f.link(values + 4 * i, e);
    f.scalar(e, 0, tags[i]);
  }
  const size_t dot = op.find('.');
  const size_t ops = f.vector(plan, 6, 1);
  const size_t entry = f.table(2);
  f.link(ops, entry);
  f.string(entry, 0, op.substr(0, dot));
  f.string(entry, 1, op.substr(dot + 1));
  const size_t chains = f.vector(plan, 5, 1);
  const size_t chain = f.table(3);
  f.link(chains, chain);
  const size_t instrs = f.vector(chain, 2, 1);
  const size_t instr = f.table(2);
  f.link(instrs, instr);
  f.scalar(instr, 0, 1); // KernelCall
  if (!call_table) {
    return f.bytes();
  }
  const size_t call = f.table(2);
  f.link(f.field(instr, 1), call);
  f.scalar(call, 0, 0);
  f.values<int32_t>(call, 1, args);
  return f.bytes();
}

// split_with_sizes_copy.out returns nothing: its call has the schema's 4
// arguments with or without the result slot, and no other count.
TEST(ArgumentKinds, ACallOfAnOperatorWithNoResultMayLeaveOutTheResultSlotAndNothingElse) {
  const std::vector<uint8_t> tags = {kTensor, kIntList, kInt, kTensorList, kNull};
  const std::string op = "aten::split_with_sizes_copy.out";
  EXPECT_EQ(refusal(with_call(tags, op, {0, 1, 2, 3})), "ok");
  EXPECT_EQ(refusal(with_call(tags, op, {0, 1, 2, 3, 4})), "ok");
  for (const std::vector<int32_t>& args : {std::vector<int32_t>{0, 1, 2}, std::vector<int32_t>{0, 1, 2, 3, 4, 4}}) {
    EXPECT_EQ(refusal(with_call(tags, op, args)), "method 'forward', instruction 0:0, operator " + op +
                                                      ": the call has " + std::to_string(args.size()) +
                                                      " arguments; the schema takes 4 and maybe a result slot");
  }
  // relu.out returns its out: the result slot is not optional, nor is one more.
  EXPECT_EQ(refusal(with_call(tags, "aten::relu.out", {0, 0, 0})), "ok");
  EXPECT_EQ(refusal(with_call(tags, "aten::relu.out", {0, 0, 0, 0})),
            "method 'forward', instruction 0:0, operator aten::relu.out: the call has 4 arguments; the schema takes 2 "
            "and a result slot");
}

// Every argument is checked, the first and the last, naming values from 0 to
// the last; one outside the values is check_program_indices' to report.
TEST(ArgumentKinds, ArgumentsNamingValuesFromTheFirstToTheLastAreChecked) {
  const std::vector<uint8_t> tags = {kInt, kTensor, kInt};
  const std::string relu = "method 'forward', instruction 0:0, operator aten::relu.out: ";
  EXPECT_EQ(refusal(with_call(tags, "aten::relu.out", {1, 1, 1})), "ok");
  EXPECT_EQ(refusal(with_call(tags, "aten::relu.out", {0, 1, 1})),
            relu + "argument 0 'self' is value 0, an Int; the schema takes a Tensor");
  EXPECT_EQ(refusal(with_call(tags, "aten::relu.out", {1, 1, 2})),
            relu + "argument 2 'result' is value 2, an Int; the schema takes a Tensor");
  EXPECT_EQ(refusal(with_call(tags, "aten::relu.out", {-1, 3, 1})), "ok");
}

// A kernel call with no call table is ExecuTorch's to refuse at method load;
// nothing is read for it at offset 0.
TEST(ArgumentKinds, AKernelInstructionWithNoCallTableIsLeftToMethodLoad) {
  EXPECT_EQ(refusal(with_call({kInt}, "aten::relu.out", {}, false)), "ok");
}

// A nested program is checked for indices first, and refused by name for
// one out of range before its kinds are looked at.
TEST(ArgumentKinds, ANestedProgramWithAnIndexOutOfRangeIsRefusedByName) {
  const auto nested = with_values({{kTensor, {}}, {kIntList, {0, 5}}});
  EXPECT_EQ(refusal(with_inline_delegate(as_record(nested), 1)),
            "nested program of delegate 0 in method 'forward': execution plan 0: list item value 5 is out of range "
            "(2)");
}

// A read past the file's end refuses the program, named when it has a name.
TEST(ArgumentKinds, AProgramCutShortIsRefusedAsAnOffsetOutsideTheFile) {
  auto b = with_values({{kInt, {}}, {kIntList, {0}}});
  ASSERT_EQ(refusal(b), "ok");
  b.resize(b.size() - 8); // the list's one item
  EXPECT_EQ(refusal(b), "the program's flatbuffer has an offset outside the file");
  EXPECT_EQ(refusal(b, "program.pte"), "program.pte: the program's flatbuffer has an offset outside the file");
  // A call's last argument cut off: not read as value 0 (an Int here) and refused for its kind.
  auto call = with_call({kInt, kTensor}, "aten::relu.out", {1, 1, 1});
  ASSERT_EQ(refusal(call), "ok");
  call.resize(call.size() - 4);
  EXPECT_EQ(refusal(call), "the program's flatbuffer has an offset outside the file");
}

TEST(ArgumentKinds, NamesACallWithTooFewArguments) {
  auto b = read_file("linear_relu_linear.pte");
  et_copy_test::Flat f{b};
  const size_t i = instruction_calling(b, "aten::relu.out");
  const size_t count = f.arguments(i);
  ASSERT_EQ(f.u32(count), 3u); // self, out, the result slot
  const uint32_t two = 2;
  std::memcpy(b.data() + count, &two, 4);
  EXPECT_EQ(refusal(b),
            "method 'forward', instruction 0:" + std::to_string(i) +
                ", operator aten::relu.out: the call has 2 arguments; the schema takes 2 and a result slot");
}

TEST(ArgumentKinds, LeavesAnOperatorOutsideTheTableUnchecked) {
  auto b = read_file("linear_relu_linear.pte");
  et_copy_test::Flat f{b};
  const size_t i = instruction_calling(b, "aten::permute_copy.out");
  b[f.value_type(f.argument(i, 0))] = kInt; // a weight only this call reads
  ASSERT_NE(refusal(b), "ok");
  // Rename the operator ("aten::permute_copy" -> "aten::permute_copz"): no schema, no check.
  const std::string name = "aten::permute_copy";
  for (size_t at = 0; at + name.size() <= b.size(); ++at) {
    if (std::memcmp(b.data() + at, name.data(), name.size()) == 0) {
      b[at + name.size() - 1] = 'z';
    }
  }
  EXPECT_EQ(et_copy::instruction_operator(b.data(), b.size(), "forward", 0, i), "aten::permute_copz.out");
  EXPECT_EQ(refusal(b), "ok");
}

TEST(ArgumentKinds, SurvivesEveryTruncationAndByteFlip) {
  const auto b = read_file("linear_relu_linear.pte");
  for (size_t n = 0; n < b.size(); n += 7) {
    const std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    (void)et_copy::check_argument_kinds(cut.data(), cut.size(), "");
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i) {
    auto flipped = b;
    flipped[rng() % flipped.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    et_copy::FailureReport report;
    if (et_copy::check_argument_kinds(flipped.data(), flipped.size(), "", &report) != Error::Ok) {
      EXPECT_FALSE(report.detail.empty());
    }
  }
  EXPECT_EQ(et_copy::check_argument_kinds(nullptr, 0, ""), Error::InvalidProgram);
}

TEST(ArgumentKinds, LoadedProgramRefusesTheProgramAtLoad) {
  ASSERT_NE(et_copy::use_simulated_device(), et_copy::Registration::kFailed);
  // The nested program of linear.record: a host program of a linear layer.
  const auto record = read_file("linear.record");
  auto r = et_copy::parse_delegate_record(record.data(), record.size());
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> b(r->payload, r->payload + r->payload_nbytes);
  et_copy_test::Flat f{b};
  {
    et_copy::FailureReport report;
    auto loaded = et_copy::LoadedProgram::load(
        std::make_unique<executorch::extension::BufferDataLoader>(b.data(), b.size()), nullptr, {}, &report);
    ASSERT_TRUE(loaded.ok()) << report.message();
  }
  // An Int item of permute_copy's dims retagged Double: both tables hold one
  // 8-byte scalar, so ExecuTorch's flatbuffer verification passes, and
  // without this check the kernel would abort in EValue::toInt.
  const int32_t dims = f.argument(instruction_calling(b, "aten::permute_copy.out"), 1);
  const size_t list = f.follow(f.field(f.element(f.follow(f.field(f.plan(), 2)), dims), 1));
  int64_t item;
  std::memcpy(&item, b.data() + f.follow(f.field(list, 0)) + 4, 8);
  ASSERT_EQ(b[f.value_type(static_cast<size_t>(item))], kInt);
  b[f.value_type(static_cast<size_t>(item))] = kDouble;
  et_copy::FailureReport report;
  auto loaded = et_copy::LoadedProgram::load(
      std::make_unique<executorch::extension::BufferDataLoader>(b.data(), b.size()), nullptr, {}, &report);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error(), Error::InvalidProgram);
  EXPECT_NE(report.message().find("method 'forward', value " + std::to_string(dims) + " (an IntList) item 0 is value " +
                                  std::to_string(item) + ", a Double, not an Int"),
            std::string::npos)
      << report.message();
}

} // namespace
