#include <et_copy/code_trust.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include <et_copy/sha256.h>

namespace et_copy {

using executorch::runtime::Error;

namespace {

std::mutex& trust_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

std::set<std::string>& trusted_here() {
  static auto* digests = new std::set<std::string>(); // never destroyed: loads may run during exit
  return *digests;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string strip(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string::npos) {
    return "";
  }
  return s.substr(first, s.find_last_not_of(" \t\n\r\f\v") - first + 1);
}

std::string marker_dir() {
  const std::string dir = compile_cache_dir();
  return dir.empty() ? "" : dir + "/trusted";
}

bool make_dirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at == path.size() || path[at] == '/') {
      const std::string prefix = path.substr(0, at);
      if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
        return false;
      }
    }
  }
  return true;
}

} // namespace

std::string compile_cache_dir() {
  const std::string setting = strip(env("ET_COPY_AOTI_CACHE").empty() ? "1" : env("ET_COPY_AOTI_CACHE"));
  if (setting == "0" || setting == "false" || setting == "no" || setting == "off") {
    return "";
  }
  if (setting.find('/') != std::string::npos) {
    return setting;
  }
  const std::string xdg = env("XDG_CACHE_HOME");
  return (xdg.empty() ? env("HOME") + "/.cache" : xdg) + "/et_copy/aoti";
}

Error trust_compiled_code(const std::string& sha256_hex) {
  if (!is_lower_hex(sha256_hex, 64)) {
    return Error::InvalidArgument;
  }
  std::lock_guard<std::mutex> lock(trust_mutex());
  trusted_here().insert(sha256_hex);
  return Error::Ok;
}

Error mark_compiled_here(const std::string& sha256_hex) {
  const Error e = trust_compiled_code(sha256_hex);
  if (e != Error::Ok) {
    return e;
  }
  const std::string dir = marker_dir();
  if (dir.empty() || !make_dirs(dir)) {
    return Error::Ok;
  }
  // An empty file named by the digest: its presence is the mark.
  if (FILE* f = std::fopen((dir + "/" + sha256_hex).c_str(), "a")) {
    std::fclose(f);
  }
  return Error::Ok;
}

bool is_trusted_code(const std::string& sha256_hex) {
  if (!is_lower_hex(sha256_hex, 64)) {
    return false; // never a path outside the marker folder
  }
  {
    std::lock_guard<std::mutex> lock(trust_mutex());
    if (trusted_here().count(sha256_hex) != 0) {
      return true;
    }
  }
  const std::string dir = marker_dir();
  struct stat st{};
  return !dir.empty() && stat((dir + "/" + sha256_hex).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace et_copy
