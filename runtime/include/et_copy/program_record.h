// The exporter-runtime contract of a program et_copy.export built: a small
// versioned record in the program's named data, so that what the runtime
// assumes about the program is read from it, never guessed.
#pragma once

#include <cstddef>
#include <string>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/result.h>

#include <et_copy/failure_report.h>

namespace et_copy {

/// The named-data key of the record, and the one version this runtime reads.
inline constexpr const char* kProgramRecordKey = "et_copy.program";
inline constexpr int kProgramRecordVersion = 1;

/// What a program's record says.
struct ProgramRecord {
  /// The program has a record: et_copy.export built it, so what the runtime
  /// assumes of it is what the record and the exporter's rules say, and a
  /// program that breaks them is refused (InvalidProgram), never run
  /// another way. Without one (another exporter) SessionPool's general
  /// rules hold.
  bool present = false;
  /// Every piece of mutable state lives inside the program's device
  /// delegates (SimulatedDeviceBackend keeps it per session), so every
  /// planned buffer of the program itself is scratch that sessions share.
  bool state_in_delegates = false;
};

/**
 * Parses a record: the line "et_copy.program <version>", then one line per
 * fact, tab-separated ("state\tdelegates"). Returns InvalidProgram, with
 * `report`'s detail naming the line (its number, from 1, and for an unknown
 * or repeated line its first 64 bytes), for another version, an unknown or
 * repeated line, a last line with no newline, or bytes that are not such a
 * record (none at all: "it is empty"). Pure function of its arguments.
 */
ET_NODISCARD executorch::runtime::Result<ProgramRecord> parse_program_record(const void* data, size_t size,
                                                                             FailureReport* report = nullptr);

/**
 * The record of a program with named data `data` (Program::get_named_data_map):
 * an empty record (no facts) when the program has none (one that
 * et_copy.export did not build), else parse_program_record's result.
 */
ET_NODISCARD executorch::runtime::Result<ProgramRecord> read_program_record(
    const executorch::runtime::NamedDataMap* data, FailureReport* report = nullptr);

} // namespace et_copy
