#include <et_copy/program_check.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace et_copy {

namespace {

using executorch::runtime::Error;

// Field slots and union tags, from executorch's schema/program.fbs (a union
// takes two slots: its type, then its value).
namespace slot {
constexpr int kProgramPlans = 1;
constexpr int kPlanName = 0, kPlanValues = 2, kPlanInputs = 3, kPlanOutputs = 4, kPlanChains = 5, kPlanOperators = 6,
              kPlanDelegates = 7, kPlanBufferSizes = 8, kPlanBufferDevices = 9;
constexpr int kChainInputs = 0, kChainOutputs = 1, kChainInstructions = 2;
constexpr int kUnionType = 0, kUnionValue = 1; // EValue.val, Instruction.instr_args
constexpr int kFirst = 0, kSecond = 1;         // the two fields of a call table, e.g. op_index, args
constexpr int kOperatorName = 0, kOperatorOverload = 1, kDelegateId = 0;
} // namespace slot

namespace tag {
constexpr uint8_t kIntList = 7, kTensorList = 10, kOptionalTensorList = 11;
constexpr uint8_t kKernelCall = 1, kDelegateCall = 2, kMoveCall = 3, kJumpFalseCall = 4, kFreeCall = 5;
} // namespace tag

// A bounds-checked flatbuffer reader: a bad offset marks it failed and
// reads as zero, so the walk ends without touching memory outside `data`.
class Reader {
 public:
  Reader(const void* data, size_t size) : p_(static_cast<const uint8_t*>(data)), n_(size) {}
  bool failed() const {
    return failed_;
  }

  template <typename T>
  T read(size_t at) {
    T v{};
    if (at > n_ || sizeof(T) > n_ - at) {
      failed_ = true;
      return v;
    }
    std::memcpy(&v, p_ + at, sizeof(T));
    return v;
  }

  // Where `field` of the table at `table` is, or 0 when it is absent.
  size_t field(size_t table, int field) {
    const int64_t vtable = static_cast<int64_t>(table) - read<int32_t>(table);
    if (failed_ || vtable < 0) {
      failed_ = true;
      return 0;
    }
    const auto vt = static_cast<size_t>(vtable);
    const uint16_t vsize = read<uint16_t>(vt);
    const size_t entry = 4 + 2 * static_cast<size_t>(field);
    if (failed_ || entry + 2 > vsize) {
      return 0;
    }
    const uint16_t off = read<uint16_t>(vt + entry);
    return off == 0 ? 0 : table + off;
  }

  // Follows the offset stored at `at` (0 stays 0: an absent field).
  size_t follow(size_t at) {
    return at == 0 ? 0 : at + read<uint32_t>(at);
  }

  // A vector field: its element count, and where its elements start.
  uint32_t vector(size_t table, int f, size_t* elements) {
    const size_t v = follow(field(table, f));
    if (v == 0) {
      *elements = 0;
      return 0;
    }
    const uint32_t count = read<uint32_t>(v);
    *elements = v + 4;
    if (count > n_) { // more elements than bytes: corrupt
      failed_ = true;
      return 0;
    }
    return count;
  }

  // The i-th table of a vector of tables starting at `elements`.
  size_t table_at(size_t elements, uint32_t i) {
    return follow(elements + 4 * static_cast<size_t>(i));
  }

  // An int field (absent: the schema default, 0).
  int64_t int_field(size_t table, int f) {
    const size_t at = field(table, f);
    return at == 0 ? 0 : read<int32_t>(at);
  }

  // A string field up to its first NUL, as ExecuTorch's c_str() reads it
  // ("" when absent).
  std::string string(size_t table, int f) {
    const size_t s = follow(field(table, f));
    if (s == 0) {
      return {};
    }
    const uint32_t length = read<uint32_t>(s);
    if (failed_ || length > n_ - (s + 4)) { // the read succeeded, so s + 4 <= n_
      failed_ = true;
      return {};
    }
    const char* chars = reinterpret_cast<const char*>(p_ + s + 4);
    return std::string(chars, strnlen(chars, length));
  }

 private:
  const uint8_t* p_;
  size_t n_;
  bool failed_ = false;
};

struct Walk {
  Reader& r;
  std::string* message;
  std::string where;
  uint32_t values = 0;
  Error error = Error::Ok;

