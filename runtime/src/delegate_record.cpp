#include <et_copy/delegate_record.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>

#include <et_copy/limits.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/platform/log.h>

#include "payload_kinds.h"

namespace et_copy {

using executorch::runtime::Error;
using executorch::runtime::Result;
namespace et = executorch::runtime::etensor;

namespace {

constexpr size_t kMaxShownLine = 80; // a garbage "line" can be megabytes

} // namespace

std::string show_record_text(std::string_view line) {
  std::string out;
  for (size_t i = 0; i < line.size() && i < kMaxShownLine; ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f || c == '\\') {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (line.size() > kMaxShownLine) {
    out += "...";
  }
  return out;
}

namespace {

std::string show(std::string_view line) {
  return show_record_text(line);
}

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
    if (tab == std::string_view::npos) {
      return fields;
    }
    start = tab + 1;
  }
}

bool parse_size(std::string_view s, size_t* out) {
  return parse_record_decimal(s, out);
}

} // namespace

bool parse_record_decimal(std::string_view s, size_t* out) {
  if (s.empty() || s.size() > 20) {
    return false;
  }
  size_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') {
      return false;
    }
    const auto d = static_cast<size_t>(c - '0');
    if (v > (SIZE_MAX - d) / 10) {
      return false;
    }
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

namespace {

// Comma-separated plain decimals; empty for none (a 0-d tensor).
bool parse_list(std::string_view s, std::vector<int64_t>* out) {
  out->clear();
  if (s.empty()) {
    return true;
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    size_t v = 0;
    if (!parse_size(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start), &v) ||
        v > static_cast<size_t>(INT64_MAX) || out->size() >= kMaxTensorDims) {
      return false;
    }
    out->push_back(static_cast<int64_t>(v));
    if (comma == std::string_view::npos) {
      return true;
    }
    start = comma + 1;
  }
}

// Bytes a strided view reaches from its start: 0 when it has no element,
// else (1 + sum (size - 1) * stride) * element size; false on overflow.
bool span_nbytes(const DelegateTensor& t, size_t* out) {
  size_t last = 0;
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    if (t.sizes[i] == 0) {
      *out = 0;
      return true;
    }
  }
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    const auto extent = static_cast<size_t>(t.sizes[i] - 1);
    const auto stride = static_cast<size_t>(t.strides[i]);
    if (stride != 0 && extent > (SIZE_MAX - last) / stride) {
      return false;
    }
    last += extent * stride;
  }
  const size_t element = executorch::runtime::elementSize(t.dtype);
  if (last >= SIZE_MAX / element) {
    return false;
  }
  *out = (last + 1) * element;
  return true;
}

class Parser {
 public:
  Parser(const uint8_t* data, size_t size, FailureReport* report) : p_(data), n_(size), report_(report) {}

  ET_NODISCARD Result<DelegateRecord> parse() {
    std::string_view line;
    if (!next_line(&line)) {
      return fail("the record has no version line (" + std::to_string(n_) + " bytes)");
    }
    const std::string version = std::string(kDelegateRecordMagic) + " " + std::to_string(kDelegateRecordVersion);
    if (line != version) {
      return fail("expected '" + version + "' (another writer or version)", line);
    }
    for (;;) {
      if (!next_line(&line)) {
        if (at_end_ >= n_) {
          return fail("the record ends before its payload line");
        }
        ++line_; // the unterminated rest is the next line
        return fail("the line has no end (\\n)",
                    std::string_view(reinterpret_cast<const char*>(p_ + at_end_), n_ - at_end_));
      }
      const std::vector<std::string_view> f = split_tabs(line);
      Reader read = nullptr;
      for (const auto& known : kLines) {
        if (f[0] == known.kind) {
          read = known.read;
        }
      }
      if (read == nullptr) {
        read = &Parser::read_kind_line; // a payload kind's, or unknown
      }
      const Error e = (this->*read)(f, line);
      if (e != Error::Ok) {
        return e;
      }
      if (read == &Parser::read_payload) {
        break; // the payload follows
      }
    }
    if (!has_device_) {
      return fail("the record has no device line");
    }
    Error e = check_states();
    if (e == Error::Ok) {
      e = check_tensors();
    }
    if (e != Error::Ok) {
      return e;
    }
    lines_.payload = line_ = lines_read_;
    for (const Owned& o : owned_) {
      if (o.kind != r_.payload_word) {
        lines_.other_kinds.push_back(KindLine{std::string(o.word), o.number});
      }
    }
    if (auto own = readers_.find(r_.payload_word); own != readers_.end()) {
      r_.payload_lines = std::move(own->second);
    } else if (rules_->reader != nullptr) {
      r_.payload_lines = rules_->reader(); // the kind's lines are absent: its rules say whether that is allowed
    }
    size_t at = 0;
    const std::string why = rules_->check(r_, lines_, &at); // the payload kind's own rules (payload_kinds.cpp)
    if (!why.empty()) {
      line_ = at;
      return fail(why);
    }
    return std::move(r_);
  }

