// The delegate record: what a device backend's preprocess hands the runtime
// as `processed` (docs/design.md, "The delegate record, version 2"). Text
// lines separated by '\n', fields by '\t', then the payload:
//
//   et_copy.delegate 2
//   device <type> <index>                          exactly once ("cuda", 0..kMaxDeviceIndex)
//   weight <fqn> <content key> <nbytes>            one per constant the payload reads
//   state  <name> <offset> <nbytes> <initial key or ->  offset a multiple of kTensorAlignment
//   arena  <nested buffer index or -> <nbytes>      at most once; absent: no state
//   tensor <name> <ScalarType int> <sizes> <strides>   sizes, strides: comma-separated decimals
//   <a payload kind's own lines>                   read by that kind's reader (PayloadRules)
//   payload <kind> <nbytes>                        last; then exactly nbytes of payload
//
// These common lines are read here. Every other kind of line belongs to a
// payload kind, which registers the words of its lines and their reader
// (register_payload_kind) along with its rules, and which names its own
// payload's format: each device backend documents its kind's lines and
// payload beside itself.
//
// Python writes it with the magic, version and kinds read from _C; this is
// the one reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/portable_type/device.h>
#include <executorch/runtime/core/portable_type/scalar_type.h>
#include <executorch/runtime/core/result.h>

#include <et_copy/device_residency.h>
#include <et_copy/failure_report.h>

