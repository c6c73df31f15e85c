// et-copy beside another library's CUDA allocator (docs/cuda.md, "Beside
// upstream's CUDA backend"). Before any test runs, the environment registers
// foreign_cuda_allocator() for CUDA, as upstream ExecuTorch's CUDA backend
// registers its own when its library loads: a GPU-like double whose memory
// faults on any host access (foreign_cuda_allocator.h). et-copy registers
// no allocator after it; its kernels, sessions and device backends use it.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <et_copy/copy_ops.h>
#include <et_copy/counting_device_allocator.h>
#include <et_copy/device_backend.h>
#include <et_copy/loaded_method.h>
#include <et_copy/loaded_program.h>
#include <et_copy/log_capture.h>
#include <et_copy/program_check.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_allocator.h>
#include <et_copy/simulated_device_backend.h>
#include <et_copy/tensor_layout.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/device_allocator.h>
#ifdef ET_COPY_TEST_WITH_CUDA
#include <et_copy/cuda_device_allocator.h>
#endif

#include "foreign_cuda_allocator.h"
#include "test_tensors.h"

namespace {

using et_copy::Registration;
using executorch::runtime::BackendInitContext;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using foreign_cuda::foreign_cuda_allocator;
using namespace et_copy_test;

const std::string kPrograms = ET_COPY_TEST_PROGRAMS;

class ForeignCudaFirst : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(foreign_cuda_register(), 1) << "nothing served CUDA before the test";
  }
};
const ::testing::Environment* const kForeignFirst = ::testing::AddGlobalTestEnvironment(new ForeignCudaFirst);

