// et_copy.runtime's core: ExecuTorch programs loaded and run with et-copy's
// kernels scoped to each method (et_copy::method_kernels()), every other
// operator from ExecuTorch's registry, planned memory on the devices the
// program names, and failures raised with the runtime's own words.
#include "program.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <et_copy/program_check.h>
#include <et_copy/registration.h>
#include <et_copy/sessions.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include "failure.h"
#include "log_capture.h"
#include "tensor_reader.h"
#include "tensor_view.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::extension::BufferDataLoader;
using executorch::extension::FlatTensorDataMap;
using executorch::extension::MmapDataLoader;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Span;
using executorch::runtime::Tag;
namespace et = executorch::runtime::etensor;

std::string device_str(et::DeviceType type, int index) {
  return type == et::DeviceType::CPU
             ? "cpu"
             : (type == et::DeviceType::CUDA ? "cuda:" : "device" + std::to_string(static_cast<int>(type)) + ":") +
                   std::to_string(index);
}

// The message of a failed runtime call: what the caller was doing, the
// error, then what ExecuTorch logged while it failed (the kernel's own
// diagnostic, the failing instruction and operator).
struct RuntimeFailure : Failure {
  RuntimeFailure(Error e, const std::string& what, const std::vector<std::string>& log)
      : Failure(e, compose(e, what, log)), log(log) {}
  static std::string compose(Error e, const std::string& what, const std::vector<std::string>& log) {
    // ExecuTorch follows a failed kernel call with one "arg N with type id
    // T" line per argument: kept in .log, left out of the message.
    static const std::regex kArgLine(R"(^arg \d+ with type id \d+)");
    std::string m = what + " failed with " + error_name(e);
    for (const auto& line : log) {
      if (!std::regex_search(line, kArgLine)) {
        m += "\n  " + line;
      }
    }
    return m;
  }
  std::vector<std::string> log;
};

[[noreturn]] void raise_runtime(Error e, const std::string& what, const std::vector<std::string>& log) {
  // The failing instruction and operator, when ExecuTorch named them.
  static const std::regex kKernelCall(R"(KernelCall failed at instruction (\d+:\d+) in operator (\S+?):? )");
  std::string instruction, op;
  for (const auto& line : log) {
    std::smatch m;
    if (std::regex_search(line, m, kKernelCall)) {
      instruction = m[1];
      op = m[2];
    }
  }
  raise_error(RuntimeFailure::compose(e, what, log), error_name(e),
              instruction.empty() ? std::nullopt : std::optional<std::string>(instruction),
              op.empty() ? std::nullopt : std::optional<std::string>(op), log);
}

} // namespace

// The program bytes, everything ExecuTorch's Program points into, and the
// session pool its methods load through.
struct LoadedProgram {
  std::string bytes;                                       // the program, when it was handed over as bytes
  std::unique_ptr<executorch::runtime::DataLoader> loader; // those bytes, or the file mmapped
  size_t nbytes = 0;
  std::unique_ptr<executorch::runtime::DataLoader> data_loader; // a .ptd file, mmapped
  std::optional<FlatTensorDataMap> data_map;
  std::optional<Program> program;
  std::unique_ptr<et_copy::SessionPool> pool;
  ~LoadedProgram() {
    pool.reset(); // before the Program and data it points into
  }
};

// One session: its state and the methods loaded on it. Holds the program.
struct LoadedSession {
  std::shared_ptr<LoadedProgram> program;
  std::unique_ptr<et_copy::Session> session;
  ~LoadedSession() {
    session.reset();
  }
};

// One loaded method of a session, and what its inputs and outputs are.
struct LoadedMethod {
  std::shared_ptr<LoadedSession> session;
  std::string name;
  Method* method = nullptr;
  // What each input and output is, read once at load for execute's checks.
  struct Slot {
    bool tensor = false;
    bool planned = false;
    int dtype = 0;
    int device_type = 0;
    int device_index = 0;
    size_t nbytes = 0; // at the planned (upper-bound) shape
    std::vector<int64_t> dim_order;
  };
  std::vector<Slot> inputs, outputs;
};

