#include <et_copy/program_check.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include <et_copy/counting_device_allocator.h>
#include <et_copy/device_backend.h>
#include <et_copy/failure_report.h>

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
constexpr int kTensorDataBufferIdx = 5, kTensorAllocationInfo = 6, kTensorExtraInfo = 9;
constexpr int kAllocationMemoryId = 0;
constexpr int kExtraFullyQualifiedName = 1, kExtraLocation = 2, kExtraDeviceType = 3, kExtraDeviceIndex = 4;
constexpr int kBufferDeviceIdx = 0, kBufferDeviceType = 1, kBufferDeviceIndex = 2;
} // namespace slot

namespace tag {
constexpr uint8_t kTensor = 5, kIntList = 7, kTensorList = 10, kOptionalTensorList = 11;
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

namespace {

using executorch::runtime::etensor::DeviceType;

constexpr uint8_t kExternalLocation = 1; // TensorDataLocation::EXTERNAL
constexpr const char* kH2dCopy = "et_copy::_h2d_copy.out";
constexpr const char* kD2hCopy = "et_copy::_d2h_copy.out";

// Where a value's memory is, as far as the program says.
struct Place {
  enum Kind : uint8_t {
    kNotTensor, // no memory of its own (or not a readable Tensor)
    kRuntime,   // an unplanned tensor whose memory the caller gives, on the host as far as it says
    kHost,      // planned on the CPU, or a constant of the program
    kDevice,    // planned on a device, or given at run time with a device in its metadata
  };
  Kind kind = kNotTensor;
  bool planned = false;
  int type = 0; // DeviceType, as the program stores it
  int index = 0;
  // A device tensor whose initial value method load writes with the host:
  // "" when none, else where the value comes from.
  std::string written_at_load;

  bool device() const {
    return kind == kDevice;
  }
  bool same(const Place& o) const {
    return kind == o.kind && (kind != kDevice || (type == o.type && index == o.index));
  }
  std::string device_name() const {
    return et_copy::device_name(type, index);
  }
  // "planned on cuda:0", "a constant of the program"...
  std::string where() const {
    switch (kind) {
      case kDevice:
        return (planned ? "planned on " : "given at run time on ") + device_name();
      case kHost:
        return planned ? "planned on " + device_name() : "a constant of the program";
      case kRuntime:
        return "given at run time";
      default:
        return "not a tensor";
    }
  }
};

struct DeviceWalk {
  Reader& r;
  const std::vector<std::string>& allowed;
  std::string* message;
  std::string method;
  std::vector<Place> places;
  size_t refusals = 0;

  void refuse(const std::string& what) {
    if (refusals++ == 0 && message != nullptr) {
      *message = what;
    }
  }

  uint8_t byte_field(size_t table, int f, uint8_t absent) {
    const size_t at = r.field(table, f);
    return at == 0 ? absent : r.read<uint8_t>(at);
  }
  uint32_t uint_field(size_t table, int f) {
    const size_t at = r.field(table, f);
    return at == 0 ? 0 : r.read<uint32_t>(at);
  }

