// The aoti payload kind's own lines of a delegate record (delegate_record.h:
// PayloadRules): the core parser reads the lines every kind shares, then
// these rules.
#pragma once

#include <et_copy/delegate_record.h>

namespace et_copy::aoti {

/// The rules of kPayloadAoti records: a target, an io and a digest line; an
/// arena of "-" (the state arena is no nested planned buffer); a tensor line
/// for every weight and state, which the compiled code is bound to in place.
PayloadRules record_rules();

} // namespace et_copy::aoti