 private:
  // Every state inside the arena, at an aligned offset.
  ET_NODISCARD Error check_states() {
    for (size_t i = 0; i < r_.states.size(); ++i) {
      const DelegateState& s = r_.states[i];
      if (!r_.has_arena || s.offset > r_.arena_nbytes || s.nbytes > r_.arena_nbytes - s.offset) {
        line_ = state_lines_[i];
        return fail("state '" + s.name + "' (" + std::to_string(s.nbytes) + " bytes at " + std::to_string(s.offset) +
                    ") is outside the arena (" + (r_.has_arena ? std::to_string(r_.arena_nbytes) + " bytes" : "none") +
                    ")");
      }
      if (s.offset % kTensorAlignment != 0) { // a GPU kernel's vector loads would fault on it
        line_ = state_lines_[i];
        return fail("state '" + s.name + "' is at offset " + std::to_string(s.offset) + ", not a multiple of " +
                    std::to_string(kTensorAlignment) + " bytes");
      }
    }
    return Error::Ok;
  }

  // Every tensor line names a weight or state, and its view fits that one's bytes.
  ET_NODISCARD Error check_tensors() {
    for (size_t i = 0; i < r_.tensors.size(); ++i) {
      const DelegateTensor& t = r_.tensors[i];
      line_ = lines_.tensors[i];
      size_t nbytes = 0;
      bool named = false;
      for (const auto& w : r_.weights) {
        if (w.fqn == t.name) {
          named = true;
          nbytes = w.nbytes;
        }
      }
      for (const auto& s : r_.states) {
        if (s.name == t.name) {
          named = true;
          nbytes = s.nbytes;
        }
      }
      if (!named) {
        return fail("tensor '" + t.name + "' names no weight or state");
      }
      size_t span = 0;
      if (!span_nbytes(t, &span) || span > nbytes) {
        return fail("tensor '" + t.name + "' reaches " + (span_nbytes(t, &span) ? std::to_string(span) : "too many") +
                    " bytes, and '" + t.name + "' has " + std::to_string(nbytes));
      }
    }
    return Error::Ok;
  }

  ET_NODISCARD Error read_device(const std::vector<std::string_view>& f, std::string_view line) {
    size_t index = 0;
    if (f.size() != 3) {
      return fail("a device line has 3 fields: device, type, index", line);
    }
    if (has_device_) {
      return fail("a second device line", line);
    }
    if (f[1] != "cuda") {
      return fail("device type '" + std::string(f[1]) + "' is not one this backend serves (cuda)", line);
    }
    if (!parse_size(f[2], &index) || index > static_cast<size_t>(kMaxDeviceIndex)) {
      return fail("device index is not in 0.." + std::to_string(kMaxDeviceIndex), line);
    }
    has_device_ = true;
    r_.device_type = et::DeviceType::CUDA;
    r_.device_index = static_cast<et::DeviceIndex>(index);
    return Error::Ok;
  }

  ET_NODISCARD Error read_weight(const std::vector<std::string_view>& f, std::string_view line) {
    DelegateWeight w;
    if (f.size() != 4) {
      return fail("a weight line has 4 fields: weight, fqn, content key, nbytes", line);
    }
    if (f[1].empty() || f[2].empty() || !parse_size(f[3], &w.nbytes)) {
      return fail("a weight needs a name, a key and a decimal size", line);
    }
    if (!fqns_.insert(f[1]).second) {
      return fail("a second weight named '" + std::string(f[1]) + "'", line);
    }
    w.fqn = f[1];
    w.key = f[2];
    r_.weights.push_back(std::move(w));
    return Error::Ok;
  }

