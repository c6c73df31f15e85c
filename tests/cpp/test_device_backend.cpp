// The device backend seam (et_copy/device_backend.h): registration through
// register_device_backend, device_backends() computed from the registered
// backends' runs_on, and a Session reaching a backend only through the
// interface: the runtime specs it passes, the state it asks for, the pool
// it releases.
//
// Registry state, in test order: nothing serves CUDA and no backend is
// registered; the tests register a backend under "XnnpackBackend" (the id
// of tests/cpp/programs/add_relu_xnnpack.pte's delegate, so a real program
// loads through it) and one that runs on et-copy's CUDA allocator only,
// then the simulated allocator for CUDA, then fill et-copy's table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <et_copy/device_backend.h>
#include <et_copy/limits.h>
#include <et_copy/loaded_program.h>
#include <et_copy/program_check.h>
#include <et_copy/registration.h>
#include <et_copy/sessions.h>
#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/options.h>

namespace {

using et_copy::DeviceBackend;
using et_copy::Registration;
using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;
using executorch::runtime::Span;
using executorch::runtime::etensor::DeviceType;

const std::string kPrograms = ET_COPY_TEST_PROGRAMS;

// A device backend that records what et-copy asks of it. Its delegates
// load (init keeps nothing) but do not run.
class RecordingBackend final : public DeviceBackend {
 public:
  RecordingBackend(const char* id, const char* serves) : id_(id), serves_(serves) {}
  const char* id() const override {
    return id_;
  }
  bool runs_on(const executorch::runtime::DeviceAllocator& server) const override {
    return std::strcmp(et_copy::allocator_name(&server), serves_) == 0;
  }
  bool is_available() const override {
    return true;
  }
  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec>) const override {
    auto pool = context.get_runtime_spec<int>("pool");
    auto session = context.get_runtime_spec<int>("session");
    inits.emplace_back(pool.ok() ? *pool : -1, session.ok() ? *session : -1);
    std::vector<std::string> keys;
    for (const auto& spec : context.runtime_specs()) {
      keys.emplace_back(spec.key);
    }
    spec_keys.push_back(std::move(keys));
    processed->Free();
    return static_cast<DelegateHandle*>(&handle_);
  }
  Error execute(BackendExecutionContext&, DelegateHandle*, Span<EValue*>) const override {
    return Error::NotSupported;
  }
  void destroy(DelegateHandle*) const override {}

  // The state of a session is 100 bytes once one of its delegates loaded.
  Error reset_state(int session) override {
    resets.push_back(session);
    return reset_result;
  }
  size_t state_nbytes(int session) const override {
    return std::any_of(inits.begin(), inits.end(), [&](const auto& i) { return i.second == session; }) ? 100 : 0;
  }
  void release_pool(int pool) override {
    released.push_back(pool);
    DeviceBackend::release_pool(pool);
  }

  mutable std::vector<std::pair<int, int>> inits;          // (pool, session) of each init
  mutable std::vector<std::vector<std::string>> spec_keys; // every runtime spec's key, of each init
  std::vector<int> resets;
  Error reset_result = Error::Ok; // what reset_state answers
  std::vector<int> released;

 private:
  const char* id_;
  const char* serves_;
  mutable int handle_ = 0;
};

// Registered for the process: ExecuTorch keeps the pointers.
RecordingBackend& on_simulated() {
  static auto* b = new RecordingBackend("XnnpackBackend", "simulated");
  return *b;
}
RecordingBackend& on_cuda() {
  static auto* b = new RecordingBackend("CudaOnlyTestBackend", "cuda");
  return *b;
}

bool listed(DeviceBackend* b) {
  const auto all = et_copy::registered_device_backends();
  return std::count(all.begin(), all.end(), b) == 1;
}

