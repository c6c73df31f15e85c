// The load check that every kernel-call argument holds the kind of value
// its operator's schema takes. ExecuTorch 1.5.1's Method hands a kernel its
// arguments unchecked, and the kernels read them with EValue::toInt,
// toTensor, toScalar... which abort the process (ET_CHECK) on another kind.
#pragma once

#include <cstddef>
#include <string>

#include <et_copy/failure_report.h>
#include <executorch/runtime/core/error.h>

namespace et_copy {

/**
 * Refuses a program in which a kernel call's argument is not of a kind its
 * operator takes, or a list holds an item of the wrong kind. For every
 * method, every kernel call of an operator in the table (built from the
 * operators' schemas in torch's registry: every operator ExecuTorch's
 * kernels implement, et_copy's, and the LLM custom ops; see
 * tools/gen_argument_kinds.py):
 *  - the number of arguments must be the schema's arguments (out arguments
 *    included) plus one result slot (optional for a schema with no result);
 *  - each argument's value must have a kind the schema's type allows:
 *    Tensor a Tensor, `Tensor?` a Tensor or None, `int` (and SymInt,
 *    ScalarType, Layout, MemoryFormat, Device) an Int, `float` a Double,
 *    `bool` a Bool, Scalar an Int, Double or Bool (what EValue::toScalar
 *    takes), `str` a String, `int[]` an IntList, `float[]` a DoubleList,
 *    `bool[]` a BoolList, `Tensor[]` a TensorList, `Tensor?[]` an
 *    OptionalTensorList; the result slot a Tensor for a Tensor result, a
 *    TensorList for several.
 * A call of an operator not in the table loads unchecked. For every value:
 * an IntList's items must be Ints, a TensorList's Tensors, an
 * OptionalTensorList's Tensors or None (ExecuTorch reads list items with
 * the same aborting accessors). And for every delegate whose processed
 * bytes (inline or in a segment) are an et-copy delegate record with a
 * program payload, which SimulatedDeviceBackend loads at init: the nested
 * program's indices (check_program_indices) and argument kinds, named
 * "nested program of delegate N in method 'M'" (nested at most 4 deep).
 *
 * `program` names the program in the message: "" for a program loaded on
 * its own, or e.g. "nested program of a delegate in method 'decode'".
 * `data` is the whole .pte; every read is bounds-checked and an index out
 * of range is skipped (check_program_indices reports those), so any bytes
 * are safe. Returns Error::Ok, or Error::InvalidProgram with the report's
 * detail (when a report is given) naming the method, the instruction ("chain:index"), the operator,
 * the argument (position and schema name) and the kinds expected and found,
 * for the first refusal. Threading: pure function of its arguments.
 */
ET_NODISCARD executorch::runtime::Error check_argument_kinds(const void* data, size_t size, const std::string& program,
                                                             FailureReport* report = nullptr);

/// How many operators the table holds (0 in a build made without Python
/// and torch, where no call is checked). Threading: any thread.
size_t argument_kinds_operator_count();

/// Whether operator `name` ("name.overload", e.g. "aten::add.out") is in
/// the table. Threading: any thread.
bool has_argument_kinds(const std::string& name);

} // namespace et_copy
