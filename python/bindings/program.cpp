// et_copy.runtime's Program, Session and Method: loading a program through
// the C++ core (et_copy::LoadedProgram), its sessions and methods, and the
// bindings of all three; their metadata (method_meta.cpp), profiles
// (etdump.cpp) and execution (execute.cpp) are bound here from their own
// files. Failures raise EtCopyError.
#include "program.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <et_copy/argument_kinds.h>
#include <et_copy/backend_options.h>
#include <et_copy/device_backend.h>
#include <et_copy/llm_methods.h>
#include <et_copy/log_capture.h>
#include <et_copy/program_check.h>
#include <et_copy/program_record.h>
#include <et_copy/registration.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include "etdump.h"
#include "execute.h"
#include "failure.h"
#include "method_io.h"
#include "method_meta.h"
#include "program_objects.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::extension::BufferDataLoader;
using executorch::extension::MmapDataLoader;
using executorch::runtime::Error;
using executorch::runtime::Program;

// What to do about a device nothing serves yet, after a NotFound.
const char kUseDevice[] = " (call et_copy.use_simulated_device() or et_copy.use_cuda() first)";

} // namespace

[[noreturn]] void raise_runtime(Error e, const std::string& what, const std::vector<std::string>& log) {
  et_copy::FailureReport r;
  r.error = e;
  r.step = what;
  r.log = log;
  raise_error(r.message(), error_name(e), std::nullopt, std::nullopt, log);
}

[[noreturn]] void raise_report(const std::string& where, et_copy::FailureReport r, const std::string& hint) {
  auto or_none = [](const std::string& s) { return s.empty() ? std::nullopt : std::optional<std::string>(s); };
  r.step = where + ": " + r.step;
  if (!r.detail.empty()) {
    r.log.insert(r.log.begin(), r.detail + hint);
    r.detail.clear();
  }
  raise_error(r.message(), error_name(r.error), or_none(r.instruction), or_none(r.op), r.log);
}

py::list method_names(const PyProgram& lp) {
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

namespace {

std::unique_ptr<executorch::runtime::DataLoader> mmap_file(const std::string& path, const std::string& what) {
  auto loader = MmapDataLoader::from(path.c_str(), MmapDataLoader::MlockConfig::NoMlock);
  if (!loader.ok()) {
    throw Failure(loader.error(), what + ": cannot map " + path + " (missing, unreadable or empty)");
  }
  return std::make_unique<MmapDataLoader>(std::move(*loader));
}

// The id under which load options go to every device backend (et_copy.runtime's
// threads, verify_data and trust_code; BackendLoadOptions::set_for_every_backend).
constexpr const char* kEveryBackend = "*";

// Options of a load beyond the bytes: executorch.runtime's load_program
// arguments; the backends' own options, opaque, by backend id.
struct LoadArguments {
  int verification = 1; // 0: Minimal, 1: InternalConsistency
  std::optional<std::string> data_path;
  bool enable_etdump = false;
  size_t debug_buffer_size = 0;
  py::dict backend_options;
};

// {backend id or "*": {key: bool, int or str}} as the core's opaque options.
et_copy::BackendLoadOptions backend_load_options(const py::dict& given, const std::string& what) {
  et_copy::BackendLoadOptions options;
  for (const auto& [id_obj, entries] : given) {
    if (!py::isinstance<py::str>(id_obj) || !py::isinstance<py::dict>(entries)) {
      throw py::type_error(what + ": backend_options maps backend ids (str) to dicts of options");
    }
    const auto id = id_obj.cast<std::string>();
    for (const auto& [key_obj, value] : entries.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key_obj)) {
        throw py::type_error(what + ": backend_options['" + id + "'] has a key that is not a str");
      }
      const auto key = key_obj.cast<std::string>();
      et_copy::BackendLoadOptions::Value v;
      if (py::isinstance<py::bool_>(value)) {
        v = value.cast<bool>();
      } else if (py::isinstance<py::int_>(value)) {
        const auto n = value.cast<long long>();
        if (n < INT32_MIN || n > INT32_MAX) {
          throw py::value_error(what + ": backend option '" + key + "' of '" + id + "' is outside int32");
        }
        v = static_cast<int>(n);
      } else if (py::isinstance<py::str>(value)) {
        v = value.cast<std::string>();
      } else {
        throw py::type_error(what + ": backend option '" + key + "' of '" + id + "' is a " +
                             std::string(py::str(py::type::of(value).attr("__name__"))) + ", not a bool, int or str");
      }
      const Error e =
          id == kEveryBackend ? options.set_for_every_backend(key, std::move(v)) : options.set(id, key, std::move(v));
      if (e != Error::Ok) {
        throw Failure(e, what + ": backend option '" + key + "' of '" + id +
                             "' cannot be passed (an empty id or key, a key of 64 chars or more, a str of 256 or "
                             "more, or pool or session, which the runtime sets itself)");
      }
    }
  }
  return options;
}

