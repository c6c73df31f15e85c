// The one way et-copy runs a method (et_copy/loaded_program.h,
// et_copy/loaded_method.h), end to end on real programs
// (tests/cpp/programs): a program loaded and checked, a session's method
// loaded and described, inputs bound, outputs landing in the caller's
// memory (the d2h redirect), a failing kernel named by its instruction,
// operator and message, and bad calls refused before anything runs; how a
// FailureReport reads (ExecuTorch's per-argument lines left out) and how
// errors and devices are named in it (LogCapture, which failure reports
// quote, has test_log_capture.cpp).
//
// Registry state: this process registers the simulated allocator for CUDA
// and no kernels (methods load with et_copy::method_kernels()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/counting_device_allocator.h>
#include <et_copy/instruction_tracer.h>
#include <et_copy/loaded_method.h>
#include <et_copy/loaded_program.h>
#include <et_copy/log_capture.h>
#include <et_copy/registration.h>
#include <et_copy/tensor_layout.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/platform/log.h>

namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::etensor::DeviceType;

const std::string kPrograms = ET_COPY_TEST_PROGRAMS;

std::vector<uint8_t> read_program(const std::string& name) {
  std::ifstream in(kPrograms + "/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class SimulatedDevice : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_NE(et_copy::use_simulated_device(), et_copy::Registration::kFailed);
  }
};
const auto* const env = ::testing::AddGlobalTestEnvironment(new SimulatedDevice);

et_copy::DeviceAllocatorStats stats() {
  return et_copy::as_counting_allocator(executorch::runtime::get_device_allocator(DeviceType::CUDA))->stats();
}

// `name` loaded from bytes, with one session and its forward.
struct Forward {
  explicit Forward(const std::string& name, const et_copy::LoadOptions& options = {}) : bytes(read_program(name)) {
    auto loaded = et_copy::LoadedProgram::load(
        std::make_unique<executorch::extension::BufferDataLoader>(bytes.data(), bytes.size()), nullptr, options,
        &report);
    EXPECT_TRUE(loaded.ok()) << report.message();
    if (!loaded.ok()) {
      return;
    }
    program = std::move(*loaded);
    session = program->new_session();
    auto m = session->load("forward", nullptr, &report);
    EXPECT_TRUE(m.ok()) << report.message();
    method = m.ok() ? *m : nullptr;
    for (size_t i = 0; i < input.size(); ++i) {
      input[i] = static_cast<float>(i) - 5.5f;
    }
    const executorch::aten::SizesType sizes[] = {2, 3, 4};
    et_copy::TensorImplView::Spec spec;
    spec.sizes = {sizes, 3};
    spec.data = input.data();
    EXPECT_EQ(view.reset(spec), Error::Ok);
  }
  std::vector<uint8_t> bytes; // outlives the program, which reads it
  et_copy::FailureReport report;
  std::unique_ptr<et_copy::LoadedProgram> program;
  std::unique_ptr<et_copy::Session> session;
  et_copy::LoadedMethod* method = nullptr;
  std::vector<float> input = std::vector<float>(24);
  et_copy::TensorImplView view;
};

// ---- FailureReport: how a failure reads --------------------------------

TEST(FailureReport, TheMessageIsTheStepTheErrorTheDetailAndTheLogLessExecuTorchsArgumentLines) {
  et_copy::FailureReport r;
  r.step = "executing";
  r.error = Error::InvalidArgument;
  EXPECT_EQ(r.message(), "executing failed with InvalidArgument");
  r.detail = "why";
  // ExecuTorch logs "arg N with type id T" after a failed kernel call: only a
  // line that is both is dropped.
  r.log = {"arg 0 with type id 1",
           "arg 12 with type id 5",
           "arg 0 has type id 1",
           "an arg 0 with type id 1",
           "args 0 with type id 1",
           "kernel said no",
           ""};
  EXPECT_EQ(r.message(),
            "executing failed with InvalidArgument\n  why\n  arg 0 has type id 1\n  an arg 0 with type id "
            "1\n  args 0 with type id 1\n  kernel said no\n  ");
  r.detail.clear();
  r.log = {"kernel said no"};
  EXPECT_EQ(r.message(), "executing failed with InvalidArgument\n  kernel said no");
}

