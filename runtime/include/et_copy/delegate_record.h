// The delegate record: what SimulatedDeviceBackend's preprocess hands the
// runtime as `processed` (docs/design.md, "The delegate record"). Version 1,
// text lines separated by '\n', fields by '\t', then the nested program:
//
//   et_copy.delegate 1
//   device <type> <index>                          exactly once ("cuda", 0..kMaxDeviceIndex)
//   weight <fqn> <content key> <nbytes>            one per external constant
//   state  <name> <offset> <nbytes> <initial key or ->  offset a multiple of kTensorAlignment
//   arena  <nested buffer index> <nbytes>           at most once; absent: no state
//   program <nbytes>                               last; then exactly nbytes of .pte
//
// python/et_copy/backend.py writes it; this is the one reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/portable_type/device.h>
#include <executorch/runtime/core/result.h>

namespace et_copy {

/// The version line's text, with the one version this reader knows.
inline constexpr const char* kDelegateRecordMagic = "et_copy.delegate";
inline constexpr int kDelegateRecordVersion = 1;

/// A constant of the nested program, kept outside it: served to the nested
/// method under `fqn`, stored in the outer program's named data under `key`.
struct DelegateWeight {
  std::string fqn;
  std::string key;
  size_t nbytes = 0;
};

/// A state tensor, at `offset` in the state arena. `initial_key` names its
/// start value in the outer named data; empty for "-" (it starts at zero).
struct DelegateState {
  std::string name;
  size_t offset = 0;
  size_t nbytes = 0;
  std::string initial_key;
};

struct DelegateRecord {
  executorch::runtime::etensor::DeviceType device_type = executorch::runtime::etensor::DeviceType::CUDA;
  executorch::runtime::etensor::DeviceIndex device_index = 0;
  std::vector<DelegateWeight> weights;
  std::vector<DelegateState> states;
  bool has_arena = false;
  size_t arena_buffer = 0; ///< index of the arena among the nested method's planned buffers (MethodMeta's numbering)
  size_t arena_nbytes = 0;
  /// The nested .pte: a view into the parsed bytes (not a copy).
  const uint8_t* program = nullptr;
  size_t program_nbytes = 0;
};

/**
 * Parses a delegate record from `data[0, size)`. Any bytes are safe: every
 * read is bounds-checked. Lines between the version line and the program
 * line may come in any order. Fails with DelegateInvalidCompatibility, and
 * writes the reason naming the line ("line 3 ('weight\tw\tk'): ...") to
 * `what` when not null, for: another magic or version; an unknown kind of
 * line; a line without its '\n'; a field count other than the kind's; a
 * number that is not plain decimal or overflows; an empty name or key; a
 * device type other than "cuda" or an index outside 0..kMaxDeviceIndex; a second device,
 * arena or program line; two weights with one fqn or two states with one
 * name; a state without an arena line, outside the arena or at an offset
 * that is not a multiple of kTensorAlignment; no device or no
 * program line; a program size other than the bytes after its line.
 *
 * The record points into `data` (DelegateRecord::program), which must
 * outlive that use. Thread-safe: no shared state.
 */
ET_NODISCARD executorch::runtime::Result<DelegateRecord> parse_delegate_record(const void* data, size_t size,
                                                                               std::string* what = nullptr);

} // namespace et_copy
