#include "reference_backend.h"

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <et_copy/device_arguments.h>
#include <et_copy/counting_device_allocator.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>

namespace et_copy_reference {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::BackendInitContext;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Span;
namespace et = executorch::runtime::etensor;

namespace {

constexpr size_t kMaxSteps = 1024; // a test program is a few lines

// An operand: a value (%k) or a weight (@fqn, by its index in the record).
struct Operand {
  bool weight = false;
  size_t index = 0;
};

struct Step {
  std::string op; // add, sub, mul, relu
  Operand a, b;
};

struct Handle final : et_copy::FrameHandle {
  const et_copy::HostAliasing* aliasing = nullptr;
  size_t inputs = 0;
  std::vector<Step> steps;
  std::vector<size_t> outputs;                                // value indices
  std::vector<std::shared_ptr<et_copy::DeviceBlock>> weights; // in record order
};

ReferenceDeviceBackend& backend() {
  static auto* instance = new ReferenceDeviceBackend(); // the registry keeps the pointer
  return *instance;
}

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at < line.size()) {
    const size_t space = line.find(' ', at);
    const size_t end = space == std::string_view::npos ? line.size() : space;
    if (end > at) {
      out.push_back(line.substr(at, end - at));
    }
    at = end + 1;
  }
  return out;
}

bool parse_index(std::string_view s, size_t* out) {
  if (s.empty() || s.size() > 6) {
    return false;
  }
  size_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') {
      return false;
    }
    v = v * 10 + static_cast<size_t>(c - '0');
  }
  *out = v;
  return true;
}

// The payload's lines into `h`; the reason when it is not this backend's grammar.
std::string parse_payload(std::string_view text, Handle& h) {
  size_t values = 0;
  bool ended = false;
  auto operand = [&](std::string_view s, Operand* out) {
    if (s.size() > 1 && s[0] == '%') {
      out->weight = false;
      return parse_index(s.substr(1), &out->index) && out->index < values;
    }
    if (s.size() > 1 && s[0] == '@') {
      for (size_t i = 0; i < h.record.weights.size(); ++i) {
        if (h.record.weights[i].fqn == s.substr(1)) {
          *out = Operand{true, i};
          return true;
        }
      }
    }
    return false;
  };
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    const auto w = words(line);
    const std::string where = "payload line " + std::to_string(line_no) + ": ";
    if (ended || w.empty()) {
      return where + (ended ? "a line after the outputs line" : "an empty line");
    }
    if (line_no == 1) {
      if (w.size() != 2 || w[0] != "inputs" || !parse_index(w[1], &h.inputs) || h.inputs == 0) {
        return where + "the first line is 'inputs <n>', n at least 1";
      }
      values = h.inputs;
    } else if (w[0] == "outputs") {
      for (size_t i = 1; i < w.size(); ++i) {
        Operand o;
        if (!operand(w[i], &o) || o.weight) {
          return where + "output '" + std::string(w[i]) + "' is not a value defined above";
        }
        h.outputs.push_back(o.index);
      }
      if (h.outputs.empty()) {
        return where + "no outputs";
      }
      ended = true;
    } else if (w[0] == "add" || w[0] == "sub" || w[0] == "mul" || w[0] == "relu") {
      Step s{std::string(w[0]), {}, {}};
      const size_t arity = w[0] == "relu" ? 1 : 2;
      if (w.size() != arity + 1 || !operand(w[1], &s.a) || (arity == 2 && !operand(w[2], &s.b))) {
        return where + "'" + std::string(w[0]) + "' takes " + std::to_string(arity) +
               " operands, each a value defined above (%k) or a weight of the record (@fqn)";
      }
      if (h.steps.size() >= kMaxSteps) {
        return where + "more than " + std::to_string(kMaxSteps) + " steps";
      }
      h.steps.push_back(std::move(s));
      ++values;
    } else {
      return where + "unknown op '" + std::string(w[0]) + "'";
    }
  }
  return ended ? "" : "the payload has no outputs line";
}

// The reference kind's own record rules: weights only (no state, and no
// line of another payload kind's, such as aoti's).
std::string check_reference(const et_copy::DelegateRecord& r, const et_copy::RecordLines& lines, size_t* line) {
  *line = lines.payload;
  if (!r.tensors.empty() || !lines.other_kinds.empty() || r.has_arena || !r.states.empty()) {
    return "a reference payload has weight lines only (no state, arena, tensor, target, io or digest line)";
  }
  return "";
}

} // namespace

const char* ReferenceDeviceBackend::id() const {
  return kReferenceDeviceBackend;
}

bool ReferenceDeviceBackend::runs_on(const executorch::runtime::DeviceAllocator& server) const {
  return server.device_type() == et::DeviceType::CUDA && et_copy::host_aliasing(&server) != nullptr;
}

const char* ReferenceDeviceBackend::payload_kind() const {
  return kPayloadReference;
}

const char* ReferenceDeviceBackend::payload_words() const {
  return "elementwise float32 steps";
}

std::unique_ptr<et_copy::FrameHandle> ReferenceDeviceBackend::new_handle() const {
  return std::make_unique<Handle>();
}

