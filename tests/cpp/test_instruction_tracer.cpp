// et_copy::InstructionTracer on real programs (tests/cpp/programs), loaded
// through et_copy's sessions with et-copy's kernels (method_kernels()) and
// the simulated device serving CUDA: the failing instruction is named, and
// every event reaches an inner tracer (a recording fake, and ExecuTorch's
// ETDumpGen) as it would with that tracer alone.
//
// Registry state: this process registers the simulated allocator for CUDA
// and no kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <et_copy/instruction_tracer.h>
#include <et_copy/program_check.h>
#include <et_copy/registration.h>
#include <et_copy/sessions.h>
#include <et_copy/tensor_layout.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>

#ifdef ET_COPY_TEST_ETDUMP
#include <executorch/devtools/etdump/etdump_flatcc.h>
#endif

namespace et_copy {

// Session::method is private: load() is the one public way in, and it puts
// the LoadedMethod's own tracer in front of the profiler. These tests give
// the raw Method a tracer of their choosing.
struct SessionTestAccess {
  static executorch::runtime::Result<executorch::runtime::Method*> method(
      Session& s, const std::string& name, FailureReport* report,
      executorch::runtime::EventTracer* event_tracer = nullptr) {
    return s.method(name, report, event_tracer);
  }
};

} // namespace et_copy

namespace {

using et_copy::InstructionTracer;
using executorch::runtime::ChainID;
using executorch::runtime::DebugHandle;
using executorch::runtime::DelegateDebugIntId;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::EventTracer;
using executorch::runtime::EventTracerDebugLogLevel;
using executorch::runtime::EventTracerEntry;
using executorch::runtime::EventTracerProfilingLevel;
using executorch::runtime::LoggedEValueType;
using executorch::runtime::Method;
using executorch::runtime::Program;
using executorch::runtime::Result;

std::vector<uint8_t> read_program(const std::string& name) {
  std::ifstream in(std::string(ET_COPY_TEST_PROGRAMS) + "/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class SimulatedDevice : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_NE(et_copy::use_simulated_device(), et_copy::Registration::kFailed);
  }
};
const auto* const env = ::testing::AddGlobalTestEnvironment(new SimulatedDevice);

// A program loaded from tests/cpp/programs, with one session on it.
struct Loaded {
  explicit Loaded(const std::string& name) : bytes(read_program(name)), loader(bytes.data(), bytes.size()) {
    auto p = Program::load(&loader);
    if (p.ok()) {
      program = std::make_unique<Program>(std::move(*p));
      auto created =
          et_copy::SessionPool::create({bytes.data(), bytes.size()}, program.get(), et_copy::method_kernels());
      if (created.ok()) {
        pool = std::move(*created);
        session = pool->new_session();
      }
    }
  }
  std::vector<uint8_t> bytes;
  executorch::extension::BufferDataLoader loader;
  std::unique_ptr<Program> program;
  std::unique_ptr<et_copy::SessionPool> pool;
  std::unique_ptr<et_copy::Session> session;
};

// The method with input 0 set to a float32[2, 3, 4] counting up.
struct Forward {
  Forward(Loaded& l, EventTracer* tracer, bool set_input = true) {
    et_copy::FailureReport report;
    auto m = et_copy::SessionTestAccess::method(*l.session, "forward", &report, tracer);
    EXPECT_TRUE(m.ok()) << report.detail;
    if (!m.ok()) {
      return;
    }
    method = *m;
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<float>(i);
    }
    const executorch::aten::SizesType sizes[] = {2, 3, 4};
    et_copy::TensorImplView::Spec spec;
    spec.sizes = {sizes, 3};
    spec.data = data.data();
    EXPECT_EQ(view.reset(spec), Error::Ok);
    if (set_input) {
      EXPECT_EQ(method->set_input(EValue(view.tensor()), 0), Error::Ok);
    }
  }
  Method* method = nullptr;
  std::vector<float> data = std::vector<float>(24);
  et_copy::TensorImplView view;
};

bool same(std::optional<et_copy::InstructionLocation> got, size_t chain, size_t instruction) {
  return got.has_value() && got->chain == chain && got->instruction == instruction;
}

