// et_copy_executor: runs an ExecuTorch program the way a real executor
// does, linking the executorch wheel's kernel library
// (libexecutorch_kernels_optimized.so, for the model's arithmetic) and its
// XNNPACK backend when they are there. Those register et_copy's two kernel
// names globally themselves, so et-copy's kernels are handed to the method
// instead (et_copy::method_kernels()). It serves CUDA with the simulated
// device and registers its backend, SimulatedDeviceBackend, in which device
// programs compute, and AotiDeviceBackend (compiled code, backend="aoti")
// when the program names it and et_copy::aoti was linked. The program loads
// and runs through et_copy's one path
// (et_copy::LoadedProgram, et_copy::LoadedMethod::execute), which refuses
// at load any program whose host would touch device memory
// (et_copy::check_device_access): a GPU could not run it.
//
//   et_copy_executor MODEL.pte [--method NAME] [--cuda] [--load LIB]...
//       [--data MODEL.ptd]                   the weights of a program exported with
//                                            external_weights=True (mmapped, as the .pte)
//       [--verify-data]                      check each weight against its content key as it
//                                            is copied to the device (LoadOptions::verify_data)
//       [--trust-code]                       run compiled code this machine did not compile
//                                            (LoadOptions::trust_code; code_trust.h)
//       [--global-kernels]                   use the registry's et_copy kernels
//       [--generate N --prompt T,T,...]...   an LLM of et_copy.llm: N tokens greedily per
//                                            prompt, each in its own session
//       [--input FILE]... | [--seed N]       inputs: raw bytes, or generated
//       [--save-inputs DIR]                  write the inputs used
//       [--output FILE]...                   write output i's raw bytes
//       [--expect FILE]...                   compare output i with a file
//       [--require-copies]                   fail unless both copies ran
//
// --load dlopens a shared library before the method loads: another backend,
// which registers itself when loaded. --global-kernels loads the method
// with the global registry alone (registering et-copy's kernels only where
// no library did): with the wheel's kernel library linked, its et_copy
// kernels then serve the copies, for comparison.
//
// Exit status: 0 success, 1 the program ran but an output differs, 2 bad
// arguments or any ExecuTorch error.
#include <dlfcn.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "generate.h"
#include "host_outputs.h"
#include "named_backends.h"

#include <et_copy/copy_ops.h>
#include <et_copy/counting_device_allocator.h>
#include <et_copy/loaded_method.h>
#include <et_copy/loaded_program.h>
#include <et_copy/program_check.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_allocator.h>
#include <et_copy/simulated_device_backend.h>
#include <et_copy/tensor_layout.h>
#ifdef ET_COPY_EXECUTOR_WITH_CUDA
#include <et_copy/cuda_device_allocator.h>
#endif

#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/platform/runtime.h>

namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Tag;
using executorch::runtime::etensor::DeviceType;

struct Options {
  std::string model;
  std::string data; // the .ptd, when the program keeps its weights outside
  std::string method = "forward";
  bool cuda = false;
  std::vector<std::string> inputs;
  uint64_t seed = 1;
  std::string save_inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> expects;
  bool require_copies = false;
  bool global_kernels = false;
  bool verify_data = false;
  bool trust_code = false;
  int generate_count = 0;
  std::vector<std::vector<int64_t>> prompts;
  std::vector<std::string> loads;
};

