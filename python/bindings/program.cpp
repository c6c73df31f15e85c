// et_copy.runtime's Program, Session and Method: Python values converted
// to and from the C++ core's (et_copy::LoadedProgram, et_copy::Session,
// et_copy::LoadedMethod), which loads and runs them, and its failures
// raised as EtCopyError.
#include "program.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <et_copy/llm_methods.h>
#include <et_copy/instruction_tracer.h>
#include <et_copy/loaded_method.h>
#include <et_copy/loaded_program.h>
#include <et_copy/log_capture.h>
#include <et_copy/argument_kinds.h>
#include <et_copy/program_check.h>
#include <et_copy/program_record.h>
#include <et_copy/registration.h>
#include <et_copy/sessions.h>
#ifdef ET_COPY_WITH_ETDUMP
#include <executorch/devtools/etdump/etdump_flatcc.h>
#endif
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include "failure.h"
#include "method_io.h"
#include "tensor_reader.h"
#include "tensor_view.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::extension::BufferDataLoader;
using executorch::extension::MmapDataLoader;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Tag;
namespace et = executorch::runtime::etensor;

[[noreturn]] void raise_runtime(Error e, const std::string& what, const std::vector<std::string>& log) {
  et_copy::FailureReport r;
  r.error = e;
  r.step = what;
  r.log = log;
  raise_error(r.message(), error_name(e), std::nullopt, std::nullopt, log);
}

// A failure of the core, raised with `where` before its message. `hint`
// follows its detail, which leads the log.
[[noreturn]] void raise_report(const std::string& where, et_copy::FailureReport r, const std::string& hint = "") {
  auto or_none = [](const std::string& s) { return s.empty() ? std::nullopt : std::optional<std::string>(s); };
  r.step = where + ": " + r.step;
  if (!r.detail.empty()) {
    r.log.insert(r.log.begin(), r.detail + hint);
    r.detail.clear();
  }
  raise_error(r.message(), error_name(r.error), or_none(r.instruction), or_none(r.op), r.log);
}

// What to do about a device nothing serves yet, after a NotFound.
const char kUseDevice[] = " (call et_copy.use_simulated_device() or et_copy.use_cuda() first)";

} // namespace

// A loaded program (the core's), and what Python adds: the bytes it was
// handed, ETDump's profiler.
struct LoadedProgram {
  std::string bytes; // the program, when it was handed over as bytes
#ifdef ET_COPY_WITH_ETDUMP
  std::unique_ptr<executorch::etdump::ETDumpGen> etdump; // enable_etdump: every method's events
  std::vector<uint8_t> debug_storage;                    // holds the debug buffer, 64-byte aligned within it
  executorch::runtime::Span<uint8_t> debug_buffer;       // its debug_buffer_size bytes of logged values
  std::unique_ptr<et_copy::DebugBufferRoom> room;        // what each method's tracer asks before logging a tensor
#endif
  std::unique_ptr<et_copy::LoadedProgram> core; // destroyed first: it reads the bytes, its methods the profiler
  const Program& program() const {
    return core->program();
  }
  et_copy::SessionPool& pool() {
    return core->pool();
  }
};

// One session: its state and the methods loaded on it. Holds the program.
struct LoadedSession {
  std::shared_ptr<LoadedProgram> program;
  std::unique_ptr<et_copy::Session> session;
};

// One loaded method of a session, and its slots as Python checks them.
struct LoadedMethod {
  std::shared_ptr<LoadedSession> session;
  std::string name;
  et_copy::LoadedMethod* core = nullptr; // the session's
  MethodIo io;                           // read once at load, for execute's checks
};

