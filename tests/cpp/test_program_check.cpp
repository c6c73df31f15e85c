// et_copy::check_program_indices on bytes no program should hold: an index
// out of range is named, and garbage of any length is rejected without a
// read outside the buffer (the sanitizer build runs this too). And
// et_copy::instruction_operator and delegate_backend_ids on real programs
// (tests/cpp/programs), on hand-built edge cases, and on their truncations
// and garbage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <fstream>
#include <iterator>
#include <random>
#include <limits>
#include <string>
#include <vector>

#include <et_copy/failure_report.h>
#include <et_copy/program_check.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_backend.h>

#include "flat_writer.h"
#include "program_bytes.h"

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
  et_copy::FailureReport report;
  EXPECT_EQ(et_copy::check_program_indices(b.data(), b.size(), &report), Error::InvalidProgram);
  EXPECT_EQ(report.detail, "execution plan 0: method input value 5 is out of range (0)");
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

// ---- every index at the edges of its range ---------------------------------
using Flat = et_copy_test::FlatWriter;

// What one plan holds. Values are EValues: kNone, or a list of value indices.
// A Plan field left out of the flatbuffer (its default then applies).
constexpr int32_t kAbsent = std::numeric_limits<int32_t>::min();

struct Plan {
  // A Tensor value (tag 5): where its memory is.
  struct Tensor {
    int64_t memory_id = -1;   // allocation_info's, or -1: unplanned (no allocation_info)
    uint32_t data_buffer = 0; // data_buffer_idx: > 0 is data in the program
    int extra_device = -1;    // extra_tensor_info's device_type, or -1: no extra_tensor_info
    int extra_index = 0;      // ... and device_index
    uint8_t location = 0;     // ... and location (1: EXTERNAL)
    std::string fqn;          // ... and fully_qualified_name
  };
  struct Value {
    uint8_t tag = 0; // 0: None; 5: Tensor; 7: IntList; 10: TensorList; 11: OptionalTensorList
    std::vector<int64_t> items;
    Tensor tensor;
  };
  struct Instr {
    Instr(uint8_t t, int32_t f, int32_t s = 0, std::vector<int32_t> a = {})
        : tag(t), first(f), second(s), args(std::move(a)) {}
    uint8_t tag; // 1 kernel, 2 delegate, 3 move, 4 jump_false, 5 free
    int32_t first;
    int32_t second;
    std::vector<int32_t> args; // kernel and delegate calls
    bool no_call = false;      // the instruction's call table left out
  };
  std::vector<Value> values = std::vector<Value>(4);
  std::vector<size_t> tableless; // values whose list tag comes with no list table
  std::vector<int32_t> inputs, outputs, chain_inputs, chain_outputs;
  std::vector<Instr> instructions;
  uint32_t operators = 2, delegates = 1, buffers = 2;
  std::vector<int32_t> buffer_devices; // each entry's planned buffer index (kAbsent: no field)
  // Each entry's device type and index (absent past the end: CPU, 0).
  std::vector<std::pair<int, int>> buffer_device_types;
  std::string name = "forward";
  // The first operators' (name, overload), and the first delegates' ids.
  // More names than `operators`: the extra operators lie past the count.
  std::vector<std::pair<std::string, std::string>> operator_names;
  std::vector<std::string> delegate_ids;
  uint32_t chains = 1; // the chain count; a second chain is the first again
};

std::vector<uint8_t> build(const Plan& p) {
  Flat f;
  const size_t program = f.table(2);
  f.root(program);
  const size_t plans = f.vector(program, 1, 1);
  const size_t plan = f.table(10);
  f.link(plans, plan);
  const size_t values = f.vector(plan, 2, static_cast<uint32_t>(p.values.size()));
  for (size_t i = 0; i < p.values.size(); ++i) {
    const size_t e = f.table(2);
    f.link(values + 4 * i, e);
    f.scalar(e, 0, p.values[i].tag);
    if (p.values[i].tag == 5) {
      const Plan::Tensor& t = p.values[i].tensor;
      const size_t table = f.table(10);
      f.link(f.field(e, 1), table);
      f.scalar(table, 5, static_cast<int32_t>(t.data_buffer));
      if (t.memory_id >= 0) {
        const size_t allocation = f.table(3);
        f.link(f.field(table, 6), allocation);
        f.scalar(allocation, 0, static_cast<int32_t>(t.memory_id));
      }
      if (t.extra_device >= 0) {
        const size_t extra = f.table(5);
        f.link(f.field(table, 9), extra);
        f.scalar(extra, 2, t.location);
        f.scalar(extra, 3, t.extra_device);
        f.scalar(extra, 4, t.extra_index);
        if (!t.fqn.empty()) {
          f.string(extra, 1, t.fqn);
        }
      }
    } else if (p.values[i].tag != 0 && std::find(p.tableless.begin(), p.tableless.end(), i) == p.tableless.end()) {
      const size_t list = f.table(1);
      f.link(f.field(e, 1), list);
      if (p.values[i].tag == 7) {
        f.values<int64_t>(list, 0, p.values[i].items);
      } else {
        f.values<int32_t>(list, 0, std::vector<int32_t>(p.values[i].items.begin(), p.values[i].items.end()));
      }
    }
  }
  f.values<int32_t>(plan, 3, p.inputs);
  f.values<int32_t>(plan, 4, p.outputs);
  f.string(plan, 0, p.name);
  const auto names = static_cast<uint32_t>(p.operator_names.size());
  const size_t ops = f.vector(plan, 6, std::max(p.operators, names));
  f.count(ops, p.operators);
  for (size_t i = 0; i < p.operator_names.size(); ++i) {
    const size_t op = f.table(2);
    f.link(ops + 4 * i, op);
    f.string(op, 0, p.operator_names[i].first);
    f.string(op, 1, p.operator_names[i].second);
  }
  const size_t delegates = f.vector(plan, 7, p.delegates);
  for (size_t i = 0; i < p.delegate_ids.size(); ++i) {
    const size_t d = f.table(3);
    f.link(delegates + 4 * i, d);
    f.string(d, 0, p.delegate_ids[i]);
  }
  f.vector(plan, 8, p.buffers, 8);
  const size_t devices = f.vector(plan, 9, static_cast<uint32_t>(p.buffer_devices.size()));
  for (size_t i = 0; i < p.buffer_devices.size(); ++i) {
    const size_t e = f.table(3);
    f.link(devices + 4 * i, e);
    if (p.buffer_devices[i] != kAbsent) {
      f.scalar(e, 0, p.buffer_devices[i]);
    }
    if (i < p.buffer_device_types.size()) {
      f.scalar(e, 1, p.buffer_device_types[i].first);
      f.scalar(e, 2, p.buffer_device_types[i].second);
    }
  }
  // The one chain, and again past the count: a chain index equal to the
  // count would find it.
  const size_t chains = f.vector(plan, 5, 2);
  f.count(chains, p.chains);
  const size_t chain = f.table(3);
  f.link(chains, chain);
  f.link(chains + 4, chain);
  f.values<int32_t>(chain, 0, p.chain_inputs);
  f.values<int32_t>(chain, 1, p.chain_outputs);
  const size_t instrs = f.vector(chain, 2, static_cast<uint32_t>(p.instructions.size()));
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const Plan::Instr& in = p.instructions[i];
    const size_t e = f.table(2);
    f.link(instrs + 4 * i, e);
    if (in.tag != 0) {
      f.scalar(e, 0, in.tag); // NONE (0) is the default, which a flatbuffer writer leaves out
    }
    if (in.no_call) {
      continue;
    }
    const size_t call = f.table(2);
    f.link(f.field(e, 1), call);
    f.scalar(call, 0, in.first);
    if (in.tag == 1 || in.tag == 2 || !in.args.empty()) {
      f.values<int32_t>(call, 1, in.args);
    } else {
      f.scalar(call, 1, in.second);
    }
  }
  return f.bytes();
}

