// et_copy._C: the bindings. They translate Python values into the C++
// core's types and its failures into et_copy.EtCopyError, and do no more.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include <et_copy/copy_ops.h>
#include <et_copy/delegate_record.h>
#include <et_copy/failure_report.h>
#include <et_copy/limits.h>

#include "allocators.h"
#include "copies.h"
#include "device_tensor.h"
#ifdef ET_COPY_WITH_CUDA
#include "cuda.h"
#endif
#include "failure.h"
#include "loops.h"
#include "program.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

// et_copy.EtCopyError, made at import and kept for the life of the process.
PyObject* g_error_type = nullptr;

constexpr const char kErrorDoc[] =
    "An et_copy operation was rejected or failed.\n"
    "\n"
    "``error`` is the ExecuTorch ``Error`` name (``\"InvalidArgument\"``,\n"
    "``\"NotFound\"``, ...); the message names the op, the argument and the\n"
    "problem. When a program failed in ``et_copy.runtime``, ``instruction``\n"
    "(\"chain:instruction\") and ``operator`` name where, when ExecuTorch said,\n"
    "and ``log`` holds the error lines it logged (the kernel's own diagnostic\n"
    "among them); otherwise they are None and empty.\n"
    "\n"
    "EtCopyError(message, *, error=\"Internal\", instruction=None, operator=None, log=())";

// EtCopyError.__init__(self, message, *, error="Internal", instruction=None,
// operator=None, log=()).
PyObject* error_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"message", "error", "instruction", "operator", "log", nullptr};
  PyObject* message = nullptr;
  PyObject* error = nullptr;
  PyObject* instruction = Py_None;
  PyObject* op = Py_None;
  PyObject* log = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OOOO:EtCopyError", const_cast<char**>(kwlist), &message, &error,
                                   &instruction, &op, &log)) {
    return nullptr;
  }
  try {
    py::tuple message_only = py::make_tuple(py::handle(message));
    if (reinterpret_cast<PyTypeObject*>(PyExc_RuntimeError)->tp_init(self, message_only.ptr(), nullptr) < 0) {
      return nullptr;
    }
    py::handle e(self);
    e.attr("error") = error != nullptr ? py::reinterpret_borrow<py::object>(error) : py::str("Internal");
    e.attr("instruction") = py::handle(instruction);
    e.attr("operator") = py::handle(op);
    e.attr("log") = log != nullptr ? py::tuple(py::reinterpret_borrow<py::object>(log)) : py::tuple();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef error_init_def = {"__init__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(error_init)),
                              METH_VARARGS | METH_KEYWORDS, nullptr};

// A RuntimeError whose fields live in its __dict__, so BaseException's own
// __reduce__ (type, args, __dict__) keeps them across pickling.
void bind_error(py::module_& m) {
  PyObject* type = PyErr_NewExceptionWithDoc("et_copy.EtCopyError", kErrorDoc, PyExc_RuntimeError, nullptr);
  if (type == nullptr) {
    throw py::error_already_set(); // MemoryError at import: the name is a dotted constant
  }
  py::object cls = py::reinterpret_steal<py::object>(type);
  PyObject* init = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(type), &error_init_def);
  if (init == nullptr) {
    throw py::error_already_set(); // MemoryError at import
  }
  cls.attr("__init__") = py::reinterpret_steal<py::object>(init);
  g_error_type = cls.inc_ref().ptr();
  m.add_object("EtCopyError", cls);
}

// Text for Python. A message may quote bytes of an untrusted program (a
// name, a record line), which need not be UTF-8: those become U+FFFD.
py::object text(const std::string& s) {
  PyObject* u = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (u == nullptr) {
    throw py::error_already_set(); // MemoryError: "replace" decodes any bytes
  }
  return py::reinterpret_steal<py::object>(u);
}

py::object optional_str(const std::optional<std::string>& s) {
  return s ? text(*s) : py::object(py::none());
}

// Sets EtCopyError(...) as the Python error; if making it fails, that failure.
void set_error(const std::string& message, const char* error, const std::optional<std::string>& instruction,
               const std::optional<std::string>& op, const std::vector<std::string>& log) {
  try {
    py::tuple lines(log.size());
    for (size_t i = 0; i < log.size(); ++i) {
      lines[i] = text(log[i]);
    }
    py::object exc = py::handle(g_error_type)(text(message), py::arg("error") = error,
                                              py::arg("instruction") = optional_str(instruction),
                                              py::arg("operator") = optional_str(op), py::arg("log") = lines);
    PyErr_SetObject(g_error_type, exc.ptr());
  } catch (py::error_already_set& e) {
    e.restore();
  }
}

} // namespace

void set_python_error(const Failure& f) {
  set_error(f.what(), error_name(f.error), std::nullopt, std::nullopt, {});
}

void raise_error(const std::string& message, const char* error, const std::optional<std::string>& instruction,
                 const std::optional<std::string>& op, const std::vector<std::string>& log) {
  set_error(message, error, instruction, op, log);
  throw py::error_already_set();
}

} // namespace et_copy::bindings

PYBIND11_MODULE(_C, m) {
  using namespace et_copy::bindings;
  m.doc() = "et_copy's C++ core. Use the et_copy package, not this module.";
  bind_error(m);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) {
        std::rethrow_exception(p);
      }
    } catch (const Failure& f) {
      set_python_error(f);
    }
  });

  m.attr("H2D_COPY_OUT") = et_copy::kH2dCopyOutName;
  m.attr("D2H_COPY_OUT") = et_copy::kD2hCopyOutName;
  // The delegate record's format (et_copy/delegate_record.h), which Python writes;
  // each payload kind's word is its backend's (its own extension).
  m.attr("DELEGATE_RECORD_MAGIC") = et_copy::kDelegateRecordMagic;
  m.attr("DELEGATE_RECORD_VERSION") = et_copy::kDelegateRecordVersion;
  // The core's limits and names (et_copy/limits.h, failure_report.h), so
  // Python spells none of them again.
  m.attr("MAX_TENSOR_DIMS") = et_copy::kMaxTensorDims;
  m.attr("MAX_DEVICES") = et_copy::kMaxDevices;
  m.attr("MIN_DEVICE_INDEX") = et_copy::kMinDeviceIndex;
  m.attr("MAX_DEVICE_INDEX") = et_copy::kMaxDeviceIndex;
  m.attr("DEVICE_ALIGNMENT") = et_copy::kDeviceAlignment;
  m.attr("TENSOR_ALIGNMENT") = et_copy::kTensorAlignment;
  m.def("device_name", py::overload_cast<int, int>(&et_copy::device_name), py::arg("device_type"),
        py::arg("device_index"), "'cpu', 'cuda:N' or 'device type T:N': how et-copy names a device everywhere.");
  bind_allocators(m);
  bind_device_tensor(m);
  bind_copies(m);
  bind_program(m);
#ifdef ET_COPY_WITH_CUDA
  bind_cuda(m);
#endif
  // In _C, not an extension of its own: a second extension would link a
  // second copy of the runtime (registry lock, served() cache, kernels).
  py::module_ loops = m.def_submodule("loops");
  bind_loops(loops);
}