namespace {

py::dict tensor_info_dict(const executorch::runtime::TensorInfo& info, const LoadedMethod::Slot& slot) {
  py::dict d;
  d["name"] = std::string(info.name());
  d["dtype"] = static_cast<int>(info.scalar_type());
  d["shape"] = std::vector<int64_t>(info.sizes().begin(), info.sizes().end());
  d["dim_order"] = std::vector<int64_t>(info.dim_order().begin(), info.dim_order().end());
  d["nbytes"] = info.nbytes();
  d["memory_planned"] = info.is_memory_planned();
  d["device_type"] = slot.device_type;
  d["device_index"] = slot.device_index;
  return d;
}

std::unique_ptr<executorch::runtime::DataLoader> mmap_file(const std::string& path, const std::string& what) {
  auto loader = MmapDataLoader::from(path.c_str(), MmapDataLoader::MlockConfig::NoMlock);
  if (!loader.ok()) {
    throw Failure(loader.error(), what + ": cannot map " + path + " (missing, unreadable or empty)");
  }
  return std::make_unique<MmapDataLoader>(std::move(*loader));
}

// Loads the program `lp->loader` serves, verified at `verification` (then
// bounds-checked: ExecuTorch aborts on some indices its verification lets
// through), with the named data of `data_path` (a .ptd file) when given.
void load_into(LoadedProgram& lp, int verification, const std::optional<std::string>& data_path) {
  install_log_capture();
  const std::string what = "et_copy.runtime.load";
  if (verification != 0 && verification != 1) {
    throw Failure(Error::InvalidArgument, what +
                                              ": verification must be Verification.Minimal (0) or "
                                              "Verification.InternalConsistency (1), got " +
                                              std::to_string(verification));
  }
  if (data_path) {
    lp.data_loader = mmap_file(*data_path, what + ": data_path");
    auto map = FlatTensorDataMap::load(lp.data_loader.get());
    if (!map.ok()) {
      raise_runtime(map.error(), what + ": reading the data file " + *data_path, {});
    }
    lp.data_map.emplace(std::move(*map));
  }
  auto size = lp.loader->size();
  lp.nbytes = size.ok() ? *size : 0;
  std::vector<std::string> log;
  {
    LogCapture capture;
    py::gil_scoped_release release;
    auto result = Program::load(lp.loader.get(), verification == 0 ? Program::Verification::Minimal
                                                                   : Program::Verification::InternalConsistency);
    if (result.ok()) {
      auto whole = lp.loader->load(
          0, lp.nbytes,
          executorch::runtime::DataLoader::SegmentInfo(executorch::runtime::DataLoader::SegmentInfo::Type::Program));
      std::string bad_index;
      if (!whole.ok() || check_program_indices(whole->data(), whole->size(), &bad_index) != Error::Ok) {
        // ExecuTorch would abort the process on this index later.
        py::gil_scoped_acquire acquire;
        raise_runtime(Error::InvalidProgram, what + ": checking the program", {bad_index});
      }
      lp.program.emplace(std::move(*result));
      lp.pool =
          std::make_unique<et_copy::SessionPool>(&*lp.program, method_kernels(), lp.data_map ? &*lp.data_map : nullptr);
    } else {
      log = capture.lines();
      py::gil_scoped_acquire acquire;
      raise_runtime(result.error(), what + ": loading the program", log);
    }
  }
}

std::shared_ptr<LoadedProgram> load_program(py::bytes data, int verification,
                                            const std::optional<std::string>& data_path) {
  auto lp = std::make_shared<LoadedProgram>();
  lp->bytes = data; // owned here: the Program reads from it for its whole life
  lp->loader = std::make_unique<BufferDataLoader>(lp->bytes.data(), lp->bytes.size());
  load_into(*lp, verification, data_path);
  return lp;
}

// A program file, mmapped rather than read: pages are read as the program
// needs them, and the weights are never copied.
std::shared_ptr<LoadedProgram> load_program_file(const std::string& path, int verification,
                                                 const std::optional<std::string>& data_path) {
  auto lp = std::make_shared<LoadedProgram>();
  lp->loader = mmap_file(path, "et_copy.runtime.load");
  load_into(*lp, verification, data_path);
  return lp;
}

// Names as Python strs; a malformed program's bytes decode with U+FFFD.
py::list method_names(const LoadedProgram& lp) {
  py::list names;
  for (size_t i = 0; i < lp.program->num_methods(); ++i) {
    auto name = lp.program->get_method_name(i);
    if (name.ok()) {
      names.append(py::reinterpret_steal<py::str>(
          PyUnicode_DecodeUTF8(*name, static_cast<Py_ssize_t>(std::strlen(*name)), "replace")));
    }
  }
  return names;
}

LoadedMethod::Slot slot_of(const EValue& value,
                           const executorch::runtime::Result<executorch::runtime::TensorInfo>& info) {
  LoadedMethod::Slot slot;
  if (value.isTensor() && info.ok()) {
    const auto* impl = value.toTensor().unsafeGetTensorImpl();
    slot = {true,
            info->is_memory_planned(),
            static_cast<int>(info->scalar_type()),
            static_cast<int>(impl->device_type()),
            static_cast<int>(impl->device_index()),
            info->nbytes(),
            std::vector<int64_t>(info->dim_order().begin(), info->dim_order().end())};
  }
  return slot;
}

void read_slots(LoadedMethod& lm) {
  Method& m = *lm.method;
  const MethodMeta meta = m.method_meta();
  std::vector<EValue> values(std::max(m.inputs_size(), m.outputs_size()));
  // Deprecated, but the only way to read the device ExecuTorch gave each input.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const Error inputs_read = m.get_inputs(values.data(), values.size());
#pragma GCC diagnostic pop
  if (inputs_read != Error::Ok) {
    throw Failure(Error::Internal, "et_copy.runtime: could not read the method's inputs");
  }
  for (size_t i = 0; i < m.inputs_size(); ++i) {
    // Tensor metadata only for tensors: ExecuTorch logs an error for any other.
    lm.inputs.push_back(values[i].isTensor() ? slot_of(values[i], meta.input_tensor_meta(i)) : LoadedMethod::Slot{});
  }
  if (m.get_outputs(values.data(), values.size()) != Error::Ok) {
    throw Failure(Error::Internal, "et_copy.runtime: could not read the method's outputs");
  }
  for (size_t i = 0; i < m.outputs_size(); ++i) {
    lm.outputs.push_back(values[i].isTensor() ? slot_of(values[i], meta.output_tensor_meta(i)) : LoadedMethod::Slot{});
  }
}

// Each planned buffer of a method: its size and the device the program names.
py::list planned_buffers(const MethodMeta& meta) {
  py::list buffers;
  for (size_t i = 0; i < meta.num_memory_planned_buffers(); ++i) {
    const auto device = meta.memory_planned_buffer_device(i);
    const auto size = meta.memory_planned_buffer_size(i);
    py::dict b;
    b["device_type"] = device.ok() ? static_cast<int>(device->type()) : 0;
    b["device_index"] = device.ok() ? static_cast<int>(device->index()) : 0;
    b["nbytes"] = size.ok() ? *size : 0;
    buffers.append(b);
  }
  return buffers;
}

// A method's metadata read from the program alone (nothing loaded): each
// input's, output's and state tensor's TensorInfo, or its tag for a value.
py::dict program_method_meta(const LoadedProgram& lp, const std::string& name) {
  auto meta = lp.program->method_meta(name.c_str());
  if (!meta.ok()) {
    throw Failure(Error::InvalidArgument, "et_copy.runtime: the program has no method '" + name +
                                              "' (it has: " + py::str(method_names(lp)).cast<std::string>() + ")");
  }
  auto info = [](const executorch::runtime::TensorInfo& t) {
    py::dict d;
    d["name"] = std::string(t.name());
    d["dtype"] = static_cast<int>(t.scalar_type());
    d["shape"] = std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
    d["dim_order"] = std::vector<int64_t>(t.dim_order().begin(), t.dim_order().end());
    d["nbytes"] = t.nbytes();
    d["memory_planned"] = t.is_memory_planned();
    return d;
  };
  auto entries = [&](size_t n, auto tag_of, auto info_of) {
    py::list list;
    for (size_t i = 0; i < n; ++i) {
      const auto tag = tag_of(i);
      if (tag.ok() && *tag == Tag::Tensor) {
        auto t = info_of(i);
        list.append(t.ok() ? py::object(info(*t)) : py::object(py::none()));
      } else {
        py::dict e;
        e["tag"] = tag.ok() ? static_cast<int>(*tag) : -1;
        list.append(e);
      }
    }
    return list;
  };
  py::dict d;
  d["name"] = name;
  d["inputs"] = entries(
      meta->num_inputs(), [&](size_t i) { return meta->input_tag(i); },
      [&](size_t i) { return meta->input_tensor_meta(i); });
  d["outputs"] = entries(
      meta->num_outputs(), [&](size_t i) { return meta->output_tag(i); },
      [&](size_t i) { return meta->output_tensor_meta(i); });
  py::list attributes;
  for (size_t i = 0; i < meta->num_attributes(); ++i) {
    auto t = meta->attribute_tensor_meta(i);
    if (t.ok()) {
      attributes.append(info(*t));
    }
  }
  d["attributes"] = attributes;
  d["planned_buffers"] = planned_buffers(*meta);
  return d;
}

std::shared_ptr<LoadedSession> new_session(const std::shared_ptr<LoadedProgram>& lp) {
  auto ls = std::make_shared<LoadedSession>();
  ls->program = lp;
  ls->session = lp->pool->new_session();
  return ls;
}

std::shared_ptr<LoadedMethod> load_method(const std::shared_ptr<LoadedSession>& ls, const std::string& name) {
  const std::string what = "et_copy.runtime: loading method '" + name + "'";
  LoadedProgram& lp = *ls->program;
  if (!lp.program->method_meta(name.c_str()).ok()) {
    throw Failure(Error::InvalidArgument, what + ": the program has no method of that name (it has: " +
                                              py::str(method_names(lp)).cast<std::string>() + ")");
  }
  auto lm = std::make_shared<LoadedMethod>();
  lm->session = ls;
  lm->name = name;
  std::vector<std::string> log;
  std::string failed;
  Error err = Error::Ok;
  {
    LogCapture capture;
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(lp.pool->execution_lock()); // loading may write the state
    auto method = ls->session->method(name, &failed);
    if (method.ok()) {
      lm->method = *method;
    } else {
      err = method.error();
      log = capture.lines();
    }
  }
  if (err != Error::Ok) {
    if (!failed.empty()) {
      log.insert(log.begin(), err == Error::NotFound ? failed +
                                                           " (call et_copy.use_simulated_device() or "
                                                           "et_copy.use_cuda() first)"
                                                     : failed);
    }
    raise_runtime(err, what, log);
  }
  read_slots(*lm);
  return lm;
}

void reset_session(LoadedSession& ls) {
  std::string failed;
  Error err = Error::Ok;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(ls.program->pool->execution_lock());
    err = ls.session->reset(&failed);
  }
  if (err != Error::Ok) {
    raise_runtime(err, "et_copy.runtime: resetting a session", {failed});
  }
}