// Ok, or the detail of the rejection.
std::string check(const Plan& p) {
  const auto b = build(p);
  et_copy::FailureReport report;
  const Error e = et_copy::check_program_indices(b.data(), b.size(), &report);
  return e == Error::Ok ? "ok" : report.detail;
}

std::string out_of_range(const std::string& what, int64_t index, uint32_t limit) {
  return "execution plan 0: " + what + " " + std::to_string(index) + " is out of range (" + std::to_string(limit) + ")";
}

TEST(ProgramCheckEdges, AWellFormedPlanPasses) {
  Plan p;
  p.inputs = {0};
  p.outputs = {3};
  p.instructions = {{1, 1, 0, {0, 3}}, {2, 0, 0, {1}}, {3, 0, 3}, {4, 2, 3}, {5, 3}};
  p.buffer_devices = {1};
  EXPECT_EQ(check(p), "ok");
}

TEST(ProgramCheckEdges, MethodAndChainValueIndicesRunFromZeroToCountMinusOne) {
  for (const char* what : {"method input value", "method output value", "chain input value", "chain output value"}) {
    for (int32_t v : {0, 3, 4, -1}) {
      Plan p;
      const std::string w = what;
      auto& list = w == "method input value"    ? p.inputs
                   : w == "method output value" ? p.outputs
                   : w == "chain input value"   ? p.chain_inputs
                                                : p.chain_outputs;
      list = {v};
      EXPECT_EQ(check(p), v == 0 || v == 3 ? "ok" : out_of_range(what, v, 4)) << what << " " << v;
    }
  }
}

TEST(ProgramCheckEdges, ListItemsRunFromZeroToCountMinusOneAndOnlyOptionalTensorListsHoldNone) {
  for (uint8_t tag : {7, 10, 11}) {
    for (int64_t item : {int64_t{0}, int64_t{3}, int64_t{4}, int64_t{-1}, int64_t{-2}}) {
      Plan p;
      p.values[1] = {tag, {0, item}, {}};
      const bool ok = (item >= 0 && item < 4) || (tag == 11 && item == -1);
      EXPECT_EQ(check(p), ok ? "ok" : out_of_range("list item value", item, 4))
          << "tag " << int(tag) << " item " << item;
    }
  }
}

TEST(ProgramCheckEdges, OperatorAndDelegateIndicesAreBoundedByTheirOwnTables) {
  // Two operators and one delegate: operator 1 and delegate 0 are the last.
  for (int32_t op : {0, 1, 2, -1}) {
    Plan p;
    p.instructions = {{1, op, 0, {0}}};
    EXPECT_EQ(check(p), op == 0 || op == 1 ? "ok" : out_of_range("operator", op, 2)) << op;
  }
  for (int32_t d : {0, 1, -1}) {
    Plan p;
    p.instructions = {{2, d, 0, {0}}};
    EXPECT_EQ(check(p), d == 0 ? "ok" : out_of_range("delegate", d, 1)) << d;
  }
  Plan args;
  args.instructions = {{1, 0, 0, {3, 4}}};
  EXPECT_EQ(check(args), out_of_range("kernel argument value", 4, 4));
  args.instructions = {{2, 0, 0, {-1}}};
  EXPECT_EQ(check(args), out_of_range("delegate argument value", -1, 4));
}

TEST(ProgramCheckEdges, MoveFreeAndJumpConditionValuesAreEachChecked) {
  const std::pair<Plan::Instr, std::string> cases[] = {
      {{3, 4, 0}, "move source value"},
      {{3, 0, 4}, "move destination value"},
      {{3, 0, -1}, "move destination value"},
      {{4, 4, 0}, "jump condition value"},
      {{5, 4}, "freed value"},
      {{5, -1}, "freed value"},
  };
  for (const auto& [instr, what] : cases) {
    Plan p;
    p.instructions = {instr};
    const int64_t bad = instr.first < 0 || instr.first >= 4 ? instr.first : instr.second;
    EXPECT_EQ(check(p), out_of_range(what, bad, 4)) << what;
  }
}

TEST(ProgramCheckEdges, AJumpMayLandOnTheLastInstructionButNotPastIt) {
  for (int32_t dest : {0, 2, 3, -1}) {
    Plan p;
    p.instructions = {{4, 0, dest}, {5, 0}, {5, 1}};
    EXPECT_EQ(check(p), dest == 0 || dest == 2 ? "ok" : out_of_range("jump destination instruction", dest, 3)) << dest;
  }
}

TEST(ProgramCheckEdges, ADeviceEntryNamesAPlannedBufferThatExists) {
  // Two planned buffers and three device entries: buffer 1 is the last.
  for (int32_t buffer : {0, 1, 2, -1}) {
    Plan p;
    p.buffer_devices = {0, 0, buffer};
    EXPECT_EQ(check(p), buffer == 0 || buffer == 1 ? "ok" : out_of_range("planned buffer of a device entry", buffer, 2))
        << buffer;
  }
}

// A device entry with no buffer index field names buffer 0, the flatbuffer
// default: fine with one planned buffer (the reserved 0), past it with none.
TEST(ProgramCheckEdges, ADeviceEntryWithNoBufferIndexNamesBufferZero) {
  for (uint32_t buffers : {1u, 2u}) {
    Plan p;
    p.buffers = buffers;
    p.buffer_devices = {kAbsent};
    EXPECT_EQ(check(p), "ok") << buffers;
  }
  Plan none;
  none.buffers = 0;
  none.buffer_devices = {kAbsent};
  EXPECT_EQ(check(none), out_of_range("planned buffer of a device entry", 0, 0));
}

TEST(ProgramCheckEdges, AProgramWhoseLastFieldEndsTheFileIsRead) {
  // plan_with_input's input index is its last 4 bytes.
  const auto b = plan_with_input(0);
  et_copy::FailureReport report;
  EXPECT_EQ(et_copy::check_program_indices(b.data(), b.size(), &report), Error::InvalidProgram);
  EXPECT_EQ(report.detail, "execution plan 0: method input value 0 is out of range (0)");
}

// ---- instruction_operator ---------------------------------------------------

