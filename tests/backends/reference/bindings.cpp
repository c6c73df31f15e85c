// et_copy_reference._reference: the backend's one registration, from Python.
// It links libet_copy_runtime.so, the runtime et_copy's own extension uses,
// so the backend lands in the tables that et_copy.runtime's loads walk.
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

#include <et_copy/registration.h>

#include "reference_backend.h"

PYBIND11_MODULE(_reference, m) {
  m.def(
      "register",
      [] {
        const et_copy::Registration r = et_copy_reference::register_reference_backend();
        if (r == et_copy::Registration::kFailed || r == et_copy::Registration::kAlreadyOther) {
          throw std::runtime_error(std::string("et_copy_reference.register: ") + et_copy::registration_name(r) +
                                   ": the runtime refused " + et_copy_reference::kReferenceDeviceBackend);
        }
        return std::string(et_copy::registration_name(r));
      },
      "Registers ReferenceDeviceBackend: 'registered', then 'already et_copy'.");
}
