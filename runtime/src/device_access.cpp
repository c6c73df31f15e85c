// The device-access check (check_device_access, program_check.h): where
// each value of a method lives, and every instruction, input and initial
// value that would have the host touch device memory. method_io_devices
// reads the same places.
#include <et_copy/program_check.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <et_copy/device_backend.h>
#include <et_copy/failure_report.h>

#include "program_reader.h"

namespace et_copy {

namespace {

using executorch::runtime::Error;
using executorch::runtime::etensor::DeviceType;
using internal::kExternalLocation;
using internal::Reader;
namespace slot = internal::slot;
namespace tag = internal::tag;

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
  // "planned on cuda:0", "a constant of the program"...
  std::string where() const {
    switch (kind) {
      case kDevice:
        return (planned ? "planned on " : "given at run time on ") + device_name(type, index);
      case kHost:
        return planned ? "planned on " + device_name(type, index) : "a constant of the program";
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
  FailureReport* report;
  std::string method;
  std::vector<Place> places;
  size_t refusals = 0;

  void refuse(const std::string& what) {
    if (refusals++ == 0) {
      (void)fail(report, Error::InvalidProgram, what);
    }
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
    const auto [devices, devices_at] = r.vector(plan, slot::kPlanBufferDevices);
    for (uint32_t d = 0; d < devices && !r.failed(); ++d) {
      const size_t e = r.table_at(devices_at, d);
      entries.push_back({r.scalar<int32_t>(e, slot::kBufferDeviceIdx), r.scalar<int8_t>(e, slot::kBufferDeviceType),
                         r.scalar<int8_t>(e, slot::kBufferDeviceIndex)});
    }
    const auto [values, values_at] = r.vector(plan, slot::kPlanValues);
    places.assign(values, Place{});
    for (uint32_t v = 0; v < values && !r.failed(); ++v) {
      const size_t t = r.tensor(r.table_at(values_at, v));
      if (t == 0) {
        continue;
      }
      Place& p = places[v];
      const size_t allocation = r.follow(r.field(t, slot::kTensorAllocationInfo));
      const size_t extra = r.follow(r.field(t, slot::kTensorExtraInfo));
      const bool external = extra != 0 && r.scalar<uint8_t>(extra, slot::kExtraLocation) == kExternalLocation;
      const uint32_t data_buffer = r.scalar<uint32_t>(t, slot::kTensorDataBufferIdx);
      if (allocation != 0) {
        // tensor_parser: memory id m is HierarchicalAllocator buffer m - 1,
        // which is non_const_buffer_sizes[m] (0 is reserved), the device
        // entry with buffer_idx m.
        const uint32_t memory_id = r.scalar<uint32_t>(allocation, slot::kAllocationMemoryId);
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
        // Given at run time, where its metadata says: with no extra_tensor_info, cpu:0 (Place's default).
        if (extra != 0) {
          p.type = r.scalar<int8_t>(extra, slot::kExtraDeviceType);
          p.index = r.scalar<int8_t>(extra, slot::kExtraDeviceIndex);
        }
        p.kind = p.type == static_cast<int>(DeviceType::CPU) ? Place::kRuntime : Place::kDevice;
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
    const uint8_t type = r.union_type(e);
    if (type != tag::kTensorList && type != tag::kOptionalTensorList) {
      return;
    }
    const size_t list = r.follow(r.field(e, slot::kUnionValue));
    const auto [n, items_at] = list == 0 ? Reader::Vector{} : r.vector(list, slot::kListItems);
    for (uint32_t i = 0; i < n && !r.failed(); ++i) {
      const int32_t item = r.read<int32_t>(items_at + 4 * static_cast<size_t>(i));
      visit(item, self + ", item " + std::to_string(i) + " (value " + std::to_string(item) + ")");
    }
  }

  void plan(size_t p) {
    method = "method '" + r.string(p, slot::kPlanName) + "'";
    read_places(p);
    const size_t values_at = r.vector(p, slot::kPlanValues).elements;
    std::vector<int64_t> inputs;
    r.append_values(p, slot::kPlanInputs, &inputs);
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
    const auto [chains, chains_at] = r.vector(p, slot::kPlanChains);
    for (uint32_t c = 0; c < chains && !r.failed(); ++c) {
      const auto [n, instr_at] = r.vector(r.table_at(chains_at, c), slot::kChainInstructions);
      for (uint32_t i = 0; i < n && !r.failed(); ++i) {
        instruction(p, values_at, r.table_at(instr_at, i), std::to_string(c) + ":" + std::to_string(i));
      }
    }
  }

  void instruction(size_t plan, size_t values_at, size_t instr, const std::string& index) {
    const uint8_t type = r.union_type(instr);
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
    r.append_values(call, slot::kSecond, &args);
    std::string op = r.call_name(plan, instr);
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
            const std::string hint = backend_hint(id);
            refuse(
                at + " (" + op + "): " + arg + " is " + place(v).where() + ", and backend '" + id +
                "' does not run on that device (" +
                (allowed_list.empty() ? std::string("no backend is allowed there") : "allowed there: " + allowed_list) +
                ")" + (hint.empty() ? "" : "; " + hint));
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

Error check_device_access(const void* data, size_t size, const std::vector<std::string>& allowed_backends,
                          FailureReport* report) {
  if (const Error e = check_program_indices(data, size, report); e != Error::Ok) {
    return e;
  }
  Reader r(data, size);
  DeviceWalk walk{r, allowed_backends, report, {}, {}};
  const auto [plans, plans_at] = r.plans();
  for (uint32_t i = 0; i < plans && !r.failed(); ++i) {
    walk.plan(r.table_at(plans_at, i));
  }
  if (r.failed()) {
    return fail(report, Error::InvalidProgram, "the program's flatbuffer has an offset outside the file");
  }
  if (walk.refusals == 0) {
    return Error::Ok;
  }
  if (walk.refusals > 1 && report != nullptr) {
    report->detail += "; " + std::to_string(walk.refusals - 1) + " more found in the program";
  }
  return Error::InvalidProgram;
}

MethodIoDevices method_io_devices(const void* data, size_t size, const char* method_name) {
  Reader r(data, size);
  const size_t plan = r.find_plan(method_name);
  if (plan == 0 || r.failed()) {
    return {};
  }
  const std::vector<std::string> none;
  DeviceWalk walk{r, none, nullptr, {}, {}};
  walk.read_places(plan);
  auto devices = [&](int field) {
    std::vector<int64_t> values;
    r.append_values(plan, field, &values);
    std::vector<executorch::runtime::etensor::Device> out;
    for (const int64_t v : values) {
      const Place& p = walk.place(v); // type and index stay CPU's 0 for all but planned and device tensors
      out.emplace_back(static_cast<DeviceType>(p.type),
                       static_cast<executorch::runtime::etensor::DeviceIndex>(p.index));
    }
    return out;
  };
  MethodIoDevices io{devices(slot::kPlanInputs), devices(slot::kPlanOutputs), {}};
  const auto [values, values_at] = r.vector(plan, slot::kPlanValues);
  for (uint32_t v = 0; v < values && !r.failed(); ++v) {
    const size_t t = r.tensor(r.table_at(values_at, v));
    if (t == 0) {
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