// A planned buffer's size comes from program bytes: any size either gives
// exactly its bytes on the device asked for or fails with the allocator's error.
TEST(PlannedBuffer, GivesExactlyItsBytesOnItsDeviceOrTheAllocatorsError) {
  using executorch::runtime::etensor::Device;
  using executorch::runtime::etensor::DeviceType;
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}}) {
    auto host = et_copy::PlannedBuffer::create(n, Device(DeviceType::CPU, 0));
    ASSERT_TRUE(host.ok()) << n;
    EXPECT_EQ(host->span().size(), n);
    EXPECT_NE(host->span().data(), nullptr) << "an empty buffer still has an address";
    EXPECT_EQ(std::count(host->span().begin(), host->span().end(), uint8_t{0}), static_cast<ptrdiff_t>(n));
    auto dev = et_copy::PlannedBuffer::create(n, Device(DeviceType::CUDA, 0));
    ASSERT_TRUE(dev.ok()) << n;
    EXPECT_EQ(dev->span().size(), n);
    EXPECT_EQ(dev->device().type(), DeviceType::CUDA);
  }
  EXPECT_EQ(et_copy::PlannedBuffer::create(SIZE_MAX, Device(DeviceType::CPU, 0)).error(), Error::MemoryAllocationFailed)
      << "no host has SIZE_MAX bytes to give";
  EXPECT_EQ(et_copy::PlannedBuffer::create(SIZE_MAX, Device(DeviceType::CUDA, 0)).error(),
            Error::MemoryAllocationFailed);
  EXPECT_EQ(et_copy::PlannedBuffer::create(8, Device(DeviceType::CUDA, 1)).error(), Error::InvalidArgument)
      << "the simulated device serves device 0 only";
}

TEST(SessionPool, ComesOnlyFromCheckedBytesAndRefusesAProgramWhoseHostWouldTouchDeviceMemory) {
  // linear_relu_linear.pte: aten kernels on tensors planned on cuda:0. It
  // loads as a Program; no pool is made for it.
  const auto bytes = read_program("linear_relu_linear.pte");
  executorch::extension::BufferDataLoader loader(bytes.data(), bytes.size());
  auto program = Program::load(&loader);
  ASSERT_TRUE(program.ok());
  et_copy::FailureReport report;
  auto refused = et_copy::SessionPool::create({bytes.data(), bytes.size()}, &*program, et_copy::method_kernels(),
                                              nullptr, &report);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), Error::InvalidProgram);
  EXPECT_NE(
      report.detail.find("method 'forward', instruction 0:2 (aten::addmm.out): argument 1 (value 5) is planned on "
                         "cuda:0"),
      std::string::npos)
      << report.detail;
  // Bytes cut short are refused too (check_program_indices runs first).
  EXPECT_FALSE(
      et_copy::SessionPool::create({bytes.data(), bytes.size() / 2}, &*program, et_copy::method_kernels()).ok());
  EXPECT_EQ(et_copy::SessionPool::create({bytes.data(), bytes.size()}, nullptr, et_copy::method_kernels()).error(),
            Error::InvalidArgument);
  // A copy-only program gets its pool.
  Loaded copies("roundtrip.pte");
  ASSERT_NE(copies.pool, nullptr);
}

TEST(InstructionTracer, NamesTheFailingKernelCallOfARealProgram) {
  // d2h_fails.pte: instruction 0:0 copies to the device, 0:1 back into a
  // Half output, which et-copy's d2h kernel refuses.
  Loaded l("d2h_fails.pte");
  ASSERT_NE(l.program, nullptr);
  InstructionTracer tracer;
  Forward f(l, &tracer);
  ASSERT_NE(f.method, nullptr);
  EXPECT_NE(f.method->execute(), Error::Ok);
  const auto at = tracer.last_instruction();
  ASSERT_TRUE(same(at, 0, 1));
  EXPECT_EQ(et_copy::instruction_operator(l.bytes.data(), l.bytes.size(), "forward", at->chain, at->instruction),
            "et_copy::_d2h_copy.out");
}

TEST(InstructionTracer, ASuccessfulRunEndsOnItsLastInstructionAndClearForgetsIt) {
  Loaded l("roundtrip.pte");
  ASSERT_NE(l.program, nullptr);
  InstructionTracer tracer;
  Forward f(l, &tracer);
  ASSERT_NE(f.method, nullptr);
  EXPECT_FALSE(tracer.last_instruction().has_value()); // loading ran no instruction
  ASSERT_EQ(f.method->execute(), Error::Ok);
  EXPECT_TRUE(same(tracer.last_instruction(), 0, 1));
  tracer.clear();
  EXPECT_FALSE(tracer.last_instruction().has_value());
}

