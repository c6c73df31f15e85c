#include "payload_kinds.h"

#include <cstring>
#include <mutex>
#include <vector>

namespace et_copy {

using executorch::runtime::Error;

namespace {

bool has_tensor_line(const DelegateRecord& r, const std::string& name) {
  for (const DelegateTensor& t : r.tensors) {
    if (t.name == name) {
      return true;
    }
  }
  return false;
}

// A nested ExecuTorch program (SimulatedDeviceBackend): its state lives in a
// nested planned buffer, and the program itself says every layout.
std::string check_program(const DelegateRecord& r, const RecordLines& lines, size_t* line) {
  if (!r.tensors.empty() || lines.target != 0 || lines.io != 0 || lines.digest != 0) {
    *line = !r.tensors.empty()  ? lines.tensors[0]
            : lines.target != 0 ? lines.target
            : lines.io != 0     ? lines.io
                                : lines.digest;
    return std::string("a ") + kPayloadProgram + " payload has no tensor, target, io or digest line";
  }
  if (r.has_arena && !r.has_arena_buffer) {
    *line = lines.arena;
    return std::string("a ") + kPayloadProgram + " payload's arena names its nested planned buffer, not -";
  }
  return "";
}

// An AOTInductor model (AotiDeviceBackend, backends/aoti): compiled code with
// a digest, bound to each weight and state in place by its tensor line.
std::string check_aoti(const DelegateRecord& r, const RecordLines& lines, size_t* line) {
  *line = lines.payload;
  if (lines.target == 0 || lines.io == 0 || lines.digest == 0) {
    return std::string("an ") + kPayloadAoti + " payload needs a target, an io and a digest line";
  }
  if (r.has_arena && r.has_arena_buffer) {
    *line = lines.arena;
    return std::string("an ") + kPayloadAoti + " payload's arena is -, not a nested planned buffer";
  }
  for (const DelegateWeight& w : r.weights) {
    if (!has_tensor_line(r, w.fqn)) {
      return std::string("an ") + kPayloadAoti + " payload needs a tensor line for weight '" + w.fqn + "'";
    }
  }
  for (const DelegateState& s : r.states) {
    if (!has_tensor_line(r, s.name)) {
      return std::string("an ") + kPayloadAoti + " payload needs a tensor line for state '" + s.name + "'";
    }
  }
  return "";
}

// The kinds, built-in ones first, under their own lock. Leaked on purpose:
// records may be parsed during static destruction.
struct Kinds {
  std::mutex mutex;
  std::vector<PayloadRules> rules{{kPayloadProgram, &check_program}, {kPayloadAoti, &check_aoti}};
};
Kinds& kinds() {
  static auto* k = new Kinds();
  return *k;
}

} // namespace

Error register_payload_kind(const PayloadRules& rules) {
  if (rules.kind == nullptr || rules.kind[0] == '\0' || rules.check == nullptr) {
    return Error::InvalidArgument;
  }
  for (const char* c = rules.kind; *c != '\0'; ++c) {
    if (*c <= ' ' || *c >= 0x7f) {
      return Error::InvalidArgument; // the payload line could not spell it, or a message could not show it
    }
  }
  Kinds& k = kinds();
  std::lock_guard<std::mutex> lock(k.mutex);
  for (const PayloadRules& known : k.rules) {
    if (std::strcmp(known.kind, rules.kind) == 0) {
      return known.check == rules.check ? Error::Ok : Error::InvalidState;
    }
  }
  if (k.rules.size() >= kMaxPayloadKinds) {
    return Error::NotSupported;
  }
  k.rules.push_back(rules);
  return Error::Ok;
}

namespace internal {

std::optional<PayloadRules> payload_rules(std::string_view kind) {
  Kinds& k = kinds();
  std::lock_guard<std::mutex> lock(k.mutex);
  for (const PayloadRules& known : k.rules) {
    if (kind == known.kind) {
      return known;
    }
  }
  return std::nullopt;
}

std::string payload_kinds_text() {
  Kinds& k = kinds();
  std::lock_guard<std::mutex> lock(k.mutex);
  std::string text;
  for (size_t i = 0; i < k.rules.size(); ++i) {
    text += i == 0 ? "" : i + 1 == k.rules.size() ? " or " : ", ";
    text += k.rules[i].kind;
  }
  return text;
}

} // namespace internal

} // namespace et_copy