namespace {

// A tensor's metadata as the program declares it, and the device it lives on.
py::dict tensor_info_dict(const executorch::runtime::TensorInfo& info, et::Device device) {
  py::dict d;
  d["name"] = std::string(info.name());
  d["dtype"] = static_cast<int>(info.scalar_type());
  d["shape"] = std::vector<int64_t>(info.sizes().begin(), info.sizes().end());
  d["dim_order"] = std::vector<int64_t>(info.dim_order().begin(), info.dim_order().end());
  d["nbytes"] = info.nbytes();
  d["memory_planned"] = info.is_memory_planned();
  d["device_type"] = static_cast<int>(device.type());
  d["device_index"] = static_cast<int>(device.index());
  return d;
}

std::unique_ptr<executorch::runtime::DataLoader> mmap_file(const std::string& path, const std::string& what) {
  auto loader = MmapDataLoader::from(path.c_str(), MmapDataLoader::MlockConfig::NoMlock);
  if (!loader.ok()) {
    throw Failure(loader.error(), what + ": cannot map " + path + " (missing, unreadable or empty)");
  }
  return std::make_unique<MmapDataLoader>(std::move(*loader));
}

#ifdef ET_COPY_WITH_ETDUMP
// ETDumpGen::set_debug_buffer's BufferDataSink starts each tensor at the next
// address aligned to this (its default alignment).
constexpr size_t kDebugBufferAlignment = 64;

// The room left in a program's debug buffer, by the ETDumpGen's data sink.
// ETDumpGen aborts the process on a tensor its sink cannot take, so every
// method's InstructionTracer asks this first.
class EtdumpRoom final : public et_copy::DebugBufferRoom {
 public:
  EtdumpRoom(executorch::etdump::ETDumpGen& etdump, executorch::runtime::Span<uint8_t> buffer)
      : etdump_(etdump), buffer_(buffer) {}
  size_t size() const override {
    return buffer_.size();
  }
  size_t used() const override {
    const auto* sink = etdump_.get_data_sink();
    return sink != nullptr ? sink->get_used_bytes() : buffer_.size(); // no sink: no room
  }
  size_t end_after(size_t offset, size_t nbytes) const override {
    const auto base = reinterpret_cast<uintptr_t>(buffer_.data());
    const uintptr_t start = (base + offset + kDebugBufferAlignment - 1) & ~uintptr_t{kDebugBufferAlignment - 1};
    return static_cast<size_t>(start - base) + nbytes;
  }