  ET_NODISCARD Error read_state(const std::vector<std::string_view>& f, std::string_view line) {
    DelegateState s;
    if (f.size() != 5) {
      return fail("a state line has 5 fields: state, name, offset, nbytes, initial key or -", line);
    }
    if (f[1].empty() || f[4].empty() || !parse_size(f[2], &s.offset) || !parse_size(f[3], &s.nbytes)) {
      return fail("a state needs a name, a decimal offset and size, and an initial key or -", line);
    }
    if (!states_.insert(f[1]).second) {
      return fail("a second state named '" + std::string(f[1]) + "'", line);
    }
    s.name = f[1];
    s.initial_key = f[4] == "-" ? std::string() : std::string(f[4]);
    state_lines_.push_back(line_);
    r_.states.push_back(std::move(s));
    return Error::Ok;
  }

  ET_NODISCARD Error read_arena(const std::vector<std::string_view>& f, std::string_view line) {
    if (f.size() != 3) {
      return fail("an arena line has 3 fields: arena, nested buffer index or -, nbytes", line);
    }
    if (r_.has_arena) {
      return fail("a second arena line", line);
    }
    r_.has_arena_buffer = f[1] != "-";
    if ((r_.has_arena_buffer && !parse_size(f[1], &r_.arena_buffer)) || !parse_size(f[2], &r_.arena_nbytes)) {
      return fail("an arena needs a decimal buffer index or -, and a decimal size", line);
    }
    r_.has_arena = true;
    lines_.arena = line_;
    return Error::Ok;
  }

  ET_NODISCARD Error read_tensor(const std::vector<std::string_view>& f, std::string_view line) {
    DelegateTensor t;
    size_t dtype = 0;
    if (f.size() != 5) {
      return fail("a tensor line has 5 fields: tensor, name, dtype, sizes, strides", line);
    }
    if (f[1].empty()) {
      return fail("a tensor needs a name", line);
    }
    if (!parse_size(f[2], &dtype) || dtype > 127 ||
        !executorch::runtime::isValid(static_cast<executorch::aten::ScalarType>(dtype))) {
      return fail("dtype '" + show(f[2]) + "' is not an ExecuTorch ScalarType", line);
    }
    t.dtype = static_cast<executorch::aten::ScalarType>(dtype);
    if (!parse_list(f[3], &t.sizes) || !parse_list(f[4], &t.strides)) {
      return fail("sizes and strides are comma-separated decimals, at most " + std::to_string(kMaxTensorDims), line);
    }
    if (t.sizes.size() != t.strides.size()) {
      return fail(std::to_string(t.sizes.size()) + " sizes and " + std::to_string(t.strides.size()) + " strides", line);
    }
    if (!tensors_.insert(f[1]).second) {
      return fail("a second tensor line for '" + std::string(f[1]) + "'", line);
    }
    t.name = f[1];
    lines_.tensors.push_back(line_);
    r_.tensors.push_back(std::move(t));
    return Error::Ok;
  }

  // A line of a payload kind's (any kind's: the payload line comes last), read by a reader of that kind.
  ET_NODISCARD Error read_kind_line(const std::vector<std::string_view>& f, std::string_view line) {
    const std::optional<PayloadRules> owner = internal::line_owner(f[0]);
    if (!owner.has_value()) {
      return fail("unknown kind of line '" + show(f[0]) + "'", line);
    }
    std::unique_ptr<PayloadLines>& reader = readers_[owner->kind];
    if (reader == nullptr) {
      reader = owner->reader();
      if (reader == nullptr) {
        return fail("the reader of payload kind '" + std::string(owner->kind) + "' gave nothing", line);
      }
    }
    const std::string why = reader->read(f, line_);
    if (!why.empty()) {
      return fail(why, line);
    }
    owned_.push_back(Owned{f[0], line_, owner->kind});
    return Error::Ok;
  }