TEST(InstructionTracer, AnExecuteThatFailsBeforeAnyInstructionNamesNone) {
  Loaded l("roundtrip.pte");
  ASSERT_NE(l.program, nullptr);
  InstructionTracer tracer;
  Forward f(l, &tracer, /*set_input=*/false);
  ASSERT_NE(f.method, nullptr);
  tracer.start_profiling("left over"); // as if from an earlier run
  tracer.set_chain_debug_handle(0, 1);
  tracer.start_profiling("OPERATOR_CALL");
  tracer.set_chain_debug_handle(executorch::runtime::kUnsetChainId, executorch::runtime::kUnsetDebugHandle);
  ASSERT_TRUE(tracer.last_instruction().has_value());
  EXPECT_EQ(f.method->execute(), Error::InvalidArgument); // input 0 not set
  EXPECT_FALSE(tracer.last_instruction().has_value());
}

TEST(InstructionTracer, RecordsInstructionZeroThoughItsHandleEqualsTheUnsetHandle) {
  InstructionTracer tracer;
  tracer.set_chain_debug_handle(0, 0);
  tracer.end_profiling(tracer.start_profiling("OPERATOR_CALL"));
  EXPECT_TRUE(same(tracer.last_instruction(), 0, 0));
  tracer.set_chain_debug_handle(2, 7);
  tracer.start_profiling_delegate("inside a delegate", 3); // no new instruction
  EXPECT_TRUE(same(tracer.last_instruction(), 0, 0));
}

// An inner tracer that records what reaches it, and the chain and
// instruction it was told at each call.
class Recorder final : public EventTracer {
 public:
  struct Event {
    std::string what;
    ChainID chain;
    DebugHandle instruction;
  };
  std::vector<Event> events;
  int open = 0; // started, not yet ended

  void note(std::string what) {
    events.push_back({std::move(what), current_chain_id(), current_debug_handle()});
  }
  bool saw(const std::string& what) const {
    return std::any_of(events.begin(), events.end(), [&](const Event& e) { return e.what == what; });
  }

  void create_event_block(const char* name) override {
    note(std::string("block ") + name);
  }
  EventTracerEntry start_profiling(const char* name, ChainID chain_id, DebugHandle debug_handle) override {
    note(std::string("start ") + name);
    ++open;
    EventTracerEntry e{};
    e.event_id = static_cast<int64_t>(events.size());
    e.chain_id = chain_id == executorch::runtime::kUnsetChainId ? chain_id_ : chain_id;
    e.debug_handle = chain_id == executorch::runtime::kUnsetChainId ? debug_handle_ : debug_handle;
    return e;
  }
  void end_profiling(EventTracerEntry e) override {
    const bool mine = e.event_id >= 1 && static_cast<size_t>(e.event_id) <= events.size();
    note(mine ? "end " + events[static_cast<size_t>(e.event_id) - 1].what.substr(6) : "end of an entry not mine");
    --open;
  }
  EventTracerEntry start_profiling_delegate(const char* name, DelegateDebugIntId) override {
    note("start_delegate");
    return EventTracerEntry{};
  }
  void end_profiling_delegate(EventTracerEntry, const void*, size_t) override {
    note("end_delegate");
  }
  void log_profiling_delegate(const char*, DelegateDebugIntId, et_timestamp_t, et_timestamp_t, const void*,
                              size_t) override {
    note("log_profiling_delegate");
  }
  void track_allocation(executorch::runtime::AllocatorID, size_t) override {
    note("track_allocation");
  }
  executorch::runtime::AllocatorID track_allocator(const char*) override {
    note("track_allocator");
    return 5;
  }
  Result<bool> log_evalue(const EValue&, LoggedEValueType type) override {
    note(type == LoggedEValueType::kProgramOutput ? "output" : "intermediate");
    return true;
  }
  Result<bool> log_intermediate_output_delegate(const char*, DelegateDebugIntId,
                                                const executorch::aten::Tensor&) override {
    note("delegate tensor");
    return true;
  }
  Result<bool> log_intermediate_output_delegate(
      const char*, DelegateDebugIntId, const executorch::runtime::ArrayRef<executorch::aten::Tensor>) override {
    note("delegate tensors");
    return true;
  }
  Result<bool> log_intermediate_output_delegate(const char*, DelegateDebugIntId, const int&) override {
    note("delegate int");
    return true;
  }
  Result<bool> log_intermediate_output_delegate(const char*, DelegateDebugIntId, const bool&) override {
    note("delegate bool");
    return true;
  }
  Result<bool> log_intermediate_output_delegate(const char*, DelegateDebugIntId, const double&) override {
    note("delegate double");
    return true;
  }
  void set_delegation_intermediate_output_filter(executorch::runtime::EventTracerFilterBase*) override {
    note("filter");
  }
};