 private:
  executorch::etdump::ETDumpGen& etdump_;
  executorch::runtime::Span<uint8_t> buffer_;
};

// Starts a new, empty profile. ETDumpGen::get_etdump_data finishes its
// builder and leaves it finished: a second call, with no event block in
// between, builds on the finished buffer and corrupts the heap (executorch
// 1.5.1), and ETDumpGen::reset drops the debug buffer. So after every
// get_etdump_data the profile starts again here, with its debug buffer.
void start_profile(LoadedProgram& lp) {
  lp.etdump->reset();
  if (!lp.debug_buffer.empty()) {
    auto set = lp.etdump->set_debug_buffer(lp.debug_buffer);
    if (!set.ok()) {
      throw Failure(set.error(), "et_copy.runtime: enable_etdump: ETDump refused the debug buffer of " +
                                     std::to_string(lp.debug_buffer.size()) + " bytes");
    }
  }
}
#endif

// Options of a load beyond the bytes: executorch.runtime's load_program arguments.
struct LoadOptions {
  int verification = 1; // 0: Minimal, 1: InternalConsistency
  std::optional<std::string> data_path;
  bool enable_etdump = false;
  size_t debug_buffer_size = 0;
  int threads = 0; // 0: each device backend's default
  bool verify_data = false;
  bool trust_code = false;
};

// Loads the program `loader` serves into `lp` through the core, with the
// named data of `options.data_path` (a .ptd file) when given.
void load_into(LoadedProgram& lp, std::unique_ptr<executorch::runtime::DataLoader> loader, const LoadOptions& options) {
  const std::string what = "et_copy.runtime.load";
  const int verification = options.verification;
  if (verification != 0 && verification != 1) {
    throw Failure(Error::InvalidArgument, what +
                                              ": verification must be Verification.Minimal (0) or "
                                              "Verification.InternalConsistency (1), got " +
                                              std::to_string(verification));
  }
  if (options.enable_etdump) {
#ifdef ET_COPY_WITH_ETDUMP
    lp.etdump = std::make_unique<executorch::etdump::ETDumpGen>();
    if (options.debug_buffer_size > SIZE_MAX / 2) {
      throw Failure(Error::InvalidArgument,
                    what + ": debug_buffer_size " + std::to_string(options.debug_buffer_size) + " is too large");
    }
    if (options.debug_buffer_size > 0) {
      // As executorch.runtime: a debug buffer means intermediate outputs are
      // logged into it (host tensors only: InstructionTracer never hands a
      // device tensor's memory to the profiler).
      // Aligned as the sink aligns each tensor, so the buffer a run needs
      // does not depend on where the allocator put it.
      lp.debug_storage.resize(options.debug_buffer_size + kDebugBufferAlignment - 1);
      const auto at = reinterpret_cast<uintptr_t>(lp.debug_storage.data());
      const size_t pad = (kDebugBufferAlignment - at % kDebugBufferAlignment) % kDebugBufferAlignment;
      lp.debug_buffer = {lp.debug_storage.data() + pad, options.debug_buffer_size};
      lp.etdump->set_event_tracer_debug_level(executorch::runtime::EventTracerDebugLogLevel::kIntermediateOutputs);
      lp.room = std::make_unique<EtdumpRoom>(*lp.etdump, lp.debug_buffer);
    }
    start_profile(lp);
#else
    throw Failure(Error::NotSupported, what + ": enable_etdump: this et_copy was built without ExecuTorch's etdump");
#endif
  }
  std::unique_ptr<executorch::runtime::DataLoader> data;
  if (options.data_path) {
    data = mmap_file(*options.data_path, what + ": data_path");
  }
  et_copy::LoadOptions core_options;
  core_options.verification =
      verification == 0 ? Program::Verification::Minimal : Program::Verification::InternalConsistency;
  if (options.threads < 0) {
    throw Failure(Error::InvalidArgument, what + ": threads must be at least 1, or 0 for the backends' default, got " +
                                              std::to_string(options.threads));
  }
  core_options.threads = options.threads;
  core_options.verify_data = options.verify_data;
  core_options.trust_code = options.trust_code;
  et_copy::FailureReport report;
  auto loaded = [&] {
    py::gil_scoped_release release;
    return et_copy::LoadedProgram::load(std::move(loader), std::move(data), core_options, &report);
  }();
  if (!loaded.ok()) {
    if (report.step == "reading the data file") {
      report.step += " " + *options.data_path;
    }
    raise_report(what, std::move(report), report.error == Error::NotFound ? kUseDevice : "");
  }
  lp.core = std::move(*loaded);
}

std::shared_ptr<LoadedProgram> load_program(py::bytes data, const LoadOptions& options) {
  auto lp = std::make_shared<LoadedProgram>();
  lp->bytes = data; // owned here: the Program reads from it for its whole life
  load_into(*lp, std::make_unique<BufferDataLoader>(lp->bytes.data(), lp->bytes.size()), options);
  return lp;
}

// A program file, mmapped rather than read: pages are read as the program
// needs them, and the weights are never copied.
std::shared_ptr<LoadedProgram> load_program_file(const std::string& path, const LoadOptions& options) {
  auto lp = std::make_shared<LoadedProgram>();
  load_into(*lp, mmap_file(path, "et_copy.runtime.load"), options);
  return lp;
}

// Names as Python strs; a malformed program's bytes decode with U+FFFD.
py::list method_names(const LoadedProgram& lp) {
  py::list names;
  for (size_t i = 0; i < lp.program().num_methods(); ++i) {
    auto name = lp.program().get_method_name(i);
    if (name.ok()) {
      names.append(py::reinterpret_steal<py::str>(
          PyUnicode_DecodeUTF8(*name, static_cast<Py_ssize_t>(std::strlen(*name)), "replace")));
    }
  }
  return names;
}

// A MethodMeta read that fails only for an index past its count, which the
// caller's loop never asks: a failure is a bug to report, not a value to make up.
template <typename T>
T read_in_range(executorch::runtime::Result<T> r, const std::string& what) {
  if (!r.ok()) {
    throw Failure(r.error(), "cannot read " + what);
  }
  return *r;
}

// Each planned buffer of a method: its size and the device the program names.
py::list planned_buffers(const MethodMeta& meta) {
  py::list buffers;
  for (size_t i = 0; i < meta.num_memory_planned_buffers(); ++i) {
    const std::string what = "planned buffer " + std::to_string(i);
    const auto device = read_in_range(meta.memory_planned_buffer_device(i), what);
    py::dict b;
    b["device_type"] = static_cast<int>(device.type());
    b["device_index"] = static_cast<int>(device.index());
    b["nbytes"] = read_in_range(meta.memory_planned_buffer_size(i), what);
    buffers.append(b);
  }
  return buffers;
}

// The one Python form of a method's metadata (_C.pyi's MethodMeta), from
// ExecuTorch's MethodMeta: per input and output its TensorInfo with the
// device the tensor lives on (`devices`), {"tag": code} for any other value,
// None for a tensor whose TensorInfo is unreadable; each attribute's
// TensorInfo and device; the planned buffers with their devices.
py::dict method_meta_dict(const MethodMeta& meta, const et_copy::MethodIoDevices& devices) {
  auto device_of = [](const std::vector<et::Device>& list, size_t i) {
    return i < list.size() ? list[i] : et::Device(et::DeviceType::CPU, 0);
  };
  auto entries = [&](size_t n, auto tag_of, auto info_of, const std::vector<et::Device>& where) {
    py::list list;
    for (size_t i = 0; i < n; ++i) {
      const auto tag = tag_of(i);
      if (tag.ok() && *tag == Tag::Tensor) {
        auto t = info_of(i);
        list.append(t.ok() ? py::object(tensor_info_dict(*t, device_of(where, i))) : py::object(py::none()));
      } else {
        py::dict e;
        e["tag"] = tag.ok() ? static_cast<int>(*tag) : -1;
        list.append(e);
      }
    }
    return list;
  };
  py::dict d;
  const char* name = meta.name();
  d["name"] =
      py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(name, static_cast<Py_ssize_t>(std::strlen(name)), "replace"));
  d["inputs"] = entries(
      meta.num_inputs(), [&](size_t i) { return meta.input_tag(i); },
      [&](size_t i) { return meta.input_tensor_meta(i); }, devices.inputs);
  d["outputs"] = entries(
      meta.num_outputs(), [&](size_t i) { return meta.output_tag(i); },
      [&](size_t i) { return meta.output_tensor_meta(i); }, devices.outputs);
  py::list attributes;
  for (size_t i = 0; i < meta.num_attributes(); ++i) {
    auto t = meta.attribute_tensor_meta(i);
    if (t.ok()) {
      attributes.append(tensor_info_dict(*t, device_of(devices.attributes, i)));
    }
  }
  d["attributes"] = attributes;
  d["planned_buffers"] = planned_buffers(meta);
  return d;
}

