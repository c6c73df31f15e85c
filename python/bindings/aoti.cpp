#include "aoti.h"

#include <string>

#include <et_copy/aoti_backend.h>
#include <et_copy/delegate_record.h>

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
}

} // namespace et_copy::bindings
