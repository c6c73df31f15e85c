// A NamedDataMap of byte blobs by key, for tests that hand device residency
// (et_copy/device_residency.h) weights and initial state values.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <executorch/runtime/core/named_data_map.h>

namespace et_copy_test {

class NamedBlobs final : public executorch::runtime::NamedDataMap {
 public:
  using Error = executorch::runtime::Error;
  template <typename T>
  using Result = executorch::runtime::Result<T>;

  Result<const executorch::runtime::TensorLayout> get_tensor_layout(std::string_view) const override {
    return Error::NotImplemented; // as a .pte's own named data answers
  }
  Result<executorch::runtime::FreeableBuffer> get_data(std::string_view key) const override {
    auto it = blobs.find(std::string(key));
    if (it == blobs.end()) {
      return Error::NotFound;
    }
    return executorch::runtime::FreeableBuffer(it->second.data(), it->second.size(), nullptr);
  }
  Error load_data_into(std::string_view, void*, size_t) const override {
    return Error::NotImplemented;
  }
  Result<uint32_t> get_num_keys() const override {
    return static_cast<uint32_t>(blobs.size());
  }
  Result<const char*> get_key(uint32_t i) const override {
    if (i >= blobs.size()) {
      return Error::InvalidArgument;
    }
    return std::next(blobs.begin(), i)->first.c_str();
  }

  std::map<std::string, std::vector<uint8_t>> blobs;
};

} // namespace et_copy_test