  ET_NODISCARD Error read_payload(const std::vector<std::string_view>& f, std::string_view line) {
    size_t nbytes = 0;
    if (f.size() != 3 || !parse_size(f[2], &nbytes)) {
      return fail("a payload line has 3 fields: payload, kind, decimal nbytes", line);
    }
    rules_ = internal::payload_rules(f[1]);
    if (!rules_.has_value()) {
      return fail("payload kind '" + show(f[1]) + "' is not " + internal::payload_kinds_text(), line);
    }
    r_.payload_word = rules_->kind;
    r_.payload_is_program = rules_->payload_is_program;
    if (nbytes != n_ - at_) {
      return fail("the payload is " + std::to_string(nbytes) + " bytes, and " + std::to_string(n_ - at_) +
                      " bytes follow its line",
                  line);
    }
    r_.payload = p_ + at_;
    r_.payload_nbytes = nbytes;
    return Error::Ok;
  }

  // The kinds of line before the payload's, each read by its own method.
  using Reader = Error (Parser::*)(const std::vector<std::string_view>&, std::string_view);
  struct LineKind {
    const char* kind;
    Reader read;
  };

 public:
  // The common lines, each read by its own method; any other is a payload kind's.
  static constexpr LineKind kLines[] = {
      {"device", &Parser::read_device}, {"weight", &Parser::read_weight}, {"state", &Parser::read_state},
      {"arena", &Parser::read_arena},   {"tensor", &Parser::read_tensor}, {"payload", &Parser::read_payload},
  };

 private:
  // The next line (without its '\n'); false at the end or when the rest has
  // no '\n' (at_end_ then says where that rest starts).
  bool next_line(std::string_view* line) {
    at_end_ = at_;
    if (at_ >= n_) {
      return false;
    }
    const void* nl = std::memchr(p_ + at_, '\n', n_ - at_);
    if (nl == nullptr) {
      return false;
    }
    const size_t end = static_cast<size_t>(static_cast<const uint8_t*>(nl) - p_);
    *line = std::string_view(reinterpret_cast<const char*>(p_ + at_), end - at_);
    at_ = end + 1;
    ++line_;
    lines_read_ = line_;
    return true;
  }

  ET_NODISCARD Error fail(const std::string& why, std::string_view line) {
    return fail_at("line " + std::to_string(line_) + " ('" + show(line) + "'): " + why);
  }
  ET_NODISCARD Error fail(const std::string& why) {
    return fail_at(line_ == 0 ? why : "line " + std::to_string(line_) + ": " + why);
  }
  ET_NODISCARD Error fail_at(std::string message) {
    message = "delegate record: " + message;
    ET_LOG(Error, "%s", message.c_str());
    return et_copy::fail(report_, Error::DelegateInvalidCompatibility,
                         std::move(message)); // failure_report.h's, not Parser::fail
  }

  const uint8_t* p_;
  size_t n_;
  FailureReport* report_;
  size_t at_ = 0;
  size_t at_end_ = 0;
  size_t line_ = 0;
  size_t lines_read_ = 0;
  std::vector<size_t> state_lines_;
  RecordLines lines_;
  DelegateRecord r_;
  bool has_device_ = false;
  std::optional<PayloadRules> rules_; // the payload line's kind
  std::set<std::string_view> fqns_, states_, tensors_;
  // Each payload kind's reader of this record, by kind, and the lines they read.
  struct Owned {
    std::string_view word;
    size_t number;
    std::string_view kind;
  };
  std::map<std::string_view, std::unique_ptr<PayloadLines>> readers_;
  std::vector<Owned> owned_;
};

} // namespace

namespace internal {

bool is_common_line(std::string_view word) {
  for (const auto& known : Parser::kLines) {
    if (word == known.kind) {
      return true;
    }
  }
  return false;
}

} // namespace internal

Result<DelegateRecord> parse_delegate_record(const void* data, size_t size, FailureReport* report) {
  if (data == nullptr && size > 0) {
    const std::string message = "delegate record: null data of " + std::to_string(size) + " bytes";
    ET_LOG(Error, "%s", message.c_str());
    return fail(report, Error::InvalidArgument, message);
  }
  return Parser(static_cast<const uint8_t*>(data), size, report).parse();
}

} // namespace et_copy