std::vector<uint8_t> read_program(const std::string& name) {
  std::ifstream in(std::string(ET_COPY_TEST_PROGRAMS) + "/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string op_of(const std::vector<uint8_t>& b, size_t chain, size_t instruction, const char* method = "forward") {
  return et_copy::instruction_operator(b.data(), b.size(), method, chain, instruction);
}

TEST(InstructionOperator, NamesTheKernelCallsOfARealProgramAsExecuTorchLogsThem) {
  // roundtrip.pte: _h2d_copy, then _d2h_copy, in one chain.
  const auto b = read_program("roundtrip.pte");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(op_of(b, 0, 0), "et_copy::_h2d_copy.out");
  EXPECT_EQ(op_of(b, 0, 1), "et_copy::_d2h_copy.out");
  EXPECT_EQ(op_of(b, 0, 2), "");
  EXPECT_EQ(op_of(b, 1, 0), "");
  EXPECT_EQ(op_of(b, 0, 0, "backward"), "");
  EXPECT_EQ(op_of(b, 0, 0, "forwar"), "");
  EXPECT_EQ(et_copy::instruction_operator(b.data(), b.size(), nullptr, 0, 0), "");
}

TEST(InstructionOperator, NamesADelegateCallByItsBackend) {
  // add_relu_xnnpack.pte: two h2d copies, the XNNPACK call, a d2h copy.
  const auto b = read_program("add_relu_xnnpack.pte");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(op_of(b, 0, 1), "et_copy::_h2d_copy.out");
  EXPECT_EQ(op_of(b, 0, 2), "delegate:XnnpackBackend");
  EXPECT_EQ(op_of(b, 0, 3), "et_copy::_d2h_copy.out");
}

TEST(InstructionOperator, AnEmptyOverloadAddsNoDotAndANameEndsAtItsFirstNul) {
  Plan p;
  p.operator_names = {{"aten::relu", ""}, {std::string("ns::op\0hidden", 13), std::string("out\0x", 5)}};
  p.delegate_ids = {""};
  p.instructions = {{1, 0, 0, {0}}, {1, 1, 0, {0}}, {2, 0, 0, {0}}, {1, 2, 0, {0}}, {1, -1, 0, {0}}};
  const auto b = build(p);
  EXPECT_EQ(op_of(b, 0, 0), "aten::relu"); // the registry's name; ExecuTorch's log adds a "."
  EXPECT_EQ(op_of(b, 0, 1), "ns::op.out");
  EXPECT_EQ(op_of(b, 0, 2), ""); // a delegate without an id
  EXPECT_EQ(op_of(b, 0, 3), ""); // operator 2 of 2
  EXPECT_EQ(op_of(b, 0, 4), ""); // operator -1
}

TEST(InstructionOperator, IndicesRunFromZeroToCountMinusOne) {
  // A third operator lies past the count of two, and the chain past its count of one.
  Plan p;
  p.operator_names = {{"ns::a", "out"}, {"ns::b", "out"}, {"ns::past", "out"}};
  p.instructions = {{1, 1, 0, {0}}, {1, 2, 0, {0}}};
  const auto b = build(p);
  EXPECT_EQ(op_of(b, 0, 0), "ns::b.out");
  EXPECT_EQ(op_of(b, 0, 1), "");
  EXPECT_EQ(op_of(b, 1, 0), "");
  EXPECT_EQ(op_of(b, 0, 2), "");
}

TEST(InstructionOperator, AStringRunningPastTheEndNamesNothing) {
  Plan p;
  p.operator_names = {{"ns::op", "overload_marker"}};
  p.instructions = {{1, 0, 0, {0}}};
  auto b = build(p);
  ASSERT_EQ(op_of(b, 0, 0), "ns::op.overload_marker");
  const std::string marker = "overload_marker";
  const auto at = std::search(b.begin(), b.end(), marker.begin(), marker.end()) - b.begin();
  ASSERT_LT(static_cast<size_t>(at), b.size());
  put32(b, static_cast<size_t>(at) - 4, static_cast<uint32_t>(b.size())); // its length
  EXPECT_EQ(op_of(b, 0, 0), ""); // not "ns::op": the overload could not be read
}

TEST(InstructionOperator, OtherInstructionsAndNamelessOperatorsGiveNothing) {
  Plan p;
  p.operator_names = {{"", "out"}};
  p.instructions = {{1, 0, 0, {0}}, {1, 1, 0, {0}}, {3, 0, 1}, {4, 0, 0}, {5, 0}};
  const auto b = build(p);
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    EXPECT_EQ(op_of(b, 0, i), "") << i; // 1: operator 1 is an empty table
  }
}

TEST(InstructionOperator, OnlyCallsAreNamedWhateverAMoveJumpOrFreeIndexPointsAt) {
  // Operator 0 and delegate 0 both have names, and every other instruction's
  // first index is 0: only the kernel and delegate calls name them.
  Plan p;
  p.operator_names = {{"ns::op", "out"}};
  p.delegate_ids = {"SimulatedDeviceBackend"};
  p.instructions = {{1, 0, 0, {0}}, {2, 0, 0, {0}}, {3, 0, 1}, {4, 0, 0}, {5, 0}, {0, 0, 0, {0}}};
  const auto b = build(p);
  EXPECT_EQ(op_of(b, 0, 0), "ns::op.out");
  EXPECT_EQ(op_of(b, 0, 1), "delegate:SimulatedDeviceBackend");
  for (size_t i = 2; i < p.instructions.size(); ++i) {
    EXPECT_EQ(op_of(b, 0, i), "") << i;
  }
}

TEST(InstructionOperator, TheMethodIsFoundByItsWholeName) {
  Plan p;
  p.name = "decode";
  p.operator_names = {{"ns::op", "out"}};
  p.instructions = {{1, 0, 0, {0}}};
  const auto b = build(p);
  EXPECT_EQ(op_of(b, 0, 0, "decode"), "ns::op.out");
  for (const char* other : {"forward", "decod", "decode2", ""}) {
    EXPECT_EQ(op_of(b, 0, 0, other), "") << other;
  }
}

TEST(InstructionOperator, SurvivesEveryTruncationBitFlipAndRandomBytes) {
  for (const char* file : {"roundtrip.pte", "add_relu_xnnpack.pte"}) {
    const auto b = read_program(file);
    ASSERT_FALSE(b.empty()) << file;
    std::vector<std::string> full;
    for (size_t i = 0; i < 4; ++i) {
      full.push_back(op_of(b, 0, i));
    }
    for (size_t n = 0; n < b.size(); ++n) {
      // A copy of exactly n bytes, so a read past it is caught by ASan.
      std::vector<uint8_t> cut(b.begin(), b.begin() + n);
      for (size_t i = 0; i < 4; ++i) {
        const std::string got = op_of(cut, 0, i);
        EXPECT_TRUE(got.empty() || got == full[i]) << file << " cut at " << n << ": " << got;
      }
    }
    for (size_t at = 0; at < b.size(); ++at) {
      for (uint8_t bit : {0x01, 0x80}) {
        auto flipped = b;
        flipped[at] ^= bit;
        for (size_t i = 0; i < 4; ++i) {
          (void)op_of(flipped, 0, i);
        }
      }
    }
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> junk(rng() % 256);
    for (auto& x : junk) {
      x = static_cast<uint8_t>(rng());
    }
    (void)op_of(junk, rng() % 2, rng() % 4);
  }
  EXPECT_EQ(et_copy::instruction_operator(nullptr, 0, "forward", 0, 0), "");
}

// ---- delegate_backend_ids ----------------------------------------------------

std::vector<std::string> ids_of(const std::vector<uint8_t>& b) {
  return et_copy::delegate_backend_ids(b.data(), b.size());
}

TEST(DelegateBackendIds, NamesTheBackendsOfARealProgramsDelegates) {
  EXPECT_EQ(ids_of(read_program("add_relu_xnnpack.pte")), std::vector<std::string>{"XnnpackBackend"});
  EXPECT_TRUE(ids_of(read_program("roundtrip.pte")).empty()); // two copies, no delegate
}

TEST(DelegateBackendIds, EachIdOnceInDelegateOrderWithoutEmptyOnesAndUpToANul) {
  Plan p;
  p.delegates = 5;
  p.delegate_ids = {"SimulatedDeviceBackend", "", "AotiDeviceBackend", "SimulatedDeviceBackend",
                    std::string("AotiDeviceBackend\0x", 19)};
  EXPECT_EQ(ids_of(build(p)), (std::vector<std::string>{"SimulatedDeviceBackend", "AotiDeviceBackend"}));
  p.delegates = 0;
  p.delegate_ids = {};
  EXPECT_TRUE(ids_of(build(p)).empty());
}

TEST(DelegateBackendIds, SurvivesEveryTruncationAndRandomBytes) {
  const auto b = read_program("add_relu_xnnpack.pte");
  ASSERT_FALSE(b.empty());
  for (size_t n = 0; n < b.size(); ++n) {
    // A copy of exactly n bytes, so a read past it is caught by ASan.
    const std::vector<uint8_t> cut(b.begin(), b.begin() + n);
    const auto got = ids_of(cut);
    EXPECT_TRUE(got.empty() || got == std::vector<std::string>{"XnnpackBackend"}) << "cut at " << n;
  }
  std::mt19937 rng(13);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> junk(rng() % 256);
    for (auto& x : junk) {
      x = static_cast<uint8_t>(rng());
    }
    (void)ids_of(junk);
  }
  EXPECT_TRUE(et_copy::delegate_backend_ids(nullptr, 100).empty());
}

} // namespace

std::vector<bool> filled(const std::vector<uint8_t>& b, const char* method = "forward") {
  return et_copy::outputs_filled_by_d2h_copy(b.data(), b.size(), method);
}

TEST(OutputsFilledByD2hCopy, RealProgramsWhoseOutputADeviceToHostCopyFills) {
  EXPECT_EQ(filled(read_program("roundtrip.pte")), std::vector<bool>{true});
  EXPECT_EQ(filled(read_program("add_relu_xnnpack.pte")), std::vector<bool>{true});
  EXPECT_TRUE(filled(read_program("roundtrip.pte"), "backward").empty());
}

