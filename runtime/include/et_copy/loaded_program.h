// A program loaded the one way et-copy runs programs: verified, checked
// (check_device_access), with its named data and its SessionPool. Sessions
// of it load methods (Session::load) and run them through
// LoadedMethod::execute (et_copy/loaded_method.h). The Python bindings
// (et_copy.runtime), the example executor and its --generate mode all load
// programs here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/core/freeable_buffer.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <et_copy/backend_options.h>
#include <et_copy/failure_report.h>
#include <et_copy/registration.h>
#include <et_copy/sessions.h>

namespace et_copy {

struct LoadOptions {
  /// Minimal or InternalConsistency (ExecuTorch's; check_program_indices
  /// runs either way).
  executorch::runtime::Program::Verification verification =
      executorch::runtime::Program::Verification::InternalConsistency;
  /// The kernels every method is loaded with, before the global registry:
  /// method_kernels() (et-copy's copy kernels, whatever the registry holds),
  /// or an empty span for the global registry alone. Must outlive the program.
  executorch::runtime::Span<const executorch::runtime::Kernel> kernels = method_kernels();
  /// Options for device backends, passed to each backend they name (or to
  /// every one) as runtime specs when a method loads, opaque to the core
  /// (backend_options.h): a backend's own options are set here, e.g.
  /// backend_options.set("AotiDeviceBackend", "threads", 4). The three
  /// fields below are conveniences that fill it for every backend.
  BackendLoadOptions backend_options;
  /// The intra-op threads each execution's compiled code may use: the
  /// runtime spec "threads" (kThreadsSpec) for every backend; 0 passes
  /// none, and each backend uses its default. Negative: InvalidArgument.
  int threads = 0;
  /// Verify every weight and initial state value against its content key
  /// as it is copied to the device (kVerifyDataSpec, for every backend): a
  /// flipped byte is refused at method load. Costs one SHA-256 pass, fused
  /// with the copy.
  bool verify_data = false;
  /// Run the program's compiled code though this machine did not compile
  /// it (kTrustCodeSpec, for every backend; code_trust.h). Only for
  /// programs from a source you trust: their code runs in this process.
  bool trust_code = false;

  /// backend_options with the conveniences above set for every backend
  /// (replacing backend_options' every-backend value of the key; a
  /// backend's own value still wins): what the sessions pass.
  /// InvalidArgument for a negative thread count.
  ET_NODISCARD executorch::runtime::Result<BackendLoadOptions> backend_specs() const;
};

class LoadedProgram {
 public:
  /**
   * Loads the program `program` serves, and the named data `data` serves
   * (a .ptd file) when not null. In order, each failure reported in
   * `report` (when not null) with its step: "reading the data file",
   * "loading the program" (ExecuTorch's verification; what it logged in
   * `log`), "reading the program", "checking the program" (SessionPool::
   * create: InvalidProgram with the refusal as `detail`, or NotFound when
   * no DeviceAllocator serves CUDA yet). Nothing is kept on failure.
   * Threading: any thread; the result is used as SessionPool says.
   */
  ET_NODISCARD static executorch::runtime::Result<std::unique_ptr<LoadedProgram>> load(
      std::unique_ptr<executorch::runtime::DataLoader> program, std::unique_ptr<executorch::runtime::DataLoader> data,
      const LoadOptions& options = {}, FailureReport* report = nullptr);

  /// load() on the file `path`, mmapped (pages are read as the program needs
  /// them), and the .ptd file `data_path` when not empty. A file that cannot
  /// be mapped fails at step "mapping <path>".
  ET_NODISCARD static executorch::runtime::Result<std::unique_ptr<LoadedProgram>> load_file(
      const std::string& path, const std::string& data_path = "", const LoadOptions& options = {},
      FailureReport* report = nullptr);

  LoadedProgram(const LoadedProgram&) = delete;
  LoadedProgram& operator=(const LoadedProgram&) = delete;
  ~LoadedProgram();

  const executorch::runtime::Program& program() const {
    return *program_;
  }
  SessionPool& pool() {
    return *pool_;
  }
  const SessionPool& pool() const {
    return *pool_;
  }
  /// A new session (SessionPool::new_session): its own state, no method loaded.
  std::unique_ptr<Session> new_session() {
    return pool_->new_session();
  }
  /// The whole program's bytes (the .pte).
  executorch::runtime::Span<const uint8_t> bytes() const {
    return {static_cast<const uint8_t*>(whole_->data()), whole_->size()};
  }

 private:
  LoadedProgram() = default;

  std::unique_ptr<executorch::runtime::DataLoader> loader_;
  std::optional<executorch::runtime::FreeableBuffer> whole_; // all of it: the checks and failure naming read it
  std::unique_ptr<executorch::runtime::DataLoader> data_loader_;
  std::optional<executorch::extension::FlatTensorDataMap> data_map_;
  std::optional<executorch::runtime::Program> program_;
  std::unique_ptr<SessionPool> pool_; // destroyed first: it points into everything above
};

} // namespace et_copy
