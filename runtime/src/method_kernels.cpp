// et_copy::method_kernels(): et-copy's kernels scoped to one method, for
// executors whose kernel library already registered the et_copy names.
#include <et_copy/registration.h>

#include <cstring>
#include <memory>
#include <vector>

#include <et_copy/copy_ops.h>

#include "registry_lock.h"

namespace et_copy {

namespace {

using executorch::runtime::Kernel;
using executorch::runtime::Span;

bool is_copy_op(const char* name) {
  return name != nullptr && (std::strcmp(name, kH2dCopyOutName) == 0 || std::strcmp(name, kD2hCopyOutName) == 0);
}

struct Snapshot {
  size_t registry_size = 0; // the global registry only grows
  std::vector<Kernel> kernels;
};

// Every snapshot ever handed out, kept for the life of the process: a
// method may hold its span, and a load on another thread may be reading an
// older one while a newer one is built.
std::vector<std::unique_ptr<Snapshot>>& snapshots() {
  static auto* all = new std::vector<std::unique_ptr<Snapshot>>();
  return *all;
}

} // namespace

Span<const Kernel> method_kernels() {
  std::lock_guard<std::mutex> lock(internal::registry_mutex());
  const Span<const Kernel> registry = executorch::runtime::get_registered_kernels();
  auto& all = snapshots();
  if (all.empty() || all.back()->registry_size != registry.size()) {
    auto snap = std::make_unique<Snapshot>();
    snap->registry_size = registry.size();
    snap->kernels.reserve(registry.size() + 2);
    // Ours first; every other library's et_copy entries (any kernel key) left out.
    snap->kernels.emplace_back(kH2dCopyOutName, &h2d_copy_out_boxed);
    snap->kernels.emplace_back(kD2hCopyOutName, &d2h_copy_out_boxed);
    for (const Kernel& k : registry) {
      if (!is_copy_op(k.name_)) {
        snap->kernels.push_back(k);
      }
    }
    all.push_back(std::move(snap));
  }
  const auto& kernels = all.back()->kernels;
  return {kernels.data(), kernels.size()};
}

} // namespace et_copy
