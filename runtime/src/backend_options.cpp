#include <et_copy/backend_options.h>

#include <array>
#include <cstring>

#include <et_copy/device_backend.h>

namespace et_copy {

using executorch::runtime::BackendOption;
using executorch::runtime::Error;

namespace {

// What ExecuTorch's BackendOption can hold, and no key the core sets itself.
bool valid(const std::string& key, const BackendLoadOptions::Value& value) {
  if (key.empty() || key.size() >= executorch::runtime::kMaxOptionKeyLength || key == kPoolSpec ||
      key == kSessionSpec) {
    return false;
  }
  const auto* text = std::get_if<std::string>(&value);
  return text == nullptr || text->size() < executorch::runtime::kMaxOptionValueLength;
}

BackendOption option(const std::string& key, const BackendLoadOptions::Value& value) {
  BackendOption o;
  std::memcpy(o.key, key.c_str(), key.size() + 1); // valid(): it fits with its NUL
  if (const auto* b = std::get_if<bool>(&value)) {
    o.value = *b;
  } else if (const auto* i = std::get_if<int>(&value)) {
    o.value = *i;
  } else {
    std::array<char, executorch::runtime::kMaxOptionValueLength> text{};
    const std::string& s = std::get<std::string>(value);
    std::memcpy(text.data(), s.c_str(), s.size() + 1);
    o.value = text;
  }
  return o;
}

} // namespace

Error BackendLoadOptions::set(const std::string& backend_id, const std::string& key, Value value) {
  if (backend_id.empty() || !valid(key, value)) {
    return Error::InvalidArgument;
  }
  own_[backend_id][key] = std::move(value);
  return Error::Ok;
}

Error BackendLoadOptions::set_for_every_backend(const std::string& key, Value value) {
  if (!valid(key, value)) {
    return Error::InvalidArgument;
  }
  every_[key] = std::move(value);
  return Error::Ok;
}

std::vector<BackendOption> BackendLoadOptions::options_for(const std::string& backend_id) const {
  std::map<std::string, const Value*> merged;
  for (const auto& [key, value] : every_) {
    merged[key] = &value;
  }
  if (auto own = own_.find(backend_id); own != own_.end()) {
    for (const auto& [key, value] : own->second) {
      merged[key] = &value;
    }
  }
  std::vector<BackendOption> options;
  options.reserve(merged.size());
  for (const auto& [key, value] : merged) {
    options.push_back(option(key, *value));
  }
  return options;
}

std::vector<std::string> BackendLoadOptions::backend_ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, options] : own_) {
    ids.push_back(id);
  }
  return ids;
}

} // namespace et_copy
