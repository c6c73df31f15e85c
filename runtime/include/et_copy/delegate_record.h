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
//   target <cpu|cuda> <torch version>              aoti payloads: exactly once
//   io     <inputs> <outputs>                      aoti payloads: exactly once
//   digest sha256 <64 lowercase hex>               aoti payloads: exactly once, the payload's SHA-256
//   payload <program|aoti> <nbytes>                last; then exactly nbytes of payload
//
// A `program` payload is a nested ExecuTorch program (SimulatedDeviceBackend);
// its arena names the nested planned buffer that holds the state, and it has
// no tensor, target, io or digest line. An `aoti` payload is an AOTInductor shared
// object (AotiDeviceBackend, backends/aoti); its arena is "-" (the state
// tensors are bound in place, not planned), and every weight and state has a
// tensor line giving the layout it is bound with.
//
// Python writes it with the magic, version and kinds read from _C; this is
// the one reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
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

/// The payload kinds, as the payload line spells them.
inline constexpr const char* kPayloadProgram = "program";
inline constexpr const char* kPayloadAoti = "aoti";

enum class PayloadKind {
  kProgram, ///< a nested ExecuTorch program (.pte)
  kAoti,    ///< an AOTInductor shared object (.so)
  kOther,   ///< a kind added with register_payload_kind (DelegateRecord::payload_word says which)
};

/// kPayloadProgram, kPayloadAoti, or "other".
const char* payload_kind_name(PayloadKind kind);

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
  std::string target;                  ///< "cpu" or "cuda"; empty when the record has no target line
  std::string torch_version;           ///< the torch that compiled the payload; empty without a target line
  std::string payload_sha256;          ///< the digest line's 64 hex digits; empty without one
  size_t num_inputs = 0;               ///< from the io line (aoti payloads)
  size_t num_outputs = 0;
  PayloadKind payload_kind = PayloadKind::kProgram;
  std::string payload_word = kPayloadProgram; ///< the payload line's kind, as written
  /// The payload: a view into the parsed bytes (not a copy).
  const uint8_t* payload = nullptr;
  size_t payload_nbytes = 0;
};

/// Where the lines of a parsed record stood (line numbers from 1; 0 when
/// the record has no such line), so a payload kind's rules can name the
/// line they refuse.
struct RecordLines {
  size_t arena = 0;
  size_t target = 0;
  size_t io = 0;
  size_t digest = 0;
  size_t payload = 0;
  std::vector<size_t> tensors; ///< one per DelegateRecord::tensors entry
};

/// A payload kind's own rules: which of the common lines its records carry
/// or lack. The parser reads every line and checks what holds for all
/// kinds; then `check` of the payload line's kind. `check` returns an empty
/// string when `record` keeps the rules, else the reason, with `*line` set
/// to the line it concerns (0: none). It must not throw; any thread.
struct PayloadRules {
  const char* kind; ///< the payload line's word; a static string
  std::string (*check)(const DelegateRecord& record, const RecordLines& lines, size_t* line);
};

/// How many payload kinds the parser knows at most, built-in ones included.
inline constexpr size_t kMaxPayloadKinds = 16;
/**
 * Adds a payload kind the parser accepts, for a device backend of its own
 * folder: the core's own kind (program) is known from the start, and
 * et_copy_aoti adds aoti (its rules in backends/aoti) when its library
 * loads; a record of a kind no library added is refused, listing the kinds. Ok when added, or when the kind
 * is known with the same check already (idempotent); InvalidArgument for a
 * null check or a kind that is empty or not printable ASCII without spaces;
 * InvalidState when the kind is known with another check; NotSupported
 * past kMaxPayloadKinds kinds. Thread-safe.
 */
ET_NODISCARD executorch::runtime::Error register_payload_kind(const PayloadRules& rules);

/**
 * Parses a delegate record from `data[0, size)`. Any bytes are safe: every
 * read is bounds-checked. Lines between the version line and the payload
 * line may come in any order. Fails with DelegateInvalidCompatibility, with
 * the reason naming the line ("line 3 ('weight\tw\tk'): ...") in `report`'s
 * detail when `report` is not null, for: another magic or version; an unknown kind of
 * line; a line without its '\n'; a field count other than the kind's; a
 * number that is not plain decimal or overflows; an empty name or key; a
 * device type other than "cuda" or an index outside 0..kMaxDeviceIndex; a
 * second device, arena, target, io or payload line; two weights with one
 * fqn, two states with one name or two tensor lines with one name; a state
 * without an arena line, outside the arena or at an offset that is not a
 * multiple of kTensorAlignment; a tensor line whose dtype is not a valid
 * ScalarType, whose sizes and strides differ in count or exceed
 * kMaxTensorDims, that names no weight or state, or whose span (the bytes
 * its sizes and strides reach) exceeds that weight's or state's nbytes; a
 * target other than cpu or cuda, or an empty torch version; a digest line
 * that is not "digest\tsha256\t" and 64 lowercase hex digits, or a second
 * one; no device or no
 * payload line; a payload kind other than program or aoti; a payload size
 * other than the bytes after its line. By payload kind: a program payload
 * with a tensor, target or io line, or an arena without a nested buffer
 * index; an aoti payload without exactly one target and one io line, with
 * an arena that names a nested buffer, or with a weight or state that has
 * no tensor line.
 *
 * The record points into `data` (DelegateRecord::payload), which must
 * outlive that use. Thread-safe: no shared state.
 */
ET_NODISCARD executorch::runtime::Result<DelegateRecord> parse_delegate_record(const void* data, size_t size,
                                                                               FailureReport* report = nullptr);

} // namespace et_copy