// Inputs' and outputs' metadata, with the device each tensor lives on as
// the loaded method holds it.
py::dict method_meta(const LoadedMethod& lm) {
  const MethodMeta meta = lm.method->method_meta();
  auto entries = [](const std::vector<LoadedMethod::Slot>& slots, auto info_of, auto tag_of) {
    py::list list;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].tensor) {
        list.append(tensor_info_dict(*info_of(i), slots[i]));
      } else {
        const auto tag = tag_of(i);
        py::dict e;
        e["tag"] = tag.ok() ? static_cast<int>(*tag) : -1;
        list.append(e);
      }
    }
    return list;
  };
  py::dict d;
  d["name"] = lm.name;
  d["inputs"] = entries(
      lm.inputs, [&](size_t i) { return meta.input_tensor_meta(i); }, [&](size_t i) { return meta.input_tag(i); });
  d["outputs"] = entries(
      lm.outputs, [&](size_t i) { return meta.output_tensor_meta(i); }, [&](size_t i) { return meta.output_tag(i); });
  d["planned_buffers"] = planned_buffers(meta);
  return d;
}

// A non-tensor method output as a Python value.
py::object output_value(const EValue& v) {
  if (v.isInt()) {
    return py::int_(v.toInt());
  }
  if (v.isDouble()) {
    return py::float_(v.toDouble());
  }
  if (v.isBool()) {
    return py::bool_(v.toBool());
  }
  if (v.isNone()) {
    return py::none();
  }
  throw Failure(Error::NotSupported, "et_copy.runtime: an output of an unsupported type (tag " +
                                         std::to_string(static_cast<int>(v.tag)) + ")");
}

