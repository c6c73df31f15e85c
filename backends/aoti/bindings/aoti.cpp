// et_copy.backends.aoti._aoti: the compiled backend's bindings, an extension
// of its own. It links et-copy's shared runtime (libet_copy_runtime.so), so
// the backend lands in the tables et_copy._C's loads walk, and the backend's
// archive (et_copy_aoti), whose static initializer describes the backend
// when this module loads (a refusal names its registration); it registers
// nothing until register_aoti_backend() is called.
#include <pybind11/pybind11.h>

#include <string>

#include <et_copy/aoti_backend.h>
#include <et_copy/code_trust.h>

#include "backend_error.h"

namespace py = pybind11;

using et_copy::bindings::raise_et_copy_error;
using et_copy::bindings::registration_answer;
using executorch::runtime::Error;

PYBIND11_MODULE(_aoti, m) {
  m.doc() = "The compiled device backend's runtime side. Use et_copy.backends.aoti, not this module.";
  // Its payload kind, as the delegate record spells it (et_copy/aoti_backend.h), which Python writes.
  m.attr("PAYLOAD_AOTI") = et_copy::kPayloadAoti;
  m.attr("AOTI_BACKEND_ID") = et_copy::kAotiDeviceBackend;
  m.attr("AOTI_TORCH_VERSION") = et_copy::aoti_torch_version();

  m.def(
      "register_aoti_backend",
      [] {
        Error err = Error::Ok;
        const et_copy::Registration r = et_copy::register_aoti_backend(&err);
        return registration_answer(r, err, "et_copy.use_aoti_backend", et_copy::kAotiDeviceBackend);
      },
      "et_copy::register_aoti_backend: 'registered' or 'already et_copy'; raises EtCopyError otherwise.");

  // Which compiled code may run (et_copy/code_trust.h).
  m.def("compile_cache_dir", &et_copy::compile_cache_dir,
        "et_copy::compile_cache_dir: the compile cache's folder, '' when off.");
  m.def(
      "trust_compiled_code",
      [](const std::string& digest, bool compiled_here) {
        const Error e = compiled_here ? et_copy::mark_compiled_here(digest) : et_copy::trust_compiled_code(digest);
        if (e != Error::Ok) {
          raise_et_copy_error(
              e, "et_copy.backends.aoti.trust: '" + digest + "' is not a SHA-256 in 64 lowercase hex digits");
        }
      },
      py::arg("digest"), py::arg("compiled_here") = false,
      "et_copy::trust_compiled_code, or et_copy::mark_compiled_here with compiled_here.");
  m.def("is_trusted_code", &et_copy::is_trusted_code, py::arg("digest"), "et_copy::is_trusted_code.");
}
