#include "aoti_record.h"

#include <memory>
#include <string>

#include <et_copy/aoti_backend.h>
#include <et_copy/sha256.h>

namespace et_copy::aoti {

namespace {

constexpr size_t kMaxIo = 1u << 20; // inputs or outputs of one delegate call; far above any real one

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
  const AotiLines& own = aoti_lines(r);
  if (own.target_line == 0 || own.io_line == 0 || own.digest_line == 0) {
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

std::string read_target(AotiLines& a, const std::vector<std::string_view>& f, size_t number) {
  if (f.size() != 3) {
    return "a target line has 3 fields: target, cpu or cuda, torch version";
  }
  if (a.target_line != 0) {
    return "a second target line";
  }
  if (f[1] != "cpu" && f[1] != "cuda") {
    return "target '" + show_record_text(f[1]) + "' is not cpu or cuda";
  }
  if (f[2].empty()) {
    return "a target needs the torch version that compiled the payload";
  }
  a.target = f[1];
  a.torch_version = f[2];
  a.target_line = number;
  return "";
}

std::string read_digest(AotiLines& a, const std::vector<std::string_view>& f, size_t number) {
  if (f.size() != 3 || f[1] != "sha256" || !is_lower_hex(std::string(f[2]), 64)) {
    return "a digest line has 3 fields: digest, sha256, 64 lowercase hex digits";
  }
  if (a.digest_line != 0) {
    return "a second digest line";
  }
  a.payload_sha256 = f[2];
  a.digest_line = number;
  return "";
}

std::string read_io(AotiLines& a, const std::vector<std::string_view>& f, size_t number) {
  if (f.size() != 3) {
    return "an io line has 3 fields: io, inputs, outputs";
  }
  if (a.io_line != 0) {
    return "a second io line";
  }
  if (!parse_record_decimal(f[1], &a.num_inputs) || !parse_record_decimal(f[2], &a.num_outputs) ||
      a.num_inputs > kMaxIo || a.num_outputs > kMaxIo) {
    return "inputs and outputs are decimal counts up to " + std::to_string(kMaxIo);
  }
  a.io_line = number;
  return "";
}

std::unique_ptr<PayloadLines> new_reader() {
  return std::make_unique<AotiLines>();
}

// The words of the kind's own lines, for the parser (PayloadRules::lines).
constexpr const char* kLines[] = {"target", "digest", "io", nullptr};

} // namespace

std::string AotiLines::read(const std::vector<std::string_view>& fields, size_t number) {
  if (fields[0] == "target") {
    return read_target(*this, fields, number);
  }
  if (fields[0] == "digest") {
    return read_digest(*this, fields, number);
  }
  return read_io(*this, fields, number); // the parser hands this kind only its own words
}

const AotiLines& aoti_lines(const DelegateRecord& record) {
  return static_cast<const AotiLines&>(*record.payload_lines);
}

PayloadRules record_rules() {
  return {kPayloadAoti, &check, kLines, &new_reader};
}

} // namespace et_copy::aoti