TEST(FailureReport, FailFillsTheReportAndClearsWhatAnEarlierFailureLeft) {
  et_copy::FailureReport r;
  r.instruction = "0:1";
  r.op = "aten::add.out";
  r.log = {"old"};
  r.debug_buffer_full = true;
  EXPECT_EQ(et_copy::fail(&r, Error::NotFound, "no such method", "loading"), Error::NotFound);
  EXPECT_EQ(r.error, Error::NotFound);
  EXPECT_EQ(r.step, "loading");
  EXPECT_EQ(r.detail, "no such method");
  EXPECT_TRUE(r.instruction.empty() && r.op.empty() && r.log.empty());
  EXPECT_FALSE(r.debug_buffer_full);
  EXPECT_EQ(et_copy::fail(nullptr, Error::Internal, "nobody asked"), Error::Internal);
}

TEST(FailureReport, ErrorsAreNamedWithoutThePrefixAndDevicesByTypeAndIndex) {
  EXPECT_STREQ(et_copy::error_name(Error::Ok), "Ok");
  EXPECT_STREQ(et_copy::error_name(Error::InvalidArgument), "InvalidArgument");
  EXPECT_STREQ(et_copy::error_name(Error::MemoryAllocationFailed), "MemoryAllocationFailed");
  EXPECT_EQ(et_copy::device_name(0, 0), "cpu");
  EXPECT_EQ(et_copy::device_name(0, 3), "cpu");
  EXPECT_EQ(et_copy::device_name(1, 0), "cuda:0");
  EXPECT_EQ(et_copy::device_name(1, 2), "cuda:2");
  EXPECT_EQ(et_copy::device_name(1, -1), "cuda:-1");
  EXPECT_EQ(et_copy::device_name(2, 1), "device type 2:1");
  EXPECT_EQ(et_copy::device_name(-1, 0), "device type -1:0");
}

TEST(LoadedMethod, DescribesItsInputsAndOutputsOnceAtLoad) {
  Forward r("roundtrip.pte");
  ASSERT_NE(r.method, nullptr);
  const et_copy::MethodIo& io = r.method->io();
  ASSERT_EQ(io.inputs.size(), 1u);
  ASSERT_EQ(io.outputs.size(), 1u);
  EXPECT_TRUE(io.inputs[0].tensor);
  EXPECT_EQ(io.inputs[0].dtype, ScalarType::Float);
  EXPECT_EQ(io.inputs[0].device.type(), DeviceType::CPU);
  EXPECT_EQ(io.inputs[0].sizes, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(io.outputs[0].nbytes, 96u);
  EXPECT_TRUE(io.outputs[0].planned);
  // et-copy's d2h kernel fills it first: execute may point it at the caller's memory.
  EXPECT_TRUE(io.outputs[0].filled_by_d2h);
  // Loading it again gives the same method.
  auto again = r.session->load("forward", nullptr, &r.report);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, r.method);
  // With another profiler: refused, and the method keeps the one it has.
  et_copy::InstructionTracer other;
  et_copy::FailureReport refused;
  auto profiled = r.session->load("forward", &other, &refused);
  ASSERT_FALSE(profiled.ok());
  EXPECT_EQ(profiled.error(), Error::InvalidArgument);
  EXPECT_EQ(refused.detail, "it is already loaded with another profiler, which it keeps");
  auto kept = r.session->load("forward", nullptr, &r.report);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, r.method);
}