  // The place of every value of `plan`, read once.
  void read_places(size_t plan) {
    // The device of each planned buffer: the first entry naming it, as
    // MethodMeta::memory_planned_buffer_device finds it; CPU when none does.
    struct Entry {
      int32_t buffer;
      int type, index;
    };
    std::vector<Entry> entries;
    size_t devices_at = 0;
    const uint32_t devices = r.vector(plan, slot::kPlanBufferDevices, &devices_at);
    for (uint32_t d = 0; d < devices && !r.failed(); ++d) {
      const size_t e = r.table_at(devices_at, d);
      const size_t at = r.field(e, slot::kBufferDeviceIdx);
      entries.push_back({at == 0 ? 0 : r.read<int32_t>(at),
                         static_cast<int8_t>(byte_field(e, slot::kBufferDeviceType, 0)),
                         static_cast<int8_t>(byte_field(e, slot::kBufferDeviceIndex, 0))});
    }
    size_t values_at = 0;
    const uint32_t values = r.vector(plan, slot::kPlanValues, &values_at);
    places.assign(values, Place{});
    for (uint32_t v = 0; v < values && !r.failed(); ++v) {
      const size_t e = r.table_at(values_at, v);
      const size_t type_at = r.field(e, slot::kUnionType);
      const size_t t = r.follow(r.field(e, slot::kUnionValue));
      if (type_at == 0 || r.read<uint8_t>(type_at) != tag::kTensor || t == 0) {
        continue;
      }
      Place& p = places[v];
      const size_t allocation = r.follow(r.field(t, slot::kTensorAllocationInfo));
      const size_t extra = r.follow(r.field(t, slot::kTensorExtraInfo));
      const bool external = extra != 0 && byte_field(extra, slot::kExtraLocation, 0) == kExternalLocation;
      const uint32_t data_buffer = uint_field(t, slot::kTensorDataBufferIdx);
      if (allocation != 0) {
        // tensor_parser: memory id m is HierarchicalAllocator buffer m - 1,
        // which is non_const_buffer_sizes[m] (0 is reserved), the device
        // entry with buffer_idx m.
        const uint32_t memory_id = uint_field(allocation, slot::kAllocationMemoryId);
        p.planned = true;
        p.kind = Place::kHost;
        for (const Entry& entry : entries) {
          if (static_cast<int64_t>(entry.buffer) == static_cast<int64_t>(memory_id)) {
            p.type = entry.type;
            p.index = entry.index;
            p.kind = entry.type == static_cast<int>(DeviceType::CPU) ? Place::kHost : Place::kDevice;
            break;
          }
        }
        // getTensorDataPtr checks EXTERNAL before data_buffer_idx.
        if (p.device() && external) {
          p.written_at_load = "in external data '" + r.string(extra, slot::kExtraFullyQualifiedName) +
                              "', which method load reads into it with NamedDataMap::load_data_into";
        } else if (p.device() && data_buffer != 0) {
          p.written_at_load = "in the program's mutable data (et_init_buffer, data_buffer_idx " +
                              std::to_string(data_buffer) + "), which method load writes with a host memcpy";
        }
      } else if (external || data_buffer != 0) {
        p.kind = Place::kHost;
      } else {
        const int type = extra == 0 ? 0 : static_cast<int8_t>(byte_field(extra, slot::kExtraDeviceType, 0));
        p.kind = type == static_cast<int>(DeviceType::CPU) ? Place::kRuntime : Place::kDevice;
        p.type = type;
        p.index = extra == 0 ? 0 : static_cast<int8_t>(byte_field(extra, slot::kExtraDeviceIndex, 0));
      }
    }
  }

  const Place& place(int64_t v) const {
    static const Place none;
    return v >= 0 && static_cast<uint64_t>(v) < places.size() ? places[static_cast<size_t>(v)] : none;
  }

  // Each tensor an argument stands for: the value itself, or a list's items.
  // `visit(value, where)` gets "argument 1 (value 7)" or "argument 2 (value
  // 9), item 0 (value 5)".
  template <typename F>
  void tensors_of(size_t plan_values_at, int64_t value, const std::string& argument, F&& visit) {
    if (value < 0 || static_cast<uint64_t>(value) >= places.size()) {
      return;
    }
    const std::string self = argument + " (value " + std::to_string(value) + ")";
    if (places[static_cast<size_t>(value)].kind != Place::kNotTensor) {
      visit(value, self);
      return;
    }
    const size_t e = r.table_at(plan_values_at, static_cast<uint32_t>(value));
    const size_t type_at = r.field(e, slot::kUnionType);
    const uint8_t type = type_at == 0 ? 0 : r.read<uint8_t>(type_at);
    if (type != tag::kTensorList && type != tag::kOptionalTensorList) {
      return;
    }
    const size_t list = r.follow(r.field(e, slot::kUnionValue));
    size_t items_at = 0;
    const uint32_t n = list == 0 ? 0 : r.vector(list, 0, &items_at);
    for (uint32_t i = 0; i < n && !r.failed(); ++i) {
      const int32_t item = r.read<int32_t>(items_at + 4 * static_cast<size_t>(i));
      visit(item, self + ", item " + std::to_string(i) + " (value " + std::to_string(item) + ")");
    }
  }

