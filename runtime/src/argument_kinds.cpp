#include <et_copy/argument_kinds.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include <et_copy/delegate_record.h>
#include <et_copy/program_check.h>

#include "argument_kinds_table.h"
#include "program_reader.h"

namespace et_copy {

namespace {

using executorch::runtime::Error;
using internal::OperatorKinds;

using internal::Reader;
using namespace internal::slot; // NOLINT(google-build-using-namespace): the schema's field slots

constexpr uint8_t kLocationSegment = 1; // DataLocation::SEGMENT
// The extended header, after the root offset and file identifier: magic
// "eh00", its length, the flatbuffer's size, then where segments start.
constexpr size_t kHeaderAt = 8, kHeaderSegmentBase = kHeaderAt + 16;
// A nested program may itself hold delegates; nesting deeper than this is refused.
constexpr int kMaxNesting = 4;
constexpr int kCallOperator = kFirst, kCallArguments = kSecond; // KernelCall.op_index, .args
constexpr uint8_t kKernelCall = internal::tag::kKernelCall;
// KernelTypes: Null 1, Int 2, Bool 3, Double 4, Tensor 5, String 6, IntList 7,
// DoubleList 8, BoolList 9, TensorList 10, OptionalTensorList 11.
constexpr uint8_t kNull = 1, kInt = 2, kTensor = 5, kIntList = 7, kTensorList = 10, kOptionalTensorList = 11;
constexpr uint16_t kAny = 0xffff;

const char* kind_name(uint8_t tag) {
  static const char* const names[] = {"no value",     "None",       "an Int",       "a Bool",
                                      "a Double",     "a Tensor",   "a String",     "an IntList",
                                      "a DoubleList", "a BoolList", "a TensorList", "an OptionalTensorList"};
  return tag < sizeof(names) / sizeof(names[0]) ? names[tag] : "a value of unknown kind";
}

} // namespace

std::string internal::kinds_text(uint16_t kinds) {
  std::string s;
  for (uint8_t tag = 1; tag <= kOptionalTensorList; ++tag) {
    if ((kinds & (1u << tag)) != 0) {
      s += (s.empty() ? "" : " or ") + std::string(kind_name(tag));
    }
  }
  return s;
}

namespace {

const OperatorKinds* find_operator(const std::string& name) {
  const auto table = internal::operator_kinds_table();
  const OperatorKinds* end = table.data() + table.size();
  const OperatorKinds* it = std::lower_bound(
      table.data(), end, name,
      [](const OperatorKinds& op, const std::string& n) { return std::strcmp(op.name, n.c_str()) < 0; });
  return it != end && name == it->name ? it : nullptr;
}

Error check_program(const void* data, size_t size, const std::string& program, FailureReport* report, int depth);

struct Walk {
  Reader& r;
  std::string prefix; // "<program>: method '<name>'"
  FailureReport* report;
  int depth;
  Error error = Error::Ok;
  size_t values_at = 0;
  uint32_t values = 0;

  void refuse(const std::string& why) {
    if (error == Error::Ok) {
      error = fail(report, Error::InvalidProgram, prefix + ", " + why);
    }
  }

  uint8_t tag_of(int64_t v) {
    return r.union_type(r.table_at(values_at, static_cast<uint32_t>(v)));
  }

  bool in_range(int64_t v) const {
    return v >= 0 && v < static_cast<int64_t>(values);
  }

