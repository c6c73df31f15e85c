#include "payload_kinds.h"

#include <cstring>
#include <mutex>
#include <vector>

namespace et_copy {

using executorch::runtime::Error;

namespace {

// The kinds, under their own lock, in registration order: each backend
// library's as it registers them (none is there from the start). Leaked on
// purpose: records may be parsed during static destruction.
struct Kinds {
  std::mutex mutex;
  std::vector<PayloadRules> rules;
};
Kinds& kinds() {
  static auto* k = new Kinds();
  return *k;
}

// A word a payload line, a message and a line's first field can all carry.
bool printable_word(const char* word) {
  if (word == nullptr || word[0] == '\0') {
    return false;
  }
  for (const char* c = word; *c != '\0'; ++c) {
    if (*c <= ' ' || *c >= 0x7f) {
      return false; // the payload line could not spell it, or a message could not show it
    }
  }
  return true;
}

bool claims(const PayloadRules& rules, std::string_view word) {
  for (const char* const* w = rules.lines; w != nullptr && *w != nullptr; ++w) {
    if (word == *w) {
      return true;
    }
  }
  return false;
}

} // namespace

Error register_payload_kind(const PayloadRules& rules) {
  if (!printable_word(rules.kind) || rules.check == nullptr || (rules.lines == nullptr) != (rules.reader == nullptr)) {
    return Error::InvalidArgument;
  }
  for (const char* const* w = rules.lines; w != nullptr && *w != nullptr; ++w) {
    if (!printable_word(*w) || internal::is_common_line(*w)) {
      return Error::InvalidArgument;
    }
  }
  Kinds& k = kinds();
  std::lock_guard<std::mutex> lock(k.mutex);
  for (const PayloadRules& known : k.rules) {
    if (std::strcmp(known.kind, rules.kind) == 0) {
      return known.check == rules.check && known.reader == rules.reader ? Error::Ok : Error::InvalidState;
    }
  }
  for (const PayloadRules& known : k.rules) {
    for (const char* const* w = rules.lines; w != nullptr && *w != nullptr; ++w) {
      if (claims(known, *w)) {
        return Error::InvalidState; // a line is one kind's: the parser hands it to one reader
      }
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

std::optional<PayloadRules> line_owner(std::string_view word) {
  Kinds& k = kinds();
  std::lock_guard<std::mutex> lock(k.mutex);
  for (const PayloadRules& known : k.rules) {
    if (claims(known, word)) {
      return known;
    }
  }
  return std::nullopt;
}

std::string payload_kinds_text() {
  Kinds& k = kinds();
  std::lock_guard<std::mutex> lock(k.mutex);
  if (k.rules.empty()) {
    return "one a backend registered (none is)";
  }
  std::string text;
  for (size_t i = 0; i < k.rules.size(); ++i) {
    text += i == 0 ? "" : i + 1 == k.rules.size() ? " or " : ", ";
    text += k.rules[i].kind;
  }
  return text;
}

} // namespace internal

} // namespace et_copy