  void plan(size_t p) {
    method = "method '" + r.string(p, slot::kPlanName) + "'";
    read_places(p);
    size_t values_at = 0;
    r.vector(p, slot::kPlanValues, &values_at);
    std::vector<int64_t> inputs;
    append_values(r, p, slot::kPlanInputs, &inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Place& at = place(inputs[i]);
      if (at.device() && at.planned) {
        refuse(method + ": input " + std::to_string(i) + " (value " + std::to_string(inputs[i]) + ") is " + at.where() +
               ", and Method::set_input would memcpy host bytes into it");
      }
    }
    for (size_t v = 0; v < places.size(); ++v) {
      if (!places[v].written_at_load.empty()) {
        refuse(method + ": value " + std::to_string(v) + " is " + places[v].where() + " with an initial value " +
               places[v].written_at_load);
      }
    }
    size_t chains_at = 0;
    const uint32_t chains = r.vector(p, slot::kPlanChains, &chains_at);
    for (uint32_t c = 0; c < chains && !r.failed(); ++c) {
      size_t instr_at = 0;
      const uint32_t n = r.vector(r.table_at(chains_at, c), slot::kChainInstructions, &instr_at);
      for (uint32_t i = 0; i < n && !r.failed(); ++i) {
        instruction(p, values_at, r.table_at(instr_at, i), std::to_string(c) + ":" + std::to_string(i));
      }
    }
  }