  void bad(const std::string& what, int64_t index, uint32_t limit) {
    if (error == Error::Ok) {
      error = Error::InvalidProgram;
      if (message != nullptr) {
        *message =
            where + ": " + what + " " + std::to_string(index) + " is out of range (" + std::to_string(limit) + ")";
      }
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
    size_t at = 0;
    const uint32_t n = r.vector(table, f, &at);
    for (uint32_t i = 0; i < n && error == Error::Ok && !r.failed(); ++i) {
      const auto v = static_cast<int64_t>(r.read<T>(at + sizeof(T) * i));
      if (!(none_allowed && v == -1)) {
        index(what, v, values);
      }
    }
  }

  void plan(size_t p, uint32_t plan_index) {
    where = "execution plan " + std::to_string(plan_index);
    size_t values_at = 0, ops_at = 0, delegates_at = 0, sizes_at = 0;
    values = r.vector(p, slot::kPlanValues, &values_at);
    const uint32_t ops = r.vector(p, slot::kPlanOperators, &ops_at);
    const uint32_t delegates = r.vector(p, slot::kPlanDelegates, &delegates_at);
    const uint32_t buffers = r.vector(p, slot::kPlanBufferSizes, &sizes_at);
    value_indices<int32_t>(p, slot::kPlanInputs, "method input value");
    value_indices<int32_t>(p, slot::kPlanOutputs, "method output value");
    for (uint32_t v = 0; v < values && error == Error::Ok && !r.failed(); ++v) {
      const size_t e = r.table_at(values_at, v);
      const uint8_t type = r.read<uint8_t>(r.field(e, slot::kUnionType));
      if (type == tag::kIntList || type == tag::kTensorList || type == tag::kOptionalTensorList) {
        const size_t list = r.follow(r.field(e, slot::kUnionValue));
        if (list != 0 && type == tag::kIntList) {
          value_indices<int64_t>(list, 0, "list item value");
        } else if (list != 0) {
          value_indices<int32_t>(list, 0, "list item value", type == tag::kOptionalTensorList);
        }
      }
    }
    size_t devices_at = 0;
    const uint32_t devices = r.vector(p, slot::kPlanBufferDevices, &devices_at);
    for (uint32_t d = 0; d < devices && error == Error::Ok && !r.failed(); ++d) {
      const size_t entry = r.table_at(devices_at, d);
      const size_t at = r.field(entry, 0);
      index("planned buffer of a device entry", at == 0 ? 0 : r.read<int32_t>(at), buffers);
    }
    size_t chains_at = 0;
    const uint32_t chains = r.vector(p, slot::kPlanChains, &chains_at);
    for (uint32_t c = 0; c < chains && error == Error::Ok && !r.failed(); ++c) {
      const size_t chain = r.table_at(chains_at, c);
      value_indices<int32_t>(chain, slot::kChainInputs, "chain input value");
      value_indices<int32_t>(chain, slot::kChainOutputs, "chain output value");
      size_t instr_at = 0;
      const uint32_t n = r.vector(chain, slot::kChainInstructions, &instr_at);
      for (uint32_t i = 0; i < n && error == Error::Ok && !r.failed(); ++i) {
        instruction(r.table_at(instr_at, i), ops, delegates, n);
      }
    }
  }

  void instruction(size_t instr, uint32_t ops, uint32_t delegates, uint32_t instructions) {
    const uint8_t type = r.read<uint8_t>(r.field(instr, slot::kUnionType));
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

Error check_program_indices(const void* data, size_t size, std::string* message) {
  Reader r(data, size);
  Walk walk{r, message, {}};
  const size_t root = r.read<uint32_t>(0); // the root table offset, from the start
  size_t plans_at = 0;
  const uint32_t plans = r.vector(root, slot::kProgramPlans, &plans_at);
  for (uint32_t i = 0; i < plans && walk.error == Error::Ok && !r.failed(); ++i) {
    walk.plan(r.table_at(plans_at, i), i);
  }
  if (walk.error == Error::Ok && r.failed()) {
    if (message != nullptr) {
      *message = "the program's flatbuffer has an offset outside the file";
    }
    return Error::InvalidProgram;
  }
  return walk.error;
}

namespace {

// The first execution plan named `method_name`, as ExecuTorch picks it; 0
// when there is none.
size_t find_plan(Reader& r, const char* method_name) {
  const size_t root = r.read<uint32_t>(0);
  size_t plans_at = 0;
  const uint32_t plans = r.vector(root, slot::kProgramPlans, &plans_at);
  for (uint32_t p = 0; p < plans && !r.failed(); ++p) {
    const size_t plan = r.table_at(plans_at, p);
    if (r.string(plan, slot::kPlanName) == method_name) {
      return r.failed() ? 0 : plan;
    }
  }
  return 0;
}

// What the instruction at `instr` of `plan` calls (instruction_operator).
std::string call_name(Reader& r, size_t plan, size_t instr) {
  const size_t type_at = r.field(instr, slot::kUnionType);
  const uint8_t type = type_at == 0 ? 0 : r.read<uint8_t>(type_at); // absent: NONE
  const size_t call = r.follow(r.field(instr, slot::kUnionValue));
  if (call == 0 || (type != tag::kKernelCall && type != tag::kDelegateCall)) {
    return {};
  }
  const int64_t index = r.int_field(call, slot::kFirst);
  size_t at = 0;
  const uint32_t n = r.vector(plan, type == tag::kKernelCall ? slot::kPlanOperators : slot::kPlanDelegates, &at);
  if (index < 0 || index >= static_cast<int64_t>(n)) {
    return {};
  }
  const size_t entry = r.table_at(at, static_cast<uint32_t>(index));
  if (type == tag::kDelegateCall) {
    const std::string id = r.string(entry, slot::kDelegateId);
    return id.empty() ? std::string() : "delegate:" + id;
  }
  // As Method::resolve_operator names it for the kernel registry.
  const std::string name = r.string(entry, slot::kOperatorName);
  const std::string overload = r.string(entry, slot::kOperatorOverload);
  return name.empty() || overload.empty() ? name : name + "." + overload;
}

} // namespace

std::string instruction_operator(const void* data, size_t size, const char* method_name, size_t chain,
                                 size_t instruction) {
  if (data == nullptr || method_name == nullptr) {
    return {};
  }
  Reader r(data, size);
  const size_t plan = find_plan(r, method_name);
  if (plan == 0) {
    return {};
  }
  size_t chains_at = 0;
  const uint32_t chains = r.vector(plan, slot::kPlanChains, &chains_at);
  if (chain >= chains) {
    return {};
  }
  size_t instr_at = 0;
  const uint32_t n = r.vector(r.table_at(chains_at, static_cast<uint32_t>(chain)), slot::kChainInstructions, &instr_at);
  if (instruction >= n) {
    return {};
  }
  std::string name = call_name(r, plan, r.table_at(instr_at, static_cast<uint32_t>(instruction)));
  // A read outside the bytes read as zeros on the way: trust nothing found.
  return r.failed() ? std::string() : name;
}

namespace {

// The value indices (int32) of vector field `f` of `table`, appended to `out`.
void append_values(Reader& r, size_t table, int f, std::vector<int64_t>* out) {
  size_t at = 0;
  const uint32_t n = r.vector(table, f, &at);
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    out->push_back(r.read<int32_t>(at + 4 * static_cast<size_t>(i)));
  }
}

std::vector<bool> filled_by_d2h(Reader& r, size_t plan) {
  std::vector<int64_t> outputs, inputs, listed;
  append_values(r, plan, slot::kPlanOutputs, &outputs);
  append_values(r, plan, slot::kPlanInputs, &inputs);
  size_t values_at = 0;
  const uint32_t values = r.vector(plan, slot::kPlanValues, &values_at);
  for (uint32_t v = 0; v < values && !r.failed(); ++v) {
    const size_t e = r.table_at(values_at, v);
    const size_t type_at = r.field(e, slot::kUnionType);
    const uint8_t type = type_at == 0 ? 0 : r.read<uint8_t>(type_at);
    if (type == tag::kTensorList || type == tag::kOptionalTensorList) {
      const size_t list = r.follow(r.field(e, slot::kUnionValue));
      if (list != 0) {
        append_values(r, list, 0, &listed);
      }
    }
  }
  std::vector<bool> filled(outputs.size(), false);
  size_t chains_at = 0;
  if (r.vector(plan, slot::kPlanChains, &chains_at) != 1) {
    return filled;
  }
  size_t instr_at = 0;
  const uint32_t n = r.vector(r.table_at(chains_at, 0), slot::kChainInstructions, &instr_at);
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
    const size_t type_at = r.field(instr, slot::kUnionType);
    const uint8_t type = type_at == 0 ? 0 : r.read<uint8_t>(type_at);
    const size_t call = r.follow(r.field(instr, slot::kUnionValue));
    if (type == tag::kJumpFalseCall) {
      return filled; // the order instructions run in is not the order they are listed in
    }
    if (call == 0) {
      continue;
    }
    if (type == tag::kKernelCall || type == tag::kDelegateCall) {
      std::vector<int64_t> args;
      append_values(r, call, slot::kSecond, &args);
      const bool d2h =
          type == tag::kKernelCall && args.size() >= 2 && call_name(r, plan, instr) == "et_copy::_d2h_copy.out";
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
  const size_t plan = find_plan(r, method_name);
  if (plan == 0) {
    return {};
  }
  std::vector<bool> filled = filled_by_d2h(r, plan);
  return r.failed() ? std::vector<bool>() : filled;
}

} // namespace et_copy
