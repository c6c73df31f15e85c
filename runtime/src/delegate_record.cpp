#include <et_copy/delegate_record.h>

#include <cstring>
#include <set>
#include <string_view>

#include <et_copy/limits.h>
#include <executorch/runtime/platform/log.h>

namespace et_copy {

using executorch::runtime::Error;
using executorch::runtime::Result;
namespace et = executorch::runtime::etensor;

namespace {

constexpr size_t kMaxShownLine = 80; // a garbage "line" can be megabytes

// A line as a message shows it: tabs as \t, other control and non-ASCII
// bytes as \xNN, cut at kMaxShownLine bytes.
std::string show(std::string_view line) {
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

// Plain decimal: digits only, no sign, no spaces, no overflow.
bool parse_size(std::string_view s, size_t* out) {
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

class Parser {
 public:
  Parser(const uint8_t* data, size_t size, std::string* what) : p_(data), n_(size), what_(what) {}

  ET_NODISCARD Result<DelegateRecord> parse() {
    std::string_view line;
    if (!next_line(&line)) {
      return fail("the record has no version line (" + std::to_string(n_) + " bytes)");
    }
    const std::string version = std::string(kDelegateRecordMagic) + " " + std::to_string(kDelegateRecordVersion);
    if (line != version) {
      return fail("expected '" + version + "' (another writer or version)", line);
    }
    DelegateRecord r;
    bool has_device = false;
    std::set<std::string_view> fqns, states;
    for (;;) {
      if (!next_line(&line)) {
        if (at_end_ >= n_) {
          return fail("the record ends before its program line");
        }
        ++line_; // the unterminated rest is the next line
        return fail("the line has no end (\\n)",
                    std::string_view(reinterpret_cast<const char*>(p_ + at_end_), n_ - at_end_));
      }
      const std::vector<std::string_view> f = split_tabs(line);
      const std::string_view kind = f[0];
      if (kind == "device") {
        size_t index = 0;
        if (f.size() != 3) {
          return fail("a device line has 3 fields: device, type, index", line);
        }
        if (has_device) {
          return fail("a second device line", line);
        }
        if (f[1] != "cuda") {
          return fail("device type '" + std::string(f[1]) + "' is not one this backend serves (cuda)", line);
        }
        if (!parse_size(f[2], &index) || index > static_cast<size_t>(kMaxDeviceIndex)) {
          return fail("device index is not in 0.." + std::to_string(kMaxDeviceIndex), line);
        }
        has_device = true;
        r.device_type = et::DeviceType::CUDA;
        r.device_index = static_cast<et::DeviceIndex>(index);
      } else if (kind == "weight") {
        DelegateWeight w;
        if (f.size() != 4) {
          return fail("a weight line has 4 fields: weight, fqn, content key, nbytes", line);
        }
        if (f[1].empty() || f[2].empty() || !parse_size(f[3], &w.nbytes)) {
          return fail("a weight needs a name, a key and a decimal size", line);
        }
        if (!fqns.insert(f[1]).second) {
          return fail("a second weight named '" + std::string(f[1]) + "'", line);
        }
        w.fqn = f[1];
        w.key = f[2];
        r.weights.push_back(std::move(w));
      } else if (kind == "state") {
        DelegateState s;
        if (f.size() != 5) {
          return fail("a state line has 5 fields: state, name, offset, nbytes, initial key or -", line);
        }
        if (f[1].empty() || f[4].empty() || !parse_size(f[2], &s.offset) || !parse_size(f[3], &s.nbytes)) {
          return fail("a state needs a name, a decimal offset and size, and an initial key or -", line);
        }
        if (!states.insert(f[1]).second) {
          return fail("a second state named '" + std::string(f[1]) + "'", line);
        }
        s.name = f[1];
        s.initial_key = f[4] == "-" ? std::string() : std::string(f[4]);
        state_lines_.push_back(line_);
        r.states.push_back(std::move(s));
      } else if (kind == "arena") {
        if (f.size() != 3) {
          return fail("an arena line has 3 fields: arena, nested buffer index, nbytes", line);
        }
        if (r.has_arena) {
          return fail("a second arena line", line);
        }
        if (!parse_size(f[1], &r.arena_buffer) || !parse_size(f[2], &r.arena_nbytes)) {
          return fail("an arena needs a decimal buffer index and size", line);
        }
        r.has_arena = true;
      } else if (kind == "program") {
        size_t nbytes = 0;
        if (f.size() != 2 || !parse_size(f[1], &nbytes)) {
          return fail("a program line has 2 fields: program, decimal nbytes", line);
        }
        if (nbytes != n_ - at_) {
          return fail("the program is " + std::to_string(nbytes) + " bytes, and " + std::to_string(n_ - at_) +
                          " bytes follow its line",
                      line);
        }
        r.program = p_ + at_;
        r.program_nbytes = nbytes;
        break;
      } else {
        return fail("unknown kind of line '" + show(kind) + "'", line);
      }
    }
    if (!has_device) {
      return fail("the record has no device line");
    }
    for (size_t i = 0; i < r.states.size(); ++i) {
      const DelegateState& s = r.states[i];
      if (!r.has_arena || s.offset > r.arena_nbytes || s.nbytes > r.arena_nbytes - s.offset) {
        line_ = state_lines_[i];
        return fail("state '" + s.name + "' (" + std::to_string(s.nbytes) + " bytes at " + std::to_string(s.offset) +
                    ") is outside the arena (" + (r.has_arena ? std::to_string(r.arena_nbytes) + " bytes" : "none") +
                    ")");
      }
      if (s.offset % kTensorAlignment != 0) { // a GPU kernel's vector loads would fault on it
        line_ = state_lines_[i];
        return fail("state '" + s.name + "' is at offset " + std::to_string(s.offset) + ", not a multiple of " +
                    std::to_string(kTensorAlignment) + " bytes");
      }
    }
    return r;
  }

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
    if (what_ != nullptr) {
      *what_ = std::move(message);
    }
    return Error::DelegateInvalidCompatibility;
  }

  const uint8_t* p_;
  size_t n_;
  std::string* what_;
  size_t at_ = 0;
  size_t at_end_ = 0;
  size_t line_ = 0;
  std::vector<size_t> state_lines_;
};

} // namespace

Result<DelegateRecord> parse_delegate_record(const void* data, size_t size, std::string* what) {
  if (data == nullptr && size > 0) {
    ET_LOG(Error, "delegate record: null data of %zu bytes", size);
    return Error::InvalidArgument;
  }
  return Parser(static_cast<const uint8_t*>(data), size, what).parse();
}

} // namespace et_copy