const char kUsage[] =
    "usage: et_copy_executor MODEL.pte [--data MODEL.ptd] [--verify-data] [--trust-code] [--method NAME] [--cuda]\n"
    "         [--load LIB]...\n"
    "         [--global-kernels]\n"
    "         [--input FILE]... | [--seed N]   (raw bytes per input, or generated)\n"
    "         [--save-inputs DIR] [--output FILE]... [--expect FILE]...\n"
    "         [--require-copies] [--generate N --prompt T,T,...]...\n";

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "et_copy_executor: %s needs a value\n", a.c_str());
        return false;
      }
      *dst = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--data") {
      if (!value(&o->data))
        return false;
    } else if (a == "--method") {
      if (!value(&o->method))
        return false;
    } else if (a == "--cuda") {
      o->cuda = true;
    } else if (a == "--input") {
      if (!value(&v))
        return false;
      o->inputs.push_back(v);
    } else if (a == "--seed") {
      if (!value(&v))
        return false;
      o->seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--save-inputs") {
      if (!value(&o->save_inputs))
        return false;
    } else if (a == "--output") {
      if (!value(&v))
        return false;
      o->outputs.push_back(v);
    } else if (a == "--expect") {
      if (!value(&v))
        return false;
      o->expects.push_back(v);
    } else if (a == "--load") {
      if (!value(&v))
        return false;
      o->loads.push_back(v);
    } else if (a == "--generate") {
      if (!value(&v))
        return false;
      o->generate_count = std::atoi(v.c_str());
    } else if (a == "--prompt") {
      if (!value(&v))
        return false;
      o->prompts.emplace_back();
      for (size_t at = 0; at <= v.size();) {
        const size_t comma = std::min(v.find(',', at), v.size());
        o->prompts.back().push_back(std::strtoll(v.substr(at, comma - at).c_str(), nullptr, 10));
        at = comma + 1;
      }
    } else if (a == "--global-kernels") {
      o->global_kernels = true;
    } else if (a == "--verify-data") {
      o->verify_data = true;
    } else if (a == "--trust-code") {
      o->trust_code = true;
    } else if (a == "--require-copies") {
      o->require_copies = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
#ifdef ET_COPY_EXECUTOR_WITH_CUDA
      std::puts("--cuda: available (linked with et_copy::cuda)");
#else
      std::puts("--cuda: unavailable (built without et_copy::cuda)");
#endif
#ifdef ET_COPY_EXECUTOR_WITH_AOTI
      std::puts("aoti: available (linked with et_copy::aoti)");
#else
      std::puts("aoti: unavailable (built without et_copy::aoti)");
#endif
      std::exit(0);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "et_copy_executor: unknown option %s\n%s", a.c_str(), kUsage);
      return false;
    } else if (o->model.empty()) {
      o->model = a;
    } else {
      std::fprintf(stderr, "et_copy_executor: more than one model given\n%s", kUsage);
      return false;
    }
  }
  if (o->model.empty()) {
    std::fputs(kUsage, stderr);
    return false;
  }
  return true;
}

bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "et_copy_executor: cannot read %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

bool write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!f) {
    std::fprintf(stderr, "et_copy_executor: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

// Deterministic input data: floats in [-1, 1) for floating dtypes (so
// eager PyTorch can reproduce the case from the saved file), 0/1 for bool,
// raw bytes otherwise.
void generate(ScalarType dtype, uint64_t seed, std::vector<uint8_t>* bytes) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&state]() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  auto unit = [&]() { return static_cast<double>(next() >> 11) / 9007199254740992.0 * 2.0 - 1.0; };
  if (dtype == ScalarType::Float) {
    for (size_t i = 0; i + 4 <= bytes->size(); i += 4) {
      const float f = static_cast<float>(unit());
      std::memcpy(bytes->data() + i, &f, 4);
    }
  } else if (dtype == ScalarType::Double) {
    for (size_t i = 0; i + 8 <= bytes->size(); i += 8) {
      const double d = unit();
      std::memcpy(bytes->data() + i, &d, 8);
    }
  } else if (dtype == ScalarType::Bool) {
    for (auto& b : *bytes)
      b = next() & 1;
  } else {
    for (auto& b : *bytes)
      b = static_cast<uint8_t>(next());
  }
}

/// A CPU input tensor over bytes this object owns, with the metadata the
/// method declares for that input (dense in its dim order).
struct InputTensor {
  std::vector<uint8_t> bytes;
  et_copy::TensorImplView view;

  Error reset(const executorch::runtime::TensorInfo& info, std::vector<uint8_t> data) {
    bytes = std::move(data);
    et_copy::TensorImplView::Spec spec;
    spec.dtype = info.scalar_type();
    spec.sizes = info.sizes();
    spec.dim_order = info.dim_order();
    spec.data = bytes.data();
    return view.reset(spec);
  }
};

