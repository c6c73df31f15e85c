#include "generate.h"
#include "host_outputs.h"
#include "named_backends.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>

#include <et_copy/llm_methods.h>
#include <et_copy/loaded_method.h>
#include <et_copy/sessions.h>
#include <et_copy/tensor_layout.h>

namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::TensorShapeDynamism;

int fail(const std::string& what, const et_copy::FailureReport& report) {
  std::fprintf(stderr, "et_copy_executor: --generate: %s: %s\n", what.c_str(), report.message().c_str());
  if (!report.instruction.empty()) {
    std::fprintf(stderr, "  at instruction %s (%s)\n", report.instruction.c_str(), report.op.c_str());
  }
  hint_trust_code(report);
  return 2;
}

// One sequence: its session, methods and position.
struct Sequence {
  std::unique_ptr<et_copy::Session> session;
  et_copy::LoadedMethod* prefill = nullptr;
  et_copy::LoadedMethod* decode = nullptr;
  et_copy::LoadedMethod* decode_next = nullptr; // export_llm(pick="device"): the last pick fed back on the device
  int64_t position = 0;
  std::vector<int64_t> tokens;
};

// Runs `ids` at the sequence's next positions through `method`, or with no
// ids, `method` (decode_next) on the last token, which stays on the device;
// writes the next token to `*token`.
Error step(Sequence& s, et_copy::LoadedMethod& method, const std::vector<int64_t>& ids, int64_t* token,
           et_copy::FailureReport* report) {
  const bool fed_back = ids.empty();
  const auto n = static_cast<executorch::aten::SizesType>(ids.size());
  std::vector<int64_t> positions(ids.size());
  std::iota(positions.begin(), positions.end(), s.position);
  const executorch::aten::SizesType id_sizes[] = {1, n};
  const executorch::aten::SizesType position_sizes[] = {n};
  et_copy::TensorImplView id_view, position_view;
  et_copy::TensorImplView::Spec spec;
  spec.dtype = ScalarType::Long;
  spec.dynamism = TensorShapeDynamism::DYNAMIC_BOUND;
  spec.sizes = {id_sizes, 2};
  spec.data = const_cast<int64_t*>(ids.data());
  Error e = id_view.reset(spec);
  spec.sizes = {position_sizes, 1};
  spec.data = positions.data();
  e = e == Error::Ok ? position_view.reset(spec) : e;
  if (e != Error::Ok) {
    report->error = e;
    report->step = "describing the inputs";
    return e;
  }
  const EValue inputs[] = {EValue(id_view.tensor()), EValue(position_view.tensor())};
  // Host memory for each tensor output, at its upper-bound size.
  const auto& slots = method.io().outputs;
  HostOutputs held(method);
  std::vector<std::vector<uint8_t>>& memory = held.memory;
  std::vector<et_copy::MethodOutput>& outputs = held.outputs;
  if (slots.empty() || !slots[0].tensor) {
    report->error = Error::InvalidProgram;
    report->step = "reading the token";
    report->detail = "output 0 is not a tensor";
    return report->error;
  }
  if ((e = method.execute({inputs, fed_back ? 0u : 2u}, {outputs.data(), outputs.size()}, report)) != Error::Ok) {
    return e;
  }
  size_t numel = 1;
  for (size_t d = 0; d < outputs[0].rank; ++d) {
    numel *= static_cast<size_t>(outputs[0].sizes[d]);
  }
  if (slots[0].dtype == ScalarType::Long) { // picked on the device
    std::memcpy(token, memory[0].data(), sizeof(int64_t));
  } else if (slots[0].dtype == ScalarType::Float) {
    const auto* logits = reinterpret_cast<const float*>(memory[0].data());
    *token = std::max_element(logits, logits + numel) - logits;
  } else {
    report->error = Error::InvalidProgram;
    report->step = "reading the token";
    report->detail = "output 0 is neither Long (a token) nor Float (logits)";
    return report->error;
  }
  s.position += fed_back ? 1 : n;
  return Error::Ok;
}

bool has_method(const executorch::runtime::Program& program, const char* name) {
  for (size_t i = 0; i < program.num_methods(); ++i) {
    auto m = program.get_method_name(i);
    if (m.ok() && std::strcmp(*m, name) == 0) {
      return true;
    }
  }
  return false;
}

} // namespace

int generate_tokens(et_copy::LoadedProgram& program, et_copy::CountingDeviceAllocator& alloc,
                    const std::vector<std::vector<int64_t>>& prompts, int tokens) {
  std::vector<Sequence> sequences(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) {
      std::fprintf(stderr, "et_copy_executor: --generate: prompt %zu is empty\n", i);
      return 2;
    }
    Sequence& s = sequences[i];
    s.session = program.new_session();
    const bool feeds_back = has_method(program.program(), et_copy::llm::kDecodeNext);
    for (auto [name, slot] :
         {std::pair{et_copy::llm::kPrefill, &s.prefill}, std::pair{et_copy::llm::kDecode, &s.decode},
          std::pair{et_copy::llm::kDecodeNext, &s.decode_next}}) {
      if (slot == &s.decode_next && !feeds_back) {
        continue;
      }
      et_copy::FailureReport report;
      auto m = s.session->load(name, nullptr, &report);
      if (!m.ok()) {
        return fail("a program of et_copy.llm.export_llm", report);
      }
      *slot = *m;
    }
    std::printf("session %zu: %zu bytes of state on the device\n", i, s.session->state_nbytes());
  }
  // Round robin: each sequence's prompt, then one decode step of each in turn.
  for (int round = 0; round < tokens; ++round) {
    for (size_t i = 0; i < sequences.size(); ++i) {
      Sequence& s = sequences[i];
      const bool first = round == 0;
      // After the prompt, a program that feeds its pick back decodes with no input at all.
      const bool fed_back = !first && s.decode_next != nullptr;
      std::vector<int64_t> ids = first ? prompts[i] : std::vector<int64_t>{s.tokens.back()};
      if (fed_back) {
        ids.clear();
      }
      et_copy::LoadedMethod& method = fed_back ? *s.decode_next : ids.size() > 1 ? *s.prefill : *s.decode;
      const auto before = alloc.stats();
      const auto start = std::chrono::steady_clock::now();
      int64_t token = 0;
      et_copy::FailureReport report;
      if (step(s, method, ids, &token, &report) != Error::Ok) {
        return fail("session " + std::to_string(i) + " step " + std::to_string(round), report);
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      const auto after = alloc.stats();
      s.tokens.push_back(token);
      std::printf("session %zu %s: %zu in, token %" PRId64 " %.1f us h2d_bytes=%" PRIu64 " d2h_bytes=%" PRIu64 "\n", i,
                  fed_back         ? et_copy::llm::kDecodeNext
                  : ids.size() > 1 ? et_copy::llm::kPrefill
                                   : et_copy::llm::kDecode,
                  ids.size(), token, us, after.h2d_bytes - before.h2d_bytes, after.d2h_bytes - before.d2h_bytes);
    }
  }
  for (size_t i = 0; i < sequences.size(); ++i) {
    std::printf("session %zu tokens:", i);
    for (int64_t t : sequences[i].tokens) {
      std::printf(" %" PRId64, t);
    }
    std::printf("\n");
  }
  return 0;
}