TEST(LoadedMethod, RunsWithHostInputsBoundAndTheOutputLandingInTheCallersMemory) {
  Forward r("roundtrip.pte");
  ASSERT_NE(r.method, nullptr);
  std::vector<float> out(24, -1.0f);
  et_copy::MethodOutput output;
  output.data = out.data();
  output.nbytes = out.size() * sizeof(float);
  const EValue inputs[] = {EValue(r.view.tensor())};
  const auto before = stats();
  ASSERT_EQ(r.method->execute({inputs, 1}, {&output, 1}, &r.report), Error::Ok) << r.report.message();
  EXPECT_EQ(out, r.input);
  ASSERT_EQ(output.rank, 3u);
  EXPECT_EQ(std::vector<int>(output.sizes, output.sizes + 3), (std::vector<int>{2, 3, 4}));
  // One copy each way, the d2h straight into `out`; the method's output is
  // its own memory again afterwards.
  const auto after = stats();
  EXPECT_EQ(after.h2d_copies - before.h2d_copies, 1u);
  EXPECT_EQ(after.d2h_copies - before.d2h_copies, 1u);
  EXPECT_NE(r.method->method().get_output(0).toTensor().const_data_ptr(), out.data());
  // Again, with other data: the same memory, the new values.
  std::reverse(r.input.begin(), r.input.end());
  ASSERT_EQ(r.method->execute({inputs, 1}, {&output, 1}, &r.report), Error::Ok) << r.report.message();
  EXPECT_EQ(out, r.input);
}

// A MethodOutput has no shape (rank 0) until a successful execute() writes a
// tensor output's; a value output gets its value and keeps rank 0.
TEST(LoadedMethod, AValueOutputGetsItsValueAndNoShape) {
  Forward r("value_output.pte");
  ASSERT_NE(r.method, nullptr);
  ASSERT_EQ(r.method->io().outputs.size(), 2u);
  EXPECT_TRUE(r.method->io().outputs[0].tensor);
  EXPECT_FALSE(r.method->io().outputs[1].tensor);
  std::vector<float> out(24, -1.0f);
  et_copy::MethodOutput outputs[2];
  outputs[0].data = out.data();
  outputs[0].nbytes = out.size() * sizeof(float);
  EXPECT_EQ(outputs[0].rank, 0u);
  EXPECT_EQ(outputs[1].rank, 0u);
  const EValue inputs[] = {EValue(r.view.tensor())};
  ASSERT_EQ(r.method->execute({inputs, 1}, {outputs, 2}, &r.report), Error::Ok) << r.report.message();
  EXPECT_EQ(out, r.input);
  EXPECT_EQ(outputs[0].rank, 3u);
  ASSERT_TRUE(outputs[1].value.isInt());
  EXPECT_EQ(outputs[1].value.toInt(), 7);
  EXPECT_EQ(outputs[1].rank, 0u);
  EXPECT_EQ(outputs[1].sizes[0], 0);
}

TEST(LoadedMethod, APlannedOutputGivenNoMemoryStaysInTheMethodsMemory) {
  // MethodOutput's nullptr: nothing is bound, redirected or copied out.
  Forward r("roundtrip.pte");
  ASSERT_NE(r.method, nullptr);
  ASSERT_TRUE(r.method->io().outputs[0].planned);
  et_copy::MethodOutput output;
  const EValue inputs[] = {EValue(r.view.tensor())};
  ASSERT_EQ(r.method->execute({inputs, 1}, {&output, 1}, &r.report), Error::Ok) << r.report.message();
  const auto& t = r.method->method().get_output(0).toTensor();
  ASSERT_EQ(t.nbytes(), 96u);
  const auto* got = t.const_data_ptr<float>();
  EXPECT_EQ(std::vector<float>(got, got + 24), r.input);
  EXPECT_EQ(output.rank, 3u);
}

