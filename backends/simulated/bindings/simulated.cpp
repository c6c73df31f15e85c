// et_copy.backends.simulated._simulated: the simulated device's backend's
// bindings, an extension of its own. It links et-copy's shared runtime
// (libet_copy_runtime.so), so the backend lands in the tables et_copy._C's
// loads walk, and the backend's archive (et_copy_simulated), whose static
// initializer describes the backend when this module loads (a refusal names
// its registration); it registers nothing until
// register_simulated_device_backend() is called. The simulated *allocator*
// is the core's, bound in et_copy._C.
#include <pybind11/pybind11.h>

#include <string>

#include <et_copy/simulated_device_backend.h>

#include "backend_error.h"

using et_copy::bindings::raise_et_copy_error;
using executorch::runtime::Error;

PYBIND11_MODULE(_simulated, m) {
  m.doc() = "The simulated device's backend's runtime side. Use et_copy.backends.simulated, not this module.";
  // Its payload kind, as the delegate record spells it (et_copy/simulated_device_backend.h), which Python writes.
  m.attr("PAYLOAD_PROGRAM") = et_copy::kPayloadProgram;

  m.def(
      "register_simulated_device_backend",
      [] {
        Error err = Error::Ok;
        const et_copy::Registration r = et_copy::register_simulated_device_backend(&err);
        const std::string op = "et_copy.register_simulated_device_backend";
        if (r == et_copy::Registration::kFailed) {
          raise_et_copy_error(err, op + ": ExecuTorch's backend registry refused " + et_copy::kSimulatedDeviceBackend);
        }
        if (r == et_copy::Registration::kAlreadyOther) {
          raise_et_copy_error(Error::RegistrationAlreadyRegistered,
                              op + ": another library registered a backend named " + et_copy::kSimulatedDeviceBackend +
                                  "; ExecuTorch cannot replace a registered backend");
        }
        return std::string(et_copy::registration_name(r));
      },
      "et_copy::register_simulated_device_backend: 'registered' or 'already et_copy'; raises EtCopyError "
      "otherwise.");
}
