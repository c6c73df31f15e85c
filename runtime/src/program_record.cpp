#include <et_copy/program_record.h>

#include <string_view>

namespace et_copy {

using executorch::runtime::Error;
using executorch::runtime::Result;

namespace {

// Every refusal of a record: InvalidProgram, its reason prefixed.
ET_NODISCARD Error refuse(FailureReport* report, const std::string& why) {
  return fail(report, Error::InvalidProgram, "et_copy program record: " + why);
}

} // namespace

Result<ProgramRecord> parse_program_record(const void* data, size_t size, FailureReport* report) {
  std::string_view text(static_cast<const char*>(data), data == nullptr ? 0 : size);
  const std::string header = std::string(kProgramRecordKey) + " ";
  ProgramRecord record;
  record.present = true;
  bool saw_state = false;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (end == std::string_view::npos) {
      return refuse(report, "line " + std::to_string(line_no + 1) + " does not end with a newline");
    }
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    if (line_no++ == 0) {
      if (line.substr(0, header.size()) != header) {
        return refuse(report, "it does not start with '" + header + "<version>'");
      }
      const std::string_view version = line.substr(header.size());
      if (version != std::to_string(kProgramRecordVersion)) {
        return refuse(report, "version '" + std::string(version) + "'; this runtime reads version " +
                                  std::to_string(kProgramRecordVersion) + " (export the program again)");
      }
      continue;
    }
    if (line == "state\tdelegates" && !saw_state) {
      record.state_in_delegates = saw_state = true;
      continue;
    }
    return refuse(report, "line " + std::to_string(line_no) + " ('" + std::string(line.substr(0, 64)) +
                              "') is unknown or repeated");
  }
  if (line_no == 0) {
    return refuse(report, "it is empty");
  }
  return record;
}

Result<ProgramRecord> read_program_record(const executorch::runtime::NamedDataMap* data, FailureReport* report) {
  if (data == nullptr) {
    return ProgramRecord{};
  }
  auto blob = data->get_data(kProgramRecordKey);
  if (!blob.ok()) {
    return ProgramRecord{}; // not one of et_copy.export's programs
  }
  auto record = parse_program_record(blob->data(), blob->size(), report);
  blob->Free();
  return record;
}

} // namespace et_copy