TEST(LoadedMethod, AFailingKernelIsNamedByInstructionOperatorAndMessageAndLeavesTheOutputAlone) {
  // d2h_fails.pte: instruction 0:1 copies back into a Half output, which
  // et-copy's d2h kernel refuses.
  Forward r("d2h_fails.pte");
  ASSERT_NE(r.method, nullptr);
  std::vector<uint8_t> out(r.method->io().outputs[0].nbytes, 0xAB);
  et_copy::MethodOutput output;
  output.data = out.data();
  output.nbytes = out.size();
  const EValue inputs[] = {EValue(r.view.tensor())};
  et_copy::FailureReport report;
  EXPECT_NE(r.method->execute({inputs, 1}, {&output, 1}, &report), Error::Ok);
  EXPECT_EQ(report.step, "executing");
  EXPECT_EQ(report.instruction, "0:1");
  EXPECT_EQ(report.op, "et_copy::_d2h_copy.out");
  EXPECT_FALSE(report.debug_buffer_full); // a kernel's refusal, not the ETDump debug buffer's
  const std::string message = report.message();
  EXPECT_NE(message.find("executing failed with "), std::string::npos) << message;
  EXPECT_NE(message.find("et_copy::_d2h_copy.out: dtype mismatch: self has Float, out has Half"), std::string::npos)
      << message;
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0xAB; }));
  EXPECT_NE(r.method->method().get_output(0).toTensor().const_data_ptr(), out.data());
}

TEST(LoadedMethod, RefusesBadInputsAndOutputsBeforeAnythingRuns) {
  Forward r("roundtrip.pte");
  ASSERT_NE(r.method, nullptr);
  std::vector<float> out(24);
  et_copy::MethodOutput output;
  output.data = out.data();
  output.nbytes = out.size() * sizeof(float);
  const auto before = stats();
  et_copy::FailureReport report;

  EXPECT_EQ(r.method->execute({}, {&output, 1}, &report), Error::InvalidArgument);
  EXPECT_EQ(report.detail, "takes 1 inputs, got 0");

  std::vector<double> doubles(24);
  const executorch::aten::SizesType sizes[] = {2, 3, 4};
  et_copy::TensorImplView wrong;
  et_copy::TensorImplView::Spec spec;
  spec.dtype = ScalarType::Double;
  spec.sizes = {sizes, 3};
  spec.data = doubles.data();
  ASSERT_EQ(wrong.reset(spec), Error::Ok);
  const EValue bad[] = {EValue(wrong.tensor())};
  EXPECT_EQ(r.method->execute({bad, 1}, {&output, 1}, &report), Error::InvalidArgument);
  EXPECT_EQ(report.detail, "input 0 must be Float on cpu, got Double on cpu") << report.detail;

  const EValue not_a_tensor[] = {EValue(int64_t{3})};
  EXPECT_EQ(r.method->execute({not_a_tensor, 1}, {&output, 1}, &report), Error::InvalidArgument);
  EXPECT_NE(report.detail.find("must be a tensor"), std::string::npos) << report.detail;

  // A device is its type and its index: cuda:0 is not the host's cpu (index 0 too).
  et_copy::TensorImplView on_cuda;
  spec.dtype = ScalarType::Float;
  spec.data = r.input.data();
  spec.device_type = DeviceType::CUDA;
  ASSERT_EQ(on_cuda.reset(spec), Error::Ok);
  const EValue elsewhere[] = {EValue(on_cuda.tensor())};
  EXPECT_EQ(r.method->execute({elsewhere, 1}, {&output, 1}, &report), Error::InvalidArgument);
  EXPECT_EQ(report.detail, "input 0 must be Float on cpu, got Float on cuda:0") << report.detail;

  const EValue inputs[] = {EValue(r.view.tensor())};
  output.device = executorch::runtime::etensor::Device(DeviceType::CUDA, 0);
  EXPECT_EQ(r.method->execute({inputs, 1}, {&output, 1}, &report), Error::InvalidArgument);
  EXPECT_EQ(report.detail, "output 0 needs 96 bytes on cpu, got 96 on cuda:0") << report.detail;
  output.device = executorch::runtime::etensor::Device(DeviceType::CPU, 0);
  output.nbytes = 95;
  EXPECT_EQ(r.method->execute({inputs, 1}, {&output, 1}, &report), Error::InvalidArgument);
  EXPECT_EQ(report.detail, "output 0 needs 96 bytes on cpu, got 95 on cpu");

  const auto after = stats();
  EXPECT_EQ(after.h2d_copies, before.h2d_copies);
  EXPECT_EQ(after.d2h_copies, before.d2h_copies);
}

