#include "aoti.h"

#include <string>

#include <et_copy/aoti_backend.h>
#include <et_copy/code_trust.h>
#include <et_copy/delegate_record.h>
#include <et_copy/simulated_device_backend.h>

#include "failure.h"

namespace py = pybind11;

namespace et_copy::bindings {

void bind_aoti(py::module_& m) {
  // The delegate record's format (et_copy/delegate_record.h), which Python writes.
  m.attr("DELEGATE_RECORD_MAGIC") = kDelegateRecordMagic;
  m.attr("DELEGATE_RECORD_VERSION") = kDelegateRecordVersion;
  m.attr("PAYLOAD_PROGRAM") = kPayloadProgram;
  m.attr("PAYLOAD_AOTI") = kPayloadAoti;
  m.attr("AOTI_BACKEND_ID") = kAotiDeviceBackend;
  m.attr("AOTI_TORCH_VERSION") = aoti_torch_version();

  m.def(
      "register_aoti_backend",
      [] {
        executorch::runtime::Error err = executorch::runtime::Error::Ok;
        const Registration r = register_aoti_backend(&err);
        const std::string op = "et_copy.use_aoti_backend";
        if (r == Registration::kFailed) {
          throw Failure(err, op + ": ExecuTorch's backend registry refused " + kAotiDeviceBackend);
        }
        if (r == Registration::kAlreadyOther) {
          throw Failure(executorch::runtime::Error::RegistrationAlreadyRegistered,
                        op + ": another library registered a backend named " + kAotiDeviceBackend +
                            "; ExecuTorch cannot replace a registered backend");
        }
        return std::string(registration_name(r));
      },
      "et_copy::register_aoti_backend: 'registered' or 'already et_copy'; raises EtCopyError otherwise.");

  // Which compiled code may run (et_copy/code_trust.h).
  m.def("compile_cache_dir", &compile_cache_dir,
        "et_copy::compile_cache_dir: the compile cache's folder, '' when off.");
  m.def(
      "trust_compiled_code",
      [](const std::string& digest, bool compiled_here) {
        const auto e = compiled_here ? mark_compiled_here(digest) : trust_compiled_code(digest);
        if (e != executorch::runtime::Error::Ok) {
          throw Failure(e, "et_copy.backends.aoti.trust: '" + digest + "' is not a SHA-256 in 64 lowercase hex digits");
        }
      },
      py::arg("digest"), py::arg("compiled_here") = false,
      "et_copy::trust_compiled_code, or et_copy::mark_compiled_here with compiled_here.");
  m.def("is_trusted_code", &is_trusted_code, py::arg("digest"), "et_copy::is_trusted_code.");
}

} // namespace et_copy::bindings
