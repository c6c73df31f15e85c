// The aoti payload kind's own lines of a delegate record (delegate_record.h:
// PayloadRules, PayloadLines): the core parser reads the lines every kind
// shares and hands these to this kind's reader, then checks these rules.
//
//   target <cpu|cuda> <torch version>     exactly once: what compiled the payload
//   io     <inputs> <outputs>             exactly once: the model's argument counts
//   digest sha256 <64 lowercase hex>      exactly once: the payload's SHA-256
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <et_copy/delegate_record.h>

namespace et_copy::aoti {

/// What the aoti kind's lines of one record say, with where they stood
/// (line numbers from 1; 0 when the record has no such line).
class AotiLines final : public PayloadLines {
 public:
  std::string target;         ///< "cpu" or "cuda"
  std::string torch_version;  ///< the torch that compiled the payload
  std::string payload_sha256; ///< the digest line's 64 hex digits
  size_t num_inputs = 0;      ///< from the io line
  size_t num_outputs = 0;
  size_t target_line = 0;
  size_t io_line = 0;
  size_t digest_line = 0;

  std::string read(const std::vector<std::string_view>& fields, size_t number) override;
};

/// The aoti lines of a record of kind kPayloadAoti (parse_delegate_record
/// gives every such record its AotiLines).
const AotiLines& aoti_lines(const DelegateRecord& record);

/// The rules of kPayloadAoti records: a target, an io and a digest line; an
/// arena of "-" (the state arena is no nested planned buffer); a tensor line
/// for every weight and state, which the compiled code is bound to in place.
PayloadRules record_rules();

} // namespace et_copy::aoti