// A method's metadata read from the program alone (nothing loaded), each
// tensor on the device the program places it on.
py::dict program_method_meta(LoadedProgram& lp, const std::string& name) {
  auto meta = lp.program().method_meta(name.c_str());
  if (!meta.ok()) {
    throw Failure(Error::InvalidArgument, "et_copy.runtime: the program has no method '" + name +
                                              "' (it has: " + py::str(method_names(lp)).cast<std::string>() + ")");
  }
  const auto bytes = lp.core->bytes();
  return method_meta_dict(*meta, et_copy::method_io_devices(bytes.data(), bytes.size(), name.c_str()));
}

// What the program's methods ask before logging a tensor, or null.
const et_copy::DebugBufferRoom* debug_buffer_room(LoadedProgram& lp) {
#ifdef ET_COPY_WITH_ETDUMP
  return lp.room.get();
#else
  (void)lp;
  return nullptr;
#endif
}

// The program's ETDump profiler, or null.
executorch::runtime::EventTracer* profiler(LoadedProgram& lp) {
#ifdef ET_COPY_WITH_ETDUMP
  return lp.etdump.get();
#else
  (void)lp;
  return nullptr;
#endif
}

std::shared_ptr<LoadedSession> new_session(const std::shared_ptr<LoadedProgram>& lp) {
  auto ls = std::make_shared<LoadedSession>();
  ls->program = lp;
  ls->session = lp->core->new_session();
  return ls;
}

