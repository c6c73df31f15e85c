// The d2h analysis (outputs_filled_by_d2h_copy, program_check.h): which
// outputs a method fills with a device-to-host copy before anything reads
// them, so a runtime may let that copy write into the caller's tensor.
#include <et_copy/program_check.h>

#include <cstdint>
#include <string>
#include <vector>

#include "program_reader.h"

namespace et_copy {

namespace {

using internal::Reader;
namespace slot = internal::slot;
namespace tag = internal::tag;

std::vector<bool> filled_by_d2h(Reader& r, size_t plan) {
  std::vector<int64_t> outputs, inputs, listed;
  r.append_values(plan, slot::kPlanOutputs, &outputs);
  r.append_values(plan, slot::kPlanInputs, &inputs);
  const auto [values, values_at] = r.vector(plan, slot::kPlanValues);
  for (uint32_t v = 0; v < values && !r.failed(); ++v) {
    const size_t e = r.table_at(values_at, v);
    const uint8_t type = r.union_type(e);
    if (type == tag::kTensorList || type == tag::kOptionalTensorList) {
      const size_t list = r.follow(r.field(e, slot::kUnionValue));
      if (list != 0) {
        r.append_values(list, 0, &listed);
      }
    }
  }
  std::vector<bool> filled(outputs.size(), false);
  const auto [chains, chains_at] = r.vector(plan, slot::kPlanChains);
  if (chains != 1) {
    return filled;
  }
  const auto [n, instr_at] = r.vector(r.table_at(chains_at, 0), slot::kChainInstructions);
  // The first instruction naming each value, and whether it is a d2h copy into it.
  std::vector<int8_t> first(outputs.size(), -1); // -1: not yet named; 0: named otherwise; 1: by a d2h out
  auto seen = [&](int64_t value, bool d2h_out) {
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (outputs[o] == value && first[o] < 0) {
        first[o] = d2h_out ? 1 : 0;
      }
    }
  };
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    const size_t instr = r.table_at(instr_at, i);
    const uint8_t type = r.union_type(instr);
    const size_t call = r.follow(r.field(instr, slot::kUnionValue));
    if (type == tag::kJumpFalseCall) {
      return filled; // the order instructions run in is not the order they are listed in
    }
    if (call == 0) {
      continue;
    }
    if (type == tag::kKernelCall || type == tag::kDelegateCall) {
      std::vector<int64_t> args;
      r.append_values(call, slot::kSecond, &args);
      const bool d2h =
          type == tag::kKernelCall && args.size() >= 2 && r.call_name(plan, instr) == "et_copy::_d2h_copy.out";
      // [self, out, the returned out]: self is seen first, so a copy of a value into itself reads it first.
      for (size_t a = 0; a < args.size(); ++a) {
        seen(args[a], d2h && a >= 1 && args[a] == args[1]);
      }
    } else if (type == tag::kMoveCall) {
      seen(r.int_field(call, slot::kFirst), false);
      seen(r.int_field(call, slot::kSecond), false);
    } else if (type == tag::kFreeCall) {
      seen(r.int_field(call, slot::kFirst), false);
    }
  }
  if (r.failed()) {
    return std::vector<bool>(outputs.size(), false);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const auto named = [&](const std::vector<int64_t>& vs) {
      for (int64_t v : vs) {
        if (v == outputs[o]) {
          return true;
        }
      }
      return false;
    };
    filled[o] = first[o] == 1 && !named(inputs) && !named(listed);
  }
  return filled;
}

} // namespace

std::vector<bool> outputs_filled_by_d2h_copy(const void* data, size_t size, const char* method_name) {
  if (data == nullptr || method_name == nullptr) {
    return {};
  }
  Reader r(data, size);
  const size_t plan = r.find_plan(method_name);
  if (plan == 0) {
    return {};
  }
  std::vector<bool> filled = filled_by_d2h(r, plan);
  return r.failed() ? std::vector<bool>() : filled;
}

} // namespace et_copy
