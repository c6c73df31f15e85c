// The payload kinds the delegate record parser accepts, and each one's own
// rules (delegate_record.h: PayloadRules, register_payload_kind).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <et_copy/delegate_record.h>

namespace et_copy::internal {

/// The rules of payload kind `kind`, or nullopt when no kind has that word.
std::optional<PayloadRules> payload_rules(std::string_view kind);

/// The known kinds for a refusal: "program or aoti", "program, aoti or x".
std::string payload_kinds_text();

} // namespace et_copy::internal