TEST(OutputsFilledByD2hCopy, OnlyWhenTheCopyIntoItIsTheFirstInstructionToNameIt) {
  // Values: 0 the input, 1 a device tensor, 2 and 3 outputs. Operator 0 is
  // the d2h copy ([self, out, returned out]), operator 1 another kernel.
  const auto plan = [](std::vector<Plan::Instr> instructions) {
    Plan p;
    p.operator_names = {{"et_copy::_d2h_copy", "out"}, {"aten::add", "out"}};
    p.inputs = {0};
    p.outputs = {2, 3};
    p.instructions = std::move(instructions);
    return build(p);
  };
  // Output 2 filled by the copy; output 3 written by add first.
  EXPECT_EQ(filled(plan({{1, 0, 0, {1, 2, 2}}, {1, 1, 0, {1, 1, 3}}})), (std::vector<bool>{true, false}));
  // Output 2 read (as add's self) before the copy fills it: its memory carries over.
  EXPECT_EQ(filled(plan({{1, 1, 0, {2, 1, 3}}, {1, 0, 0, {1, 2, 2}}})), (std::vector<bool>{false, false}));
  // A copy of a value into itself, a move or a free naming it first.
  EXPECT_EQ(filled(plan({{1, 0, 0, {2, 2, 2}}})), (std::vector<bool>{false, false}));
  EXPECT_EQ(filled(plan({{3, 1, 2}, {1, 0, 0, {1, 2, 2}}})), (std::vector<bool>{false, false}));
  EXPECT_EQ(filled(plan({{5, 2}, {1, 0, 0, {1, 2, 2}}})), (std::vector<bool>{false, false}));
  // A jump anywhere: instructions may not run in the order they are listed.
  EXPECT_EQ(filled(plan({{1, 0, 0, {1, 2, 2}}, {4, 0, 0}})), (std::vector<bool>{false, false}));
}

TEST(OutputsFilledByD2hCopy, TheCopysOutIsItsSecondArgumentWhateverFollows) {
  Plan p;
  p.operator_names = {{"et_copy::_d2h_copy", "out"}};
  p.outputs = {2, 3};
  // A returned value other than out: out (2) is filled, the other (3) only named.
  p.instructions = {{1, 0, 0, {1, 2, 3}}};
  EXPECT_EQ(filled(build(p)), (std::vector<bool>{true, false}));
  // [self, out] alone: out is still the copy's.
  p.instructions = {{1, 0, 0, {1, 2}}};
  EXPECT_EQ(filled(build(p)), (std::vector<bool>{true, false}));
  // One argument is no copy into anything: the value it names is only read.
  p.instructions = {{1, 0, 0, {2}}, {1, 0, 0, {1, 2, 2}}};
  EXPECT_EQ(filled(build(p)), (std::vector<bool>{false, false}));
}

// Only a kernel call of the d2h copy fills its out: another kernel or a
// delegate whose second argument is the output is a call that names it first.
TEST(OutputsFilledByD2hCopy, AnotherKernelOrADelegateWithTheOutputSecondFillsNothing) {
  Plan p;
  p.operator_names = {{"et_copy::_d2h_copy", "out"}, {"aten::add", "out"}};
  p.delegate_ids = {"et_copy::_d2h_copy.out"};
  p.outputs = {2};
  for (const Plan::Instr& first : {Plan::Instr{1, 1, 0, {1, 2, 2}}, Plan::Instr{2, 0, 0, {1, 2, 2}}}) {
    p.instructions = {first, {1, 0, 0, {1, 2, 2}}};
    EXPECT_EQ(filled(build(p)), std::vector<bool>{false}) << int(first.tag);
    p.instructions = {{1, 0, 0, {1, 2, 2}}, first};
    EXPECT_EQ(filled(build(p)), std::vector<bool>{true}) << int(first.tag);
  }
}

TEST(OutputsFilledByD2hCopy, AnInstructionWithNoTypeIsNoCallWhateverItsValueHolds) {
  Plan p;
  p.operator_names = {{"et_copy::_d2h_copy", "out"}, {"aten::add", "out"}};
  p.outputs = {2, 3};
  // Call arguments naming output 2 under no instruction type (NONE, the field
  // left out), then the d2h copy into it: the copy is the first call to name it.
  p.instructions = {{0, 1, 0, {2, 1, 2}}, {1, 0, 0, {1, 2, 2}}};
  EXPECT_EQ(filled(build(p)), (std::vector<bool>{true, false}));
  // The same arguments typed as a kernel call (add reading output 2) name it first.
  p.instructions[0].tag = 1;
  EXPECT_EQ(filled(build(p)), (std::vector<bool>{false, false}));
}

TEST(OutputsFilledByD2hCopy, NotForAMethodInputNorAListItem) {
  Plan p;
  p.operator_names = {{"et_copy::_d2h_copy", "out"}};
  p.outputs = {2};
  p.instructions = {{1, 0, 0, {1, 2, 2}}};
  EXPECT_EQ(filled(build(p)), std::vector<bool>{true});
  p.inputs = {2};
  EXPECT_EQ(filled(build(p)), std::vector<bool>{false});
  p.inputs = {};
  for (uint8_t list : {10, 11}) { // a TensorList or an OptionalTensorList holding it
    p.values[3] = {list, {0, 2}, {}};
    EXPECT_EQ(filled(build(p)), std::vector<bool>{false}) << int(list);
  }
}

// Only a method of one chain is read in order: with a second chain (here
// the first again), which chain runs when is not known.
TEST(OutputsFilledByD2hCopy, OnlyInAMethodOfOneChain) {
  Plan p;
  p.operator_names = {{"et_copy::_d2h_copy", "out"}};
  p.outputs = {2, 3};
  p.instructions = {{1, 0, 0, {1, 2, 2}}};
  EXPECT_EQ(filled(build(p)), (std::vector<bool>{true, false}));
  p.chains = 2;
  EXPECT_EQ(filled(build(p)), (std::vector<bool>{false, false}));
  p.chains = 0;
  EXPECT_EQ(filled(build(p)), (std::vector<bool>{false, false}));
}

TEST(OutputsFilledByD2hCopy, NoBytesOrNoMethodNameOrNoSuchMethodIsNoOutputs) {
  const auto b = read_program("roundtrip.pte");
  EXPECT_EQ(et_copy::outputs_filled_by_d2h_copy(b.data(), b.size(), "forward"), std::vector<bool>{true});
  EXPECT_TRUE(et_copy::outputs_filled_by_d2h_copy(nullptr, b.size(), "forward").empty());
  EXPECT_TRUE(et_copy::outputs_filled_by_d2h_copy(b.data(), b.size(), nullptr).empty());
  EXPECT_TRUE(et_copy::outputs_filled_by_d2h_copy(b.data(), b.size(), "forwards").empty());
  EXPECT_TRUE(et_copy::outputs_filled_by_d2h_copy(b.data(), b.size(), "").empty());
}

TEST(OutputsFilledByD2hCopy, SurvivesEveryTruncationOfARealProgram) {
  const auto b = read_program("roundtrip.pte");
  for (size_t n = 0; n < b.size(); ++n) {
    const auto f = et_copy::outputs_filled_by_d2h_copy(b.data(), n, "forward");
    EXPECT_TRUE(f.empty() || f.size() == 1) << n;
  }
}

// ---- method_io_devices -------------------------------------------------------

namespace {

std::vector<std::string> device_names(const std::vector<executorch::runtime::etensor::Device>& devices) {
  std::vector<std::string> names;
  for (const auto& d : devices) {
    names.push_back(et_copy::device_name(static_cast<int>(d.type()), static_cast<int>(d.index())));
  }
  return names;
}

} // namespace