Error ReferenceDeviceBackend::init_payload(et_copy::FrameHandle& frame, BackendInitContext& context,
                                           FreeableBuffer& processed) const {
  auto& h = static_cast<Handle&>(frame);
  h.aliasing = et_copy::host_aliasing(executorch::runtime::get_device_allocator(et::DeviceType::CUDA));
  if (h.aliasing == nullptr) {
    return fail(Error::NotSupported, h.method_name, "cuda is not served by an allocator with a host alias");
  }
  const std::string why =
      parse_payload(std::string_view(reinterpret_cast<const char*>(h.record.payload), h.record.payload_nbytes), h);
  h.record.payload = nullptr; // the bytes go with `processed`
  processed.Free();
  if (!why.empty()) {
    return fail(Error::DelegateInvalidCompatibility, h.method_name, why);
  }
  for (const et_copy::DelegateWeight& w : h.record.weights) {
    auto block = bind_weight(h, w, context.get_named_data_map());
    if (!block.ok()) {
      return block.error();
    }
    h.weights.push_back(std::move(*block));
  }
  return Error::Ok;
}

ReferenceDeviceBackend::Io ReferenceDeviceBackend::io(const et_copy::FrameHandle& frame) const {
  const auto& h = static_cast<const Handle&>(frame);
  return Io{h.inputs, h.outputs.size(), "the reference program"};
}

Error ReferenceDeviceBackend::execute_payload(et_copy::FrameHandle& frame, Span<EValue*> args) const {
  auto& h = static_cast<Handle&>(frame);
  const auto device = h.record.device_type;
  const auto index = h.record.device_index;
  if (!args[0]->isTensor()) {
    return fail(Error::InvalidArgument, h.method_name, "input 0 is not a tensor");
  }
  const Tensor& first = args[0]->toTensor();
  const size_t n = static_cast<size_t>(first.numel());
  std::vector<std::vector<float>> values;
  for (size_t i = 0; i < h.inputs; ++i) {
    const std::string name = "input " + std::to_string(i);
    if (!args[i]->isTensor() || args[i]->toTensor().scalar_type() != ScalarType::Float ||
        static_cast<size_t>(args[i]->toTensor().numel()) != n) {
      return fail(Error::InvalidArgument, h.method_name, name + " is not float32 of input 0's element count");
    }
    const Tensor& t = args[i]->toTensor();
    if (!et_copy::is_device_argument(t, t.nbytes(), device, index)) {
      return fail(Error::InvalidArgument, h.method_name,
                  name + " " + et_copy::refuse_device_argument(t, t.nbytes(), device, index));
    }
    auto alias = h.aliasing->host_alias(t.const_data_ptr(), t.nbytes(), index);
    if (!alias.ok()) {
      return fail(alias.error(), h.method_name, name + ": no host alias");
    }
    const auto* p = static_cast<const float*>(*alias);
    values.emplace_back(p, p + n);
  }
  for (size_t i = 0; i < h.weights.size(); ++i) {
    if (h.weights[i]->nbytes() != n * sizeof(float)) {
      return fail(Error::InvalidArgument, h.method_name,
                  "weight '" + h.record.weights[i].fqn + "' is " + std::to_string(h.weights[i]->nbytes()) +
                      " bytes, the inputs " + std::to_string(n * sizeof(float)));
    }
  }
  auto read = [&](const Operand& o) {
    return o.weight ? reinterpret_cast<const float*>(h.weights[o.index]->host_alias()) : values[o.index].data();
  };
  for (const Step& s : h.steps) {
    std::vector<float> out(n);
    const float* a = read(s.a);
    const float* b = s.op == "relu" ? nullptr : read(s.b);
    for (size_t k = 0; k < n; ++k) {
      if (s.op == "add") {
        out[k] = a[k] + b[k];
      } else if (s.op == "sub") {
        out[k] = a[k] - b[k];
      } else if (s.op == "mul") {
        out[k] = a[k] * b[k];
      } else {
        out[k] = a[k] > 0.0f ? a[k] : 0.0f; // relu
      }
    }
    values.push_back(std::move(out));
  }
  for (size_t j = 0; j < h.outputs.size(); ++j) {
    const std::string name = "output " + std::to_string(j);
    EValue* arg = args[h.inputs + j];
    if (!arg->isTensor() || arg->toTensor().scalar_type() != ScalarType::Float) {
      return fail(Error::InvalidArgument, h.method_name, name + " is not a float32 tensor");
    }
    Tensor& t = arg->toTensor();
    Error e = executorch::runtime::resize_tensor(t, first.sizes());
    if (e != Error::Ok || !et_copy::is_device_argument(t, t.nbytes(), device, index)) {
      return fail(Error::InvalidArgument, h.method_name, name + " cannot take input 0's shape on the device");
    }
    auto alias = h.aliasing->host_alias(t.const_data_ptr(), t.nbytes(), index);
    if (!alias.ok()) {
      return fail(alias.error(), h.method_name, name + ": no host alias");
    }
    std::memcpy(*alias, values[h.outputs[j]].data(), t.nbytes());
  }
  return Error::Ok;
}

et_copy::Registration register_reference_backend() {
  return et_copy::register_device_backend({&backend(),
                                           {kPayloadReference, &check_reference},
                                           "et_copy_reference.register()",
                                           "et_copy_reference::register_reference_backend()",
                                           "any device whose memory the host reaches through an alias"});
}

} // namespace et_copy_reference