TEST(InstructionTracerForwarding, TheInnerTracerSeesEachInstructionWithItsChainAndIndex) {
  Loaded l("roundtrip.pte");
  ASSERT_NE(l.program, nullptr);
  Recorder inner;
  InstructionTracer tracer(&inner);
  Forward f(l, &tracer);
  ASSERT_NE(f.method, nullptr);
  EXPECT_TRUE(inner.saw("block Default")); // load_method's block
  inner.events.clear();
  ASSERT_EQ(f.method->execute(), Error::Ok);
  std::vector<std::string> kernel_calls;
  for (const auto& e : inner.events) {
    if (e.what == "start OPERATOR_CALL") {
      kernel_calls.push_back(std::to_string(e.chain) + ":" + std::to_string(e.instruction));
    }
  }
  EXPECT_EQ(kernel_calls, (std::vector<std::string>{"0:0", "0:1"}));
  ASSERT_FALSE(inner.events.empty());
  EXPECT_EQ(inner.events.front().what, "block Execute");
  EXPECT_EQ(inner.open, 0);          // every scope it was given was ended
  EXPECT_FALSE(inner.saw("output")); // its debug level is kNoLogging
}

TEST(InstructionTracerForwarding, MethodLogsOutputsAsTheInnerTracersDebugLevelAsks) {
  Loaded l("roundtrip.pte");
  ASSERT_NE(l.program, nullptr);
  Recorder inner;
  InstructionTracer tracer(&inner);
  Forward f(l, &tracer);
  ASSERT_NE(f.method, nullptr);
  // Set on the inner after loading: execute's event block copies it.
  inner.set_event_tracer_debug_level(EventTracerDebugLogLevel::kProgramOutputs);
  ASSERT_EQ(f.method->execute(), Error::Ok);
  EXPECT_EQ(tracer.event_tracer_debug_level(), EventTracerDebugLogLevel::kProgramOutputs);
  EXPECT_TRUE(inner.saw("output"));
  EXPECT_FALSE(inner.saw("intermediate"));
}

TEST(InstructionTracerForwarding, AnInnerTracerProfilingTheMethodOnlyGetsNoInstructionScopesYetTheFailureIsNamed) {
  Loaded l("d2h_fails.pte");
  ASSERT_NE(l.program, nullptr);
  Recorder inner;
  inner.set_event_tracer_profiling_level(EventTracerProfilingLevel::kProfileMethodOnly);
  InstructionTracer tracer(&inner);
  Forward f(l, &tracer);
  ASSERT_NE(f.method, nullptr);
  EXPECT_NE(f.method->execute(), Error::Ok);
  EXPECT_TRUE(inner.saw("start Method::execute"));
  EXPECT_FALSE(inner.saw("start OPERATOR_CALL"));
  EXPECT_FALSE(inner.saw("end OPERATOR_CALL"));
  EXPECT_TRUE(same(tracer.last_instruction(), 0, 1));
}

