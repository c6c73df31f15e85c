// Linking et_copy::simulated describes the simulated device's backend to
// et-copy's tables (its payload kind, and the registration call a load
// check's refusal names), as the backend library does when it loads. It is
// an object of its own, on the link line of every program that links
// et_copy::simulated, so the linker keeps it though nothing references it:
// in the archive alone, the library's own initializer is dropped with its
// object file by a program that never calls into it. Registers nothing with
// ExecuTorch: register_simulated_device_backend() does, when the program
// asks (after use_simulated_device(), whose allocator the backend runs on).
#include <et_copy/simulated_device_backend.h>

#include <executorch/runtime/platform/log.h>

namespace {

executorch::runtime::Error describe_when_linked() {
  const executorch::runtime::Error error = et_copy::describe_simulated_device_backend();
  if (error != executorch::runtime::Error::Ok) {
    ET_LOG(Error, "%s: describing it when the program started failed (error 0x%x)", et_copy::kSimulatedDeviceBackend,
           static_cast<unsigned>(error));
  }
  return error;
}

[[maybe_unused]] const executorch::runtime::Error kDescribedWhenLinked = describe_when_linked();

} // namespace
