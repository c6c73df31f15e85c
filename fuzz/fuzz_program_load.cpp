// libFuzzer target: a whole program's bytes, loaded and run as et_copy's
// runtime does it (LoadedProgram::load, then every method in a fresh
// session, executed once on zeros).
//
// The seeds (fuzz/programs, written by fuzz/make_program_seeds.py) are real
// exports: a device MLP, a copy-only round trip, a tiny seeded Qwen3-MoE
// LLM whose delegate records carry nested programs, and a compiled MLP with
// state (backend="aoti") whose record carries an AOTInductor .so. The
// harness trusts no compiled code (the compile cache, whose marks say what
// this machine compiled, is turned off), so a compiled program's record is
// parsed and its payload's digest checked, and then it is refused before
// its code is loaded: no payload, mutated or not, runs here
// (tests/backends/aoti/test_aoti_untrusted.py runs the trusted path). A mutated input must be
// refused with an ExecuTorch Error, or run: anything that aborts, traps or
// trips AddressSanitizer is a finding. The load-time checks (indices,
// argument kinds, device access, the delegate records) are what stand
// between program bytes and ExecuTorch's aborting accessors, in the outer
// program and in every nested one the simulated device backend loads.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <et_copy/aoti_backend.h>
#include <et_copy/loaded_method.h>
#include <et_copy/loaded_program.h>
#include <et_copy/registration.h>
#include <et_copy/sessions.h>
#include <et_copy/simulated_device_backend.h>
#include <et_copy/tensor_layout.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/platform/runtime.h>

namespace {

using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Tag;

// Inputs and outputs larger than this are not backed: a size read from
// mutated bytes may be absurd, and the harness is not what is under test.
constexpr size_t kMaxIoBytes = size_t{1} << 24;

// ExecuTorch reads the program in place; its segments want the alignment a
// file mapping would give.
struct AlignedCopy {
  explicit AlignedCopy(const uint8_t* data, size_t size)
      : bytes(static_cast<uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64 + 64))), size(size) {
    std::memcpy(bytes.get(), data, size);
  }
  struct Free {
    void operator()(uint8_t* p) const noexcept {
      std::free(p);
    }
  };
  std::unique_ptr<uint8_t, Free> bytes;
  size_t size;
};

// A zero-filled CPU tensor with the metadata the method declares.
struct ZeroTensor {
  std::vector<uint8_t> bytes;
  et_copy::TensorImplView view;
};

// One run of `name` in a fresh session. Inputs the harness cannot build
// (a size read from the bytes too large to back) end the run quietly.
void run_method(et_copy::LoadedProgram& program, const char* name) {
  std::unique_ptr<et_copy::Session> session = program.new_session();
  auto method = session->load(name);
  if (!method.ok()) {
    return;
  }
  const et_copy::MethodIo& io = (*method)->io();
  std::vector<std::unique_ptr<ZeroTensor>> tensors;
  std::vector<EValue> inputs;
  auto meta = program.program().method_meta(name);
  if (!meta.ok()) {
    return;
  }
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    const et_copy::IoSlot& slot = io.inputs[i];
    if (!slot.tensor) {
      auto tag = meta->input_tag(i);
      if (!tag.ok()) {
        return;
      }
      switch (*tag) {
        case Tag::Int:
          inputs.emplace_back(int64_t{0});
          break;
        case Tag::Bool:
          inputs.emplace_back(false);
          break;
        case Tag::Double:
          inputs.emplace_back(0.0);
          break;
        default:
          inputs.emplace_back(); // None: the method's own check answers
      }
      continue;
    }
    if (slot.nbytes > kMaxIoBytes) {
      return;
    }
    auto info = meta->input_tensor_meta(i);
    if (!info.ok()) {
      return;
    }
    tensors.push_back(std::make_unique<ZeroTensor>());
    ZeroTensor& t = *tensors.back();
    t.bytes.assign(slot.nbytes, 0);
    et_copy::TensorImplView::Spec spec;
    spec.dtype = info->scalar_type();
    spec.sizes = info->sizes();
    spec.dim_order = info->dim_order();
    spec.data = t.bytes.data();
    if (t.view.reset(spec) != Error::Ok) {
      return;
    }
    inputs.emplace_back(t.view.tensor());
  }
  std::vector<std::vector<uint8_t>> memory(io.outputs.size());
  std::vector<et_copy::MethodOutput> outputs(io.outputs.size());
  for (size_t i = 0; i < io.outputs.size(); ++i) {
    if (io.outputs[i].tensor && io.outputs[i].nbytes <= kMaxIoBytes) {
      memory[i].resize(io.outputs[i].nbytes);
      outputs[i].data = memory[i].data();
      outputs[i].nbytes = memory[i].size();
    }
  }
  (void)(*method)->execute({inputs.data(), inputs.size()}, {outputs.data(), outputs.size()});
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  executorch::runtime::runtime_init();
  // Trust no compiled code: with the compile cache off, no digest is marked
  // as compiled here (et_copy/code_trust.h), and nothing else trusts one.
  setenv("ET_COPY_AOTI_CACHE", "0", 1);
  // Device programs need the device served and their backends registered
  // before they load; without them every seed would only be refused.
  const et_copy::Registration device = et_copy::use_simulated_device();
  Error err = Error::Ok;
  const et_copy::Registration backend = et_copy::register_simulated_device_backend(&err);
  const et_copy::Registration compiled = et_copy::register_aoti_backend(&err);
  for (const et_copy::Registration r : {device, backend, compiled}) {
    if (r != et_copy::Registration::kRegistered && r != et_copy::Registration::kAlreadyOurs) {
      std::fprintf(stderr, "et_copy fuzz: cannot set up the simulated device (%s)\n", et_copy::registration_name(r));
      std::abort();
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  AlignedCopy copy(data, size);
  auto loader = std::make_unique<executorch::extension::BufferDataLoader>(copy.bytes.get(), copy.size);
  auto loaded = et_copy::LoadedProgram::load(std::move(loader), nullptr);
  if (!loaded.ok()) {
    return 0;
  }
  et_copy::LoadedProgram& program = **loaded;
  const size_t methods = program.program().num_methods();
  for (size_t m = 0; m < methods; ++m) {
    auto name = program.program().get_method_name(m);
    if (name.ok()) {
      run_method(program, *name);
    }
  }
  return 0;
}
