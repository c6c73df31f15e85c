// Which compiled code the compiled backend may run (docs/runtime.md,
// "Untrusted programs"). A program with a `backend="aoti"` delegate
// carries a shared library, and loading it runs its code: it is code, not
// data. AotiDeviceBackend runs a payload only when its SHA-256 (the
// record's digest line, checked against the bytes before anything else)
// is trusted:
// - compiled on this machine: the compile cache marks each digest it
//   compiled or served (mark_compiled_here), in the folder
//   compile_cache_dir()/trusted;
// - trusted in this process (trust_compiled_code);
// - or the load asks for it: the runtime spec "trust_code" (kTrustCodeSpec,
//   LoadOptions::trust_code) trusts every payload of that program.
#pragma once

#include <string>

#include <executorch/runtime/core/error.h>

namespace et_copy {

/// The compile cache's folder: $ET_COPY_AOTI_CACHE when it names a folder
/// (holds a '/'); empty when it turns the cache off (0, false, no, off);
/// else $XDG_CACHE_HOME/et_copy/aoti, or $HOME/.cache/et_copy/aoti.
std::string compile_cache_dir();

/// Trusts, for this process, the compiled code whose SHA-256 is
/// `sha256_hex` (64 lowercase hex digits; else InvalidArgument).
ET_NODISCARD executorch::runtime::Error trust_compiled_code(const std::string& sha256_hex);

/// Records that this machine compiled the code of digest `sha256_hex`:
/// trusted in this process, and marked in compile_cache_dir()/trusted
/// when the cache is on (a folder that cannot be written is not an error:
/// the process still trusts it). InvalidArgument for a malformed digest.
ET_NODISCARD executorch::runtime::Error mark_compiled_here(const std::string& sha256_hex);

/// Whether the code of digest `sha256_hex` is trusted: by this process, or
/// marked as compiled on this machine.
bool is_trusted_code(const std::string& sha256_hex);

} // namespace et_copy