std::shared_ptr<LoadedMethod> load_method(const std::shared_ptr<LoadedSession>& ls, const std::string& name) {
  LoadedProgram& lp = *ls->program;
  if (!lp.program().method_meta(name.c_str()).ok()) {
    throw Failure(Error::InvalidArgument, "et_copy.runtime: loading method '" + name +
                                              "': the program has no method of that name (it has: " +
                                              py::str(method_names(lp)).cast<std::string>() + ")");
  }
  et_copy::FailureReport report;
  auto loaded = [&] {
    py::gil_scoped_release release;
    auto method = ls->session->load(name, profiler(lp), &report);
    if (method.ok()) {
      std::lock_guard<std::mutex> lock(lp.pool().execution_lock()); // the method may be running already
      (*method)->tracer().set_debug_buffer_room(debug_buffer_room(lp));
    }
    return method;
  }();
  if (!loaded.ok()) {
    raise_report("et_copy.runtime", std::move(report), report.error == Error::NotFound ? kUseDevice : "");
  }
  auto lm = std::make_shared<LoadedMethod>();
  lm->session = ls;
  lm->name = name;
  lm->core = *loaded;
  lm->io = read_method_io(**loaded);
  return lm;
}

void write_file(const std::string& path, const void* data, size_t size, const std::string& what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) {
    throw Failure(Error::AccessFailed, what + ": cannot write " + path);
  }
}

// Writes what the program's profiler recorded since it was last written
// (executorch.runtime's Program.write_etdump_result_to_file): the ETDump to
// `path`, and the debug buffer's bytes to `debug_buffer_path` when the
// program was loaded with one.
void write_etdump(LoadedProgram& lp, const std::string& path, const std::optional<std::string>& debug_buffer_path) {
  const std::string what = "et_copy.runtime: write_etdump_result_to_file";
#ifdef ET_COPY_WITH_ETDUMP
  if (!lp.etdump) {
    throw Failure(Error::InvalidState, what + ": the program was loaded without enable_etdump=True");
  }
  executorch::etdump::ETDumpResult result{nullptr, 0};
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(lp.pool().execution_lock()); // the profiler records every method's events
    result = lp.etdump->get_etdump_data();
    start_profile(lp); // whatever happens to the file: never get_etdump_data twice on one profile
  }
  const std::unique_ptr<void, void (*)(void*)> owned(result.buf, std::free);
  if (result.buf == nullptr || result.size == 0) {
    throw Failure(Error::NotFound, what + ": nothing was recorded (load and execute a method first)");
  }
  write_file(path, result.buf, result.size, what);
  if (debug_buffer_path && !lp.debug_buffer.empty()) {
    write_file(*debug_buffer_path, lp.debug_buffer.data(), lp.debug_buffer.size(), what);
  }