TEST(InstructionTracerForwarding, EveryOtherCallReachesTheInnerTracer) {
  Recorder inner;
  InstructionTracer tracer(&inner);
  tracer.set_chain_debug_handle(1, 4);
  const float x = 1;
  const executorch::aten::SizesType one = 1;
  et_copy::TensorImplView view;
  et_copy::TensorImplView::Spec spec;
  spec.sizes = {&one, 1};
  spec.data = const_cast<float*>(&x);
  ASSERT_EQ(view.reset(spec), Error::Ok);
  tracer.end_profiling_delegate(tracer.start_profiling_delegate("d", 0));
  tracer.log_profiling_delegate("d", 0, 1, 2);
  EXPECT_EQ(tracer.track_allocator("a"), 5u);
  tracer.track_allocation(5, 64);
  EXPECT_TRUE(*tracer.log_evalue(EValue(view.tensor()), LoggedEValueType::kIntermediateOutput));
  EXPECT_TRUE(*tracer.log_intermediate_output_delegate("d", 0, view.tensor()));
  EXPECT_TRUE(*tracer.log_intermediate_output_delegate(
      "d", 0, executorch::runtime::ArrayRef<executorch::aten::Tensor>(&view.tensor(), 1)));
  EXPECT_TRUE(*tracer.log_intermediate_output_delegate("d", 0, 3));
  EXPECT_TRUE(*tracer.log_intermediate_output_delegate("d", 0, true));
  EXPECT_TRUE(*tracer.log_intermediate_output_delegate("d", 0, 2.5));
  tracer.set_delegation_intermediate_output_filter(nullptr);
  const std::vector<std::string> expected = {"start_delegate",  "end_delegate",     "log_profiling_delegate",
                                             "track_allocator", "track_allocation", "intermediate",
                                             "delegate tensor", "delegate tensors", "delegate int",
                                             "delegate bool",   "delegate double",  "filter"};
  ASSERT_EQ(inner.events.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(inner.events[i].what, expected[i]);
    EXPECT_EQ(inner.events[i].chain, 1) << expected[i];
    EXPECT_EQ(inner.events[i].instruction, 4u) << expected[i];
  }
}

TEST(InstructionTracerForwarding, ADeviceTensorIsNeverHandedToTheInnerTracerToLog) {
  // A tracer copies a logged tensor's bytes with a host memcpy: device
  // memory (here an address no host may read) must not reach it.
  Recorder inner;
  InstructionTracer tracer(&inner);
  const executorch::aten::SizesType one = 1;
  et_copy::TensorImplView device, host;
  et_copy::TensorImplView::Spec spec;
  spec.sizes = {&one, 1};
  float x = 1;
  spec.data = &x;
  ASSERT_EQ(host.reset(spec), Error::Ok);
  spec.data = reinterpret_cast<void*>(uintptr_t{0x10});
  spec.device_type = executorch::runtime::etensor::DeviceType::CUDA;
  ASSERT_EQ(device.reset(spec), Error::Ok);
  EXPECT_FALSE(*tracer.log_evalue(EValue(device.tensor()), LoggedEValueType::kIntermediateOutput));
  executorch::aten::Tensor both[] = {host.tensor(), device.tensor()};
  executorch::runtime::EValue items[] = {EValue(both[0]), EValue(both[1])};
  executorch::runtime::EValue* item_ptrs[] = {&items[0], &items[1]};
  executorch::runtime::BoxedEvalueList<executorch::aten::Tensor> list(item_ptrs, both, 2);
  EXPECT_FALSE(*tracer.log_evalue(EValue(&list), LoggedEValueType::kProgramOutput));
  EXPECT_TRUE(inner.events.empty());
  EXPECT_TRUE(*tracer.log_evalue(EValue(host.tensor()), LoggedEValueType::kProgramOutput));
  ASSERT_EQ(inner.events.size(), 1u);
  EXPECT_EQ(inner.events[0].what, "output");
}

// A debug buffer of `size_` bytes holding `used_`, each write 64-aligned.
class FakeRoom final : public et_copy::DebugBufferRoom {
 public:
  size_t size_ = 128, used_ = 0;
  size_t size() const override {
    return size_;
  }
  size_t used() const override {
    return used_;
  }
  size_t end_after(size_t offset, size_t nbytes) const override {
    return (offset + 63) / 64 * 64 + nbytes;
  }
};

// Drops (filters out) every delegate output.
class DropAll final : public executorch::runtime::EventTracerFilterBase {
 public:
  Result<bool> filter(const char*, DelegateDebugIntId) override {
    return true;
  }
};

