#include "program_reader.h"

namespace et_copy::internal {

size_t Reader::field(size_t table, int field) {
  const int64_t vtable = static_cast<int64_t>(table) - read<int32_t>(table);
  if (failed_ || vtable < 0) {
    failed_ = true;
    return 0;
  }
  const auto vt = static_cast<size_t>(vtable);
  const uint16_t vsize = read<uint16_t>(vt);
  const size_t entry = 4 + 2 * static_cast<size_t>(field);
  if (failed_ || entry + 2 > vsize) {
    return 0;
  }
  const uint16_t off = read<uint16_t>(vt + entry);
  return off == 0 ? 0 : table + off;
}

Reader::Vector Reader::vector(size_t table, int f) {
  const size_t v = follow(field(table, f));
  if (v == 0) {
    return {};
  }
  const uint32_t count = read<uint32_t>(v);
  if (count > n_) { // more elements than bytes: corrupt
    failed_ = true;
    return {};
  }
  return {count, v + 4};
}

size_t Reader::string_at(size_t table, int f, uint32_t* length) {
  const size_t s = follow(field(table, f));
  if (s == 0) {
    return 0; // absent: *length untouched, as callers start it at 0
  }
  *length = read<uint32_t>(s);
  if (failed_ || *length > n_ - (s + 4)) { // the read succeeded, so s + 4 <= n_
    failed_ = true;
    return 0;
  }
  return s + 4;
}

std::string Reader::string(size_t table, int f) {
  uint32_t length = 0;
  const size_t at = string_at(table, f, &length);
  if (at == 0) {
    return {};
  }
  const char* chars = reinterpret_cast<const char*>(p_ + at);
  return std::string(chars, strnlen(chars, length));
}

std::string Reader::whole_string(size_t table, int f) {
  uint32_t length = 0;
  const size_t at = string_at(table, f, &length);
  return at == 0 ? std::string() : std::string(reinterpret_cast<const char*>(p_ + at), length);
}

size_t Reader::find_plan(const char* method_name) {
  const auto [n, plans_at] = plans();
  for (uint32_t p = 0; p < n && !failed(); ++p) {
    const size_t plan = table_at(plans_at, p);
    if (string(plan, slot::kPlanName) == method_name) {
      return failed() ? 0 : plan;
    }
  }
  return 0;
}

void Reader::append_values(size_t table, int f, std::vector<int64_t>* out) {
  const auto [n, at] = vector(table, f);
  for (uint32_t i = 0; i < n && !failed(); ++i) {
    out->push_back(read<int32_t>(at + 4 * static_cast<size_t>(i)));
  }
}

std::string Reader::call_name(size_t plan, size_t instr) {
  const uint8_t type = union_type(instr);
  const size_t call = follow(field(instr, slot::kUnionValue));
  if (call == 0 || (type != tag::kKernelCall && type != tag::kDelegateCall)) {
    return {};
  }
  const int64_t index = int_field(call, slot::kFirst);
  const auto [n, at] = vector(plan, type == tag::kKernelCall ? slot::kPlanOperators : slot::kPlanDelegates);
  if (index < 0 || index >= static_cast<int64_t>(n)) {
    return {};
  }
  const size_t entry = table_at(at, static_cast<uint32_t>(index));
  if (type == tag::kDelegateCall) {
    const std::string id = string(entry, slot::kDelegateId);
    return id.empty() ? std::string() : "delegate:" + id;
  }
  // As Method::resolve_operator names it for the kernel registry.
  const std::string name = string(entry, slot::kOperatorName);
  const std::string overload = string(entry, slot::kOperatorOverload);
  return name.empty() || overload.empty() ? name : name + "." + overload;
}

} // namespace et_copy::internal