#else
  (void)lp, (void)path, (void)debug_buffer_path;
  throw Failure(Error::NotSupported, what + ": this et_copy was built without ExecuTorch's etdump");
#endif
}

void reset_session(LoadedSession& ls) {
  et_copy::FailureReport failed;
  Error err = Error::Ok;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(ls.program->pool().execution_lock());
    err = ls.session->reset(&failed);
  }
  if (err != Error::Ok) {
    raise_runtime(err, "et_copy.runtime: resetting a session", {failed.detail});
  }
}

// The loaded method's metadata: its inputs and outputs on the devices its
// slots hold them on, its attributes where the program places them.
py::dict method_meta(const LoadedMethod& lm) {
  const auto bytes = lm.session->program->core->bytes();
  et_copy::MethodIoDevices devices = et_copy::method_io_devices(bytes.data(), bytes.size(), lm.name.c_str());
  auto slot_devices = [](const std::vector<IoSlot>& slots) {
    std::vector<et::Device> list;
    for (const IoSlot& slot : slots) {
      list.push_back(slot.device); // CPU's for a value that is not a tensor
    }
    return list;
  };
  devices.inputs = slot_devices(lm.io.inputs);
  devices.outputs = slot_devices(lm.io.outputs);
  return method_meta_dict(lm.core->method().method_meta(), devices);
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

// Runs the method. `inputs`: a list or tuple of torch tensors, DeviceTensors
// (read by tensor_reader.h) or Python scalars, in order. `outputs`: per
// output, None (not a tensor), or the tensor that receives it: bound as the
// output's memory when the program does not plan it, copied into after the
// run when it does, and given the shape the output ran with. Every value is
// checked (method_io.h) before anything runs. Returns a list: per tensor
// output None, per other output its value.
py::list execute(LoadedMethod& lm, const py::handle& inputs, const py::handle& outputs) {
  const MethodIo& io = lm.io;
  if (!PyList_Check(inputs.ptr()) && !PyTuple_Check(inputs.ptr())) {
    throw py::type_error(io.where + ": inputs must be a list or tuple, got " + Py_TYPE(inputs.ptr())->tp_name);
  }
  if (!PyList_Check(outputs.ptr()) && !PyTuple_Check(outputs.ptr())) {
    throw py::type_error(io.where + ": outputs= must be a list or tuple, got " + Py_TYPE(outputs.ptr())->tp_name);
  }
  const auto in = py::reinterpret_borrow<py::sequence>(inputs);
  const auto out = py::reinterpret_borrow<py::sequence>(outputs);
  if (in.size() != io.inputs.size()) {
    throw py::value_error(io.where + ": takes " + std::to_string(io.inputs.size()) + " inputs, got " +
                          std::to_string(in.size()));
  }
  if (out.size() != io.outputs.size()) {
    throw py::value_error(io.where + ": has " + std::to_string(io.outputs.size()) + " outputs, got " +
                          std::to_string(out.size()) + " in outputs=");
  }
  std::vector<std::unique_ptr<TensorView>> views;
  views.reserve(io.inputs.size());
  std::vector<EValue> values(io.inputs.size());
  TensorSpec spec;
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    if (read_input(io, i, in[i].ptr(), spec, values[i])) {
      views.push_back(std::make_unique<TensorView>(spec));
      values[i] = EValue(views.back()->tensor());
    }
  }
  // Per tensor output, the tensor as read (its layout takes the output's
  // final shape); read_output checked it holds the output's nbytes.
  std::vector<std::optional<TensorSpec>> targets(io.outputs.size());
  for (size_t i = 0; i < io.outputs.size(); ++i) {
    if (read_output(io, i, out[i].ptr(), spec)) {
      targets[i] = spec;
    }
  }
  std::vector<et_copy::MethodOutput> bound(io.outputs.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i]) { // read_output checked it holds the output's nbytes, on its device
      if (io.outputs[i].dynamic) {
        check_takes_shape(out[i].ptr(),
                          *targets[i]); // torch refusing the run's shape afterwards would leave out written
      }
      bound[i].data = reinterpret_cast<void*>(targets[i]->data);
      bound[i].nbytes = io.outputs[i].nbytes;
      bound[i].device = et::Device(static_cast<et::DeviceType>(targets[i]->device_type),
                                   static_cast<et::DeviceIndex>(targets[i]->device_index));
    }
  }
  et_copy::FailureReport report;
  Error err = Error::Ok;
  {
    py::gil_scoped_release release;
    err = lm.core->execute({values.data(), values.size()}, {bound.data(), bound.size()}, &report);
  }
  if (err != Error::Ok) {
    // The debug buffer's shortfall (not another failure): say which load argument answers it.
    const bool out_of_debug_buffer = report.debug_buffer_full;
    raise_report(io.where, std::move(report),
                 out_of_debug_buffer ? "; load the program with enable_etdump=True and a larger debug_buffer_size "
                                       "(it fills across executions until write_etdump_result_to_file empties it)"
                                     : "");
  }
  py::list result;
  for (size_t i = 0; i < io.outputs.size(); ++i) {
    if (targets[i]) {
      // A dynamic shape: the given tensor keeps its memory and takes the size it ran with.
      TensorSpec& s = *targets[i];
      const auto& got = bound[i];
      if (!std::equal(got.sizes, got.sizes + got.rank, s.sizes)) { // same rank: its dim order matched above
        std::copy(got.sizes, got.sizes + got.rank, s.sizes);
        dense_strides(s); // in the dim order checked against the output's above
        take_shape(out[i].ptr(), s);
      }
      result.append(py::none());
    } else {
      result.append(output_value(bound[i].value));
    }
  }
  return result;
}