TEST(DeviceBackend, RegisteringTwiceIsIdempotentAndAnotherBackendOfTheIdIsLeftAlone) {
  Error e = Error::Internal;
  EXPECT_EQ(et_copy::register_device_backend(on_simulated(), &e), Registration::kRegistered);
  EXPECT_EQ(e, Error::Ok);
  EXPECT_EQ(et_copy::register_device_backend(on_simulated(), &e), Registration::kAlreadyOurs); // no abort
  EXPECT_EQ(executorch::runtime::get_backend_class("XnnpackBackend"), &on_simulated());
  EXPECT_TRUE(listed(&on_simulated())) << "in the table once";

  static RecordingBackend impostor("XnnpackBackend", "simulated");
  EXPECT_EQ(et_copy::register_device_backend(impostor), Registration::kAlreadyOther);
  EXPECT_EQ(executorch::runtime::get_backend_class("XnnpackBackend"), &on_simulated());
  EXPECT_FALSE(listed(&impostor));

  EXPECT_EQ(et_copy::register_device_backend(on_cuda()), Registration::kRegistered);
  EXPECT_EQ(et_copy::registered_device_backends(),
            (std::vector<DeviceBackend*>{&on_simulated(), &on_cuda()})); // in registration order
}

TEST(DeviceBackend, AnIdTheOptionsMapCannotHoldIsRefusedBeforeTheRegistry) {
  static const std::string long_id(et_copy::kMaxDeviceBackendIdLength + 1, 'x');
  static RecordingBackend too_long(long_id.c_str(), "simulated");
  static RecordingBackend empty("", "simulated");
  for (RecordingBackend* b : {&too_long, &empty}) {
    Error e = Error::Ok;
    EXPECT_EQ(et_copy::register_device_backend(*b, &e), Registration::kFailed);
    EXPECT_EQ(e, Error::InvalidArgument);
    EXPECT_EQ(executorch::runtime::get_backend_class(b->id()), nullptr);
    EXPECT_FALSE(listed(b));
  }
}

TEST(DeviceBackend, DeviceBackendsListsABackendOnlyWhereItsRunsOnAcceptsTheAllocator) {
  EXPECT_TRUE(et_copy::device_backends().empty()) << "nothing serves CUDA yet";
  ASSERT_NE(et_copy::use_simulated_device(), Registration::kFailed);
  // CudaOnlyTestBackend is registered, but runs_on refuses the simulated allocator.
  EXPECT_EQ(et_copy::device_backends(), std::vector<std::string>{"XnnpackBackend"});
  EXPECT_TRUE(et_copy::device_backends(DeviceType::CPU).empty());
}

TEST(DeviceBackend, ASessionPassesItsSpecsToTheBackendAndAsksItForItsState) {
  ASSERT_EQ(et_copy::register_device_backend(on_simulated()), Registration::kAlreadyOurs);
  et_copy::FailureReport report;
  auto program = et_copy::LoadedProgram::load_file(kPrograms + "/add_relu_xnnpack.pte", "", {}, &report);
  ASSERT_TRUE(program.ok()) << report.message(); // its delegate's id is allowed on the device: device_backends()
  et_copy::SessionPool& pool = (*program)->pool();
  auto session = pool.new_session();
  EXPECT_EQ(session->state_nbytes(), 0u);
  EXPECT_EQ(session->reset(), Error::Ok) << "nothing loaded: a no-op";
  EXPECT_TRUE(on_simulated().resets.empty());

  on_simulated().inits.clear();
  ASSERT_TRUE(session->load("forward", nullptr, &report).ok()) << report.message();
  ASSERT_EQ(on_simulated().inits.size(), 1u);
  EXPECT_EQ(on_simulated().inits[0], std::make_pair(pool.id(), session->id()));
  // The session's state is what the backend reports, and reset goes to it.
  EXPECT_EQ(session->state_nbytes(), 100u);
  auto other = pool.new_session();
  ASSERT_TRUE(other->load("forward", nullptr, &report).ok()) << report.message();
  EXPECT_EQ(on_simulated().inits[1], std::make_pair(pool.id(), other->id()));
  const size_t without = session->device_nbytes() - 100;
  EXPECT_EQ(other->device_nbytes(), without + 100) << "each session counts its own state once";
  EXPECT_EQ(session->reset(), Error::Ok);
  EXPECT_EQ(on_simulated().resets, std::vector<int>{session->id()});
  EXPECT_TRUE(on_cuda().resets.empty()) << "a backend holding no state of the session is not reset";
  // A backend that cannot reset fails the session's reset, named; once it can, the reset succeeds.
  on_simulated().reset_result = Error::AccessFailed;
  et_copy::FailureReport failed;
  EXPECT_EQ(session->reset(&failed), Error::AccessFailed);
  EXPECT_NE(failed.message().find("resetting the state in the device backend XnnpackBackend"), std::string::npos)
      << failed.message();
  on_simulated().reset_result = Error::Ok;
  EXPECT_EQ(session->reset(), Error::Ok);
  EXPECT_EQ(on_simulated().resets, (std::vector<int>{session->id(), session->id(), session->id()}));

  const int id = pool.id();
  session.reset();
  other.reset();
  EXPECT_TRUE(on_simulated().released.empty()) << "sessions going do not release the pool";
  program->reset();
  EXPECT_EQ(on_simulated().released, std::vector<int>{id}) << "the pool going does";
  EXPECT_EQ(on_cuda().released, std::vector<int>{id}) << "on every registered backend";
}