  // The items of every list value must be what ExecuTorch's list accessors read.
  void lists() {
    for (uint32_t v = 0; v < values && error == Error::Ok && !r.failed(); ++v) {
      const uint8_t tag = tag_of(v);
      if (tag != kIntList && tag != kTensorList && tag != kOptionalTensorList) {
        continue;
      }
      const size_t list = r.follow(r.field(r.table_at(values_at, v), kUnionValue));
      const auto [n, at] = list == 0 ? Reader::Vector{} : r.vector(list, kListItems);
      for (uint32_t i = 0; i < n && error == Error::Ok && !r.failed(); ++i) {
        const int64_t item = tag == kIntList ? r.read<int64_t>(at + 8 * static_cast<size_t>(i))
                                             : r.read<int32_t>(at + 4 * static_cast<size_t>(i));
        if (r.failed() || !in_range(item)) {
          continue; // cut short, or -1 (None) in an optional tensor list; anything else check_program_indices reports
        }
        const uint8_t found = tag_of(item);
        const uint8_t want = tag == kIntList ? kInt : kTensor;
        if (found != want && !(tag == kOptionalTensorList && found == kNull)) {
          refuse("value " + std::to_string(v) + " (" + kind_name(tag) + ") item " + std::to_string(i) + " is value " +
                 std::to_string(item) + ", " + kind_name(found) + ", not " +
                 (tag == kOptionalTensorList ? "a Tensor or None" : kind_name(want)));
        }
      }
    }
  }

  void kernel_call(size_t plan, size_t call, size_t chain, uint32_t index) {
    const auto [ops, ops_at] = r.vector(plan, kPlanOperators);
    const int64_t op_index = r.int_field(call, kCallOperator);
    if (op_index < 0 || op_index >= static_cast<int64_t>(ops)) {
      return;
    }
    const size_t entry = r.table_at(ops_at, static_cast<uint32_t>(op_index));
    std::string name = r.string(entry, kOperatorName);
    const std::string overload = r.string(entry, kOperatorOverload);
    if (!overload.empty()) {
      name += "." + overload;
    }
    const OperatorKinds* op = find_operator(name);
    if (op == nullptr) {
      return; // not in the table: cannot check
    }
    const std::string where =
        "instruction " + std::to_string(chain) + ":" + std::to_string(index) + ", operator " + name;
    const auto [n, args_at] = r.vector(call, kCallArguments);
    if (n != op->arguments && !(op->results == 0 && n == op->schema_arguments)) {
      refuse(where + ": the call has " + std::to_string(n) + " arguments; the schema takes " +
             std::to_string(op->schema_arguments) +
             (op->results > 0 ? " and a result slot" : " and maybe a result slot"));
      return;
    }
    const internal::ArgumentKinds* kinds = internal::argument_kinds_of(*op);
    for (uint32_t i = 0; i < n && error == Error::Ok && !r.failed(); ++i) {
      const int64_t v = r.read<int32_t>(args_at + 4 * static_cast<size_t>(i));
      if (r.failed() || kinds[i].kinds == kAny || !in_range(v)) {
        continue; // cut short: the refusal is the offset outside the file, not the kind of what read as 0
      }
      const uint8_t found = tag_of(v);
      if (found >= 16 || (kinds[i].kinds & (1u << found)) == 0) {
        refuse(where + ": argument " + std::to_string(i) + " '" + kinds[i].name + "' is value " + std::to_string(v) +
               ", " + kind_name(found) + "; the schema takes " + internal::kinds_text(kinds[i].kinds));
      }
    }
  }

  // Where delegate `d`'s processed bytes are in the file (nullptr when its
  // reference leads outside it).
  const uint8_t* processed(size_t d_entry, size_t* n) {
    const size_t ref = r.follow(r.field(d_entry, kDelegateProcessed));
    if (ref == 0) {
      return nullptr;
    }
    const uint8_t location = r.scalar<uint8_t>(ref, kReferenceLocation);
    const uint32_t index = r.scalar<uint32_t>(ref, kReferenceIndex);
    const size_t root = r.root();
    if (location == kLocationSegment) {
      const auto [segments, at] = r.vector(root, kProgramSegments);
      if (index >= segments || r.bytes(kHeaderAt, 4) == nullptr || std::memcmp(r.bytes(kHeaderAt, 4), "eh00", 4) != 0) {
        return nullptr;
      }
      const size_t segment = r.table_at(at, index);
      const uint64_t base = r.read<uint64_t>(kHeaderSegmentBase);
      const uint64_t offset = r.scalar<uint64_t>(segment, kSegmentOffset);
      const uint64_t nbytes = r.scalar<uint64_t>(segment, kSegmentSize);
      if (base > r.size() || !internal::range_within(offset, nbytes, r.size() - base)) {
        return nullptr;
      }
      *n = static_cast<size_t>(nbytes);
      return r.bytes(static_cast<size_t>(base + offset), *n);
    }
    const auto [inline_data, at] = r.vector(root, kProgramInlineData);
    if (index >= inline_data) {
      return nullptr;
    }
    const auto [count, data_at] = r.vector(r.table_at(at, index), kInlineData);
    *n = count;
    return data_at == 0 ? nullptr : r.bytes(data_at, *n);
  }