// Runs one of the runtime's load checks over a program's bytes without the
// GIL, raising its refusal as EtCopyError under `name`.
template <typename Check>
void run_load_check(const char* name, const py::bytes& program, Check check) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(program.ptr(), &data, &size) != 0) {
    throw py::error_already_set(); // never: pybind11 passes only bytes objects
  }
  et_copy::FailureReport refusal;
  Error e = Error::Ok;
  {
    py::gil_scoped_release release; // `program` keeps the bytes alive
    e = check(data, static_cast<size_t>(size), &refusal);
  }
  if (e != Error::Ok) {
    raise_runtime(e, name, {refusal.detail});
  }
}

} // namespace

void bind_program(py::module_& m) {
  // The exporter writes the program record with these (et_copy.export); the runtime reads it in C++.
  m.attr("PROGRAM_RECORD_KEY") = et_copy::kProgramRecordKey;
  py::dict llm_methods;
  llm_methods["prefill"] = et_copy::llm::kPrefill;
  llm_methods["decode"] = et_copy::llm::kDecode;
  llm_methods["decode_next"] = et_copy::llm::kDecodeNext;
  llm_methods["set_sampling"] = et_copy::llm::kSetSampling;
  llm_methods["max_seq_len"] = et_copy::llm::kMaxSeqLen;
  llm_methods["max_prompt_len"] = et_copy::llm::kMaxPromptLen;
  llm_methods["max_top_k"] = et_copy::llm::kMaxTopK;
  m.attr("LLM_METHODS") = llm_methods;
  m.attr("PROGRAM_RECORD_VERSION") = et_copy::kProgramRecordVersion;
  py::class_<LoadedProgram, std::shared_ptr<LoadedProgram>>(m, "Program")
      .def_property_readonly("method_names", &method_names)
      .def("new_session", &new_session)
      .def("method_meta", &program_method_meta, py::arg("name"))
      .def("write_etdump", &write_etdump, py::arg("path"), py::arg("debug_buffer_path") = py::none())
      .def_property_readonly("device_scratch_nbytes",
                             [](const LoadedProgram& lp) { return lp.core->pool().device_scratch_nbytes(); });
  py::class_<LoadedSession, std::shared_ptr<LoadedSession>>(m, "Session")
      .def("load_method", &load_method, py::arg("name"))
      .def("reset", &reset_session)
      .def_property_readonly("state_nbytes", [](const LoadedSession& s) { return s.session->state_nbytes(); })
      .def_property_readonly("device_nbytes", [](const LoadedSession& s) { return s.session->device_nbytes(); });
  py::class_<LoadedMethod, std::shared_ptr<LoadedMethod>>(m, "Method")
      .def_readonly("name", &LoadedMethod::name)
      .def("meta", &method_meta)
      .def("execute", &execute, py::arg("inputs"), py::arg("outputs"));
  m.def(
      "load_program",
      [](py::bytes data, int verification, std::optional<std::string> data_path, bool enable_etdump,
         size_t debug_buffer_size, int threads, bool verify_data, bool trust_code) {
        return load_program(data, {verification, std::move(data_path), enable_etdump, debug_buffer_size, threads,
                                   verify_data, trust_code});
      },
      py::arg("data"), py::arg("verification") = 1, py::arg("data_path") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0, py::arg("threads") = 0, py::arg("verify_data") = false,
      py::arg("trust_code") = false, "Loads program bytes (verification 0: Minimal, 1: InternalConsistency).");
  m.def(
      "load_program_file",
      [](const std::string& path, int verification, std::optional<std::string> data_path, bool enable_etdump,
         size_t debug_buffer_size, int threads, bool verify_data, bool trust_code) {
        return load_program_file(path, {verification, std::move(data_path), enable_etdump, debug_buffer_size, threads,
                                        verify_data, trust_code});
      },
      py::arg("path"), py::arg("verification") = 1, py::arg("data_path") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0, py::arg("threads") = 0, py::arg("verify_data") = false,
      py::arg("trust_code") = false, "Loads a program file, mmapped.");
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
  m.def(
      "check_device_access",
      [](py::bytes program, std::optional<std::vector<std::string>> backends) {
        const std::vector<std::string> allowed = backends ? std::move(*backends) : et_copy::device_backends();
        run_load_check("et_copy.check_device_access", program,
                       [&](const void* data, size_t size, et_copy::FailureReport* refusal) {
                         return et_copy::check_device_access(data, size, allowed, refusal);
                       });
      },
      py::arg("program"), py::arg("backends") = py::none(),
      "Refuses a program whose host would read or write device memory (EtCopyError, InvalidProgram). backends: the "
      "delegate backend ids allowed on the device; None: device_backends().");
  m.def(
      "check_argument_kinds",
      [](py::bytes program) {
        run_load_check("et_copy.check_argument_kinds", program,
                       [](const void* data, size_t size, et_copy::FailureReport* refusal) {
                         return et_copy::check_argument_kinds(data, size, "", refusal);
                       });
      },
      py::arg("program"),
      "Refuses a program with a kernel argument of a kind its operator's schema does not take (EtCopyError, "
      "InvalidProgram). Indices out of range are skipped (the load check reports them).");
  m.def("has_argument_kinds", &et_copy::has_argument_kinds, py::arg("operator"),
        "Whether the argument-kind table holds `operator` ('name.overload'); a call of one it lacks loads unchecked.");
  m.def("argument_kinds_operator_count", &et_copy::argument_kinds_operator_count,
        "How many operators the argument-kind table holds (0: built without Python and torch).");
  m.def(
      "device_backends", [] { return et_copy::device_backends(); },
      "The delegate backend ids the allocator serving CUDA allows on the device.");
  m.def("set_forwarded_log_levels", &et_copy::set_forwarded_levels, py::arg("info_and_debug"),
        "Whether ExecuTorch's info and debug log lines reach stderr (et_copy._quiet turns them off); returns the "
        "previous setting.");
}

} // namespace et_copy::bindings
