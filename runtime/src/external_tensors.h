// The external constants of a serialized ExecuTorch program: what a
// NamedDataMap must answer get_tensor_layout() with for Method to accept them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/result.h>

namespace et_copy::internal {

struct ExternalTensor {
  std::string fqn;
  executorch::aten::ScalarType scalar_type;
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;
};

/**
 * Every tensor value of every execution plan of the program in
 * `pte[0, size)` that is a constant stored outside the program
 * (ExtraTensorInfo.location EXTERNAL, no allocation info), once per fully
 * qualified name, in the order met. Method::load_method asks the data map
 * for each by that name, and checks the layout it returns against the
 * program's (Method::parse_external_constants, validateTensorLayout); the
 * delegate record names no layout, so the backend reads it here. Every read
 * is bounds-checked; InvalidProgram for bytes that are not such a program,
 * and for an external tensor of an unknown scalar type, a negative size or
 * more than kMaxTensorDims dims.
 */
ET_NODISCARD executorch::runtime::Result<std::vector<ExternalTensor>> external_tensors(const uint8_t* pte, size_t size);

} // namespace et_copy::internal