TEST(MethodIoDevices, PlacesEachInputAndOutputWhereTheProgramDoes) {
  const auto b = read_program("roundtrip.pte"); // host in, host out; the copy's device tensor is no input
  auto io = et_copy::method_io_devices(b.data(), b.size(), "forward");
  EXPECT_EQ(device_names(io.inputs), std::vector<std::string>{"cpu"});
  EXPECT_EQ(device_names(io.outputs), std::vector<std::string>{"cpu"});
  EXPECT_TRUE(io.attributes.empty());
  const auto d = read_program("device_input.pte"); // input 0 planned on cuda:0
  io = et_copy::method_io_devices(d.data(), d.size(), "forward");
  EXPECT_EQ(device_names(io.inputs), std::vector<std::string>{"cuda:0"});
  EXPECT_EQ(device_names(io.outputs), std::vector<std::string>{"cpu"});
  io = et_copy::method_io_devices(b.data(), b.size(), "backward");
  EXPECT_TRUE(io.inputs.empty() && io.outputs.empty() && io.attributes.empty());
}

TEST(MethodIoDevices, SurvivesEveryTruncationOfARealProgram) {
  const auto b = read_program("device_input.pte");
  for (size_t n = 0; n < b.size(); ++n) {
    const auto io = et_copy::method_io_devices(b.data(), n, "forward");
    EXPECT_LE(io.inputs.size(), 1u) << n;
    EXPECT_LE(io.outputs.size(), 1u) << n;
  }
}

// ---- check_device_access ----------------------------------------------------