TEST(LoadedProgram, RefusesAProgramWhoseHostWouldTouchDeviceMemoryAndNamesTheStep) {
  const auto bytes = read_program("linear_relu_linear.pte");
  et_copy::FailureReport report;
  auto refused = et_copy::LoadedProgram::load(
      std::make_unique<executorch::extension::BufferDataLoader>(bytes.data(), bytes.size()), nullptr, {}, &report);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), Error::InvalidProgram);
  EXPECT_EQ(report.step, "checking the program");
  EXPECT_NE(report.detail.find("planned on cuda:0"), std::string::npos) << report.detail;
}

TEST(LoadedProgram, LoadsAFileAndSaysWhenItCannotMapOne) {
  et_copy::FailureReport report;
  auto program = et_copy::LoadedProgram::load_file(kPrograms + "/roundtrip.pte", "", {}, &report);
  ASSERT_TRUE(program.ok()) << report.message();
  EXPECT_EQ((*program)->bytes().size(), read_program("roundtrip.pte").size());
  auto session = (*program)->new_session();
  auto missing = session->load("backward", nullptr, &report);
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(report.step, "loading method 'backward'");
  EXPECT_EQ(report.detail, "the program has no method 'backward'");

  auto absent = et_copy::LoadedProgram::load_file(kPrograms + "/absent.pte", "", {}, &report);
  EXPECT_FALSE(absent.ok());
  EXPECT_EQ(report.step, "mapping " + kPrograms + "/absent.pte");
}

// ---- Programs and kernels no exporter gives (tests/python/helpers/hand_made_programs.py) ----

// Another _d2h_copy.out than et-copy's own (it copies the same way, through
// ours, but is not ours): the method list's first entry of the name serves it.
void foreign_d2h_copy_out(executorch::runtime::KernelRuntimeContext& ctx, executorch::runtime::Span<EValue*> stack) {
  et_copy::d2h_copy_out_boxed(ctx, stack);
}
const executorch::runtime::Kernel kForeignD2h[] = {
    executorch::runtime::Kernel(et_copy::kH2dCopyOutName, et_copy::h2d_copy_out_boxed),
    executorch::runtime::Kernel(et_copy::kD2hCopyOutName, foreign_d2h_copy_out),
};

// A planned host output is pointed at the caller's memory only when
// et-copy's own d2h kernel fills it (program_check.h says why that is safe
// for ours alone): with another kernel of the name, the output is written in
// the method's memory and copied out, with the same result.
TEST(LoadedMethod, AnOutputIsWrittenInTheCallersMemoryOnlyWhenEtCopysOwnD2hKernelFillsIt) {
  et_copy::LoadOptions foreign;
  foreign.kernels = {kForeignD2h, 2};
  for (const bool ours : {true, false}) {
    Forward r("roundtrip.pte", ours ? et_copy::LoadOptions{} : foreign);
    ASSERT_NE(r.method, nullptr);
    EXPECT_EQ(r.method->io().outputs[0].filled_by_d2h, ours);
    std::vector<float> out(24, -1.0f);
    et_copy::MethodOutput output;
    output.data = out.data();
    output.nbytes = out.size() * sizeof(float);
    const EValue inputs[] = {EValue(r.view.tensor())};
    ASSERT_EQ(r.method->execute({inputs, 1}, {&output, 1}, &r.report), Error::Ok) << r.report.message();
    EXPECT_EQ(out, r.input) << ours;
    const auto& own = r.method->method().get_output(0).toTensor();
    ASSERT_NE(own.const_data_ptr(), out.data());
    const auto* written = own.const_data_ptr<float>();
    EXPECT_EQ(std::vector<float>(written, written + 24) == r.input, !ours)
        << (ours ? "the copy wrote the caller's memory only" : "the copy wrote the method's memory, then copied out");
  }
}