namespace et_copy {

/// The version line's text, with the one version this reader knows.
inline constexpr const char* kDelegateRecordMagic = "et_copy.delegate";
inline constexpr int kDelegateRecordVersion = 2;

/// A constant of the payload, kept outside it: read by the payload under
/// `fqn`, stored in the outer program's named data under `key`.
struct DelegateWeight {
  std::string fqn;
  std::string key;
  size_t nbytes = 0;
};

/// A state tensor, at `offset` in the state arena. `initial_key` names its
/// start value in the outer named data; empty for "-" (it starts at zero).
/// The residency module's type, so backends bind the record's states as they are.
using DelegateState = ArenaState;

/// The layout a weight or state (by `name`) is bound with: a strided view
/// whose span (checked) fits the weight's or state's bytes.
struct DelegateTensor {
  std::string name;
  executorch::runtime::etensor::ScalarType dtype = executorch::runtime::etensor::ScalarType::Float;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

/**
 * What a payload kind reads of its own lines in one record: each kind's
 * reader is its own type, derived from this. The parser makes one per
 * record (PayloadRules::reader) for each kind with a line in it, hands it
 * each of that kind's lines in record order, and keeps the payload's kind's
 * in DelegateRecord::payload_lines, where its backend reads what it made.
 */
class PayloadLines {
 public:
  virtual ~PayloadLines() = default;
  /// Reads one line of the kind: `fields` is the line split at '\t'
  /// (fields[0] one of the kind's words), `number` its line number (from 1).
  /// Returns an empty string when read, else the reason, which the parser
  /// refuses the record with ("line 12 ('<the line>'): <reason>"). Must not
  /// throw.
  virtual std::string read(const std::vector<std::string_view>& fields, size_t number) = 0;
};

struct DelegateRecord {
  executorch::runtime::etensor::DeviceType device_type = executorch::runtime::etensor::DeviceType::CUDA;
  executorch::runtime::etensor::DeviceIndex device_index = 0;
  std::vector<DelegateWeight> weights;
  std::vector<DelegateState> states;
  bool has_arena = false;
  bool has_arena_buffer = false; ///< false for "-"
  size_t arena_buffer = 0; ///< index of the arena among the nested method's planned buffers (MethodMeta's numbering)
  size_t arena_nbytes = 0;
  std::vector<DelegateTensor> tensors; ///< in line order
  std::string payload_word;            ///< the payload line's kind, as written
  /// The payload is an ExecuTorch program (PayloadRules::payload_is_program),
  /// which the load checks check as one.
  bool payload_is_program = false;
  /// What the payload kind's reader made of its lines; null when the kind
  /// reads no lines of its own. Shared by copies of the record.
  std::shared_ptr<const PayloadLines> payload_lines;
  /// The payload: a view into the parsed bytes (not a copy).
  const uint8_t* payload = nullptr;
  size_t payload_nbytes = 0;
};

/// A line a payload kind read (its first field, and its number).
struct KindLine {
  std::string word;
  size_t number = 0;
};

/// Where the lines of a parsed record stood (line numbers from 1; 0 when
/// the record has no such line), so a payload kind's rules can name the
/// line they refuse.
struct RecordLines {
  size_t arena = 0;
  size_t payload = 0;
  std::vector<size_t> tensors; ///< one per DelegateRecord::tensors entry
  /// The lines other payload kinds read (not the payload's kind), in record order.
  std::vector<KindLine> other_kinds;
};

/**
 * A payload kind: the payload line's word, its own kinds of line and their
 * reader, and its rules. The parser reads the common lines and hands each
 * of a kind's lines to a reader of that kind (whatever the payload's kind:
 * a line is the kind's that registered its word); at the payload line it
 * checks what holds for all kinds, then calls `check` of the payload's kind.
 * `check` returns an empty string when `record` keeps the rules, else the
 * reason, with `*line` set to the line it concerns (0: none). It must not
 * throw; any thread.
 */
struct PayloadRules {
  const char* kind; ///< the payload line's word; a static string
  std::string (*check)(const DelegateRecord& record, const RecordLines& lines, size_t* line);
  /// The words of the kind's own lines (static strings, the array ended by
  /// nullptr), or null when it has none.
  const char* const* lines = nullptr;
  /// A fresh reader for one record; null exactly when `lines` is.
  std::unique_ptr<PayloadLines> (*reader)() = nullptr;
  /// The payload is an ExecuTorch program: the load checks check it as one
  /// (check_argument_kinds, program_check.h).
  bool payload_is_program = false;
};

/// A field or line of a record as a refusal shows it: tabs as \t, other
/// control and non-ASCII bytes as \xNN, cut at 80 bytes ("..." after).
/// For readers' messages, so that every refusal shows bytes alike.
std::string show_record_text(std::string_view text);

/// Reads plain decimal (digits only: no sign, no spaces) into `*out`; false,
/// leaving it, when `text` is not or overflows size_t. For readers.
bool parse_record_decimal(std::string_view text, size_t* out);

/// How many payload kinds the parser knows at most (none is built in).
inline constexpr size_t kMaxPayloadKinds = 16;
/**
 * Adds a payload kind the parser accepts, for a device backend: each
 * backend's library adds its own, when it loads and when the backend is
 * registered (none is known from the start); a record of a kind no library
 * added is refused, listing the kinds. Ok when added, or
 * when the kind is known with the same check and reader already
 * (idempotent); InvalidArgument for a null check, a kind or a line word that
 * is empty or not printable ASCII without spaces, a line word that is one of
 * the common lines', or `lines` without `reader` or the reverse;
 * InvalidState when the kind is known with another check or reader, or a
 * line word is another kind's; NotSupported past kMaxPayloadKinds kinds.
 * Thread-safe.
 */
ET_NODISCARD executorch::runtime::Error register_payload_kind(const PayloadRules& rules);

/**
 * Parses a delegate record from `data[0, size)`. Any bytes are safe: every
 * read is bounds-checked. Lines between the version line and the payload
 * line may come in any order. Fails with DelegateInvalidCompatibility, with
 * the reason naming the line ("line 3 ('weight\tw\tk'): ...") in `report`'s
 * detail when `report` is not null, for: another magic or version; a kind of
 * line neither common nor a registered payload kind's; a line without its
 * '\n'; a field count other than the kind's; a number that is not plain
 * decimal or overflows; an empty name or key; a device type other than
 * "cuda" or an index outside 0..kMaxDeviceIndex; a second device, arena or
 * payload line; two weights with one fqn, two states with one name or two
 * tensor lines with one name; a state without an arena line, outside the
 * arena or at an offset that is not a multiple of kTensorAlignment; a
 * tensor line whose dtype is not a valid ScalarType, whose sizes and
 * strides differ in count or exceed kMaxTensorDims, that names no weight or
 * state, or whose span (the bytes its sizes and strides reach) exceeds that
 * weight's or state's nbytes; no device or no payload line; a payload kind
 * no backend registered; a payload size other than the bytes after its
 * line; a line its payload kind's reader refuses; a record the payload
 * kind's rules refuse.
 *
 * The record points into `data` (DelegateRecord::payload), which must
 * outlive that use. Thread-safe: the registered kinds are read under their
 * lock, and each parse has readers of its own.
 */
ET_NODISCARD executorch::runtime::Result<DelegateRecord> parse_delegate_record(const void* data, size_t size,
                                                                               FailureReport* report = nullptr);

} // namespace et_copy
