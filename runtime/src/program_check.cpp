// The index checks (check_program_indices, program_check.h): every index an
// execution plan holds, checked against what it indexes before ExecuTorch's
// Method asserts on it.
#include <et_copy/program_check.h>

#include <cstdint>
#include <string>

#include "program_reader.h"

namespace et_copy {

namespace {

using executorch::runtime::Error;
using internal::Reader;
namespace slot = internal::slot;
namespace tag = internal::tag;

struct Walk {
  Reader& r;
  FailureReport* report;
  std::string where;
  uint32_t values = 0;
  Error error = Error::Ok;

  void bad(const std::string& what, int64_t index, uint32_t limit) {
    if (error == Error::Ok) {
      error =
          fail(report, Error::InvalidProgram,
               where + ": " + what + " " + std::to_string(index) + " is out of range (" + std::to_string(limit) + ")");
    }
  }

  void index(const char* what, int64_t i, uint32_t limit) {
    if (i < 0 || i >= static_cast<int64_t>(limit)) {
      bad(what, i, limit);
    }
  }

  // A vector of value indices of element type T. `none_allowed`: -1
  // stands for None (items of an optional tensor list, e.g. index_put's
  // indices for `x[:, i] = v`), as ExecuTorch's loader reads it.
  template <typename T>
  void value_indices(size_t table, int f, const char* what, bool none_allowed = false) {
    const auto [n, at] = r.vector(table, f);
    for (uint32_t i = 0; i < n && error == Error::Ok && !r.failed(); ++i) {
      const auto v = static_cast<int64_t>(r.read<T>(at + sizeof(T) * i));
      if (!(none_allowed && v == -1)) {
        index(what, v, values);
      }
    }
  }

  void plan(size_t p, uint32_t plan_index) {
    where = "execution plan " + std::to_string(plan_index);
    const auto [value_count, values_at] = r.vector(p, slot::kPlanValues);
    values = value_count;
    const uint32_t ops = r.vector(p, slot::kPlanOperators).count;
    const uint32_t delegates = r.vector(p, slot::kPlanDelegates).count;
    const uint32_t buffers = r.vector(p, slot::kPlanBufferSizes).count;
    value_indices<int32_t>(p, slot::kPlanInputs, "method input value");
    value_indices<int32_t>(p, slot::kPlanOutputs, "method output value");
    for (uint32_t v = 0; v < values && error == Error::Ok && !r.failed(); ++v) {
      const size_t e = r.table_at(values_at, v);
      const uint8_t type = r.union_type(e);
      if (type == tag::kIntList || type == tag::kTensorList || type == tag::kOptionalTensorList) {
        const size_t list = r.follow(r.field(e, slot::kUnionValue));
        if (list != 0 && type == tag::kIntList) {
          value_indices<int64_t>(list, 0, "list item value");
        } else if (list != 0) {
          value_indices<int32_t>(list, 0, "list item value", type == tag::kOptionalTensorList);
        }
      }
    }
    const auto [devices, devices_at] = r.vector(p, slot::kPlanBufferDevices);
    for (uint32_t d = 0; d < devices && error == Error::Ok && !r.failed(); ++d) {
      const size_t entry = r.table_at(devices_at, d);
      index("planned buffer of a device entry", r.scalar<int32_t>(entry, slot::kBufferDeviceIdx), buffers);
    }
    const auto [chains, chains_at] = r.vector(p, slot::kPlanChains);
    for (uint32_t c = 0; c < chains && error == Error::Ok && !r.failed(); ++c) {
      const size_t chain = r.table_at(chains_at, c);
      value_indices<int32_t>(chain, slot::kChainInputs, "chain input value");
      value_indices<int32_t>(chain, slot::kChainOutputs, "chain output value");
      const auto [n, instr_at] = r.vector(chain, slot::kChainInstructions);
      for (uint32_t i = 0; i < n && error == Error::Ok && !r.failed(); ++i) {
        instruction(r.table_at(instr_at, i), ops, delegates, n);
      }
    }
  }

  void instruction(size_t instr, uint32_t ops, uint32_t delegates, uint32_t instructions) {
    const uint8_t type = r.union_type(instr);
    const size_t call = r.follow(r.field(instr, slot::kUnionValue));
    if (call == 0) {
      return; // no arguments: ExecuTorch rejects the instruction itself
    }
    switch (type) {
      case tag::kKernelCall:
        index("operator", r.int_field(call, slot::kFirst), ops);
        value_indices<int32_t>(call, slot::kSecond, "kernel argument value");
        break;
      case tag::kDelegateCall:
        index("delegate", r.int_field(call, slot::kFirst), delegates);
        value_indices<int32_t>(call, slot::kSecond, "delegate argument value");
        break;
      case tag::kMoveCall:
        index("move source value", r.int_field(call, slot::kFirst), values);
        index("move destination value", r.int_field(call, slot::kSecond), values);
        break;
      case tag::kJumpFalseCall:
        index("jump condition value", r.int_field(call, slot::kFirst), values);
        index("jump destination instruction", r.int_field(call, slot::kSecond), instructions);
        break;
      case tag::kFreeCall:
        index("freed value", r.int_field(call, slot::kFirst), values);
        break;
      default:
        break;
    }
  }
};

} // namespace

Error check_program_indices(const void* data, size_t size, FailureReport* report) {
  Reader r(data, size);
  Walk walk{r, report, {}};
  const auto [plans, plans_at] = r.plans();
  for (uint32_t i = 0; i < plans && walk.error == Error::Ok && !r.failed(); ++i) {
    walk.plan(r.table_at(plans_at, i), i);
  }
  if (walk.error == Error::Ok && r.failed()) {
    return fail(report, Error::InvalidProgram, "the program's flatbuffer has an offset outside the file");
  }
  return walk.error;
}

} // namespace et_copy