std::string shape_string(const et_copy::MethodOutput& o) {
  std::string s = "[";
  for (size_t i = 0; i < o.rank; ++i) {
    s += (i ? ", " : "") + std::to_string(o.sizes[i]);
  }
  return s + "]";
}

// Serves CUDA with et-copy's CUDA allocator (--cuda) or the simulated
// device and its backend. False, with a message, when the device cannot be
// used; `*alloc` is the counting allocator serving CUDA, or nullptr (with a
// message) when another library's allocator does.
bool register_device(bool cuda, et_copy::CountingDeviceAllocator** alloc) {
  using et_copy::Registration;
  Registration r;
  const char* which;
  if (cuda) {
#ifdef ET_COPY_EXECUTOR_WITH_CUDA
    Error err = Error::Ok;
    r = et_copy::use_cuda(&err);
    which = "cuda";
    if (r == Registration::kFailed) {
      std::fprintf(stderr, "et_copy_executor: cannot use the CUDA allocator: %s (error 0x%x)\n",
                   executorch::runtime::to_string(err), static_cast<unsigned>(err));
      return false;
    }
#else
    std::fprintf(stderr, "et_copy_executor: --cuda: this executor was built without et_copy::cuda\n");
    return false;
#endif
  } else {
    r = et_copy::use_simulated_device();
    which = "simulated";
  }
  std::printf("allocator %s for CUDA: %s\n", which, et_copy::registration_name(r));
  if (!cuda) {
    // The simulated device's memory faults on a host access, as a GPU's
    // does: a device program computes in SimulatedDeviceBackend's
    // delegates, which need it registered before the method loads.
    Error err = Error::Ok;
    const Registration b = et_copy::register_simulated_device_backend(&err);
    std::printf("backend %s: %s\n", et_copy::kSimulatedDeviceBackend, et_copy::registration_name(b));
    if (b == Registration::kFailed) {
      std::fprintf(stderr, "et_copy_executor: cannot register %s: %s (error 0x%x)\n", et_copy::kSimulatedDeviceBackend,
                   executorch::runtime::to_string(err), static_cast<unsigned>(err));
      return false;
    }
    if (b == Registration::kAlreadyOther) {
      std::fprintf(stderr, "et_copy_executor: another backend is registered as %s; its delegates run there\n",
                   et_copy::kSimulatedDeviceBackend);
    }
  }
  *alloc = et_copy::as_counting_allocator(executorch::runtime::get_device_allocator(DeviceType::CUDA));
  if (r == Registration::kAlreadyOther || *alloc == nullptr) {
    std::fprintf(stderr, "et_copy_executor: another CUDA allocator is registered; counters unavailable\n");
  }
  return !cuda || *alloc != nullptr;
}

void print_stats(const et_copy::CountingDeviceAllocator& a) {
  const et_copy::DeviceAllocatorStats s = a.stats();
  std::printf("allocator %s: allocations=%" PRIu64 " deallocations=%" PRIu64 " bytes_outstanding=%" PRIu64
              " peak_bytes_outstanding=%" PRIu64 " h2d_copies=%" PRIu64 " h2d_bytes=%" PRIu64 " d2h_copies=%" PRIu64
              " d2h_bytes=%" PRIu64 " failed_calls=%" PRIu64 "\n",
              a.name(), s.allocations, s.deallocations, s.bytes_outstanding, s.peak_bytes_outstanding, s.h2d_copies,
              s.h2d_bytes, s.d2h_copies, s.d2h_bytes, s.failed_calls);
}

int fail(const char* what, Error err) {
  std::fprintf(stderr, "et_copy_executor: %s failed: %s (error 0x%x)\n", what, executorch::runtime::to_string(err),
               static_cast<unsigned>(err));
  return 2;
}

// A failure of et_copy's load or run path: what failed and why, and the
// instruction and operator of a failed execution.
int fail(const std::string& where, const et_copy::FailureReport& report) {
  std::fprintf(stderr, "et_copy_executor: %s: %s (error 0x%x)\n", where.c_str(), report.message().c_str(),
               static_cast<unsigned>(report.error));
  if (!report.instruction.empty()) {
    std::fprintf(stderr, "et_copy_executor: it stopped at instruction %s (%s)\n", report.instruction.c_str(),
                 report.op.empty() ? "?" : report.op.c_str());
  }
  hint_trust_code(report);
  return 2;
}

