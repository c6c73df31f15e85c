#include "payload_kinds.h"

#include "core_backend.h"

#include <cstring>
#include <mutex>
#include <vector>

namespace et_copy {

using executorch::runtime::Error;

namespace {

// The kinds, under their own lock: the core's own (the simulated backend's
// nested program) first, then each backend library's as it registers them.
// Leaked on purpose: records may be parsed during static destruction.
struct Kinds {
  std::mutex mutex;
  std::vector<PayloadRules> rules{internal::program_payload_rules()};
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