std::vector<uint8_t> read_program(const std::string& name) {
  std::ifstream in(kPrograms + "/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string logged(const et_copy::LogCapture& capture) {
  std::string all;
  for (const auto& line : capture.lines()) {
    all += line + "\n";
  }
  return all;
}

// Device memory from the foreign allocator, freed with the object.
struct ForeignBlock {
  explicit ForeignBlock(size_t n) : nbytes(n) {
    auto p = foreign_cuda_allocator().allocate(n, 0, 256);
    EXPECT_TRUE(p.ok());
    data = p.ok() ? static_cast<uint8_t*>(*p) : nullptr;
  }
  ~ForeignBlock() {
    foreign_cuda_allocator().deallocate(data, 0);
  }
  size_t nbytes;
  uint8_t* data;
};

TEST(ForeignCuda, TheDoublesMemoryFaultsOnAHostReadAsAGpusDoes) {
  ForeignBlock block(64);
  ASSERT_NE(block.data, nullptr);
  // Death, not KilledBySignal(SIGSEGV): under AddressSanitizer the fault is
  // reported and the process exits 1 instead of dying by the signal.
  EXPECT_DEATH(
      {
        volatile uint8_t v = block.data[0];
        (void)v;
        std::exit(0);
      },
      "");
}

TEST(ForeignCuda, TheSimulatedDeviceIsNotRegisteredOverIt) {
  EXPECT_EQ(et_copy::use_simulated_device(), Registration::kAlreadyOther);
  EXPECT_EQ(executorch::runtime::get_device_allocator(DeviceType::CUDA), &foreign_cuda_allocator());
  EXPECT_STREQ(et_copy::allocator_name(&foreign_cuda_allocator()), et_copy::kForeignAllocatorName);
  EXPECT_EQ(et_copy::allocator_words(&foreign_cuda_allocator()), "another library's allocator");
  EXPECT_EQ(et_copy::as_counting_allocator(&foreign_cuda_allocator()), nullptr);
}

#ifdef ET_COPY_TEST_WITH_CUDA
TEST(ForeignCuda, UseCudaAnswersAlreadyOtherAndLeavesTheForeignAllocatorServing) {
  for (int i = 0; i < 2; ++i) {
    Error err = Error::Internal;
    EXPECT_EQ(et_copy::use_cuda(&err), Registration::kAlreadyOther);
    EXPECT_EQ(err, Error::Ok) << "not a failure: CUDA is served by a GPU's allocator";
  }
  EXPECT_EQ(executorch::runtime::get_device_allocator(DeviceType::CUDA), &foreign_cuda_allocator());
}
#endif

TEST(ForeignCuda, TheCopyKernelsMoveBytesThroughTheForeignAllocator) {
  ForeignBlock device(96);
  GuardedBuffer host(96), back(96, 0xEE);
  host.fill_pattern();
  TestTensor::Options cuda0;
  cuda0.device = DeviceType::CUDA;
  cuda0.index = 0;
  TestTensor self(ScalarType::Float, {2, 3, 4}, host.data());
  TestTensor on_device(ScalarType::Float, {2, 3, 4}, device.data, cuda0);
  TestTensor out(ScalarType::Float, {2, 3, 4}, back.data());
  const uint64_t h2d = foreign_cuda_allocator().h2d_bytes, d2h = foreign_cuda_allocator().d2h_bytes;
  ASSERT_EQ(et_copy::h2d_copy(self.t(), on_device.t()), Error::Ok);
  ASSERT_EQ(et_copy::d2h_copy(on_device.t(), out.t()), Error::Ok);
  EXPECT_EQ(back.contents(), host.contents());
  EXPECT_EQ(foreign_cuda_allocator().h2d_bytes - h2d, 96u);
  EXPECT_EQ(foreign_cuda_allocator().d2h_bytes - d2h, 96u);
  // The allocator judges the index (it cannot be asked for a device count): device 1 is its refusal.
  TestTensor::Options cuda1 = cuda0;
  cuda1.index = 1;
  TestTensor elsewhere(ScalarType::Float, {2, 3, 4}, device.data, cuda1);
  et_copy::CopyDiagnostic diag;
  EXPECT_EQ(et_copy::h2d_copy(self.t(), elsewhere.t(), &diag), Error::InvalidArgument);
  EXPECT_NE(std::string(diag.message).find("device allocator failed"), std::string::npos) << diag.message;
}

TEST(ForeignCuda, ACopyOnlyProgramPlannedOnCudaRunsOnTheForeignAllocator) {
  const std::vector<uint8_t> bytes = read_program("roundtrip.pte");
  et_copy::FailureReport report;
  auto program = et_copy::LoadedProgram::load(
      std::make_unique<executorch::extension::BufferDataLoader>(bytes.data(), bytes.size()), nullptr, {}, &report);
  ASSERT_TRUE(program.ok()) << report.message();
  auto session = (*program)->new_session();
  const uint64_t allocations = foreign_cuda_allocator().allocations;
  auto method = session->load("forward", nullptr, &report);
  ASSERT_TRUE(method.ok()) << report.message();
  EXPECT_GT(foreign_cuda_allocator().allocations, allocations) << "the planned CUDA buffer is the foreign allocator's";

  std::vector<float> input(24), out(24, -1.0f);
  for (size_t i = 0; i < input.size(); ++i) {
    input[i] = static_cast<float>(i) * 0.5f - 3.0f;
  }
  const executorch::aten::SizesType sizes[] = {2, 3, 4};
  et_copy::TensorImplView view;
  et_copy::TensorImplView::Spec spec;
  spec.sizes = {sizes, 3};
  spec.data = input.data();
  ASSERT_EQ(view.reset(spec), Error::Ok);
  et_copy::MethodOutput output;
  output.data = out.data();
  output.nbytes = out.size() * sizeof(float);
  const EValue inputs[] = {EValue(view.tensor())};
  const uint64_t h2d = foreign_cuda_allocator().h2d_copies, d2h = foreign_cuda_allocator().d2h_copies;
  ASSERT_EQ((*method)->execute({inputs, 1}, {&output, 1}, &report), Error::Ok) << report.message();
  EXPECT_EQ(out, input);
  EXPECT_EQ(foreign_cuda_allocator().h2d_copies - h2d, 1u);
  EXPECT_EQ(foreign_cuda_allocator().d2h_copies - d2h, 1u);
}

TEST(ForeignCuda, ACpuKernelOnCudaPlannedMemoryIsStillRefusedAtLoad) {
  const std::vector<uint8_t> bytes = read_program("linear_relu_linear.pte");
  et_copy::FailureReport report;
  auto program = et_copy::LoadedProgram::load(
      std::make_unique<executorch::extension::BufferDataLoader>(bytes.data(), bytes.size()), nullptr, {}, &report);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.error(), Error::InvalidProgram);
  EXPECT_NE(report.detail.find("a CPU kernel cannot read device memory"), std::string::npos) << report.detail;
}

// A device backend of the caller's own that runs on a GPU, whoever's allocator serves it.
class GpuBackend final : public et_copy::DeviceBackend {
 public:
  explicit GpuBackend(const char* id = "GpuTestBackend") : id_(id) {}
  const char* id() const override {
    return id_;
  }
  bool runs_on(const executorch::runtime::DeviceAllocator& server) const override {
    return server.device_type() == DeviceType::CUDA && &server != &et_copy::simulated_device_allocator();
  }
  bool is_available() const override {
    return true;
  }
  executorch::runtime::Result<executorch::runtime::DelegateHandle*> init(
      BackendInitContext&, FreeableBuffer*,
      executorch::runtime::ArrayRef<executorch::runtime::CompileSpec>) const override {
    return Error::NotSupported;
  }
  Error execute(executorch::runtime::BackendExecutionContext&, executorch::runtime::DelegateHandle*,
                executorch::runtime::Span<EValue*>) const override {
    return Error::NotSupported;
  }
  void destroy(executorch::runtime::DelegateHandle*) const override {}

 private:
  const char* id_;
};

std::string accept_gpu_records(const et_copy::DelegateRecord&, const et_copy::RecordLines&, size_t*) {
  return "";
}

// A definition of a test GPU backend: its payload kind "gpu_test", and the words a refusal names.
et_copy::DeviceBackendDefinition gpu_definition(et_copy::DeviceBackend* backend, const char* python, const char* cpp,
                                                const char* runs_on) {
  return {backend, {"gpu_test", &accept_gpu_records}, python, cpp, runs_on};
}