namespace {

const std::vector<std::string> kSimulated = {"SimulatedDeviceBackend"};

// "ok", or the refusal's detail (with the error when it is not InvalidProgram).
std::string access(const std::vector<uint8_t>& b, const std::vector<std::string>& allowed = kSimulated) {
  et_copy::FailureReport report;
  const Error e = et_copy::check_device_access(b.data(), b.size(), allowed, &report);
  if (e == Error::Ok) {
    return "ok";
  }
  return e == Error::InvalidProgram ? report.detail
                                    : "error " + std::to_string(static_cast<int>(e)) + ": " + report.detail;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST(CheckDeviceAccess, ACopyOnlyProgramIsAccepted) {
  // roundtrip.pte: D2H(H2D(x)), the device tensor planned on cuda:0.
  const auto b = read_program("roundtrip.pte");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(access(b), "ok");
  EXPECT_EQ(access(b, {}), "ok"); // no delegate: no backend needs allowing
}

TEST(CheckDeviceAccess, CpuKernelsOnDeviceTensorsAreRefusedNamingTheFirstAndCountingTheRest) {
  // linear_relu_linear.pte: export_device_program(Linear-ReLU-Linear) as
  // et-copy exports it today: aten kernels on tensors planned on cuda:0.
  const auto b = read_program("linear_relu_linear.pte");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(access(b),
            "method 'forward', instruction 0:2 (aten::addmm.out): argument 1 (value 5) is planned on "
            "cuda:0, and a CPU kernel cannot read device memory (only et-copy's copy kernels and a device "
            "backend's delegates may take device tensors); 8 more found in the program");
}

TEST(CheckDeviceAccess, ADelegateOnTheDeviceIsRefusedUnlessItsBackendIsAllowed) {
  // add_relu_xnnpack.pte: XNNPACK (a CPU backend) between copies to cuda:0.
  const auto b = read_program("add_relu_xnnpack.pte");
  ASSERT_FALSE(b.empty());
  const std::string refused =
      "method 'forward', instruction 0:2 (delegate:XnnpackBackend): argument 0 (value 2) is "
      "planned on cuda:0, and backend 'XnnpackBackend' does not run on that device ";
  EXPECT_EQ(access(b), refused + "(allowed there: SimulatedDeviceBackend); 2 more found in the program");
  EXPECT_EQ(access(b, {}), refused + "(no backend is allowed there); 2 more found in the program");
  EXPECT_EQ(access(b, {"SimulatedDeviceBackend", "XnnpackBackend"}), "ok");
  EXPECT_NE(access(b, {"Xnnpack", "XnnpackBackend2", ""}), "ok"); // the whole id, nothing else
}

TEST(CheckDeviceAccess, AMethodInputPlannedOnTheDeviceIsRefused) {
  // device_input.pte: input 0 resident on cuda:0 and planned (alloc_graph_input=True).
  const auto b = read_program("device_input.pte");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(access(b),
            "method 'forward': input 0 (value 0) is planned on cuda:0, and Method::set_input would memcpy host bytes "
            "into it");
}

namespace {

// A plan whose values 0..3 are tensors: 0 unplanned (given at run time), 1
// planned in memory id 1 (a CPU buffer), 2 planned in memory id 2 (buffer
// 2: cuda:0), 3 a constant. Operators: the two copies, then aten::add.out.
Plan device_plan() {
  Plan p;
  p.values = std::vector<Plan::Value>(6);
  for (auto& v : p.values) {
    v.tag = 5;
  }
  p.values[1].tensor.memory_id = 1;
  p.values[2].tensor.memory_id = 2;
  p.values[3].tensor.data_buffer = 1;
  p.values[4] = {0, {}, {}}; // None
  p.values[5] = {0, {}, {}};
  p.buffers = 3;
  p.buffer_devices = {2};
  p.buffer_device_types = {{1, 0}};
  p.operators = 3;
  p.operator_names = {{"et_copy::_h2d_copy", "out"}, {"et_copy::_d2h_copy", "out"}, {"aten::add", "out"}};
  p.delegates = 1;
  p.delegate_ids = {"SimulatedDeviceBackend"};
  return p;
}

std::string access(const Plan& p, const std::vector<std::string>& allowed = kSimulated) {
  return access(build(p), allowed);
}

constexpr int32_t kH2d = 0, kD2h = 1, kAdd = 2;

} // namespace

// ExecuTorch's method load refuses a list value with no list table ("Missing
// list"); the load checks pass it on to that refusal rather than call it an
// offset outside the file, whichever instruction takes it.
TEST(ProgramCheckEdges, AListValueWithNoListTableIsLeftToMethodLoad) {
  for (uint8_t tag : {7, 10, 11}) {
    Plan p = device_plan();
    p.values[4] = {tag, {}, {}};
    p.tableless = {4};
    EXPECT_EQ(check(p), "ok") << int(tag);
    for (const Plan::Instr& in : {Plan::Instr{1, kAdd, 0, {4, 1, 1}}, Plan::Instr{2, 0, 0, {4, 2}}}) {
      p.instructions = {in};
      EXPECT_EQ(access(p), "ok") << int(tag) << " in a call of kind " << int(in.tag);
    }
    p.tableless.clear(); // the same list with its table, holding a device tensor: seen and refused
    p.values[4].items = {2};
    p.instructions = {{1, kAdd, 0, {4, 1, 1}}};
    EXPECT_EQ(access(p) == "ok", tag == 7) << int(tag) << ": " << access(p);
  }
}

TEST(CheckDeviceAccessEdges, CopiesBetweenHostAndDeviceMemoryAndDelegatesOfAnAllowedBackendPass) {
  Plan p = device_plan();
  p.inputs = {0};
  p.outputs = {1};
  p.instructions = {{1, kH2d, 0, {0, 2, 2}}, {2, 0, 0, {2, 2}}, {1, kD2h, 0, {2, 1, 1}}, {1, kAdd, 0, {1, 0, 1, 1}}};
  EXPECT_EQ(access(p), "ok");
}

TEST(CheckDeviceAccessEdges, MemoryIdMIsTheBufferOfTheDeviceEntryWithBufferIdxM) {
  // Value 1 is in memory id 1, value 2 in memory id 2.
  Plan p = device_plan();
  p.instructions = {{1, kAdd, 0, {1, 1, 1}}};
  EXPECT_EQ(access(p), "ok");
  p.instructions = {{1, kAdd, 0, {2, 2, 2}}};
  EXPECT_TRUE(has(access(p), "argument 0 (value 2) is planned on cuda:0")) << access(p);
  p.buffer_devices = {1}; // the device entry now names memory id 1
  EXPECT_EQ(access(p), "ok");
  p.instructions = {{1, kAdd, 0, {1, 1, 1}}};
  EXPECT_TRUE(has(access(p), "argument 0 (value 1) is planned on cuda:0")) << access(p);
  // The first entry naming a buffer gives its device, as MethodMeta reads it.
  p.buffer_devices = {1, 1};
  p.buffer_device_types = {{1, 3}, {1, 0}};
  EXPECT_TRUE(has(access(p), "is planned on cuda:3")) << access(p);
  p.buffer_device_types = {{0, 0}, {1, 0}};
  EXPECT_EQ(access(p), "ok");
  p.buffer_device_types = {{2, 1}};
  EXPECT_TRUE(has(access(p), "is planned on device type 2:1")) << access(p);
  // An entry with no buffer index field names memory id 0 (the flatbuffer
  // default), which holds no value: both values are then the host's.
  p.buffer_devices = {kAbsent};
  p.buffer_device_types = {{1, 0}};
  for (int32_t v : {1, 2}) {
    p.instructions = {{1, kAdd, 0, {v, v, v}}};
    EXPECT_EQ(access(p), "ok") << v;
  }
}

TEST(CheckDeviceAccessEdges, AnyOtherKernelWithADeviceTensorArgumentOrListItemIsRefused) {
  Plan p = device_plan();
  for (size_t a = 0; a < 4; ++a) {
    std::vector<int32_t> args = {1, 1, 1, 1};
    args[a] = 2;
    p.instructions = {{1, kAdd, 0, args}};
    EXPECT_EQ(access(p), "method 'forward', instruction 0:0 (aten::add.out): argument " + std::to_string(a) +
                             " (value 2) is planned on cuda:0, and a CPU kernel cannot read device memory (only "
                             "et-copy's copy kernels and a device backend's delegates may take device tensors)")
        << a;
  }
  // List items, None (-1) among them, count as arguments.
  for (uint8_t list : {10, 11}) {
    p.values[4] = {list, {1, -1, 2}, {}};
    p.values[4].items = list == 10 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1, -1, 2};
    p.instructions = {{1, kAdd, 0, {4, 1, 1}}};
    const std::string item = list == 10 ? "item 1" : "item 2";
    EXPECT_TRUE(has(access(p), "(aten::add.out): argument 0 (value 4), " + item + " (value 2) is planned on cuda:0"))
        << access(p);
    p.values[4].items = {2, 1}; // the first item, and the last
    EXPECT_TRUE(has(access(p), "(aten::add.out): argument 0 (value 4), item 0 (value 2) is planned on cuda:0"))
        << access(p);
    p.values[4].items = {1, 2};
    EXPECT_TRUE(has(access(p), "(aten::add.out): argument 0 (value 4), item 1 (value 2) is planned on cuda:0"))
        << access(p);
    p.values[4].items = {1, 0, 3};
    EXPECT_EQ(access(p), "ok") << int(list);
  }
  // An unplanned tensor whose metadata names a device: its memory, given
  // at run time, is device memory.
  p.values[0].tensor.extra_device = 1;
  p.instructions = {{1, kAdd, 0, {0, 1, 1}}};
  EXPECT_TRUE(has(access(p), "argument 0 (value 0) is given at run time on cuda:0")) << access(p);
  // ... but a planned tensor's place is its buffer's, whatever its metadata says.
  p.values[0].tensor.extra_device = -1;
  p.values[1].tensor.extra_device = 1;
  EXPECT_EQ(access(p), "ok");
}

TEST(CheckDeviceAccessEdges, PrimOpsAndNamelessOperatorsAreKernelsToo) {
  Plan p = device_plan();
  p.operator_names.push_back({"executorch_prim::et_view", "default"});
  p.operators = 5; // operator 4 has no table: no name
  p.instructions = {{1, 3, 0, {2, 4, 1}}, {1, 4, 0, {2}}};
  const std::string got = access(p);
  EXPECT_TRUE(has(got, "instruction 0:0 (executorch_prim::et_view.default): argument 0 (value 2)")) << got;
  EXPECT_TRUE(has(got, "; 1 more found in the program")) << got;
  p.instructions = {{1, 4, 0, {2}}};
  EXPECT_TRUE(has(access(p), "instruction 0:0 (operator 4): argument 0 (value 2)")) << access(p);
}

TEST(CheckDeviceAccessEdges, EachSideOfACopyMustBeItsOwnKindOfMemory) {
  Plan p = device_plan();
  const auto refusal = [](const std::string& op, const std::string& arg, const std::string& where,
                          const std::string& must) {
    return "method 'forward', instruction 0:0 (et_copy::" + op + ".out): " + arg + " is " + where + ", but a " +
           (op == "_h2d_copy" ? "host-to-device" : "device-to-host") + " copy's " + must;
  };
  p.instructions = {{1, kH2d, 0, {2, 2, 2}}}; // h2d from device memory
  EXPECT_TRUE(has(access(p),
                  refusal("_h2d_copy", "argument 0 (self) (value 2)", "planned on cuda:0", "self must be host memory")))
      << access(p);
  p.instructions = {{1, kH2d, 0, {1, 1, 1}}}; // h2d into host memory
  EXPECT_TRUE(has(access(p), refusal("_h2d_copy", "argument 1 (out) (value 1)", "planned on cpu",
                                     "out must be device memory; 1 more")))
      << access(p);
  p.instructions = {{1, kH2d, 0, {0, 3, 3}}}; // h2d into a constant
  EXPECT_TRUE(has(access(p), "argument 1 (out) (value 3) is a constant of the program")) << access(p);
  p.instructions = {{1, kD2h, 0, {1, 1, 1}}}; // d2h from host memory
  EXPECT_EQ(access(p),
            refusal("_d2h_copy", "argument 0 (self) (value 1)", "planned on cpu", "self must be device memory"));
  p.instructions = {{1, kD2h, 0, {2, 2, 2}}}; // d2h into device memory
  EXPECT_TRUE(has(access(p), refusal("_d2h_copy", "argument 1 (out) (value 2)", "planned on cuda:0",
                                     "out must be host memory; 1 more")))
      << access(p);
  // Memory given at run time may be either: the runtime's to check.
  p.instructions = {{1, kH2d, 0, {0, 2, 2}}, {1, kD2h, 0, {2, 0, 0}}, {1, kH2d, 0, {1, 0, 0}}, {1, kD2h, 0, {0, 1, 1}}};
  EXPECT_EQ(access(p), "ok");
}

TEST(CheckDeviceAccessEdges, ADelegateTakingDeviceTensorsMustBeAnAllowedBackend) {
  Plan p = device_plan();
  p.delegate_ids = {"XnnpackBackend"};
  p.instructions = {{2, 0, 0, {1, 0, 3}}};
  EXPECT_EQ(access(p, {}), "ok"); // host tensors only
  p.instructions = {{2, 0, 0, {1, 2}}};
  EXPECT_EQ(access(p),
            "method 'forward', instruction 0:0 (delegate:XnnpackBackend): argument 1 (value 2) is "
            "planned on cuda:0, and backend 'XnnpackBackend' does not run on that device (allowed there: "
            "SimulatedDeviceBackend)");
  EXPECT_EQ(access(p, {"CudaBackend", "XnnpackBackend"}), "ok");
  p.delegate_ids = {""};
  // A delegate without an id is named by its index, and an empty id allows nothing.
  EXPECT_EQ(access(p, {""}),
            "method 'forward', instruction 0:0 (delegate 0): argument 1 (value 2) is planned on "
            "cuda:0, and backend '' does not run on that device (no backend is allowed there)");
}

TEST(CheckDeviceAccessEdges, AMethodInputPlannedOnADeviceIsRefusedButNotOneGivenAtRunTime) {
  Plan p = device_plan();
  p.inputs = {0, 1, 2};
  EXPECT_EQ(access(p),
            "method 'forward': input 2 (value 2) is planned on cuda:0, and Method::set_input would memcpy "
            "host bytes into it");
  p.inputs = {0};
  p.values[0].tensor.extra_device = 1; // a device tensor the caller binds by pointer
  EXPECT_EQ(access(p), "ok");
}

TEST(CheckDeviceAccessEdges, AnInitialValueThatMethodLoadWritesIntoDeviceMemoryIsRefused) {
  Plan p = device_plan();
  p.values[2].tensor.data_buffer = 3; // et_init_buffer
  EXPECT_EQ(access(p),
            "method 'forward': value 2 is planned on cuda:0 with an initial value in the program's "
            "mutable data (et_init_buffer, data_buffer_idx 3), which method load writes with a host "
            "memcpy");
  p.values[2].tensor.data_buffer = 0;
  p.values[2].tensor.extra_device = 1;
  p.values[2].tensor.location = 1; // EXTERNAL
  p.values[2].tensor.fqn = "layers.0.k_cache";
  EXPECT_EQ(access(p),
            "method 'forward': value 2 is planned on cuda:0 with an initial value in external data "
            "'layers.0.k_cache', which method load reads into it with NamedDataMap::load_data_into");
  // On the host both are fine.
  p.values[1].tensor = p.values[2].tensor;
  p.values[1].tensor.memory_id = 1;
  p.values[1].tensor.data_buffer = 3;
  p.values[2].tensor = {};
  p.values[2].tensor.memory_id = 2;
  EXPECT_EQ(access(p), "ok");
}

// ExecuTorch's getTensorDataPtr reads an unplanned EXTERNAL tensor from the
// named data on the host whatever device its metadata names, and checks
// EXTERNAL before data_buffer_idx for a planned one.
TEST(CheckDeviceAccessEdges, AnUnplannedExternalTensorIsTheHostsAndExternalDataIsNamedFirst) {
  Plan p = device_plan();
  p.values[0].tensor.extra_device = 1;
  p.values[0].tensor.location = 1; // EXTERNAL
  p.values[0].tensor.fqn = "weight";
  p.instructions = {{1, kAdd, 0, {0, 1, 1}}};
  EXPECT_EQ(access(p), "ok");
  p.instructions = {{1, kH2d, 0, {1, 0, 0}}};
  EXPECT_TRUE(has(access(p),
                  "argument 1 (out) (value 0) is a constant of the program, but a host-to-device copy's "
                  "out must be device memory"))
      << access(p);
  p.values[0].tensor.location = 0; // the same metadata, not EXTERNAL: memory given at run time on the device
  p.instructions = {{1, kAdd, 0, {0, 1, 1}}};
  EXPECT_TRUE(has(access(p), "argument 0 (value 0) is given at run time on cuda:0")) << access(p);
  p = device_plan();
  p.values[2].tensor.extra_device = 1;
  p.values[2].tensor.location = 1;
  p.values[2].tensor.fqn = "cache";
  p.values[2].tensor.data_buffer = 3;
  EXPECT_EQ(access(p),
            "method 'forward': value 2 is planned on cuda:0 with an initial value in external data 'cache', which "
            "method load reads into it with NamedDataMap::load_data_into");
}

TEST(CheckDeviceAccessEdges, AJumpOnADeviceConditionAndAMoveAcrossDevicesAreRefused) {
  Plan p = device_plan();
  p.instructions = {{4, 1, 0}, {4, 4, 0}, {4, 0, 0}};
  EXPECT_EQ(access(p), "ok");
  p.instructions = {{4, 2, 0}};
  EXPECT_EQ(access(p),
            "method 'forward', instruction 0:0 (jump_false): its condition (value 2) is planned on "
            "cuda:0, and Method::execute reads a condition's elements on the host");
  p.values[5].tensor.memory_id = 2;
  p.values[5].tag = 5;
  p.instructions = {{3, 2, 5}, {3, 1, 0}};
  EXPECT_EQ(access(p), "ok"); // device to the same device; host to memory given at run time
  for (const auto& [from, to] : std::vector<std::pair<int32_t, int32_t>>{{2, 1}, {1, 2}, {2, 0}, {2, 4}, {3, 5}}) {
    p.instructions = {{5, 0}, {3, from, to}};
    const std::string got = access(p);
    EXPECT_TRUE(has(got, "instruction 0:1 (move): moves value " + std::to_string(from))) << got;
    EXPECT_TRUE(has(got, "so the destination would hold memory of another device than its own")) << got;
  }
  p.buffer_devices = {2, 2};
  p.buffer_device_types = {{1, 0}, {1, 1}};
  p.values[5].tensor.memory_id = 1; // cpu
  p.instructions = {{3, 2, 5}};
  EXPECT_TRUE(has(access(p), "moves value 2 (planned on cuda:0) into value 5 (planned on cpu)")) << access(p);
}

TEST(CheckDeviceAccessEdges, AnIndexOutOfRangeIsCheckProgramIndicessToReport) {
  Plan p = device_plan();
  p.instructions = {{1, kAdd, 0, {2, 6}}};
  EXPECT_EQ(access(p), out_of_range("kernel argument value", 6, 6));
}

TEST(CheckDeviceAccess, SurvivesEveryTruncationBitFlipAndRandomBytes) {
  for (const char* file : {"roundtrip.pte", "add_relu_xnnpack.pte", "linear_relu_linear.pte", "device_input.pte"}) {
    const auto b = read_program(file);
    ASSERT_FALSE(b.empty()) << file;
    for (size_t n = 0; n < b.size(); ++n) {
      // A copy of exactly n bytes, so a read past it is caught by ASan.
      std::vector<uint8_t> cut(b.begin(), b.begin() + n);
      et_copy::FailureReport report;
      const Error e = et_copy::check_device_access(cut.data(), cut.size(), kSimulated, &report);
      EXPECT_TRUE(e == Error::Ok || (e == Error::InvalidProgram && !report.detail.empty())) << file << " cut at " << n;
    }
    for (size_t at = 0; at < b.size(); ++at) {
      for (uint8_t bit : {0x01, 0x80}) {
        auto flipped = b;
        flipped[at] ^= bit;
        et_copy::FailureReport report;
        const Error e = et_copy::check_device_access(flipped.data(), flipped.size(), kSimulated, &report);
        EXPECT_TRUE(e == Error::Ok || (e == Error::InvalidProgram && !report.detail.empty())) << file << " at " << at;
      }
    }
  }
  std::mt19937 rng(13);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> junk(rng() % 256);
    for (auto& x : junk) {
      x = static_cast<uint8_t>(rng());
    }
    (void)et_copy::check_device_access(junk.data(), junk.size(), kSimulated);
  }
  EXPECT_EQ(et_copy::check_device_access(nullptr, 0, kSimulated), Error::InvalidProgram);
}