// A backend's options travel opaque: any keys, any number, to that backend only (and those set for every
// backend to each), beside the core's pool and session; LoadOptions' conveniences fill the same map.
TEST(DeviceBackend, ALoadPassesEachBackendItsOwnOptionsWhateverTheirKeysAndCount) {
  ASSERT_EQ(et_copy::register_device_backend(on_simulated()), Registration::kAlreadyOurs);
  et_copy::LoadOptions options;
  std::vector<std::string> own;
  for (int i = 0; i < 9; ++i) { // more than any fixed BackendOptions<N> the core declared
    own.push_back("option_" + std::to_string(i));
    ASSERT_EQ(options.backend_options.set("XnnpackBackend", own.back(), i), Error::Ok);
  }
  ASSERT_EQ(options.backend_options.set("XnnpackBackend", "mode", std::string("fast")), Error::Ok);
  ASSERT_EQ(options.backend_options.set("CudaOnlyTestBackend", "not_for_xnnpack", true), Error::Ok);
  ASSERT_EQ(options.backend_options.set("AnotherLibrarysBackend", "theirs", 1), Error::Ok) << "any id";
  ASSERT_EQ(options.backend_options.set_for_every_backend("shared", true), Error::Ok);
  options.threads = 3; // a convenience: "threads" for every backend
  et_copy::FailureReport report;
  auto program = et_copy::LoadedProgram::load_file(kPrograms + "/add_relu_xnnpack.pte", "", options, &report);
  ASSERT_TRUE(program.ok()) << report.message();
  auto session = (*program)->new_session();
  on_simulated().spec_keys.clear();
  ASSERT_TRUE(session->load("forward", nullptr, &report).ok()) << report.message();
  ASSERT_EQ(on_simulated().spec_keys.size(), 1u);
  std::vector<std::string> keys = on_simulated().spec_keys[0];
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> expected = own;
  expected.insert(expected.end(), {"mode", "pool", "session", "shared", "threads"});
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(keys, expected);

  // What the options map refuses: the core's own keys, and what ExecuTorch's BackendOption cannot hold.
  et_copy::BackendLoadOptions refused;
  EXPECT_EQ(refused.set("XnnpackBackend", "pool", 1), Error::InvalidArgument);
  EXPECT_EQ(refused.set_for_every_backend("session", 1), Error::InvalidArgument);
  EXPECT_EQ(refused.set("", "key", 1), Error::InvalidArgument);
  EXPECT_EQ(refused.set("XnnpackBackend", "", 1), Error::InvalidArgument);
  EXPECT_EQ(refused.set("XnnpackBackend", std::string(executorch::runtime::kMaxOptionKeyLength, 'k'), 1),
            Error::InvalidArgument);
  EXPECT_EQ(refused.set("XnnpackBackend", std::string(executorch::runtime::kMaxOptionKeyLength - 1, 'k'), 1),
            Error::Ok);
  EXPECT_EQ(refused.set("XnnpackBackend", "text", std::string(executorch::runtime::kMaxOptionValueLength, 'v')),
            Error::InvalidArgument);
  EXPECT_EQ(refused.set("XnnpackBackend", "text", std::string(executorch::runtime::kMaxOptionValueLength - 1, 'v')),
            Error::Ok);
  // A backend's own value wins over one for every backend; a string arrives whole.
  ASSERT_EQ(refused.set_for_every_backend("text", std::string("every")), Error::Ok);
  const auto specs = refused.options_for("XnnpackBackend");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(std::string(std::get<std::array<char, executorch::runtime::kMaxOptionValueLength>>(specs[1].value).data()),
            std::string(executorch::runtime::kMaxOptionValueLength - 1, 'v'));
  EXPECT_EQ(refused.options_for("Other").size(), 1u);

  et_copy::LoadOptions negative;
  negative.threads = -1;
  auto bad = et_copy::LoadedProgram::load_file(kPrograms + "/add_relu_xnnpack.pte", "", negative, &report);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), Error::InvalidArgument);
  EXPECT_NE(report.message().find("threads must be at least 1, or 0 for the backends' default, got -1"),
            std::string::npos)
      << report.message();
}