TEST(InstructionTracerForwarding, ATensorTheDebugBufferHasNoRoomForIsKeptFromTheInnerAndTheShortfallNamed) {
  Recorder inner;
  InstructionTracer tracer(&inner);
  FakeRoom room;
  tracer.set_debug_buffer_room(&room);
  const executorch::aten::SizesType one = 1;
  float x = 1, y = 2;
  et_copy::TensorImplView a, b;
  et_copy::TensorImplView::Spec spec;
  spec.sizes = {&one, 1};
  spec.data = &x;
  ASSERT_EQ(a.reset(spec), Error::Ok);
  spec.data = &y;
  ASSERT_EQ(b.reset(spec), Error::Ok);
  // 4 bytes at 0: fits in 128.
  EXPECT_TRUE(*tracer.log_evalue(EValue(a.tensor()), LoggedEValueType::kIntermediateOutput));
  EXPECT_FALSE(tracer.shortfall());
  room.used_ = 4;
  // Two more, logged by instruction 0:2: at 64 (ends 68) and 128 (ends
  // 132 > 128): the list is kept whole.
  tracer.set_chain_debug_handle(0, 2);
  executorch::aten::Tensor both[] = {a.tensor(), b.tensor()};
  executorch::runtime::EValue items[] = {EValue(both[0]), EValue(both[1])};
  executorch::runtime::EValue* item_ptrs[] = {&items[0], &items[1]};
  executorch::runtime::BoxedEvalueList<executorch::aten::Tensor> list(item_ptrs, both, 2);
  EXPECT_FALSE(*tracer.log_evalue(EValue(&list), LoggedEValueType::kIntermediateOutput));
  ASSERT_TRUE(tracer.shortfall());
  EXPECT_EQ(tracer.shortfall()->needed, 132u);
  EXPECT_EQ(tracer.shortfall()->size, 128u);
  EXPECT_TRUE(same(tracer.shortfall()->instruction, 0, 2));
  tracer.set_chain_debug_handle(executorch::runtime::kUnsetChainId, executorch::runtime::kUnsetDebugHandle);
  // One more would fit alone (64..68), but the block is short already: kept,
  // and counted on from 132 (192..196); a delegate's tensors too.
  EXPECT_FALSE(*tracer.log_evalue(EValue(a.tensor()), LoggedEValueType::kProgramOutput));
  EXPECT_EQ(tracer.shortfall()->needed, 196u);
  EXPECT_FALSE(*tracer.log_intermediate_output_delegate(nullptr, 1, a.tensor()));
  EXPECT_FALSE(*tracer.log_intermediate_output_delegate(nullptr, 1, executorch::runtime::ArrayRef(both, 2)));
  EXPECT_EQ(tracer.shortfall()->needed, 388u); // 256..260, then 320..324 and 384..388
  // A value the buffer does not hold still reaches the inner tracer.
  EXPECT_TRUE(*tracer.log_evalue(EValue(int64_t{3}), LoggedEValueType::kIntermediateOutput));
  EXPECT_TRUE(*tracer.log_intermediate_output_delegate(nullptr, 1, 2.0));
  ASSERT_EQ(inner.events.size(), 3u);
  EXPECT_EQ(inner.events[1].what, "intermediate");
  EXPECT_EQ(inner.events[2].what, "delegate double");
  // A delegate output the filter drops needs no room: the inner gets it to drop.
  DropAll drop;
  tracer.set_delegation_intermediate_output_filter(&drop);
  EXPECT_TRUE(*tracer.log_intermediate_output_delegate(nullptr, 1, a.tensor()));
  EXPECT_EQ(inner.events.back().what, "delegate tensor");
  tracer.set_delegation_intermediate_output_filter(nullptr);
  EXPECT_TRUE(same(tracer.shortfall()->instruction, 0, 2)); // the first kept's
  // The next event block starts afresh; a value logged outside any
  // instruction (the method's outputs) names none.
  tracer.create_event_block("Execute");
  EXPECT_FALSE(tracer.shortfall());
  room.used_ = 128;
  EXPECT_FALSE(*tracer.log_evalue(EValue(a.tensor()), LoggedEValueType::kProgramOutput));
  ASSERT_TRUE(tracer.shortfall());
  EXPECT_FALSE(tracer.shortfall()->instruction);
  EXPECT_EQ(tracer.shortfall()->needed, 132u);
  tracer.clear();
  EXPECT_FALSE(tracer.shortfall());
  room.used_ = 0;
  EXPECT_TRUE(*tracer.log_intermediate_output_delegate(nullptr, 1, a.tensor()));
  room.used_ = 128;
  tracer.set_debug_buffer_room(nullptr);
  EXPECT_TRUE(*tracer.log_evalue(EValue(a.tensor()), LoggedEValueType::kIntermediateOutput));
  EXPECT_FALSE(tracer.shortfall());
}

