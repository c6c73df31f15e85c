#include "named_backends.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <et_copy/program_check.h>
#include <et_copy/registration.h>
#ifdef ET_COPY_EXECUTOR_WITH_AOTI
#include <et_copy/aoti_backend.h>
#endif

#include <executorch/extension/data_loader/mmap_data_loader.h>

namespace {

using executorch::extension::MmapDataLoader;
using executorch::runtime::DataLoader;
using executorch::runtime::Error;

// The id AotiDeviceBackend serves, known here even when it is not linked.
constexpr const char* kAotiId = "AotiDeviceBackend";

std::vector<std::string> backend_ids(const std::string& path) {
  auto loader = MmapDataLoader::from(path.c_str(), MmapDataLoader::MlockConfig::NoMlock);
  if (!loader.ok()) {
    return {};
  }
  auto size = loader->size();
  if (!size.ok()) {
    return {};
  }
  // Mapped, so only the pages the flatbuffer's tables sit on are read.
  auto bytes = loader->load(0, *size, DataLoader::SegmentInfo(DataLoader::SegmentInfo::Type::Program));
  if (!bytes.ok()) {
    return {};
  }
  return et_copy::delegate_backend_ids(bytes->data(), bytes->size());
}

} // namespace

bool register_named_backends(const std::string& path) {
  const std::vector<std::string> ids = backend_ids(path);
  if (std::find(ids.begin(), ids.end(), kAotiId) == ids.end()) {
    return true;
  }
#ifdef ET_COPY_EXECUTOR_WITH_AOTI
  Error err = Error::Ok;
  const et_copy::Registration r = et_copy::register_aoti_backend(&err);
  std::printf("backend %s: %s\n", et_copy::kAotiDeviceBackend, et_copy::registration_name(r));
  if (r == et_copy::Registration::kFailed) {
    std::fprintf(stderr, "et_copy_executor: cannot register %s: %s (error 0x%x)\n", et_copy::kAotiDeviceBackend,
                 executorch::runtime::to_string(err), static_cast<unsigned>(err));
    return false;
  }
  if (r == et_copy::Registration::kAlreadyOther) {
    std::fprintf(stderr, "et_copy_executor: another backend is registered as %s; its delegates run there\n",
                 et_copy::kAotiDeviceBackend);
  }
  return true;
#else
  std::fprintf(stderr,
               "et_copy_executor: %s has delegates of %s (compiled code, backend=\"aoti\"), and this executor was "
               "built without it: build it against an et_copy package that has et_copy::aoti (et_copy_HAS_AOTI; "
               "et-copy's wheel, or a build with -DET_COPY_BUILD_AOTI=ON)\n",
               path.c_str(), kAotiId);
  return false;
#endif
}

void hint_trust_code(const et_copy::FailureReport& report) {
  if (report.error == Error::AccessFailed) {
    std::fputs(
        "et_copy_executor: --trust-code runs compiled code this machine did not compile; only for a "
        "program from a source you would run a binary from\n",
        stderr);
  }
}
