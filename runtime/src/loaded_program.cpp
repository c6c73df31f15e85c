#include <et_copy/loaded_program.h>

#include <et_copy/device_backend.h>
#include <et_copy/log_capture.h>

#include <executorch/extension/data_loader/mmap_data_loader.h>

namespace et_copy {

using executorch::extension::FlatTensorDataMap;
using executorch::extension::MmapDataLoader;
using executorch::runtime::DataLoader;
using executorch::runtime::Error;
using executorch::runtime::Program;
using executorch::runtime::Result;

namespace {

// fail(), with the lines ExecuTorch logged meanwhile.
ET_NODISCARD Error fail_logged(FailureReport* report, Error e, std::string step, std::vector<std::string> log) {
  e = fail(report, e, "", std::move(step));
  if (report != nullptr) {
    report->log = std::move(log);
  }
  return e;
}

ET_NODISCARD Result<std::unique_ptr<DataLoader>> mmap_file(const std::string& path, FailureReport* report) {
  auto loader = MmapDataLoader::from(path.c_str(), MmapDataLoader::MlockConfig::NoMlock);
  if (!loader.ok()) {
    return fail(report, loader.error(), "missing, unreadable or empty", "mapping " + path);
  }
  return std::unique_ptr<DataLoader>(std::make_unique<MmapDataLoader>(std::move(*loader)));
}

} // namespace

LoadedProgram::~LoadedProgram() {
  pool_.reset(); // before the Program and data it points into
}

Result<std::unique_ptr<LoadedProgram>> LoadedProgram::load(std::unique_ptr<DataLoader> program,
                                                           std::unique_ptr<DataLoader> data, const LoadOptions& options,
                                                           FailureReport* report) {
  if (program == nullptr) {
    return fail(report, Error::InvalidArgument, "no program given", "loading the program");
  }
  std::unique_ptr<LoadedProgram> lp(new LoadedProgram());
  lp->loader_ = std::move(program);
  if (data != nullptr) {
    lp->data_loader_ = std::move(data);
    auto map = FlatTensorDataMap::load(lp->data_loader_.get());
    if (!map.ok()) {
      return fail(report, map.error(), "", "reading the data file");
    }
    lp->data_map_.emplace(std::move(*map));
  }
  LogCapture capture;
  auto loaded = Program::load(lp->loader_.get(), options.verification);
  if (!loaded.ok()) {
    return fail_logged(report, loaded.error(), "loading the program", capture.lines());
  }
  auto size = lp->loader_->size();
  auto whole =
      lp->loader_->load(0, size.ok() ? *size : 0, DataLoader::SegmentInfo(DataLoader::SegmentInfo::Type::Program));
  if (!whole.ok()) {
    return fail_logged(report, whole.error(), "reading the program", capture.lines());
  }
  lp->whole_.emplace(std::move(*whole));
  lp->program_.emplace(std::move(*loaded));
  // The pool checks the bytes first: an index ExecuTorch would abort the
  // process on later, or a program whose host would touch device memory.
  FailureReport refusal;
  auto specs = options.backend_specs();
  if (!specs.ok()) {
    return fail(report, specs.error(),
                "threads must be at least 1, or 0 for the backends' default, got " + std::to_string(options.threads),
                "checking the program");
  }
  auto pool = SessionPool::create(lp->bytes(), &*lp->program_, options.kernels,
                                  lp->data_map_ ? &*lp->data_map_ : nullptr, &refusal, *specs);
  if (!pool.ok()) {
    return fail(report, pool.error(), std::move(refusal.detail), "checking the program");
  }
  lp->pool_ = std::move(*pool);
  return lp;
}

Result<BackendLoadOptions> LoadOptions::backend_specs() const {
  if (threads < 0) {
    return Error::InvalidArgument;
  }
  // For every backend: a backend's own value of a key still wins (BackendLoadOptions::options_for).
  BackendLoadOptions specs = backend_options;
  if (threads > 0) {
    (void)specs.set_for_every_backend(kThreadsSpec, threads); // keys it takes: these cannot fail
  }
  if (verify_data) {
    (void)specs.set_for_every_backend(kVerifyDataSpec, true);
  }
  if (trust_code) {
    (void)specs.set_for_every_backend(kTrustCodeSpec, true);
  }
  return specs;
}

Result<std::unique_ptr<LoadedProgram>> LoadedProgram::load_file(const std::string& path, const std::string& data_path,
                                                                const LoadOptions& options, FailureReport* report) {
  auto program = mmap_file(path, report);
  if (!program.ok()) {
    return program.error();
  }
  std::unique_ptr<DataLoader> data;
  if (!data_path.empty()) {
    auto mapped = mmap_file(data_path, report);
    if (!mapped.ok()) {
      return mapped.error();
    }
    data = std::move(*mapped);
  }
  return load(std::move(*program), std::move(data), options, report);
}

} // namespace et_copy
