// The payload kinds the delegate record parser accepts: each one's rules,
// and the words of the lines it reads itself (delegate_record.h:
// PayloadRules, register_payload_kind). Empty until a backend registers one.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <et_copy/delegate_record.h>

namespace et_copy::internal {

/// The rules of payload kind `kind`, or nullopt when no kind has that word.
std::optional<PayloadRules> payload_rules(std::string_view kind);

/// The rules of the kind whose own lines start with `word`, or nullopt when
/// no kind reads such lines.
std::optional<PayloadRules> line_owner(std::string_view word);

/// The known kinds for a refusal: "program or aoti", "program, aoti or x".
std::string payload_kinds_text();

/// Whether `word` starts one of the lines every record may hold (the
/// parser's own), which no payload kind may claim.
bool is_common_line(std::string_view word);

} // namespace et_copy::internal