  void instruction(size_t plan, size_t values_at, size_t instr, const std::string& index) {
    const size_t type_at = r.field(instr, slot::kUnionType);
    const uint8_t type = type_at == 0 ? 0 : r.read<uint8_t>(type_at);
    const size_t call = r.follow(r.field(instr, slot::kUnionValue));
    if (call == 0) {
      return;
    }
    const std::string at = method + ", instruction " + index;
    if (type == tag::kJumpFalseCall) {
      const int64_t cond = r.int_field(call, slot::kFirst);
      if (place(cond).device()) {
        refuse(at + " (jump_false): its condition (value " + std::to_string(cond) + ") is " + place(cond).where() +
               ", and Method::execute reads a condition's elements on the host");
      }
      return;
    }
    if (type == tag::kMoveCall) {
      const int64_t from = r.int_field(call, slot::kFirst), to = r.int_field(call, slot::kSecond);
      const Place &a = place(from), &b = place(to);
      if ((a.device() || b.device()) && !a.same(b)) {
        refuse(at + " (move): moves value " + std::to_string(from) + " (" + a.where() + ") into value " +
               std::to_string(to) + " (" + b.where() +
               "), so the destination would hold memory of another device than its own");
      }
      return;
    }
    if (type != tag::kKernelCall && type != tag::kDelegateCall) {
      return;
    }
    std::vector<int64_t> args;
    append_values(r, call, slot::kSecond, &args);
    std::string op = call_name(r, plan, instr);
    if (type == tag::kDelegateCall) {
      const std::string id = op.empty() ? std::string() : op.substr(std::strlen("delegate:"));
      op = op.empty() ? "delegate " + std::to_string(r.int_field(call, slot::kFirst)) : op;
      bool allowed_id = false;
      for (const auto& a : allowed) {
        allowed_id = allowed_id || (!id.empty() && a == id);
      }
      std::string allowed_list;
      for (const auto& a : allowed) {
        allowed_list += (allowed_list.empty() ? "" : ", ") + a;
      }
      for (size_t a = 0; a < args.size() && !allowed_id; ++a) {
        tensors_of(values_at, args[a], "argument " + std::to_string(a), [&](int64_t v, const std::string& arg) {
          if (place(v).device()) {
            refuse(
                at + " (" + op + "): " + arg + " is " + place(v).where() + ", and backend '" + id +
                "' does not run on that device (" +
                (allowed_list.empty() ? std::string("no backend is allowed there") : "allowed there: " + allowed_list) +
                ")");
          }
        });
      }
      return;
    }
    if (op.empty()) {
      op = "operator " + std::to_string(r.int_field(call, slot::kFirst));
    }
    const bool h2d = op == kH2dCopy, d2h = op == kD2hCopy;
    for (size_t a = 0; a < args.size(); ++a) {
      if (!h2d && !d2h) {
        tensors_of(values_at, args[a], "argument " + std::to_string(a), [&](int64_t v, const std::string& arg) {
          if (place(v).device()) {
            refuse(at + " (" + op + "): " + arg + " is " + place(v).where() +
                   ", and a CPU kernel cannot read device memory (only et-copy's copy kernels and a device backend's "
                   "delegates may take device tensors)");
          }
        });
        continue;
      }
      // [self, out, the returned out]: the host side is h2d's self and d2h's outs.
      const bool self = a == 0;
      const bool host_side = h2d == self;
      const std::string name = self ? "self" : "out";
      const std::string copy = h2d ? "a host-to-device copy's " : "a device-to-host copy's ";
      tensors_of(values_at, args[a], "argument " + std::to_string(a) + " (" + name + ")",
                 [&](int64_t v, const std::string& arg) {
                   const Place& p = place(v);
                   if (host_side && p.device()) {
                     refuse(at + " (" + op + "): " + arg + " is " + p.where() + ", but " + copy + name +
                            " must be host memory");
                   } else if (!host_side && p.kind == Place::kHost) {
                     refuse(at + " (" + op + "): " + arg + " is " + p.where() + ", but " + copy + name +
                            " must be device memory");
                   }
                 });
    }
  }
};

} // namespace

std::vector<std::string> device_backends(executorch::runtime::etensor::DeviceType type) {
  if (type == DeviceType::CPU) {
    return {};
  }
  const CountingDeviceAllocator* ours = as_counting_allocator(executorch::runtime::get_device_allocator(type));
  if (ours == nullptr) {
    return {};
  }
  std::vector<std::string> ids;
  for (const DeviceBackend* b : registered_device_backends()) {
    if (b->runs_on(*ours)) {
      ids.emplace_back(b->id());
    }
  }
  // Upstream's CUDA backend is no DeviceBackend of ours, but its delegates run on et-copy's CUDA allocator.
  if (std::strcmp(ours->name(), "cuda") == 0 && std::find(ids.begin(), ids.end(), kCudaBackendId) == ids.end()) {
    ids.emplace_back(kCudaBackendId);
  }
  return ids;
}

Error check_device_access(const void* data, size_t size, const std::vector<std::string>& allowed_backends,
                          std::string* message) {
  if (const Error e = check_program_indices(data, size, message); e != Error::Ok) {
    return e;
  }
  Reader r(data, size);
  DeviceWalk walk{r, allowed_backends, message, {}, {}};
  const size_t root = r.read<uint32_t>(0);
  size_t plans_at = 0;
  const uint32_t plans = r.vector(root, slot::kProgramPlans, &plans_at);
  for (uint32_t i = 0; i < plans && !r.failed(); ++i) {
    walk.plan(r.table_at(plans_at, i));
  }
  if (r.failed()) {
    if (message != nullptr) {
      *message = "the program's flatbuffer has an offset outside the file";
    }
    return Error::InvalidProgram;
  }
  if (walk.refusals == 0) {
    return Error::Ok;
  }
  if (walk.refusals > 1 && message != nullptr) {
    *message += "; " + std::to_string(walk.refusals - 1) + " more found in the program";
  }
  return Error::InvalidProgram;
}

MethodIoDevices method_io_devices(const void* data, size_t size, const char* method_name) {
  Reader r(data, size);
  const size_t plan = find_plan(r, method_name);
  if (plan == 0 || r.failed()) {
    return {};
  }
  const std::vector<std::string> none;
  DeviceWalk walk{r, none, nullptr, {}, {}};
  walk.read_places(plan);
  auto devices = [&](int field) {
    std::vector<int64_t> values;
    append_values(r, plan, field, &values);
    std::vector<executorch::runtime::etensor::Device> out;
    for (const int64_t v : values) {
      const Place& p = walk.place(v); // type and index stay CPU's 0 for all but planned and device tensors
      out.emplace_back(static_cast<DeviceType>(p.type),
                       static_cast<executorch::runtime::etensor::DeviceIndex>(p.index));
    }
    return out;
  };
  MethodIoDevices io{devices(slot::kPlanInputs), devices(slot::kPlanOutputs), {}};
  size_t values_at = 0;
  const uint32_t values = r.vector(plan, slot::kPlanValues, &values_at);
  for (uint32_t v = 0; v < values && !r.failed(); ++v) {
    const size_t e = r.table_at(values_at, v);
    const size_t type_at = r.field(e, slot::kUnionType);
    const size_t t = r.follow(r.field(e, slot::kUnionValue));
    if (type_at == 0 || r.read<uint8_t>(type_at) != tag::kTensor || t == 0) {
      continue;
    }
    const size_t extra = r.follow(r.field(t, slot::kTensorExtraInfo));
    if (extra != 0 && r.field(extra, slot::kExtraFullyQualifiedName) != 0) { // MethodMeta::num_attributes' rule
      const Place& p = walk.place(v);
      io.attributes.emplace_back(static_cast<DeviceType>(p.type),
                                 static_cast<executorch::runtime::etensor::DeviceIndex>(p.index));
    }
  }
  return r.failed() ? MethodIoDevices{} : io;
}

} // namespace et_copy
