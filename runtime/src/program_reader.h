// Reading a serialized ExecuTorch program (schema/program.fbs) with every
// offset checked: the one flatbuffer reader behind the load checks
// (program_check.h) and the simulated backend's external tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "byte_range.h"

namespace et_copy::internal {

// Field slots and union tags, from executorch's schema/program.fbs (a union
// takes two slots: its type, then its value).
namespace slot {
constexpr int kProgramPlans = 1, kProgramInlineData = 3, kProgramSegments = 4;
constexpr int kPlanName = 0, kPlanValues = 2, kPlanInputs = 3, kPlanOutputs = 4, kPlanChains = 5, kPlanOperators = 6,
              kPlanDelegates = 7, kPlanBufferSizes = 8, kPlanBufferDevices = 9;
constexpr int kChainInputs = 0, kChainOutputs = 1, kChainInstructions = 2;
constexpr int kUnionType = 0, kUnionValue = 1; // EValue.val, Instruction.instr_args
constexpr int kFirst = 0, kSecond = 1;         // the two fields of a call table, e.g. op_index, args
constexpr int kOperatorName = 0, kOperatorOverload = 1, kDelegateId = 0;
constexpr int kTensorScalarType = 0, kTensorSizes = 2, kTensorDimOrder = 3, kTensorDataBufferIdx = 5,
              kTensorAllocationInfo = 6, kTensorExtraInfo = 9;
constexpr int kAllocationMemoryId = 0;
constexpr int kExtraFullyQualifiedName = 1, kExtraLocation = 2, kExtraDeviceType = 3, kExtraDeviceIndex = 4;
constexpr int kBufferDeviceIdx = 0, kBufferDeviceType = 1, kBufferDeviceIndex = 2;
constexpr int kDelegateProcessed = 1, kReferenceLocation = 0, kReferenceIndex = 1; // BackendDelegate, its DataReference
constexpr int kInlineData = 0, kSegmentOffset = 0, kSegmentSize = 1;
constexpr int kListItems = 0; // IntList.items, TensorList.items, OptionalTensorList.items
} // namespace slot

namespace tag {
constexpr uint8_t kTensor = 5, kIntList = 7, kTensorList = 10, kOptionalTensorList = 11;
constexpr uint8_t kKernelCall = 1, kDelegateCall = 2, kMoveCall = 3, kJumpFalseCall = 4, kFreeCall = 5;
} // namespace tag

constexpr uint8_t kExternalLocation = 1; // TensorDataLocation::EXTERNAL

// A bounds-checked flatbuffer reader over `data[0, size)`: a bad offset
// marks it failed and reads as zero, so a walk ends without touching memory
// outside `data`. Positions are byte offsets from `data`; 0 stands for an
// absent table or field (no table starts at 0: the root offset is there).
// Threading: one reader per walk, on one thread.
class Reader {
 public:
  Reader(const void* data, size_t size) : p_(static_cast<const uint8_t*>(data)), n_(data == nullptr ? 0 : size) {}
  bool failed() const {
    return failed_;
  }

  template <typename T>
  T read(size_t at) {
    T v{};
    if (!range_within(at, sizeof(T), n_)) {
      failed_ = true;
      return v;
    }
    std::memcpy(&v, p_ + at, sizeof(T));
    return v;
  }

  // Where `field` of the table at `table` is, or 0 when it is absent.
  size_t field(size_t table, int field);

  // Follows the offset stored at `at` (0 stays 0: an absent field).
  size_t follow(size_t at) {
    return at == 0 ? 0 : at + read<uint32_t>(at);
  }

  // A vector field: its element count, and where its elements start ({0, 0}
  // when absent, or when its count could not be stored in the file).
  struct Vector {
    uint32_t count = 0;
    size_t elements = 0;
  };
  Vector vector(size_t table, int f);

  // The i-th table of a vector of tables starting at `elements`.
  size_t table_at(size_t elements, uint32_t i) {
    return follow(elements + 4 * static_cast<size_t>(i));
  }

  // The type tag of union field (EValue.val, Instruction.instr_args) of
  // `table`; 0 (NONE) when absent.
  uint8_t union_type(size_t table) {
    return scalar<uint8_t>(table, slot::kUnionType);
  }

  // The Tensor table EValue table `value` holds; 0 when it holds another
  // kind or nothing. Reads the value's offset whatever its kind, so a bad
  // one fails the reader either way.
  size_t tensor(size_t value) {
    const size_t t = follow(field(value, slot::kUnionValue));
    return union_type(value) == tag::kTensor ? t : 0;
  }

  // `n` bytes at `at` in the file, or nullptr when they are not all inside it.
  const uint8_t* bytes(size_t at, size_t n) const {
    return range_within(at, n, n_) ? p_ + at : nullptr;
  }
  size_t size() const {
    return n_;
  }

  // Scalar field `f` of `table`, or `absent` (the schema's default) when the
  // field is not stored: flatbuffers leaves out a field equal to its default.
  template <typename T>
  T scalar(size_t table, int f, T absent = T{}) {
    const size_t at = field(table, f);
    return at == 0 ? absent : read<T>(at);
  }

  // An int field (absent: the schema default, 0).
  int64_t int_field(size_t table, int f) {
    return scalar<int32_t>(table, f);
  }

  // A string field up to its first NUL, as ExecuTorch's c_str() reads it
  // ("" when absent).
  std::string string(size_t table, int f);
  // A string field with all the bytes its length covers, NULs included.
  std::string whole_string(size_t table, int f);

  // The Program table: the root offset, from the file's start.
  size_t root() {
    return read<uint32_t>(0);
  }

  // The execution plans: their count, and where the vector's elements start.
  Vector plans() {
    return vector(root(), slot::kProgramPlans);
  }

  // The first execution plan named `method_name`, as ExecuTorch picks it; 0
  // when there is none.
  size_t find_plan(const char* method_name);

  // The value indices (int32) of vector field `f` of `table`, appended to `out`.
  void append_values(size_t table, int f, std::vector<int64_t>* out);

  // What the instruction at `instr` of `plan` calls, as instruction_operator
  // (program_check.h) names it; "" for anything else.
  std::string call_name(size_t plan, size_t instr);

 private:
  // A string field's length and where its bytes start (0 when absent or bad).
  size_t string_at(size_t table, int f, uint32_t* length);

  const uint8_t* p_;
  size_t n_;
  bool failed_ = false;
};

} // namespace et_copy::internal
