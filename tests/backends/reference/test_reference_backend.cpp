// The reference backend (reference_backend.h) from export to execute: the
// program make_program.py exported with ReferencePartitioner, loaded with
// LoadedProgram and run on the simulated device, gives the eager output;
// the record seams refuse what is not theirs (the simulated backend a
// reference payload, the parser the reference kind's extra lines).
//
// Registry state: the simulated allocator serves CUDA; the reference
// backend and its payload kind are registered, and no kernels (methods load
// with et_copy::method_kernels()).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <et_copy/delegate_record.h>
#include <et_copy/loaded_method.h>
#include <et_copy/loaded_program.h>
#include <et_copy/log_capture.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_backend.h>
#include <et_copy/tensor_layout.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>

#include "reference_backend.h"

namespace {

using executorch::runtime::Error;
using executorch::runtime::EValue;

std::string logged(const et_copy::LogCapture& log) {
  std::string text;
  for (const std::string& line : log.lines()) {
    text += line + "\n";
  }
  return text;
}

std::vector<uint8_t> read_file(const std::string& name) {
  std::ifstream in(std::string(ET_COPY_REFERENCE_DIR) + "/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class Registered : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_NE(et_copy::use_simulated_device(), et_copy::Registration::kFailed);
    ASSERT_EQ(et_copy_reference::register_reference_backend(), et_copy::Registration::kRegistered);
  }
};
const auto* const env = ::testing::AddGlobalTestEnvironment(new Registered);

// scale_add_relu.pte loaded, and a view of each of its float32[2, 3] tensors in scale_add_relu.io.
struct ScaleAddRelu {
  ScaleAddRelu() : bytes(read_file("scale_add_relu.pte")) {
    const std::vector<uint8_t> io = read_file("scale_add_relu.io");
    EXPECT_EQ(io.size(), 3 * 6 * sizeof(float));
    for (size_t i = 0; i < 3 && io.size() == 3 * 6 * sizeof(float); ++i) {
      std::memcpy(tensors[i].data(), io.data() + i * 6 * sizeof(float), 6 * sizeof(float));
    }
    auto loaded = et_copy::LoadedProgram::load(
        std::make_unique<executorch::extension::BufferDataLoader>(bytes.data(), bytes.size()), nullptr, {}, &report);
    EXPECT_TRUE(loaded.ok()) << report.message();
    if (loaded.ok()) {
      program = std::move(*loaded);
    }
  }
  std::vector<uint8_t> bytes;                    // outlives the program, which reads it
  std::array<std::array<float, 6>, 3> tensors{}; // x, y, the eager output
  et_copy::FailureReport report;
  std::unique_ptr<et_copy::LoadedProgram> program;
};

TEST(ReferenceBackend, RunsTheExportedProgramAndGivesTheEagerOutput) {
  ScaleAddRelu p;
  ASSERT_NE(p.program, nullptr);
  auto session = p.program->new_session();
  auto method = session->load("forward", nullptr, &p.report);
  ASSERT_TRUE(method.ok()) << p.report.message();
  const executorch::aten::SizesType sizes[] = {2, 3};
  et_copy::TensorImplView views[2];
  EValue inputs[2];
  for (size_t i = 0; i < 2; ++i) {
    et_copy::TensorImplView::Spec spec;
    spec.sizes = {sizes, 2};
    spec.data = p.tensors[i].data();
    ASSERT_EQ(views[i].reset(spec), Error::Ok);
    inputs[i] = EValue(views[i].tensor());
  }
  std::array<float, 6> out{};
  et_copy::MethodOutput output;
  output.data = out.data();
  output.nbytes = sizeof(out);
  for (int step = 0; step < 2; ++step) { // twice: the weights stay bound, nothing is consumed
    out.fill(-1.0f);
    ASSERT_EQ((*method)->execute({inputs, 2}, {&output, 1}, &p.report), Error::Ok) << p.report.message();
    ASSERT_EQ(output.rank, 2u);
    EXPECT_EQ(output.sizes[0], 2);
    EXPECT_EQ(output.sizes[1], 3);
    for (size_t k = 0; k < 6; ++k) {
      EXPECT_FLOAT_EQ(out[k], p.tensors[2][k]) << "element " << k << ", step " << step;
    }
  }
}

TEST(ReferenceBackend, TheProgramsDelegateIsAReferenceRecordThatTheSimulatedBackendRefuses) {
  ScaleAddRelu p;
  ASSERT_NE(p.program, nullptr);
  // The record, found in the program's bytes: its magic line up to the end of its payload.
  const std::string all(p.bytes.begin(), p.bytes.end());
  const size_t at = all.find("et_copy.delegate 2\n");
  ASSERT_NE(at, std::string::npos);
  const size_t payload = all.find("payload\treference\t", at);
  ASSERT_NE(payload, std::string::npos);
  const size_t size_at = payload + std::strlen("payload\treference\t");
  const size_t nl = all.find('\n', size_at);
  const size_t end = nl + 1 + std::stoul(all.substr(size_at, nl - size_at));
  const std::string record = all.substr(at, end - at);
  et_copy::FailureReport report;
  auto parsed = et_copy::parse_delegate_record(record.data(), record.size(), &report);
  ASSERT_TRUE(parsed.ok()) << report.detail;
  EXPECT_EQ(parsed->payload_word, "reference");
  EXPECT_FALSE(parsed->payload_is_program);
  ASSERT_EQ(parsed->weights.size(), 1u);
  EXPECT_EQ(parsed->weights[0].fqn, "w");

  // The simulated backend's frame refuses another kind's payload by name.
  et_copy::LogCapture log;
  executorch::runtime::FreeableBuffer processed(record.data(), record.size(), nullptr);
  executorch::runtime::BackendInitContext context(nullptr, nullptr, "forward");
  auto handle = et_copy::simulated_device_backend().init(context, &processed, {});
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.error(), Error::DelegateInvalidCompatibility);
  EXPECT_NE(logged(log).find("the record's payload is 'reference', and SimulatedDeviceBackend runs 'program' "
                             "payloads (a nested program)"),
            std::string::npos)
      << logged(log);
}