TEST(CheckDeviceAccess, AHandBuiltPlanSurvivesEveryTruncation) {
  Plan p = device_plan();
  p.values[2].tensor.extra_device = 1;
  p.values[2].tensor.location = 1;
  p.values[2].tensor.fqn = "state";
  p.values[4] = {10, {1, 2}, {}};
  p.inputs = {2};
  p.instructions = {{1, kAdd, 0, {4, 1}}, {2, 0, 0, {2}}, {3, 2, 1}, {4, 2, 0}};
  const auto b = build(p);
  ASSERT_NE(access(b), "ok");
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + n);
    EXPECT_EQ(et_copy::check_device_access(cut.data(), cut.size(), kSimulated), Error::InvalidProgram) << n;
  }
}

// ---- method_io_devices on hand-built plans ----------------------------------

// Each input and output where the program puts it: a planned tensor on its
// buffer's device, an unplanned one where its metadata says (CPU when it has
// none), anything that is no tensor or no value on the CPU.
TEST(MethodIoDevices, AnUnplannedTensorIsWhereItsMetadataSaysAndAPlannedOneWhereItsBufferIs) {
  Plan p = device_plan();
  p.values[0].tensor.extra_device = 1;
  p.values[0].tensor.extra_index = 2;
  p.values[1].tensor.extra_device = 1; // planned on the CPU buffer, whatever its metadata says
  p.inputs = {0, 1, 2, 3, 4};
  p.outputs = {2, -1, 6};
  const auto b = build(p);
  const auto io = et_copy::method_io_devices(b.data(), b.size(), "forward");
  EXPECT_EQ(device_names(io.inputs), (std::vector<std::string>{"cuda:2", "cpu", "cuda:0", "cpu", "cpu"}));
  EXPECT_EQ(device_names(io.outputs), (std::vector<std::string>{"cuda:0", "cpu", "cpu"}));
  p.values[0].tensor.extra_device = -1; // no extra_tensor_info: the CPU
  const auto c = build(p);
  EXPECT_EQ(device_names(et_copy::method_io_devices(c.data(), c.size(), "forward").inputs),
            (std::vector<std::string>{"cpu", "cpu", "cuda:0", "cpu", "cpu"}));
  EXPECT_TRUE(et_copy::method_io_devices(c.data(), c.size(), "forwards").inputs.empty());
}