// A non-tensor input: a Python scalar or None.
EValue scalar_input(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) {
    return EValue(value.cast<bool>());
  }
  if (py::isinstance<py::int_>(value)) {
    return EValue(value.cast<int64_t>());
  }
  if (py::isinstance<py::float_>(value)) {
    return EValue(value.cast<double>());
  }
  if (value.is_none()) {
    return EValue();
  }
  throw Failure(Error::InvalidArgument, "et_copy.runtime: unsupported input value");
}

size_t capacity_bytes(const TensorSpec& s) {
  size_t n = executorch::runtime::elementSize(static_cast<executorch::aten::ScalarType>(s.dtype));
  const int64_t* shape = s.has_capacity ? s.capacity : s.sizes;
  for (size_t i = 0; i < s.rank; ++i) {
    n *= static_cast<size_t>(shape[i]);
  }
  return n;
}

bool same_dim_order(const TensorSpec& s, const std::vector<int64_t>& order) {
  return order.size() == s.rank && std::equal(order.begin(), order.end(), s.dim_order);
}

// Runs the method. `inputs`: torch tensors, DeviceTensors (read by
// tensor_reader.h) or Python scalars, in order. `outputs`: per output, None
// (not a tensor), or the tensor that receives it: bound as the output's
// memory when the program does not plan it, copied into after the run when
// it does, and given the shape the output ran with. Returns NotImplemented,
// having run nothing, when an input or output is not the tensor its slot
// expects: Python then raises the error that says why. Otherwise a list:
// per tensor output None, per other output its value.
py::object execute(LoadedMethod& lm, const py::list& inputs, const py::list& outputs) {
  Method& m = *lm.method;
  const std::string what = "et_copy.runtime: method '" + lm.name + "'";
  if (inputs.size() != lm.inputs.size() || outputs.size() != lm.outputs.size()) {
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
  std::vector<std::unique_ptr<TensorView>> views;
  views.reserve(inputs.size());
  std::vector<EValue> values;
  values.reserve(inputs.size());
  TensorSpec spec;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const LoadedMethod::Slot& slot = lm.inputs[i];
    py::handle value = inputs[i];
    if (slot.tensor) {
      if (read_tensor(value.ptr(), false, spec) != ReadProblem::kNone || spec.dtype != slot.dtype ||
          spec.device_type != slot.device_type || spec.device_index != slot.device_index ||
          (slot.planned && slot.device_type != 0)) {
        return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      }
      views.push_back(std::make_unique<TensorView>(spec));
      values.emplace_back(views.back()->tensor());
    } else if (read_tensor(value.ptr(), false, spec) == ReadProblem::kNotATensor) {
      values.push_back(scalar_input(value));
    } else {
      return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    }
  }
  struct Target {
    size_t capacity;
    TensorSpec spec; // the tensor as read: its layout takes the output's final shape
  };
  std::vector<std::optional<Target>> targets(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const LoadedMethod::Slot& slot = lm.outputs[i];
    if (!slot.tensor) {
      continue;
    }
    const bool host_copy = slot.planned && slot.device_type == 0;
    // The tensor must hold the output as the program lays it out: same dtype,
    // device, dim order, and room for its upper-bound shape.
    if (outputs[i].is_none() || read_tensor(outputs[i].ptr(), true, spec) != ReadProblem::kNone ||
        spec.dtype != slot.dtype || spec.device_type != slot.device_type || spec.device_index != slot.device_index ||
        (slot.planned && !host_copy) || !same_dim_order(spec, slot.dim_order) || capacity_bytes(spec) < slot.nbytes) {
      return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    }
    targets[i] = Target{capacity_bytes(spec), spec};
  }
  std::vector<std::string> log;
  Error err = Error::Ok;
  std::string step;
  {
    LogCapture capture;
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(lm.session->program->pool->execution_lock()); // the scratch is shared
    for (size_t i = 0; i < values.size() && err == Error::Ok; ++i) {
      err = m.set_input(values[i], i);
      if (err != Error::Ok) {
        step = "setting input " + std::to_string(i);
      }
    }
    for (size_t i = 0; i < targets.size() && err == Error::Ok; ++i) {
      if (targets[i] && !lm.outputs[i].planned) {
        err = m.set_output_data_ptr(reinterpret_cast<void*>(targets[i]->spec.data), targets[i]->capacity, i);
        if (err != Error::Ok) {
          step = "binding output " + std::to_string(i);
        }
      }
    }
    if (err == Error::Ok) {
      err = m.execute();
      if (err != Error::Ok) {
        step = "executing"; // execute() has reset itself for the next call
      }
    }
    for (size_t i = 0; i < targets.size() && err == Error::Ok; ++i) {
      if (targets[i] && lm.outputs[i].planned) { // host memory the method owns: copy out
        const auto& t = m.get_output(i).toTensor();
        if (t.nbytes() > targets[i]->capacity) {
          err = Error::InvalidArgument;
          step = "copying output " + std::to_string(i) + " (" + std::to_string(t.nbytes()) + " bytes) into a " +
                 std::to_string(targets[i]->capacity) + "-byte tensor";
        } else if (t.nbytes() > 0) {
          std::memcpy(reinterpret_cast<void*>(targets[i]->spec.data), t.const_data_ptr(), t.nbytes());
        }
      }
    }
    if (err != Error::Ok) {
      log = capture.lines();
    }
  }
  if (err != Error::Ok) {
    raise_runtime(err, what + ": " + step, log);
  }
  py::list result;
  for (size_t i = 0; i < lm.outputs.size(); ++i) {
    const EValue& v = m.get_output(i);
    if (targets[i]) {
      // A dynamic shape: the given tensor keeps its memory and takes the size it ran with.
      TensorSpec& s = targets[i]->spec;
      const auto sizes = v.toTensor().sizes();
      if (!std::equal(sizes.begin(), sizes.end(), s.sizes)) { // same rank: its dim order matched above
        std::copy(sizes.begin(), sizes.end(), s.sizes);
        dense_strides(s); // in the dim order checked against the output's above
        take_shape(outputs[i].ptr(), s);
      }
      result.append(py::none());
    } else {
      result.append(output_value(v));
    }
  }
  return result;
}

} // namespace

