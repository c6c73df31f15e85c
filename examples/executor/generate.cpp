#include "generate.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>

#include <et_copy/sessions.h>
#include <et_copy/tensor_layout.h>

namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Method;
using executorch::runtime::TensorShapeDynamism;

int fail(const std::string& what, Error err, const std::string& detail = "") {
  std::fprintf(stderr, "et_copy_executor: --generate: %s failed: %s%s%s\n", what.c_str(),
               executorch::runtime::to_string(err), detail.empty() ? "" : ": ", detail.c_str());
  return 2;
}

// One sequence: its session, methods and position.
struct Sequence {
  std::unique_ptr<et_copy::Session> session;
  Method* prefill = nullptr;
  Method* decode = nullptr;
  int64_t position = 0;
  std::vector<int64_t> tokens;
};

// Runs `ids` at the sequence's next positions through `method`; writes the
// next token to `*token`.
Error step(Sequence& s, Method& method, const std::vector<int64_t>& ids, int64_t* token) {
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
  if (Error e = id_view.reset(spec); e != Error::Ok) {
    return e;
  }
  spec.sizes = {position_sizes, 1};
  spec.data = positions.data();
  if (Error e = position_view.reset(spec); e != Error::Ok) {
    return e;
  }
  for (auto [view, index] : {std::pair{&id_view, 0}, std::pair{&position_view, 1}}) {
    if (Error e = method.set_input(EValue(view->tensor()), index); e != Error::Ok) {
      return e;
    }
  }
  if (Error e = method.execute(); e != Error::Ok) {
    return e;
  }
  const auto& out = method.get_output(0).toTensor();
  if (out.scalar_type() == ScalarType::Long) { // picked on the device
    *token = out.const_data_ptr<int64_t>()[0];
  } else if (out.scalar_type() == ScalarType::Float) {
    const float* logits = out.const_data_ptr<float>();
    *token = std::max_element(logits, logits + out.numel()) - logits;
  } else {
    return Error::InvalidProgram;
  }
  s.position += n;
  return Error::Ok;
}

} // namespace

int generate_tokens(const executorch::runtime::Program& program, executorch::runtime::Span<const uint8_t> program_bytes,
                    executorch::runtime::Span<const executorch::runtime::Kernel> kernels,
                    et_copy::CountingDeviceAllocator& alloc, const std::vector<std::vector<int64_t>>& prompts,
                    int tokens) {
  std::string refusal;
  auto created = et_copy::SessionPool::create(program_bytes, &program, kernels, nullptr, &refusal);
  if (!created.ok()) {
    return fail("checking the program", created.error(), refusal);
  }
  et_copy::SessionPool& pool = **created;
  std::vector<Sequence> sequences(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) {
      std::fprintf(stderr, "et_copy_executor: --generate: prompt %zu is empty\n", i);
      return 2;
    }
    Sequence& s = sequences[i];
    s.session = pool.new_session();
    std::string what;
    for (auto [name, slot] : {std::pair{"prefill", &s.prefill}, std::pair{"decode", &s.decode}}) {
      auto m = s.session->method(name, &what);
      if (!m.ok()) {
        return fail(std::string("loading ") + name + " (a program of et_copy.llm.export_llm)", m.error(), what);
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
      std::vector<int64_t> ids = first ? prompts[i] : std::vector<int64_t>{s.tokens.back()};
      Method& method = ids.size() > 1 ? *s.prefill : *s.decode;
      const auto before = alloc.stats();
      const auto start = std::chrono::steady_clock::now();
      int64_t token = 0;
      if (Error e = step(s, method, ids, &token); e != Error::Ok) {
        return fail("session " + std::to_string(i) + " step " + std::to_string(round), e);
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      const auto after = alloc.stats();
      s.tokens.push_back(token);
      std::printf("session %zu %s: %zu in, token %" PRId64 " %.1f us h2d_bytes=%" PRIu64 " d2h_bytes=%" PRIu64 "\n", i,
                  ids.size() > 1 ? "prefill" : "decode", ids.size(), token, us, after.h2d_bytes - before.h2d_bytes,
                  after.d2h_bytes - before.d2h_bytes);
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
