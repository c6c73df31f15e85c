#include "aoti_record.h"

#include <string>

namespace et_copy::aoti {

namespace {

bool has_tensor_line(const DelegateRecord& r, const std::string& name) {
  for (const DelegateTensor& t : r.tensors) {
    if (t.name == name) {
      return true;
    }
  }
  return false;
}

std::string check(const DelegateRecord& r, const RecordLines& lines, size_t* line) {
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

} // namespace

PayloadRules record_rules() {
  return {kPayloadAoti, &check};
}

} // namespace et_copy::aoti
