// The table of argument kinds (argument_kinds.h), generated at build time by
// tools/gen_argument_kinds.py into the build folder; a build without
// Python and torch gets an empty table (runtime/CMakeLists.txt).
#pragma once

#include <cstdint>
#include <string>

#include <executorch/runtime/core/span.h>

namespace et_copy::internal {

/// One kernel-call argument: its schema name ("result" for the result
/// slot) and the EValue kinds it may hold, as bits 1 << the flatbuffer
/// KernelTypes tag (0xffff: any, not checked).
struct ArgumentKinds {
  const char* name;
  uint16_t kinds;
};

/// One operator, "name.overload" as the kernel registry names it; its
/// arguments are `arguments` entries from `first_argument`: the schema's
/// `schema_arguments`, then one result slot (which a call of an operator
/// with no result, `results` == 0, may leave out).
struct OperatorKinds {
  const char* name;
  uint32_t first_argument;
  uint16_t arguments;
  uint16_t schema_arguments;
  uint16_t results;
};

/// Sorted by name (strcmp).
executorch::runtime::Span<const OperatorKinds> operator_kinds_table();
const ArgumentKinds* argument_kinds_of(const OperatorKinds& op);

/// The kinds in `kinds` (bits as ArgumentKinds'), as a refusal names them:
/// "None or a Tensor".
std::string kinds_text(uint16_t kinds);

} // namespace et_copy::internal
