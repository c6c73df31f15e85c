// Load options for device backends, opaque to the core: per backend id, key
// and value pairs, as upstream's LoadBackendOptionsMap carries them. A
// session hands each backend its own (and those set for every backend) as
// runtime specs when a method loads (BackendInitContext::get_runtime_spec),
// beside the core's own two (kPoolSpec, kSessionSpec, device_backend.h).
// The core reads none of them: each backend documents its keys beside
// itself, so adding an option to a backend edits that backend only.
// LoadOptions (loaded_program.h) fills this from its conveniences (threads,
// verify_data, trust_code) and from its own backend_options.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/core/error.h>

namespace et_copy {

class BackendLoadOptions {
 public:
  /// A value: a bool, an int or a string (ExecuTorch's OptionValue kinds).
  using Value = std::variant<bool, int, std::string>;

  /**
   * Sets `key` to `value` for the backend of id `backend_id`, replacing an
   * earlier value of the key. InvalidArgument, leaving the options as they
   * were, for an empty id or key, a key of kMaxOptionKeyLength chars or more
   * or a string value of kMaxOptionValueLength or more (ExecuTorch's
   * BackendOption holds them, with their NUL), or one of the keys the core
   * sets itself (kPoolSpec, kSessionSpec). Not thread-safe (a value).
   */
  ET_NODISCARD executorch::runtime::Error set(const std::string& backend_id, const std::string& key, Value value);
  /// set() for every device backend: a backend's own value of the key wins.
  ET_NODISCARD executorch::runtime::Error set_for_every_backend(const std::string& key, Value value);

  /// The options of backend `backend_id`: those set for every backend, then
  /// its own (one entry per key, by key order). Never fails.
  std::vector<executorch::runtime::BackendOption> options_for(const std::string& backend_id) const;
  /// The ids options were set for (not those set for every backend), in order.
  std::vector<std::string> backend_ids() const;
  bool empty() const {
    return every_.empty() && own_.empty();
  }

 private:
  std::map<std::string, Value> every_;
  std::map<std::string, std::map<std::string, Value>> own_;
};

} // namespace et_copy
