// Naming a failed instruction (instruction_operator, program_check.h): what
// it calls, read from the program's bytes.
#include <et_copy/program_check.h>

#include <cstdint>
#include <string>

#include "program_reader.h"

namespace et_copy {

namespace slot = internal::slot;

std::string instruction_operator(const void* data, size_t size, const char* method_name, size_t chain,
                                 size_t instruction) {
  if (data == nullptr || method_name == nullptr) {
    return {};
  }
  internal::Reader r(data, size);
  const size_t plan = r.find_plan(method_name);
  if (plan == 0) {
    return {};
  }
  const auto [chains, chains_at] = r.vector(plan, slot::kPlanChains);
  if (chain >= chains) {
    return {};
  }
  const auto [n, instr_at] = r.vector(r.table_at(chains_at, static_cast<uint32_t>(chain)), slot::kChainInstructions);
  if (instruction >= n) {
    return {};
  }
  std::string name = r.call_name(plan, r.table_at(instr_at, static_cast<uint32_t>(instruction)));
  // A read outside the bytes read as zeros on the way: trust nothing found.
  return r.failed() ? std::string() : name;
}

} // namespace et_copy