  // The nested program of every delegate whose processed bytes are an
  // et-copy delegate record whose payload kind says its payload is an
  // ExecuTorch program (SimulatedDeviceBackend's, which it loads at init):
  // its indices, then its argument kinds.
  void nested_programs(size_t p, const std::string& method) {
    const auto [n, at] = r.vector(p, kPlanDelegates);
    for (uint32_t d = 0; d < n && error == Error::Ok && !r.failed(); ++d) {
      size_t nbytes = 0;
      const uint8_t* bytes = processed(r.table_at(at, d), &nbytes);
      if (bytes == nullptr) {
        continue; // ExecuTorch refuses a delegate whose data it cannot find
      }
      auto record = parse_delegate_record(bytes, nbytes);
      if (!record.ok() || !record->payload_is_program) {
        continue; // not ours, or no nested program: the backend's init judges it
      }
      const std::string name = "nested program of delegate " + std::to_string(d) + " in method '" + method + "'";
      if (depth >= kMaxNesting) {
        error =
            fail(report, Error::InvalidProgram, name + ": nested more than " + std::to_string(kMaxNesting) + " deep");
        return;
      }
      FailureReport why;
      Error e = check_program_indices(record->payload, record->payload_nbytes, &why);
      if (e != Error::Ok) {
        why.detail = name + ": " + why.detail;
      } else {
        e = check_program(record->payload, record->payload_nbytes, name, &why, depth + 1);
      }
      if (e != Error::Ok) {
        error = fail(report, e, std::move(why.detail));
      }
    }
  }

  void plan(size_t p) {
    const std::string method = r.string(p, kPlanName);
    prefix += "method '" + method + "'";
    const Reader::Vector all = r.vector(p, kPlanValues);
    values = all.count;
    values_at = all.elements;
    lists();
    const auto [chains, chains_at] = r.vector(p, kPlanChains);
    for (uint32_t c = 0; c < chains && error == Error::Ok && !r.failed(); ++c) {
      const auto [n, instr_at] = r.vector(r.table_at(chains_at, c), kChainInstructions);
      for (uint32_t i = 0; i < n && error == Error::Ok && !r.failed(); ++i) {
        const size_t instr = r.table_at(instr_at, i);
        if (r.union_type(instr) == kKernelCall) {
          const size_t call = r.follow(r.field(instr, kUnionValue));
          if (call != 0) {
            kernel_call(p, call, c, i);
          }
        }
      }
    }
    if (error == Error::Ok && !r.failed()) {
      nested_programs(p, method);
    }
  }
};

} // namespace

namespace {

Error check_program(const void* data, size_t size, const std::string& program, FailureReport* report, int depth) {
  Reader r(data, size);
  const auto [plans, plans_at] = r.plans();
  for (uint32_t i = 0; i < plans && !r.failed(); ++i) {
    Walk walk{r, program.empty() ? std::string() : program + ": ", report, depth};
    walk.plan(r.table_at(plans_at, i));
    if (walk.error != Error::Ok) {
      return walk.error;
    }
  }
  if (r.failed()) {
    return fail(
        report, Error::InvalidProgram,
        (program.empty() ? std::string() : program + ": ") + "the program's flatbuffer has an offset outside the file");
  }
  return Error::Ok;
}

} // namespace

Error check_argument_kinds(const void* data, size_t size, const std::string& program, FailureReport* report) {
  return check_program(data, size, program, report, 0);
}

size_t argument_kinds_operator_count() {
  return internal::operator_kinds_table().size();
}

bool has_argument_kinds(const std::string& name) {
  return find_operator(name) != nullptr;
}

} // namespace et_copy