// Loads the program `loader` serves into `lp` through the core, with the
// named data of `options.data_path` (a .ptd file) when given.
void load_into(PyProgram& lp, std::unique_ptr<executorch::runtime::DataLoader> loader, const LoadArguments& options) {
  const std::string what = "et_copy.runtime.load";
  const int verification = options.verification;
  if (verification != 0 && verification != 1) {
    throw Failure(Error::InvalidArgument, what +
                                              ": verification must be Verification.Minimal (0) or "
                                              "Verification.InternalConsistency (1), got " +
                                              std::to_string(verification));
  }
  if (options.enable_etdump) {
    enable_etdump(lp, options.debug_buffer_size, what);
  }
  std::unique_ptr<executorch::runtime::DataLoader> data;
  if (options.data_path) {
    data = mmap_file(*options.data_path, what + ": data_path");
  }
  et_copy::LoadOptions core_options;
  core_options.verification =
      verification == 0 ? Program::Verification::Minimal : Program::Verification::InternalConsistency;
  core_options.backend_options = backend_load_options(options.backend_options, what);
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

std::shared_ptr<PyProgram> load_program(py::bytes data, const LoadArguments& options) {
  auto lp = std::make_shared<PyProgram>();
  lp->bytes = data; // owned here: the Program reads from it for its whole life
  load_into(*lp, std::make_unique<BufferDataLoader>(lp->bytes.data(), lp->bytes.size()), options);
  return lp;
}

// A program file, mmapped rather than read: pages are read as the program
// needs them, and the weights are never copied.
std::shared_ptr<PyProgram> load_program_file(const std::string& path, const LoadArguments& options) {
  auto lp = std::make_shared<PyProgram>();
  load_into(*lp, mmap_file(path, "et_copy.runtime.load"), options);
  return lp;
}

std::shared_ptr<PySession> new_session(const std::shared_ptr<PyProgram>& lp) {
  auto ls = std::make_shared<PySession>();
  ls->program = lp;
  ls->session = lp->core->new_session();
  return ls;
}

std::shared_ptr<PyMethod> load_method(const std::shared_ptr<PySession>& ls, const std::string& name) {
  PyProgram& lp = *ls->program;
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
  auto lm = std::make_shared<PyMethod>();
  lm->session = ls;
  lm->name = name;
  lm->core = *loaded;
  lm->io = read_method_io(**loaded);
  return lm;
}

void reset_session(PySession& ls) {
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
  py::class_<PyProgram, std::shared_ptr<PyProgram>>(m, "Program")
      .def_property_readonly("method_names", &method_names)
      .def("new_session", &new_session)
      .def("method_meta", &program_method_meta, py::arg("name"))
      .def("write_etdump", &write_etdump, py::arg("path"), py::arg("debug_buffer_path") = py::none())
      .def_property_readonly("device_scratch_nbytes",
                             [](const PyProgram& lp) { return lp.core->pool().device_scratch_nbytes(); });
  py::class_<PySession, std::shared_ptr<PySession>>(m, "Session")
      .def("load_method", &load_method, py::arg("name"))
      .def("reset", &reset_session)
      .def_property_readonly("state_nbytes", [](const PySession& s) { return s.session->state_nbytes(); })
      .def_property_readonly("device_nbytes", [](const PySession& s) { return s.session->device_nbytes(); });
  py::class_<PyMethod, std::shared_ptr<PyMethod>>(m, "Method")
      .def_readonly("name", &PyMethod::name)
      .def("meta", &method_meta)
      .def("execute", &execute, py::arg("inputs"), py::arg("outputs"));
  m.def(
      "load_program",
      [](py::bytes data, int verification, std::optional<std::string> data_path, bool enable_etdump,
         size_t debug_buffer_size, py::dict backend_options) {
        return load_program(
            data, {verification, std::move(data_path), enable_etdump, debug_buffer_size, std::move(backend_options)});
      },
      py::arg("data"), py::arg("verification") = 1, py::arg("data_path") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0, py::arg("backend_options") = py::dict(),
      "Loads program bytes (verification 0: Minimal, 1: InternalConsistency).");
  m.def(
      "load_program_file",
      [](const std::string& path, int verification, std::optional<std::string> data_path, bool enable_etdump,
         size_t debug_buffer_size, py::dict backend_options) {
        return load_program_file(
            path, {verification, std::move(data_path), enable_etdump, debug_buffer_size, std::move(backend_options)});
      },
      py::arg("path"), py::arg("verification") = 1, py::arg("data_path") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0, py::arg("backend_options") = py::dict(), "Loads a program file, mmapped.");
  // The backend id of options for every device backend, and the keys of et_copy.runtime's three conveniences.
  m.attr("EVERY_BACKEND") = kEveryBackend;
  m.attr("THREADS_SPEC") = et_copy::kThreadsSpec;
  m.attr("VERIFY_DATA_SPEC") = et_copy::kVerifyDataSpec;
  m.attr("TRUST_CODE_SPEC") = et_copy::kTrustCodeSpec;
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