TEST(ReferenceBackend, ItsKindsRulesAndItsKindWordAreTheParsersOnceRegistered) {
  const std::string head = "et_copy.delegate 2\ndevice\tcuda\t0\n";
  const std::string payload = "inputs 1\noutputs %0\n";
  const std::string tail = "payload\treference\t" + std::to_string(payload.size()) + "\n" + payload;
  et_copy::FailureReport report;
  const std::string good = head + tail;
  EXPECT_TRUE(et_copy::parse_delegate_record(good.data(), good.size(), &report).ok()) << report.detail;
  const std::string with_arena = head + "arena\t-\t16\n" + tail;
  EXPECT_FALSE(et_copy::parse_delegate_record(with_arena.data(), with_arena.size(), &report).ok());
  EXPECT_NE(report.detail.find("line 4: a reference payload has weight lines only"), std::string::npos)
      << report.detail;
  // An io line is the aoti kind's, whose reader is its library's: not linked here, so no kind reads it.
  const std::string with_io = head + "io\t1\t1\n" + tail;
  EXPECT_FALSE(et_copy::parse_delegate_record(with_io.data(), with_io.size(), &report).ok());
  EXPECT_NE(report.detail.find("line 3 ('io\\t1\\t1'): unknown kind of line 'io'"), std::string::npos) << report.detail;
  const std::string other = head + "payload\tpte\t0\n";
  EXPECT_FALSE(et_copy::parse_delegate_record(other.data(), other.size(), &report).ok());
  // The core's own kind and this one: the aoti kind is its library's, not linked here.
  EXPECT_NE(report.detail.find("payload kind 'pte' is not program or reference"), std::string::npos) << report.detail;
  // Registering again is idempotent; the kind word with another check is refused.
  EXPECT_EQ(et_copy_reference::register_reference_backend(), et_copy::Registration::kAlreadyOurs);
  const auto accept = [](const et_copy::DelegateRecord&, const et_copy::RecordLines&, size_t*) {
    return std::string();
  };
  EXPECT_EQ(et_copy::register_payload_kind({"reference", accept}), Error::InvalidState);
  EXPECT_EQ(et_copy::register_payload_kind({"two words", accept}), Error::InvalidArgument);
}

// BackendFrame's preludes, through this backend: what every framed backend
// refuses before its own code runs, each logged naming the backend and method.
TEST(ReferenceBackend, TheFramesPreludesRefuseBeforeThePayloadRuns) {
  auto* backend = executorch::runtime::get_backend_class(et_copy_reference::kReferenceDeviceBackend);
  ASSERT_NE(backend, nullptr);
  const std::string payload = "inputs 1\noutputs %0\n";
  const std::string record =
      "et_copy.delegate 2\ndevice\tcuda\t0\npayload\treference\t" + std::to_string(payload.size()) + "\n" + payload;
  executorch::runtime::BackendInitContext init(nullptr, nullptr, "forward");
  {
    et_copy::LogCapture log;
    EXPECT_EQ(backend->init(init, nullptr, {}).error(), Error::InvalidArgument);
    char device[] = "cuda:1";
    executorch::runtime::CompileSpec spec{"target_device", {device, 6}};
    executorch::runtime::FreeableBuffer processed(record.data(), record.size(), nullptr);
    EXPECT_EQ(backend->init(init, &processed, {&spec, 1}).error(), Error::DelegateInvalidCompatibility);
    const std::string text = logged(log);
    EXPECT_NE(text.find("ReferenceDeviceBackend: method 'forward': no processed bytes"), std::string::npos) << text;
    EXPECT_NE(text.find("compile spec target_device is 'cuda:1', the record's device cuda:0"), std::string::npos)
        << text;
  }
  executorch::runtime::FreeableBuffer processed(record.data(), record.size(), nullptr);
  auto handle = backend->init(init, &processed, {});
  ASSERT_TRUE(handle.ok());
  executorch::runtime::BackendExecutionContext run;
  et_copy::LogCapture log;
  EXPECT_EQ(backend->execute(run, nullptr, {}), Error::InvalidArgument);
  EValue one;
  EValue* args[] = {&one};
  EXPECT_EQ(backend->execute(run, *handle, {args, 1}), Error::InvalidArgument);
  EValue* missing[] = {&one, nullptr};
  EXPECT_EQ(backend->execute(run, *handle, {missing, 2}), Error::InvalidArgument);
  backend->destroy(*handle);
  const std::string text = logged(log);
  EXPECT_NE(text.find("ReferenceDeviceBackend: execute without a handle"), std::string::npos) << text;
  EXPECT_NE(text.find("1 arguments, the reference program takes 1 inputs and 1 outputs"), std::string::npos) << text;
  EXPECT_NE(text.find("output 0 is missing"), std::string::npos) << text;
}

} // namespace