TEST(InstructionTracerForwarding, WithoutAnInnerTracerCallsAnswerQuietly) {
  InstructionTracer tracer;
  EXPECT_EQ(tracer.inner(), nullptr);
  EXPECT_EQ(tracer.track_allocator("a"), 0u);
  const auto e = tracer.start_profiling("OPERATOR_CALL");
  EXPECT_EQ(e.event_id, InstructionTracer::kNotForwarded);
  tracer.end_profiling(e);
  EXPECT_FALSE(*tracer.log_intermediate_output_delegate("d", 0, 3));
  Recorder later;
  later.set_event_tracer_debug_level(EventTracerDebugLogLevel::kIntermediateOutputs);
  tracer.set_inner(&later);
  EXPECT_EQ(tracer.event_tracer_debug_level(), EventTracerDebugLogLevel::kIntermediateOutputs);
  tracer.end_profiling(e); // started before: not the inner's to end
  EXPECT_TRUE(later.events.empty());
  tracer.set_inner(nullptr);
  EXPECT_EQ(tracer.event_tracer_debug_level(), EventTracerDebugLogLevel::kNoLogging);
}

TEST(SessionEventTracer, ALoadedMethodKeepsItsTracerAndRefusesAnother) {
  Loaded l("roundtrip.pte");
  ASSERT_NE(l.program, nullptr);
  InstructionTracer tracer, other;
  et_copy::FailureReport report;
  auto method = [&](et_copy::Session& s, EventTracer* t) {
    return et_copy::SessionTestAccess::method(s, "forward", &report, t);
  };
  auto first = method(*l.session, &tracer);
  ASSERT_TRUE(first.ok()) << report.detail;
  EXPECT_EQ((*first)->get_event_tracer(), &tracer);
  auto again = method(*l.session, nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  auto same_tracer = method(*l.session, &tracer);
  ASSERT_TRUE(same_tracer.ok());
  auto refused = method(*l.session, &other);
  EXPECT_EQ(refused.error(), Error::InvalidArgument);
  EXPECT_EQ(report.detail, "method 'forward' is already loaded with another event tracer, which it keeps");
  // Another session of the pool loads the method with a tracer of its own.
  auto s2 = l.pool->new_session();
  auto second = method(*s2, &other);
  ASSERT_TRUE(second.ok()) << report.detail;
  EXPECT_EQ((*second)->get_event_tracer(), &other);
}

#ifdef ET_COPY_TEST_ETDUMP

bool contains(const executorch::etdump::ETDumpResult& r, const std::string& text) {
  const auto* b = static_cast<const char*>(r.buf);
  return r.buf != nullptr && std::search(b, b + r.size, text.begin(), text.end()) != b + r.size;
}

TEST(InstructionTracerEtdump, OneTracerGivesAnEtdumpProfileAndNamesTheFailingInstruction) {
  Loaded l("d2h_fails.pte");
  ASSERT_NE(l.program, nullptr);
  executorch::etdump::ETDumpGen etdump;
  InstructionTracer tracer(&etdump);
  Forward f(l, &tracer);
  ASSERT_NE(f.method, nullptr);
  EXPECT_NE(f.method->execute(), Error::Ok);
  EXPECT_TRUE(same(tracer.last_instruction(), 0, 1));
  const auto data = etdump.get_etdump_data();
  ASSERT_NE(data.buf, nullptr);
  EXPECT_GT(data.size, 0u);
  EXPECT_EQ(etdump.get_num_blocks(), 2u); // load_method's and execute's
  EXPECT_TRUE(contains(data, "OPERATOR_CALL"));
  EXPECT_TRUE(contains(data, "Method::execute"));
  free(data.buf); // ETDumpGen's buffer, the caller's to free
}

TEST(InstructionTracerEtdump, ASuccessfulRunIsProfiled) {
  Loaded l("roundtrip.pte");
  ASSERT_NE(l.program, nullptr);
  executorch::etdump::ETDumpGen etdump;
  InstructionTracer tracer(&etdump);
  Forward f(l, &tracer);
  ASSERT_NE(f.method, nullptr);
  ASSERT_EQ(f.method->execute(), Error::Ok);
  ASSERT_EQ(f.method->execute(), Error::Ok);
  const auto data = etdump.get_etdump_data();
  ASSERT_NE(data.buf, nullptr);
  EXPECT_EQ(etdump.get_num_blocks(), 3u);
  EXPECT_TRUE(contains(data, "OPERATOR_CALL"));
  EXPECT_TRUE(contains(data, "Program::load_method"));
  free(data.buf);
}

#endif

} // namespace
