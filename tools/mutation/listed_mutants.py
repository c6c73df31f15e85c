"""The mutants tools/mutation/mutation.py plants, one at a time.

A mutant replaces `old` (a piece of exactly one line, found exactly once in
`file`) with `new`, and names the tests that should notice:

- "cpp:<executable>[:<gtest filter>]": a GoogleTest executable of tests/cpp;
- "py:<path>[::<test>]": pytest, against the development package.

To add one: pick a plausible slip (an edge off by one, a dropped or inverted
check, the wrong argument named, a counter left alone), add a Mutant below
with a short id prefixed by its area, list the narrowest tests that assert
the behaviour it breaks, and run `python tools/mutation/mutation.py --check` (it
applies) and `python tools/mutation/mutation.py <id>` (it is killed). If no test
kills it, write one from the rule the code implements, not from the mutant.
If the program cannot behave differently, give `equivalent` a sentence
saying why; equivalent mutants are listed and not run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    equivalent: str = ""
    # Generated mutants (tools/mutation/mutant_generator.py) carry their edits at
    # fixed offsets instead of a unique `old`, and their operator.
    edits: tuple = ()
    operator: str = ""


def M(id: str, file: str, old: str, new: str, *tests: str, equivalent: str = "") -> Mutant:
    return Mutant(id, file, old, new, tuple(tests), equivalent)


KERNEL = "runtime/src/device_copy.cpp"
SIM = "runtime/src/simulated_device_allocator.cpp"
COUNTING = "runtime/src/counting_device_allocator.cpp"
CUDA = "runtime/cuda_allocator/cuda_device_allocator.cpp"
REG = "runtime/src/registration.cpp"
CHECK = "runtime/src/program_check.cpp"
FLATBUFFER = "runtime/src/program_reader.h"
FLATBUFFER_CPP = "runtime/src/program_reader.cpp"
BYTE_RANGE = "runtime/src/byte_range.h"
D2H_FILLED = "runtime/src/d2h_filled_outputs.cpp"
TRACER = "runtime/src/instruction_tracer.cpp"
SESSIONS = "runtime/src/sessions.cpp"
READER = "python/bindings/tensor_reader.cpp"
DTENSOR = "python/bindings/device_tensor.cpp"
SPEC = "python/bindings/tensor_spec.cpp"
LAYOUT = "runtime/include/et_copy/tensor_layout.h"
COPIES = "python/bindings/copies.cpp"
PROGRAM = "python/bindings/program.cpp"
EXECUTE = "python/bindings/execute.cpp"
METHOD_IO = "python/bindings/method_io.cpp"
TENSORS = "python/et_copy/_tensors.py"
DEVICE = "python/et_copy/_device.py"

T_KERNELS = "cpp:et_copy_test_copy_kernels"
T_SIM = "cpp:et_copy_test_simulated_device_allocator"
T_CUDA = "cpp:et_copy_test_cuda_device_allocator"
T_REG = "cpp:et_copy_test_registration"
T_FOREIGN = "cpp:et_copy_test_registration_foreign"
T_CHECK = "cpp:et_copy_test_program_check"
T_TRACER = "cpp:et_copy_test_instruction_tracer"
P_REJECT = "py:tests/python/test_copy_rejections.py"
P_BOUNDARY = "py:tests/python/test_tensor_boundary.py"
P_FIELDS = "py:tests/python/test_device_tensor_fields.py"
P_RUNTIME = "py:tests/python/test_runtime_checks.py"
P_COPY = "py:tests/python/test_copy_kernels.py"
# The new, narrow tests first (pytest -x stops at the first failure), then the
# older suites of the same area, which run in full only for a survivor.
PY_BINDINGS = (P_FIELDS, P_BOUNDARY, P_REJECT)
# test_runtime.py's tests that run the programs of runtime_programs.py (exported
# once per run), not the tampered ones conftest.py exports per session.
PY_RUNTIME = (P_RUNTIME,) + tuple(
    "py:tests/python/test_runtime.py::" + t
    for t in (
        "test_a_host_tensor_where_a_device_input_is_planned_is_rejected_without_a_copy",
        "test_a_device_tensor_where_a_host_input_is_planned_is_rejected",
        "test_inputs_the_method_cannot_take_are_rejected_naming_the_input",
        "test_device_output_can_be_bound_to_a_device_tensor_of_the_callers",
        "test_device_resident_methods_chain_with_no_host_round_trip",
        "test_arithmetic_between_the_copies_equals_eager_with_one_copy_per_input_and_output",
    )
)

# fmt: off
MUTANTS: list[Mutant] = [
    # ---- the kernels: runtime/src/device_copy.cpp, op_*.cpp ------------------
    M("kernel-rank-limit-off-by-one", KERNEL, "dim > static_cast<ssize_t>(kMaxTensorDims)) {",
      "dim >= static_cast<ssize_t>(kMaxTensorDims)) {", T_KERNELS),
    M("kernel-dim-order-repeat-allowed", KERNEL, "if (d >= dim || (seen >> d) & 1u) {", "if (d >= dim) {",
      T_KERNELS),
    M("kernel-negative-size-allowed", KERNEL, "if (size < 0 || __builtin_mul_overflow(n,",
      "if (__builtin_mul_overflow(n,", T_KERNELS),
    M("kernel-empty-must-be-dense", KERNEL, "return n == 0 || (dense && strides != nullptr)",
      "return (dense && strides != nullptr)", T_KERNELS),
    M("kernel-size-one-stride-checked", KERNEL, "dense = dense && (size == 1 ||", "dense = dense && (size == 0 ||",
      T_KERNELS),
    M("kernel-expected-stride-not-advanced", KERNEL, "    expected *= static_cast<uint64_t>(size);\n",
      "    expected += static_cast<uint64_t>(size);\n", T_KERNELS),
    M("kernel-fast-path-ignores-dtype", KERNEL, "self.scalar_type() != out.scalar_type() || !valid_device_type(",
      "!valid_device_type(", T_KERNELS, P_REJECT),
    M("kernel-fast-path-ignores-out-dim-order", KERNEL, "if (d >= dim || oo[i] != d || (seen >> d) & 1u) {",
      "if (d >= dim || (seen >> d) & 1u) {", T_KERNELS, P_REJECT),
    M("kernel-fast-path-ignores-out-stride", KERNEL, "(o != 1 && !stride_is(ot[d], o_expected))",
      "(o != 1 && !stride_is(st[d], o_expected))", T_KERNELS),
    M("kernel-fast-path-size-zero-strides", KERNEL, "(s != 1 && !stride_is(st[d], s_expected))",
      "(s > 1 && !stride_is(st[d], s_expected))", T_KERNELS,
      equivalent="a size-0 dim makes the byte count 0, and the named checks accept any strides of an empty tensor "
      "(n == 0), so skipping the stride check there gives the same outcome"),
    M("kernel-fast-path-ignores-shape", KERNEL, "    same = same && s == o;\n", "    same = same && s <= o;\n",
      T_KERNELS, P_REJECT),
    M("kernel-host-side-not-checked", KERNEL, "if (host.device_type() != DeviceType::CPU) {",
      "if (host.device_type() == DeviceType::CUDA && device.device_type() == DeviceType::CPU) {", T_KERNELS,
      P_REJECT),
    M("kernel-wrong-arg-named-for-device-side", KERNEL,
      '"%s must be a device tensor, got a CPU tensor", device_arg);',
      '"%s must be a device tensor, got a CPU tensor", host_arg);', T_KERNELS, P_REJECT),
    M("kernel-dim-order-last-dim-skipped", KERNEL,
      "  for (ssize_t at = 0; at < a.dim(); ++at) {\n    if (a.dim_order()",
      "  for (ssize_t at = 0; at + 1 < a.dim(); ++at) {\n    if (a.dim_order()", T_KERNELS,
      equivalent="both dim orders were checked to be permutations of the same rank, and two permutations that agree "
      "on all but the last position agree on it too"),
    M("kernel-device-index-equal-to-count", KERNEL, "index < -1 || index >= count.get()",
      "index < -1 || index > count.get()", T_KERNELS, P_REJECT),
    M("kernel-device-index-minus-one-refused", KERNEL, "index < -1 || index >= count.get()",
      "index < 0 || index >= count.get()", T_KERNELS),
    M("kernel-null-self-data-one-byte", KERNEL, "if (nbytes > 0 && self.const_data_ptr() == nullptr) {",
      "if (nbytes > 1 && self.const_data_ptr() == nullptr) {", T_KERNELS),
    M("kernel-null-out-data-one-byte", KERNEL, "if (nbytes > 0 && out.mutable_data_ptr() == nullptr) {",
      "if (nbytes > 1 && out.mutable_data_ptr() == nullptr) {", T_KERNELS),
    M("kernel-unbound-out-treated-static", KERNEL, "out.shape_dynamism() == TensorShapeDynamism::STATIC",
      "out.shape_dynamism() != TensorShapeDynamism::DYNAMIC_BOUND", T_KERNELS),
    M("kernel-shape-not-restored", KERNEL, "if (err != Error::Ok && resize) {", "if (err != Error::Ok && !resize) {",
      T_KERNELS),
    M("kernel-shape-saved-short", KERNEL, "std::memcpy(old_sizes, out.sizes().data(), rank * sizeof(SizesType));",
      "std::memcpy(old_sizes, out.sizes().data(), rank);", T_KERNELS),
    M("kernel-boxed-accepts-long-stack", KERNEL, "if (stack.size() != 3 ||", "if (stack.size() < 3 ||", T_KERNELS),
    M("kernel-context-not-failed", KERNEL, "    ET_LOG(Error, \"%s\", diag.message);\n    ctx.fail(err);",
      "    ET_LOG(Error, \"%s\", diag.message);\n    (void)ctx;", T_KERNELS),
    M("op-h2d-boxed-wrong-direction", "runtime/src/op_h2d_copy.cpp",
      "internal::device_copy_boxed(internal::Direction::kHostToDevice",
      "internal::device_copy_boxed(internal::Direction::kDeviceToHost", T_KERNELS),
    M("op-d2h-kernel-form-wrong-direction", "runtime/src/op_d2h_copy.cpp",
      "internal::device_copy_out(internal::Direction::kDeviceToHost",
      "internal::device_copy_out(internal::Direction::kHostToDevice", T_KERNELS),
    # ---- the simulated and counting allocators --------------------------------
    M("sim-device-count-127-refused", SIM, "if (count < 1 || count > kMaxDevices) {",
      "if (count < 1 || count >= kMaxDevices) {", T_SIM),
    M("sim-index-equal-to-count", SIM, "if (index < 0 || index >= device_count_.load()) {",
      "if (index < 0 || index > device_count_.load()) {", T_SIM),
    M("sim-alignment-limit-off-by-one", SIM, "if (alignment > kMaxAlignment) {", "if (alignment >= kMaxAlignment) {",
      T_SIM),
    M("sim-padded-overflow-unchecked", SIM, "if (padded < nbytes) {", "if (padded < nbytes && padded != 0) {", T_SIM),
    M("sim-range-ignores-offset", BYTE_RANGE, "return a >= b && range_within(a - b, n, size);",
      "return a >= b && n <= size;", T_SIM),
    M("sim-range-ignores-device", SIM, "it->second.index == device && internal::bytes_within(",
      "internal::bytes_within(", T_SIM),
    # Equivalent while the allocator's lookup had its own bound (it is only asked about copies of at least one
    # byte); the bound is now byte_range.h's, whose own test holds an empty range at the end inside.
    M("sim-range-end-exclusive", BYTE_RANGE, "return at <= size && n <= size - at;",
      "return at < size && n <= size - at;", T_SIM, "cpp:et_copy_test_program_reader"),
    M("sim-zero-byte-copy-skips-index-check", SIM, "  if (device < 0) {\n    ET_LOG(Error, \"simulated device: %s",
      "  if (device < 0 && nbytes > 0) {\n    ET_LOG(Error, \"simulated device: %s", T_SIM),
    M("sim-d2d-checks-destination-twice", SIM,
      '        err = check_copy("device-to-device copy", src, dst, nbytes, index, &src_alias);',
      '        err = check_copy("device-to-device copy", dst, src, nbytes, index, &src_alias);', T_SIM),
    M("counting-failed-allocate-counted-as-allocation", COUNTING,
      "  if (!r.ok()) {\n    add(failed_calls_, 1);", "  if (!r.ok()) {\n    add(allocations_, 1);", T_SIM),
    M("counting-peak-ties", COUNTING, "while (now > peak &&", "while (now >= peak &&", T_SIM,
      equivalent="when now equals peak the compare-exchange stores the value already there and the loop ends"),
    M("counting-free-adds-bytes", COUNTING, "bytes_outstanding_.fetch_sub(r.nbytes",
      "bytes_outstanding_.fetch_add(r.nbytes", T_SIM),
    M("counting-d2h-bytes-counted-as-one", COUNTING, "add(d2h_bytes_, nbytes);", "add(d2h_bytes_, 1);", T_SIM),
    M("counting-failed-free-not-counted", COUNTING, "if (!r.known || r.error != Error::Ok) {", "if (!r.known) {",
      T_CUDA),
    # ---- the CUDA allocator, against tests/cpp/mock_cuda_runtime.cpp ------------
    M("cuda-chunk-min-off-by-one", CUDA, "config.chunk_bytes < kMinChunk ||", "config.chunk_bytes <= kMinChunk ||",
      T_CUDA),
    M("cuda-chunk-max-off-by-one", CUDA, "config.chunk_bytes > kMaxChunk) {", "config.chunk_bytes >= kMaxChunk) {",
      T_CUDA),
    M("cuda-pageable-mode-unchecked", CUDA,
      "config.pageable != PageableCopy::kDirect && config.pageable != PageableCopy::kStaged",
      "config.pageable == PageableCopy::kDirect && config.pageable == PageableCopy::kStaged", T_CUDA),
    M("cuda-staging-threshold-exclusive", CUDA, "nbytes >= config.staging_threshold;",
      "nbytes > config.staging_threshold;", T_CUDA),
    M("cuda-index-equal-to-count", CUDA, "if (device < 0 || device >= *count) {",
      "if (device < 0 || device > *count) {", T_CUDA),
    M("cuda-alignment-limit-off-by-one", CUDA, "if (alignment > kMaxAlignment) {\n    return fail(Error::NotSupported",
      "if (alignment >= kMaxAlignment) {\n    return fail(Error::NotSupported", T_CUDA),
    M("cuda-range-checks-first-byte-only", CUDA, "static_cast<const void*>(last_byte(p, nbytes))}) {\n    auto attr = "
      "attributes(q);\n    if (!attr.ok()) {\n      return attr.error();\n    }\n    if (attr->type == "
      "cudaMemoryTypeManaged", "static_cast<const void*>(last_byte(p, 1))}) {\n    auto attr = attributes(q);\n    if "
      "(!attr.ok()) {\n      return attr.error();\n    }\n    if (attr->type == cudaMemoryTypeManaged", T_CUDA),
    M("cuda-zero-byte-copy-skips-index-check", CUDA, "  auto device = resolve(self, index, what);",
      "  auto device = nbytes == 0 ? Result<int>(0) : resolve(self, index, what);", T_CUDA),
    # ---- registration ----------------------------------------------------------
    M("reg-foreign-kernel-reported-ours", REG,
      "  }\n  return Registration::kAlreadyOther;\n}\n\n} // namespace",
      "  }\n  return Registration::kAlreadyOurs;\n}\n\n} // namespace", T_FOREIGN),
    M("reg-same-allocator-reported-registered", REG, "if (current == alloc) {\n    return Registration::kAlreadyOurs;",
      "if (current == alloc) {\n    return Registration::kRegistered;", T_REG),
    M("reg-simulated-twice-is-other", REG, "if (current != nullptr && current != &sim) {",
      "if (current != nullptr) {", T_REG),
    M("reg-bad-device-count-error-dropped", REG,
      "  const Error err = sim.set_device_count(device_count);\n  if (err != Error::Ok) {\n    if (error != nullptr) {",
      "  const Error err = sim.set_device_count(device_count);\n  if (err != Error::Ok) {\n    if (error == nullptr) {",
      T_REG),
    M("reg-outcome-name-swapped", REG, 'case Registration::kAlreadyOther:\n      return "already other";',
      'case Registration::kAlreadyOther:\n      return "already et_copy";', T_REG, T_FOREIGN),
    # ---- the program check -----------------------------------------------------
    M("check-index-equal-to-count", CHECK, "if (i < 0 || i >= static_cast<int64_t>(limit)) {",
      "if (i < 0 || i > static_cast<int64_t>(limit)) {", T_CHECK),
    M("check-minus-one-everywhere", CHECK, "if (i < 0 || i >= static_cast<int64_t>(limit)) {",
      "if (i < -1 || i >= static_cast<int64_t>(limit)) {", T_CHECK),
    M("check-any-negative-is-none", CHECK, "if (!(none_allowed && v == -1)) {", "if (!(none_allowed && v < 0)) {",
      T_CHECK),
    M("check-tensor-list-allows-none", CHECK, '"list item value", type == tag::kOptionalTensorList);',
      '"list item value", type != tag::kIntList);', T_CHECK),
    M("check-jump-past-last-instruction", CHECK, "int_field(call, slot::kSecond), instructions);",
      "int_field(call, slot::kSecond), instructions + 1);", T_CHECK),
    M("check-move-destination-unchecked", CHECK,
      'index("move destination value", r.int_field(call, slot::kSecond), values);',
      'index("move destination value", r.int_field(call, slot::kFirst), values);', T_CHECK),
    M("check-delegate-against-operators", CHECK, 'index("delegate", r.int_field(call, slot::kFirst), delegates);',
      'index("delegate", r.int_field(call, slot::kFirst), ops);', T_CHECK),
    M("check-device-entry-against-entries", CHECK, "r.scalar<int32_t>(entry, slot::kBufferDeviceIdx), buffers);",
      "r.scalar<int32_t>(entry, slot::kBufferDeviceIdx), devices);", T_CHECK),
    M("check-read-at-the-end-fails", BYTE_RANGE, "return at <= size && n <= size - at;",
      "return at <= size && n < size - at;", T_CHECK),
    M("check-last-vtable-slot-ignored", FLATBUFFER_CPP, "if (failed_ || entry + 2 > vsize) {",
      "if (failed_ || entry + 2 >= vsize) {", T_CHECK),
    M("check-chain-outputs-unchecked", CHECK,
      'value_indices<int32_t>(chain, slot::kChainOutputs, "chain output value");',
      'value_indices<int32_t>(chain, slot::kChainInputs, "chain output value");', T_CHECK),
    # ---- outputs_filled_by_d2h_copy (d2h_filled_outputs.cpp) ----------------------
    M("filled-later-touch-overrides", D2H_FILLED, "if (outputs[o] == value && first[o] < 0) {",
      "if (outputs[o] == value) {", T_CHECK),
    M("filled-self-counts-as-out", D2H_FILLED, "seen(args[a], d2h && a >= 1 && args[a] == args[1]);",
      "seen(args[a], d2h && args[a] == args[1]);", T_CHECK),
    M("filled-jump-ignored", D2H_FILLED, "      return filled; // the order instructions run in",
      "      continue; // the order instructions run in", T_CHECK),
    M("filled-input-allowed", D2H_FILLED, "filled[o] = first[o] == 1 && !named(inputs) && !named(listed);",
      "filled[o] = first[o] == 1 && !named(listed);", T_CHECK),
    # ---- the bindings: DeviceTensor, its reader, dense strides, copies, program --
    M("dtensor-16-dims-too-many", DTENSOR, "if (rank > kMaxTensorDims) {", "if (rank >= kMaxTensorDims) {",
      *PY_BINDINGS),
    M("dtensor-dim-order-length-unchecked", DTENSOR, "if (ones.rank != rank || !all_fit || !dense_strides(ones)) {",
      "if (!all_fit || !dense_strides(ones)) {", *PY_BINDINGS),
    M("dtensor-shape-beyond-memory-accepted", DTENSOR, "if (l.nbytes > memory->nbytes()) {", "if (false) {",
      *PY_BINDINGS),
    M("dtensor-device-index-narrowed", DTENSOR,
      "if (type != kCuda || index < kMinDeviceIndex || index > kMaxDeviceIndex) {", "if (type != kCuda) {",
      *PY_BINDINGS),
    M("dtensor-device-type-unchecked", DTENSOR,
      "if (type != kCuda || index < kMinDeviceIndex || index > kMaxDeviceIndex) {",
      "if (index < kMinDeviceIndex || index > kMaxDeviceIndex) {", *PY_BINDINGS),
    M("dtensor-freed-buffer-accepted", DTENSOR, "if (memory->freed()) {", "if (false) {", *PY_BINDINGS),
    M("dtensor-dynamic-flag-inverted", DTENSOR, "t->spec.dynamism = dynamic ? 1 : 0;",
      "t->spec.dynamism = dynamic ? 0 : 1;", *PY_BINDINGS),
    M("dtensor-max-size-off-by-one", DTENSOR, "too_large = too_large || size > kMaxSize;",
      "too_large = too_large || size >= kMaxSize;", *PY_BINDINGS),
    M("dtensor-max-size-is-2-31", DTENSOR, "constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();",
      "constexpr int64_t kMaxSize = int64_t{1} << 31;", *PY_BINDINGS),
    M("dtensor-byte-count-signed", DTENSOR, "uint64_t nbytes = empty ? 0 : l.itemsize;",
      "int64_t nbytes = empty ? 0 : l.itemsize;", *PY_BINDINGS),
    M("dtensor-negative-size-minus-one", DTENSOR, "negative = negative || size < 0;",
      "negative = negative || size < -1;", *PY_BINDINGS),
    M("reader-freed-memory-read", READER, "return read_device_tensor(o, s) ? ReadProblem::kNone : ReadProblem::kFreed;",
      "return read_device_tensor(o, s) ? ReadProblem::kNone : ReadProblem::kNone;", *PY_BINDINGS),
    M("spec-size-zero-dim-stride", LAYOUT, "const int64_t size = sizes[d] == 0 ? 1 : static_cast<int64_t>(sizes[d]);",
      "const int64_t size = static_cast<int64_t>(sizes[d]);", *PY_BINDINGS),
    M("spec-repeated-dim-accepted", LAYOUT, "if (static_cast<uint64_t>(d) >= rank || (seen >> d & 1u) != 0) {",
      "if (static_cast<uint64_t>(d) >= rank) {", *PY_BINDINGS),
    M("spec-negative-dim-check-dropped", LAYOUT, "      if (d < 0) {", "      if (false) {", *PY_BINDINGS,
      equivalent="a negative dim cast to uint64_t is larger than any rank, so the next comparison refuses it anyway"),
    M("spec-stride-ties-reordered", SPEC, "spec.strides[order[j - 1]] < spec.strides[d]",
      "spec.strides[order[j - 1]] <= spec.strides[d]", *PY_BINDINGS),
    M("copies-dynamic-out-ignored", COPIES, 'describe_tensor(out, dynamic_out, op, "out", specs[1]);',
      'describe_tensor(out, false, op, "out", specs[1]);', *PY_BINDINGS),
    M("copies-self-named-out", COPIES, 'describe_tensor(self, false, op, "self", specs[0]);',
      'describe_tensor(self, false, op, "out", specs[0]);', *PY_BINDINGS),
    M("copies-16-dims-too-many", COPIES, "  if (rank > kMaxTensorDims) {\n    throw Failure(",
      "  if (rank >= kMaxTensorDims) {\n    throw Failure(", *PY_BINDINGS),
    M("program-output-copy-exact-capacity-refused", "runtime/src/loaded_method.cpp",
      "if (t.nbytes() > outputs[i].nbytes) {", "if (t.nbytes() >= outputs[i].nbytes) {", *PY_RUNTIME),
    # ---- et_copy.runtime's input and output checks: python/bindings/method_io.cpp -----
    M("io-input-device-index-unchecked", METHOD_IO,
      "if (spec.device_type != device_type(slot) || spec.device_index != device_index(slot)) {\n"
      "    const std::string planned",
      "if (spec.device_type != device_type(slot)) {\n    const std::string planned", *PY_RUNTIME),
    M("io-input-dtype-unchecked", METHOD_IO, "  if (spec.dtype != dtype_code(slot)) {\n    throw py::type_error(",
      "  if (false) {\n    throw py::type_error(", *PY_RUNTIME),
    M("io-freed-input-unchecked", METHOD_IO, "  if (p != ReadProblem::kNone) {\n    describe_tensor(o, false,",
      "  if (p != ReadProblem::kNone && p != ReadProblem::kFreed) {\n    describe_tensor(o, false,", *PY_RUNTIME),
    M("io-output-device-unchecked", METHOD_IO,
      "if (spec.dtype != dtype_code(slot) || spec.device_type != device_type(slot) ||\n"
      "      spec.device_index != device_index(slot)) {",
      "if (spec.dtype != dtype_code(slot) || spec.device_type != device_type(slot) ||\n      false) {", *PY_RUNTIME),
    M("io-freed-output-unchecked", METHOD_IO, "  if (read_tensor(o, true, spec) != ReadProblem::kNone) {",
      "  if (const ReadProblem q = read_tensor(o, true, spec); q != ReadProblem::kNone && q != ReadProblem::kFreed) {",
      *PY_RUNTIME),
    M("io-output-capacity-from-current-shape", METHOD_IO,
      "const int64_t* capacity = spec.has_capacity ? spec.capacity : spec.sizes;",
      "const int64_t* capacity = spec.sizes;", *PY_RUNTIME),
    M("io-output-shape-unchecked", METHOD_IO,
      "spec.rank != slot.sizes.size() || !std::equal(slot.sizes.begin(), slot.sizes.end(), capacity) ||",
      "spec.rank != slot.sizes.size() ||", *PY_RUNTIME),
    M("io-output-density-unchecked", METHOD_IO,
      "const bool is_dense = dense_strides(dense) && "
      "std::equal(spec.strides, spec.strides + spec.rank, dense.strides);",
      "const bool is_dense = true;", *PY_RUNTIME),
    M("io-too-many-inputs-accepted", EXECUTE, "if (in.size() != io.inputs.size()) {",
      "if (in.size() < io.inputs.size()) {", *PY_RUNTIME),
    M("io-outputs-count-unchecked", EXECUTE, "if (out.size() != io.outputs.size()) {",
      "if (out.size() < io.outputs.size()) {", *PY_RUNTIME),
    # ---- _tensors and _device (Python) --------------------------------------------
    M("tensors-empty-drops-dynamic", TENSORS, "dim_order, dynamic, _ALIGNMENT)", "dim_order, False, _ALIGNMENT)",
      *PY_BINDINGS),
    M("device-index-127-refused", DEVICE, "int(index) > _C.MAX_DEVICE_INDEX:", "int(index) >= _C.MAX_DEVICE_INDEX:",
      *PY_BINDINGS),
    M("tensors-quantized-permutation-not-inverted", TENSORS,
      ".permute([order.index(d) for d in range(len(order))])", ".permute(list(order))", *PY_BINDINGS),
]
# fmt: on

# --smoke (CI): Python-level mutants, so no C++ build is needed; each is
# killed by a fast test of tests/python/test_device_tensor_fields.py.
SMOKE = ("tensors-empty-drops-dynamic", "tensors-quantized-permutation-not-inverted", "device-index-127-refused")

# Why each listed mutant is written by hand: what it does that no operator of
# tools/mutation/mutant_generator.py produces. (A listed mutant an operator does
# produce needs no entry: `mutation.py --check` names its operator, and it
# stays for the narrow test it names.)
DROP = "drops one clause of a compound condition (no operator removes a clause)"
ARG = "passes a neighbouring variable of the same type (no operator swaps operands)"
ENUM = "names another enumerator (no operator swaps names)"
FALSE = "replaces a whole check with false (negate inverts it instead)"
ARITH = "changes arithmetic, not a comparison (no arithmetic operator)"
WIDER = "widens a comparison by more than a boundary step"
# fmt: off
WHY: dict[str, str] = {
    "kernel-dim-order-repeat-allowed": DROP,
    "kernel-negative-size-allowed": DROP,
    "kernel-empty-must-be-dense": DROP,
    "kernel-expected-stride-not-advanced": ARITH + ": *= for +=",
    "kernel-fast-path-ignores-dtype": DROP,
    "kernel-fast-path-ignores-out-dim-order": DROP,
    "kernel-fast-path-ignores-out-stride": ARG,
    "kernel-fast-path-size-zero-strides": "turns != 1 into > 1, not a boundary step of either operator",
    "kernel-fast-path-ignores-shape": "turns == into <=, a relation no operator maps == to",
    "kernel-host-side-not-checked": "rewrites the condition to test the other tensor's side",
    "kernel-wrong-arg-named-for-device-side": ARG + " (the message names the wrong argument)",
    "kernel-dim-order-last-dim-skipped": "shortens a loop by its bound's expression, not a literal",
    "kernel-device-index-minus-one-refused": "moves a negative literal (-1 to 0): the ±1 operator leaves signs alone",
    "kernel-unbound-out-treated-static": ENUM + " and inverts the test at once",
    "kernel-shape-not-restored": "negates one operand of &&, not the whole condition",
    "kernel-shape-saved-short": ARITH + ": drops a sizeof factor",
    "kernel-boxed-accepts-long-stack": "turns != into <, a relation no operator maps != to",
    "kernel-context-not-failed": "removes a call that reports the failure (drop-exit removes returns only)",
    "op-h2d-boxed-wrong-direction": ENUM,
    "op-d2h-kernel-form-wrong-direction": ENUM,
    "sim-padded-overflow-unchecked": "adds a clause to a condition",
    "sim-range-ignores-offset": ARITH + ": drops a subtraction",
    "sim-range-ignores-device": DROP,
    "sim-zero-byte-copy-skips-index-check": "adds a clause to a condition",
    "sim-d2d-checks-destination-twice": ARG,
    "counting-failed-allocate-counted-as-allocation": ARG + " (the wrong counter)",
    "counting-free-adds-bytes": "calls the opposite atomic (fetch_sub for fetch_add)",
    "counting-d2h-bytes-counted-as-one": "replaces a variable with a literal",
    "counting-failed-free-not-counted": DROP,
    "cuda-pageable-mode-unchecked": "flips both comparisons of one condition together",
    "cuda-range-checks-first-byte-only": "replaces a variable with a literal",
    "cuda-zero-byte-copy-skips-index-check": "short-circuits a call for a zero-byte copy",
    "reg-foreign-kernel-reported-ours": ENUM,
    "reg-same-allocator-reported-registered": ENUM,
    "reg-simulated-twice-is-other": DROP,
    "reg-outcome-name-swapped": "changes a string literal (strings are never mutated)",
    "check-minus-one-everywhere": "moves a literal at a sign (0 to -1): the ±1 operator leaves 0 - 1 alone",
    "check-any-negative-is-none": "turns == -1 into < 0, a relation and a literal at once",
    "check-tensor-list-allows-none": ENUM + " and inverts the test at once",
    "check-jump-past-last-instruction": ARITH + ": + 1 on a bound",
    "check-move-destination-unchecked": ENUM + " (reads the other field)",
    "check-delegate-against-operators": ARG + " (checks against the other table)",
    "check-device-entry-against-entries": ARG + " (checks against the other table)",
    "check-chain-outputs-unchecked": ENUM + " (reads the other field)",
    "filled-later-touch-overrides": DROP,
    "filled-self-counts-as-out": DROP,
    "filled-jump-ignored": "replaces a return with continue",
    "filled-input-allowed": DROP,
    "dtensor-dim-order-length-unchecked": DROP,
    "dtensor-shape-beyond-memory-accepted": FALSE,
    "dtensor-device-index-narrowed": DROP,
    "dtensor-device-type-unchecked": DROP,
    "dtensor-freed-buffer-accepted": FALSE,
    "dtensor-dynamic-flag-inverted": "swaps the two arms of a ?:",
    "dtensor-max-size-is-2-31": "replaces a limit by another expression",
    "dtensor-byte-count-signed": "changes a type",
    "dtensor-negative-size-minus-one": WIDER + " (< 0 to < -1)",
    "reader-freed-memory-read": ENUM,
    "spec-size-zero-dim-stride": "drops a ?: that guards size 0",
    "spec-repeated-dim-accepted": DROP,
    "spec-negative-dim-check-dropped": FALSE,
    "copies-dynamic-out-ignored": "replaces a variable with a literal",
    "copies-self-named-out": "changes a string literal (strings are never mutated)",
    "io-input-device-index-unchecked": DROP,
    "io-input-dtype-unchecked": FALSE,
    "io-freed-input-unchecked": "adds a clause to a condition",
    "io-output-device-unchecked": DROP,
    "io-freed-output-unchecked": "adds a clause to a condition",
    "io-output-capacity-from-current-shape": "drops a ?: that picks the capacity",
    "io-output-shape-unchecked": DROP,
    "io-output-density-unchecked": "replaces a computed flag with true",
    "io-too-many-inputs-accepted": "turns != into <, a relation no operator maps != to",
    "io-outputs-count-unchecked": "turns != into <, a relation no operator maps != to",
    "tensors-empty-drops-dynamic": "replaces a variable with a literal",
    "tensors-quantized-permutation-not-inverted": "drops an inversion of a permutation",
}
# fmt: on