int run(const Options& opt) {
  executorch::runtime::runtime_init();

  // Libraries first, so a kernel one of them registers shows up below as
  // "already other" instead of being hidden by ours.
  for (const auto& lib : opt.loads) {
    if (dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::fprintf(stderr, "et_copy_executor: cannot load %s: %s\n", lib.c_str(), dlerror());
      return 2;
    }
    std::printf("loaded %s\n", lib.c_str());
  }

  // Kernels and the allocator are settled before the program loads:
  // loading a method allocates the device-planned buffers and resolves
  // every operator.
  et_copy::LoadOptions load_options;
  load_options.verify_data = opt.verify_data;
  load_options.trust_code = opt.trust_code;
  if (opt.global_kernels) {
    for (const auto& k : et_copy::register_kernels()) {
      std::printf("kernel %s: %s\n", k.op_name, et_copy::registration_name(k.outcome));
      if (k.outcome == et_copy::Registration::kFailed) {
        return fail("registering et_copy's kernels", k.error);
      }
    }
    load_options.kernels = {}; // the global registry alone
  } else {
    std::printf("kernels: et_copy's, method-scoped (%zu operators listed)\n", load_options.kernels.size());
  }
  et_copy::CountingDeviceAllocator* alloc = nullptr;
  if (!register_device(opt.cuda, &alloc) || !register_named_backends(opt.model)) {
    return 2;
  }

  // Refused before anything loads: a program whose host would read or
  // write device memory (a CPU kernel on a device tensor faults on a GPU),
  // or that holds an index ExecuTorch would abort on.
  et_copy::FailureReport report;
  auto loaded = et_copy::LoadedProgram::load_file(opt.model, opt.data, load_options, &report);
  if (!loaded.ok()) {
    return fail(opt.model, report);
  }
  std::unique_ptr<et_copy::LoadedProgram> program = std::move(*loaded);
  if (opt.generate_count > 0) {
    if (alloc == nullptr || opt.prompts.empty() || opt.global_kernels) {
      std::fprintf(stderr,
                   "et_copy_executor: --generate needs et_copy's allocator, method-scoped kernels and a "
                   "--prompt\n");
      return 2;
    }
    const int status = generate_tokens(*program, *alloc, opt.prompts, opt.generate_count);
    program.reset(); // the scratch the sessions shared, so the counters show every device byte back
    print_stats(*alloc);
    return status;
  }
  std::unique_ptr<et_copy::Session> session = program->new_session();
  auto method = session->load(opt.method, nullptr, &report);
  if (!method.ok()) {
    return fail(opt.model, report);
  }
  auto meta = program->program().method_meta(opt.method.c_str());
  if (!meta.ok()) {
    return fail("reading the method's metadata", meta.error());
  }

  const size_t n_in = meta->num_inputs();
  if (!opt.inputs.empty() && opt.inputs.size() != n_in) {
    std::fprintf(stderr, "et_copy_executor: %s takes %zu inputs, %zu --input files given\n", opt.method.c_str(), n_in,
                 opt.inputs.size());
    return 2;
  }
  std::vector<std::unique_ptr<InputTensor>> tensors;
  std::vector<EValue> inputs;
  for (size_t i = 0; i < n_in; ++i) {
    auto tag = meta->input_tag(i);
    if (!tag.ok() || *tag != Tag::Tensor) {
      std::fprintf(stderr, "et_copy_executor: input %zu is not a tensor; only tensor inputs are supported\n", i);
      return 2;
    }
    auto info = meta->input_tensor_meta(i);
    if (!info.ok()) {
      return fail("reading input metadata", info.error());
    }
    std::vector<uint8_t> bytes(info->nbytes());
    if (opt.inputs.empty()) {
      generate(info->scalar_type(), opt.seed + i, &bytes);
    } else {
      if (!read_file(opt.inputs[i], &bytes))
        return 2;
      if (bytes.size() != info->nbytes()) {
        std::fprintf(stderr, "et_copy_executor: %s has %zu bytes; input %zu takes %zu\n", opt.inputs[i].c_str(),
                     bytes.size(), i, info->nbytes());
        return 2;
      }
    }
    if (!opt.save_inputs.empty() &&
        !write_file(opt.save_inputs + "/input" + std::to_string(i) + ".bin", bytes.data(), bytes.size())) {
      return 2;
    }
    tensors.push_back(std::make_unique<InputTensor>());
    if (Error e = tensors.back()->reset(*info, std::move(bytes)); e != Error::Ok) {
      return fail(("describing input " + std::to_string(i)).c_str(), e);
    }
    inputs.emplace_back(tensors.back()->view.tensor());
  }

  // Every tensor output lands in host memory of ours: the method's d2h copy
  // writes it there, or et_copy copies it out (a device output through the
  // DeviceAllocator).
  const auto& slots = (*method)->io().outputs;
  HostOutputs held(**method);
  std::vector<std::vector<uint8_t>>& host = held.memory;
  std::vector<et_copy::MethodOutput>& outs = held.outputs;
  if ((*method)->execute({inputs.data(), inputs.size()}, {outs.data(), outs.size()}, &report) != Error::Ok) {
    return fail("running method '" + opt.method + "'", report);
  }
  if ((!opt.outputs.empty() && opt.outputs.size() != outs.size()) ||
      (!opt.expects.empty() && opt.expects.size() != outs.size())) {
    std::fprintf(stderr, "et_copy_executor: %s returned %zu outputs; give one --output/--expect per output\n",
                 opt.method.c_str(), outs.size());
    return 2;
  }

  int status = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!slots[i].tensor) {
      std::printf("output %zu: not a tensor (tag %d)\n", i, static_cast<int>(outs[i].value.tag));
      continue;
    }
    size_t nbytes = executorch::runtime::elementSize(slots[i].dtype);
    for (size_t d = 0; d < outs[i].rank; ++d) {
      nbytes *= static_cast<size_t>(outs[i].sizes[d]);
    }
    host[i].resize(nbytes); // the shape it ran with, within the upper bound
    std::printf("output %zu: %s %s on %s, %zu bytes\n", i, executorch::runtime::toString(slots[i].dtype),
                shape_string(outs[i]).c_str(), slots[i].device.type() == DeviceType::CPU ? "CPU" : "CUDA", nbytes);
    if (!opt.outputs.empty() && !write_file(opt.outputs[i], host[i].data(), host[i].size())) {
      return 2;
    }
    if (!opt.expects.empty()) {
      std::vector<uint8_t> want;
      if (!read_file(opt.expects[i], &want))
        return 2;
      if (want == host[i]) {
        std::printf("output %zu: matches %s\n", i, opt.expects[i].c_str());
      } else {
        size_t at = 0;
        while (at < want.size() && at < host[i].size() && want[at] == host[i][at])
          ++at;
        std::printf("output %zu: DIFFERS from %s (%zu vs %zu bytes, first difference at byte %zu)\n", i,
                    opt.expects[i].c_str(), host[i].size(), want.size(), at);
        status = 1;
      }
    }
  }

  if (alloc != nullptr) {
    print_stats(*alloc);
    const auto s = alloc->stats();
    if (opt.require_copies && (s.h2d_copies == 0 || s.d2h_copies == 0)) {
      // Without copies the output could be the input's own buffer, and a
      // kernel that does nothing would pass (docs/cmake.md, "Why --require-copies").
      std::fprintf(stderr,
                   "et_copy_executor: --require-copies: the allocator saw %" PRIu64 " host-to-device and %" PRIu64
                   " device-to-host copies\n",
                   s.h2d_copies, s.d2h_copies);
      status = status ? status : 1;
    }
  } else if (opt.require_copies) {
    std::fprintf(stderr, "et_copy_executor: --require-copies needs et_copy's allocator\n");
    status = 2;
  }
  return status;
}

} // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, &opt)) {
    return 2;
  }
  return run(opt);
}
