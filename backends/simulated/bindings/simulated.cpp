// et_copy.backends.simulated._simulated: the simulated device's backend's
// bindings, an extension of its own. It links et-copy's shared runtime
// (libet_copy_runtime.so), so the backend lands in the tables et_copy._C's
// loads walk, and the backend's archive (et_copy_simulated), whose static
// initializer describes the backend when this module loads (a refusal names
// its registration); it registers nothing until
// register_simulated_device_backend() is called. The simulated *allocator*
// is the core's, bound in et_copy._C.
#include <pybind11/pybind11.h>

#include <et_copy/simulated_device_backend.h>

#include "backend_error.h"

using et_copy::bindings::registration_answer;
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
        return registration_answer(r, err, "et_copy.register_simulated_device_backend",
                                   et_copy::kSimulatedDeviceBackend);
      },
      "et_copy::register_simulated_device_backend: 'registered' or 'already et_copy'; raises EtCopyError "
      "otherwise.");
}
