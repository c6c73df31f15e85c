// Linking et_copy::aoti registers the compiled backend, as ExecuTorch's own
// backend libraries register theirs: this object's static initializer calls
// register_aoti_backend() (idempotent: a program that calls it too gets
// kAlreadyOurs, and nothing is registered twice). It is an object of its own,
// on the link line of every program that links et_copy::aoti, so the linker
// keeps it though nothing references it. The library et_copy_aoti holds the
// backend without it: its Python extension (_aoti) links that one, and an import
// registers nothing (et_copy.use_aoti_backend() does). The allocator stays
// the program's choice (use_simulated_device(), use_cuda()).
#include <et_copy/aoti_backend.h>

#include <executorch/runtime/platform/log.h>

namespace {

et_copy::Registration register_when_linked() {
  executorch::runtime::Error error = executorch::runtime::Error::Ok;
  const et_copy::Registration r = et_copy::register_aoti_backend(&error);
  if (r == et_copy::Registration::kFailed) {
    ET_LOG(Error, "%s: registering it when the program started failed (error 0x%x)", et_copy::kAotiDeviceBackend,
           static_cast<unsigned>(error));
  }
  return r;
}

[[maybe_unused]] const et_copy::Registration kRegisteredWhenLinked = register_when_linked();

} // namespace