// ExecuTorch's verification refuses a tensor whose bytes overflow a size_t;
// Minimal verification loads it, and MethodMeta cannot describe it: the
// load is refused naming the input or output, every time it is asked for.
TEST(LoadedMethod, AMethodWhoseInputOrOutputMethodMetaCannotDescribeIsRefusedAtLoad) {
  et_copy::LoadOptions minimal;
  minimal.verification = executorch::runtime::Program::Verification::Minimal;
  Forward plain("roundtrip.pte", minimal);
  ASSERT_NE(plain.method, nullptr) << "Minimal verification loads and describes a real program";
  EXPECT_TRUE(plain.method->io().inputs[0].tensor && plain.method->io().outputs[0].tensor);
  for (const char* end : {"input", "output"}) {
    const auto bytes = read_program(std::string("roundtrip_huge_") + end + ".pte");
    et_copy::FailureReport report;
    auto program = et_copy::LoadedProgram::load(
        std::make_unique<executorch::extension::BufferDataLoader>(bytes.data(), bytes.size()), nullptr, minimal,
        &report);
    ASSERT_TRUE(program.ok()) << report.message();
    auto session = (*program)->new_session();
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto m = session->load("forward", nullptr, &report);
      ASSERT_FALSE(m.ok()) << end;
      EXPECT_EQ(m.error(), Error::InvalidProgram);
      EXPECT_EQ(report.step, "loading method 'forward'");
      EXPECT_EQ(report.detail, std::string(end) +
                                   " 0 is a tensor MethodMeta cannot describe (InvalidArgument: its byte size "
                                   "overflows, or its metadata is missing)");
    }
  }
}

// Each refusal of LoadedProgram::load and load_file names its step, with or
// without a report to fill: no program, a program ExecuTorch's verification
// refuses (what it logged kept), a data file that cannot be mapped or is no
// .ptd. A data file that maps goes on to be read.
TEST(LoadedProgram, EachRefusalNamesItsStepWithOrWithoutAReport) {
  et_copy::FailureReport report;
  auto none = et_copy::LoadedProgram::load(nullptr, nullptr, {}, &report);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error(), Error::InvalidArgument);
  EXPECT_EQ(report.step, "loading the program");
  EXPECT_EQ(report.detail, "no program given");
  EXPECT_EQ(et_copy::LoadedProgram::load(nullptr, nullptr).error(), Error::InvalidArgument);

  const std::vector<uint8_t> garbage(64, 'x');
  auto loader = [&] {
    return std::make_unique<executorch::extension::BufferDataLoader>(garbage.data(), garbage.size());
  };
  report = {};
  auto refused = et_copy::LoadedProgram::load(loader(), nullptr, {}, &report);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(report.error, refused.error());
  EXPECT_EQ(report.step, "loading the program");
  EXPECT_FALSE(report.log.empty()) << "what ExecuTorch logged while refusing it";
  EXPECT_EQ(et_copy::LoadedProgram::load(loader(), nullptr).error(), refused.error());

  const auto bytes = read_program("roundtrip.pte");
  report = {};
  auto bad_data = et_copy::LoadedProgram::load(
      std::make_unique<executorch::extension::BufferDataLoader>(bytes.data(), bytes.size()), loader(), {}, &report);
  ASSERT_FALSE(bad_data.ok());
  EXPECT_EQ(report.step, "reading the data file");

  const std::string absent = ::testing::TempDir() + "et_copy_absent.ptd";
  std::remove(absent.c_str());
  report = {};
  auto unmapped = et_copy::LoadedProgram::load_file(kPrograms + "/roundtrip.pte", absent, {}, &report);
  ASSERT_FALSE(unmapped.ok());
  EXPECT_EQ(report.step, "mapping " + absent);
  const std::string not_ptd = ::testing::TempDir() + "et_copy_not_a.ptd";
  std::ofstream(not_ptd, std::ios::binary).write(reinterpret_cast<const char*>(garbage.data()), garbage.size());
  report = {};
  auto mapped = et_copy::LoadedProgram::load_file(kPrograms + "/roundtrip.pte", not_ptd, {}, &report);
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(report.step, "reading the data file") << "mapped, then read";
  std::remove(not_ptd.c_str());
}

} // namespace