// An attribute is a tensor whose extra_tensor_info names it (MethodMeta's
// rule): one with no extra_tensor_info, or one with it but no name, is none.
TEST(MethodIoDevices, AttributesAreTheTensorsWhoseMetadataNamesThemInValueOrder) {
  Plan p = device_plan();
  p.values[1].tensor.extra_device = 0;
  p.values[1].tensor.fqn = "weight";
  p.values[2].tensor.extra_device = 0;
  p.values[2].tensor.fqn = "cache";
  p.values[3].tensor.extra_device = 0; // metadata, no name
  const auto b = build(p);
  auto io = et_copy::method_io_devices(b.data(), b.size(), "forward");
  EXPECT_EQ(device_names(io.attributes), (std::vector<std::string>{"cpu", "cuda:0"}));
  p.values[0].tensor.extra_device = 1; // an unplanned named tensor on the device
  p.values[0].tensor.fqn = "given";
  p.values[1].tensor.fqn = "";
  const auto c = build(p);
  io = et_copy::method_io_devices(c.data(), c.size(), "forward");
  EXPECT_EQ(device_names(io.attributes), (std::vector<std::string>{"cuda:0", "cuda:0"}));
}

// An instruction of any kind whose call table is absent is ExecuTorch's to
// refuse at method load: every check passes over it without reading at
// offset 0, and the next instruction is still checked.
TEST(ProgramCheckEdges, AnInstructionWithNoCallTableIsLeftToMethodLoad) {
  for (uint8_t tag : {1, 2, 3, 4, 5}) {
    Plan p = device_plan();
    p.outputs = {1};
    p.instructions = {{tag, 0, 0, {}}, {1, kD2h, 0, {2, 1, 1}}};
    p.instructions[0].no_call = true;
    EXPECT_EQ(check(p), "ok") << int(tag);
    EXPECT_EQ(access(p), "ok") << int(tag);
    const auto b = build(p);
    EXPECT_EQ(op_of(b, 0, 0), "") << int(tag);
    EXPECT_EQ(op_of(b, 0, 1), "et_copy::_d2h_copy.out") << int(tag);
    EXPECT_EQ(filled(b), std::vector<bool>{tag != 4}) << int(tag); // a jump, even with no call, reorders
    p.instructions[1] = {1, kAdd, 0, {2, 2, 2}};                   // what follows it is still checked
    EXPECT_TRUE(has(access(p), "instruction 0:1 (aten::add.out): argument 0 (value 2)")) << int(tag);
    p.instructions[1] = {1, kAdd, 0, {6}};
    EXPECT_EQ(check(p), "execution plan 0: kernel argument value 6 is out of range (6)") << int(tag);
  }
}

// A move between two devices is refused whenever type or index differ; a
// move within one device passes.
TEST(CheckDeviceAccessEdges, AMoveBetweenTwoDevicesIsRefusedWhenEitherTypeOrIndexDiffers) {
  Plan p = device_plan();
  p.buffers = 4;
  p.buffer_devices = {2, 3};
  p.values[5].tag = 5;
  p.values[5].tensor.memory_id = 3;
  p.instructions = {{3, 2, 5}};
  for (const auto& [second, where] : std::vector<std::pair<std::pair<int, int>, std::string>>{
           {{1, 1}, "planned on cuda:1"}, {{2, 0}, "planned on device type 2:0"}, {{1, 0}, ""}}) {
    p.buffer_device_types = {{1, 0}, second};
    EXPECT_EQ(access(p), where.empty()
                             ? "ok"
                             : "method 'forward', instruction 0:0 (move): moves value 2 (planned on cuda:0) "
                               "into value 5 (" +
                                   where + "), so the destination would hold memory of another device than its own")
        << where;
  }
}

// A list's items run from the first to its count: the 4 bytes after the
// items of the last value's list hold the inputs' count, 2, a device
// value, which an item past the count would name.
TEST(CheckDeviceAccessEdges, AListsItemsEndAtItsCount) {
  Plan p = device_plan();
  p.values[5] = {10, {1}, {}};
  p.inputs = {0, 0};
  p.instructions = {{1, kAdd, 0, {5, 1, 1}}};
  EXPECT_EQ(access(p), "ok");
  p.inputs = {0};
  p.values[5].items = {1, 2};
  EXPECT_TRUE(has(access(p), "argument 0 (value 5), item 1 (value 2) is planned on cuda:0")) << access(p);
}

// Without a report to fill, a refusal is still a refusal, however many.
TEST(CheckDeviceAccess, RefusesWithoutAReportToFill) {
  const auto b = read_program("linear_relu_linear.pte"); // nine refusals
  EXPECT_EQ(et_copy::check_device_access(b.data(), b.size(), kSimulated, nullptr), Error::InvalidProgram);
  const auto d = read_program("device_input.pte"); // one
  EXPECT_EQ(et_copy::check_device_access(d.data(), d.size(), kSimulated, nullptr), Error::InvalidProgram);
  const auto ok = read_program("roundtrip.pte");
  EXPECT_EQ(et_copy::check_device_access(ok.data(), ok.size(), kSimulated, nullptr), Error::Ok);
}

// The index check does not follow a Tensor value's table; the device walk
// does: a tensor table outside the file refuses the program there, and
// leaves no places to report.
TEST(CheckDeviceAccess, ATensorTableOutsideTheFileIsAnOffsetOutsideTheFile) {
  Plan p = device_plan();
  p.inputs = {1};
  std::vector<uint8_t> b = build(p);
  ASSERT_EQ(access(b), "ok");
  et_copy_test::Flat f{b};
  const size_t at = f.field(f.element(f.follow(f.field(f.plan(), 2)), 1), 1); // value 1's Tensor offset
  ASSERT_NE(at, 0u);
  const auto past = static_cast<uint32_t>(b.size());
  std::memcpy(b.data() + at, &past, 4);
  EXPECT_EQ(check(p), "ok") << "the index check reads no tensor table";
  EXPECT_EQ(et_copy::check_program_indices(b.data(), b.size()), Error::Ok);
  EXPECT_EQ(access(b), "the program's flatbuffer has an offset outside the file");
  const auto io = et_copy::method_io_devices(b.data(), b.size(), "forward");
  EXPECT_TRUE(io.inputs.empty() && io.outputs.empty() && io.attributes.empty());
}

// Last in this file: an allocator or backend, once registered, stays for the process.
TEST(DeviceBackends, WhoeverServesTheDeviceSaysWhichBackendsRunOnIt) {
  using executorch::runtime::etensor::DeviceType;
  EXPECT_TRUE(et_copy::device_backends().empty()); // nothing serves CUDA yet
  EXPECT_TRUE(et_copy::device_backends(DeviceType::CPU).empty());
  ASSERT_NE(et_copy::use_simulated_device(), et_copy::Registration::kFailed);
  // The list is the registered device backends that run on it (device_backend.h): none yet.
  EXPECT_TRUE(et_copy::device_backends().empty());
  ASSERT_NE(et_copy::register_simulated_device_backend(), et_copy::Registration::kFailed);
  EXPECT_EQ(et_copy::device_backends(), std::vector<std::string>{"SimulatedDeviceBackend"});
  EXPECT_EQ(et_copy::device_backends(DeviceType::CUDA), std::vector<std::string>{"SimulatedDeviceBackend"});
  EXPECT_TRUE(et_copy::device_backends(DeviceType::CPU).empty());
}