// ExecuTorch's LoadBackendOptionsMap holds kMaxDeviceBackends backends (its
// capacity is private), so et-copy's table holds no more.
TEST(DeviceBackend, TheTableHoldsWhatOneOptionsMapHolds) {
  executorch::runtime::BackendOptions<1> options;
  executorch::runtime::LoadBackendOptionsMap map;
  static std::vector<std::string> ids; // the registry keeps the id pointers
  for (size_t i = 0; i <= et_copy::kMaxDeviceBackends; ++i) {
    ids.push_back("Backend" + std::to_string(i));
  }
  for (size_t i = 0; i < et_copy::kMaxDeviceBackends; ++i) {
    EXPECT_EQ(map.set_options(ids[i].c_str(), options.view()), Error::Ok) << i;
  }
  EXPECT_EQ(map.set_options(ids.back().c_str(), options.view()), Error::InvalidArgument);
  executorch::runtime::LoadBackendOptionsMap fresh;
  EXPECT_EQ(fresh.set_options(std::string(et_copy::kMaxDeviceBackendIdLength, 'x').c_str(), options.view()), Error::Ok);
  EXPECT_EQ(fresh.set_options(std::string(et_copy::kMaxDeviceBackendIdLength + 1, 'x').c_str(), options.view()),
            Error::InvalidArgument);

  // Fill et-copy's table (two are registered by the tests above), then one more.
  static std::vector<std::unique_ptr<RecordingBackend>> more;
  for (size_t i = et_copy::registered_device_backends().size(); i < et_copy::kMaxDeviceBackends; ++i) {
    more.push_back(std::make_unique<RecordingBackend>(ids[i].c_str(), "simulated"));
    EXPECT_EQ(et_copy::register_device_backend(*more.back()), Registration::kRegistered) << i;
  }
  more.push_back(std::make_unique<RecordingBackend>(ids.back().c_str(), "simulated"));
  Error e = Error::Ok;
  EXPECT_EQ(et_copy::register_device_backend(*more.back(), &e), Registration::kFailed);
  EXPECT_EQ(e, Error::NotSupported);
  EXPECT_EQ(executorch::runtime::get_backend_class(ids.back().c_str()), nullptr) << "refused before the registry";
  EXPECT_EQ(et_copy::registered_device_backends().size(), et_copy::kMaxDeviceBackends);
}

} // namespace