void bind_program(py::module_& m) {
  py::class_<LoadedProgram, std::shared_ptr<LoadedProgram>>(m, "Program")
      .def_property_readonly("method_names", &method_names)
      .def("new_session", &new_session)
      .def("method_meta", &program_method_meta, py::arg("name"))
      .def_property_readonly("nbytes", [](const LoadedProgram& lp) { return lp.nbytes; })
      .def_property_readonly("device_scratch_nbytes",
                             [](const LoadedProgram& lp) { return lp.pool->device_scratch_nbytes(); });
  py::class_<LoadedSession, std::shared_ptr<LoadedSession>>(m, "Session")
      .def("load_method", &load_method, py::arg("name"))
      .def("reset", &reset_session)
      .def_property_readonly("state_nbytes", [](const LoadedSession& s) { return s.session->state_nbytes(); })
      .def_property_readonly("device_nbytes", [](const LoadedSession& s) { return s.session->device_nbytes(); });
  py::class_<LoadedMethod, std::shared_ptr<LoadedMethod>>(m, "Method")
      .def_readonly("name", &LoadedMethod::name)
      .def("meta", &method_meta)
      .def("execute", &execute, py::arg("inputs"), py::arg("outputs"));
  m.def("load_program", &load_program, py::arg("data"), py::arg("verification") = 1, py::arg("data_path") = py::none(),
        "Loads program bytes (verification 0: Minimal, 1: InternalConsistency).");
  m.def("load_program_file", &load_program_file, py::arg("path"), py::arg("verification") = 1,
        py::arg("data_path") = py::none(), "Loads a program file, mmapped.");
  m.def("operator_names", [] {
    py::set names;
    for (const auto& k : executorch::runtime::get_registered_kernels()) {
      names.add(py::str(k.name_));
    }
    return names;
  });
  m.def("backend_names", [] {
    py::list names;
    for (size_t i = 0; i < executorch::runtime::get_num_registered_backends(); ++i) {
      auto name = executorch::runtime::get_backend_name(i);
      if (name.ok()) {
        names.append(py::str(*name));
      }
    }
    return names;
  });
  m.def("set_forwarded_log_levels", &set_forwarded_levels, py::arg("info_and_debug"),
        "Whether ExecuTorch's info and debug log lines reach stderr (et_copy._quiet turns them off); returns the "
        "previous setting.");
}

} // namespace et_copy::bindings