TEST(ForeignCuda, OnAForeignGpuTheGpuBackendsMayRunAndTheSimulatedBackendMayNot) {
  EXPECT_EQ(et_copy::device_backends(), std::vector<std::string>{et_copy::kCudaBackendId})
      << "upstream's CUDA backend runs on its own allocator";
  ASSERT_EQ(et_copy::register_simulated_device_backend(), Registration::kRegistered);
  static auto* gpu = new GpuBackend();
  ASSERT_EQ(et_copy::register_device_backend(*gpu), Registration::kRegistered);
  EXPECT_FALSE(et_copy::simulated_device_backend().runs_on(foreign_cuda_allocator()));
  EXPECT_TRUE(et_copy::simulated_device_backend().runs_on(et_copy::simulated_device_allocator()));
  EXPECT_EQ(et_copy::device_backends(), (std::vector<std::string>{"GpuTestBackend", et_copy::kCudaBackendId}));
  // A load check's refusal of the simulated backend's delegate says why, and who serves CUDA.
  EXPECT_EQ(et_copy::backend_hint(et_copy::kSimulatedDeviceBackend),
            "backend 'SimulatedDeviceBackend' runs on et-copy's simulated device only (its processor reads device "
            "memory through the host, and a GPU's memory is not host memory), and cuda is served by another "
            "library's allocator");
  // A backend its library describes is named with the calls that register it, until they are made.
  static auto* later = new GpuBackend("LaterGpuBackend");
  ASSERT_EQ(et_copy::describe_device_backend(gpu_definition(later, "use_later()", "register_later()", "GPUs")),
            Error::Ok);
  EXPECT_EQ(et_copy::backend_hint("LaterGpuBackend"),
            "backend 'LaterGpuBackend' is not registered: call use_later() (C++: register_later()) before loading")
      << "it runs on a foreign GPU once registered";
  ASSERT_EQ(et_copy::describe_device_backend(gpu_definition(later, "again()", "again()", "again")), Error::Ok);
  EXPECT_NE(et_copy::backend_hint("LaterGpuBackend").find("call use_later()"), std::string::npos)
      << "the first description stays";
  ASSERT_EQ(et_copy::describe_device_backend(gpu_definition(gpu, "use_gpu()", "register_gpu()", "GPUs")), Error::Ok);
  EXPECT_EQ(et_copy::backend_hint("GpuTestBackend"), "") << "registered, and it runs here";
  EXPECT_EQ(et_copy::backend_hint("AotiDeviceBackend"), "") << "et_copy_aoti is not linked here: nothing describes it";
  EXPECT_EQ(et_copy::describe_device_backend(gpu_definition(nullptr, "a", "b", "c")), Error::InvalidArgument);
  EXPECT_EQ(et_copy::describe_device_backend(gpu_definition(later, nullptr, "b", "c")), Error::InvalidArgument);
  EXPECT_EQ(et_copy::describe_device_backend(gpu_definition(later, "a", nullptr, "c")), Error::InvalidArgument);
  EXPECT_EQ(et_copy::describe_device_backend(gpu_definition(later, "a", "b", nullptr)), Error::InvalidArgument);
  EXPECT_EQ(et_copy::describe_device_backend({later, {"", &accept_gpu_records}, "a", "b", "c"}), Error::InvalidArgument)
      << "the payload kind's own refusal";
  // The one registration call refuses a definition its description refuses, saying why in *error.
  Error refused = Error::Ok;
  EXPECT_EQ(et_copy::register_device_backend(gpu_definition(later, "a", "b", nullptr), &refused),
            Registration::kFailed);
  EXPECT_EQ(refused, Error::InvalidArgument);
  EXPECT_EQ(et_copy::register_device_backend(gpu_definition(later, "a", "b", nullptr)), Registration::kFailed)
      << "no error pointer: refused all the same";
  static auto* nameless = new GpuBackend("");
  EXPECT_EQ(et_copy::describe_device_backend(gpu_definition(nameless, "a", "b", "c")), Error::InvalidArgument);
  EXPECT_EQ(et_copy::backend_hint("XnnpackBackend"), "") << "not et-copy's";
}

TEST(ForeignCuda, TheSimulatedBackendRefusesADelegateNamingWhoServesCuda) {
  executorch::extension::MallocMemoryAllocator alloc;
  BackendInitContext context(&alloc, nullptr, "forward", nullptr);
  std::string record = "et_copy.delegate 2\ndevice\tcuda\t0\npayload\tprogram\t4\nnope";
  FreeableBuffer processed(record.data(), record.size(), nullptr);
  et_copy::LogCapture log;
  auto h = et_copy::simulated_device_backend().init(context, &processed, {});
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error(), Error::NotSupported);
  EXPECT_NE(logged(log).find(
                "cuda is served by another library's allocator, not the simulated device this backend computes on"),
            std::string::npos)
      << logged(log);
  EXPECT_EQ(foreign_cuda_allocator().allocations - foreign_cuda_allocator().deallocations, 0u)
      << "nothing left on the device";
}

} // namespace
