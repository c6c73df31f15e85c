#include "decode.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>

#include <et_copy/tensor_layout.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>

namespace {

using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::TensorInfo;
using executorch::runtime::etensor::DeviceType;

// A dense tensor over memory someone else owns, shaped as the method says.
struct View {
  et_copy::TensorImplView view;
  Error error;

  View(const TensorInfo& info, void* data, DeviceType device) {
    et_copy::TensorImplView::Spec spec;
    spec.dtype = info.scalar_type();
    spec.sizes = info.sizes();
    spec.dim_order = info.dim_order();
    spec.data = data;
    spec.device_type = device;
    error = view.reset(spec);
  }
  EValue value() {
    return EValue(view.tensor());
  }
};

int fail(const char* what, Error err) {
  std::fprintf(stderr, "et_copy_executor: --decode: %s failed: %s\n", what, executorch::runtime::to_string(err));
  return 2;
}

} // namespace

int decode(executorch::extension::Module& module, const std::string& method, et_copy::CountingDeviceAllocator& alloc,
           const std::vector<int64_t>& prompt, int steps) {
  auto meta = module.method_meta(method);
  if (!meta.ok() || meta->num_inputs() != 4 || meta->num_outputs() != 3 || prompt.empty()) {
    std::fprintf(stderr,
                 "et_copy_executor: --decode needs a method (token, position, k_cache, v_cache) -> "
                 "(logits, k_cache, v_cache), as et_copy.decoding.export_resident makes, and a prompt\n");
    return 2;
  }
  const TensorInfo cache_info = *meta->input_tensor_meta(2);
  const TensorInfo logits_info = *meta->output_tensor_meta(0);
  const size_t cache_bytes = cache_info.nbytes();
  // Two cache pairs on the device, written in turn; the first starts zeroed.
  void* caches[2][2] = {};
  for (auto& pair : caches) {
    for (void*& c : pair) {
      auto p = alloc.allocate(cache_bytes, 0);
      if (!p.ok())
        return fail("allocating a device cache", p.error());
      c = *p;
    }
  }
  const std::vector<uint8_t> zeros(cache_bytes, 0);
  for (void* c : caches[0]) {
    if (Error e = alloc.copy_host_to_device(c, zeros.data(), cache_bytes, 0); e != Error::Ok) {
      return fail("zeroing a cache", e);
    }
  }
  std::vector<float> logits(logits_info.nbytes() / sizeof(float));
  int64_t token = prompt[0];
  int64_t position = 0;
  std::vector<int64_t> generated;
  int status = 0;
  const int total = static_cast<int>(prompt.size()) + steps - 1;
  for (int i = 0; i < total && status == 0; ++i, ++position) {
    View token_in(*meta->input_tensor_meta(0), &token, DeviceType::CPU);
    View position_in(*meta->input_tensor_meta(1), &position, DeviceType::CPU);
    View k_in(cache_info, caches[i % 2][0], DeviceType::CUDA), v_in(cache_info, caches[i % 2][1], DeviceType::CUDA);
    View logits_out(logits_info, logits.data(), DeviceType::CPU);
    View k_out(cache_info, caches[(i + 1) % 2][0], DeviceType::CUDA);
    View v_out(cache_info, caches[(i + 1) % 2][1], DeviceType::CUDA);
    for (const View* view : {&token_in, &position_in, &k_in, &v_in, &logits_out, &k_out, &v_out}) {
      if (view->error != Error::Ok) {
        return fail("describing a tensor", view->error);
      }
    }
    for (auto [view, index] : {std::pair{&logits_out, 0}, std::pair{&k_out, 1}, std::pair{&v_out, 2}}) {
      if (Error e = module.set_output(method, view->value(), index); e != Error::Ok) {
        return fail("binding an output", e);
      }
    }
    const auto before = alloc.stats();
    const auto start = std::chrono::steady_clock::now();
    auto result = module.execute(method, {token_in.value(), position_in.value(), k_in.value(), v_in.value()});
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (!result.ok()) {
      status = fail("a decode step", result.error());
      break;
    }
    const auto after = alloc.stats();
    const int64_t best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    std::printf("step %d: token %" PRId64 " %.1f us h2d_bytes=%" PRIu64 " d2h_bytes=%" PRIu64
                " device_bytes_outstanding=%" PRIu64 "\n",
                i, best, us, after.h2d_bytes - before.h2d_bytes, after.d2h_bytes - before.d2h_bytes,
                after.bytes_outstanding);
    const bool prefill = i + 1 < static_cast<int>(prompt.size());
    token = prefill ? prompt[i + 1] : best;
    if (!prefill) {
      generated.push_back(token);
    }
  }
  std::printf("tokens:");
  for (int64_t t : generated) {
    std::printf(" %" PRId64, t);
  }
  std::printf("\n");
  for (auto& pair : caches) {
    for (void* c : pair) {
      alloc.deallocate(c, 0);
    }
  }
  return status;
}
