"""Generated mutants that cannot change what the program does.

tools/mutation/mutation.py reports a generated mutant that matches an entry here
as `equivalent` (listed with the reason, not run, not counted). An entry
names the file, the operator, the line's text as it stands (stripped, so
the entry survives lines moving) and, when that operator has several sites
on the line, which one (k of the mutant's id); and one line saying why no
input can tell the mutant from the original. A mutant that a test could
kill does not belong here: write the test.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Equivalent:
    file: str
    operator: str
    line: str
    why: str
    site: int = -1  # -1: every site of the operator on that line


# fmt: off
EQUIVALENT: list[Equivalent] = [
    Equivalent("python/et_copy/backends/aoti/_cpu_layouts.py", "int-1",
               "out = (xs * w).sum(3).sum(2)  # [blocks, m, width]: a block's slab is read once for every row of x",
               "summing the chunks' dimension first or the in-chunk one first adds the same products over K; only "
               "the order of fp32 additions (within rounding) and Inductor's loops (speed) differ", site=0),
    *(Equivalent("python/et_copy/backends/aoti/_cpu_layouts.py", operator,
                 "q = torch.randint(-8, 8, (2 * ATEN_INT4_BLOCK, 64), generator=torch.Generator().manual_seed(0), "
                 "dtype=torch.int8)",
                 "the probe's count of 64-row blocks: ATen packs every block alike, so one, two or three blocks "
                 "give the same verdict", site=2)
      for operator in ("int+1", "int-1")),
    Equivalent("python/et_copy/backends/__init__.py", "int+1", "stacklevel=2,",
               "the warning is given while et_copy.backends is being imported, so the frame it is attributed to is "
               "an import's; its text names the entry point, which is what a user reads"),
    Equivalent("python/et_copy/export/_boundary_planning.py", "negate", "if merged:",
               "recompile() only refreshes the GraphModule's Python code; memory planning and the emitter read "
               "the graph, which the merge already changed, and nothing calls the module afterwards"),
    Equivalent("python/et_copy/export/_boundary_planning.py", "logic",
               "if isinstance(out, torch.fx.Node) and not out.users:",
               "every copy here is an out-variant node whose out is an alloc node only that copy reads, so once "
               "the copy is erased both conditions hold"),
    Equivalent("python/et_copy/llm/_state.py", "int-1", "self.cumulative_length.add_(key_states.shape[-2])",
               "StatefulCausalLM sets every layer's cumulative_length from cache_position before each step (_step), "
               "and masks are sized before the layers run, so the count update() leaves behind is never read"),
    Equivalent("python/et_copy/llm/_state.py", "int+1", "self.cumulative_length.add_(key_states.shape[-2])",
               "as int-1 on this line: the count update() leaves behind is overwritten before it is read"),
    Equivalent("python/et_copy/llm/_state.py", "int-1",
               "def padded(query, key, value, g, beta, chunk_size: int = 64, **kwargs):",
               "transformers calls the rule with its default chunk size, and the chunked gated-delta rule computes "
               "the same recurrence whatever the chunk: another default moves only the zero padding and the chunk "
               "edges, so results agree up to float rounding (the reference itself fixes no summation order)"),
    Equivalent("python/et_copy/llm/_state.py", "int+1",
               "def padded(query, key, value, g, beta, chunk_size: int = 64, **kwargs):",
               "as int-1 on this line: the chunk length moves only the zero padding and the chunk edges"),
    # unsqueeze(1) for unsqueeze(0) on a one-item tensor: pick_token's settings and pick are [1] by contract.
    Equivalent("python/et_copy/llm/_sampling.py", "int+1",
               "kth = torch.gather(largest, -1, (torch.clamp(top_k, 1, k) - 1).unsqueeze(0))",
               "top_k is [1] (pick_token's contract, and every caller's), so unsqueeze(1) gives the same [1, 1] "
               "index as unsqueeze(0)", site=3),
    Equivalent("python/et_copy/llm/_sampling.py", "int+1",
               'threshold = torch.where(top_k.unsqueeze(0) > 0, kth, torch.full_like(kth, float("-inf")))',
               "top_k is [1], so unsqueeze(1) gives the same [1, 1] condition as unsqueeze(0)", site=0),
    Equivalent("python/et_copy/llm/_sampling.py", "int+1",
               "scores = logits + temperature.unsqueeze(0) * gumbel_noise(seed, position, vocab)",
               "temperature is [1], so unsqueeze(1) gives the same [1, 1] factor as unsqueeze(0)"),
    Equivalent("python/et_copy/llm/_state.py", "int+1", "self.next_token.copy_(token.unsqueeze(0))",
               "the pick is [1], so unsqueeze(1) gives the same [1, 1] token as unsqueeze(0)"),
    # Indexing the one position logits_to_keep=1 leaves: 0 and -1 are the same row.
    Equivalent("python/et_copy/llm/_state.py", "int-1", "logits = out.logits[:, -1, :]",
               "logits_to_keep=1 leaves one position, so [:, 0] and [:, -1] are the same row"),
    Equivalent("python/et_copy/llm/_check.py", "int-1",
               "expected = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]",
               "the reference's logits: logits_to_keep=0 (every position) or [:, 0] of the one position kept give "
               "the same last row, so the check compares the same values; only the reference's cost differs"),
    Equivalent("python/et_copy/llm/_check.py", "int+1",
               "expected = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]",
               "logits_to_keep=2 keeps the last two positions (one in a decode), and [:, -1] takes the same last row",
               site=0),
    # A seed drawn when the caller gives none: any seed is valid, and generate() does not say which it drew.
    Equivalent("python/et_copy/llm/_generate.py", "int+1", "seed = int(torch.randint(0, 2**62, ()))",
               "a seed from 1 rather than 0 is still a valid seed, and which one was drawn is not returned; only "
               "the distribution of drawn seeds differs, which no run can tell", site=0),
    Equivalent("python/et_copy/llm/_generate.py", "int-1", "seed = int(torch.randint(0, 2**62, ()))",
               "drawing below 2**61 rather than 2**62 still gives a new valid seed per run; which one is not "
               "returned", site=1),
    Equivalent("python/et_copy/llm/_generate.py", "int+1",
               "def _greedy(logits: torch.Tensor, position: int = 0) -> int:",
               "the greedy pick ignores the position (it takes the pick(logits, position) signature of the "
               "host sampler), so its default is never read"),
    # The example prompt length's prime search: edges the search never reaches differently.
    Equivalent("python/et_copy/llm/_export.py", "int-1", "for n in range(bound, 2, -1):",
               "also trying n = 2 (bound 2 only: every larger bound finds 3 first) finds 2 prime and returns it, "
               "which is the fallback's value", site=0),
    Equivalent("python/et_copy/llm/_export.py", "int+1", "if all(n % d for d in range(2, int(n**0.5) + 1)):",
               "one more trial divisor, int(sqrt(n)) + 1, is below n for every n >= 3 and divides no prime, and a "
               "composite already has a divisor up to its square root", site=1),
    Equivalent("runtime/src/delegate_record.cpp", "int+1", "size_t index = 0;",
               "parse_size() writes index whenever it returns true, and the device line is refused before index is "
               "read when it returns false"),
    Equivalent("runtime/src/delegate_record.cpp", "int+1", "size_t dtype = 0;",
               "parse_size() writes dtype whenever it returns true, and the tensor line is refused before dtype is "
               "read when it returns false"),
    Equivalent("runtime/src/delegate_record.cpp", "int+1", "size_t nbytes = 0;",
               "the payload line's nbytes is written by parse_size() or the line is refused; a tensor line's is "
               "written by the weight or state it names, or the record is refused before it is read"),
    Equivalent("runtime/src/device_copy.cpp", "int+1", "uint64_t out_nbytes = 0;",
               "out's byte count is written by check_tensor and never read: only self's bytes are copied"),
    Equivalent("runtime/src/device_copy.cpp", "int+1", "n = 0;",
               "unreachable: the prefix is one of two short op names, so snprintf neither fails nor fills the buffer"),
    Equivalent("runtime/src/device_copy.cpp", "rel", "for (ssize_t i = 0; i < t.dim() && used < len; ++i) {",
               "at used == len the extra snprintf gets size 0 and writes nothing; used then passes len and the "
               "loop ends as it would have", site=1),
    Equivalent("runtime/src/device_copy.cpp", "int+1", "for (ssize_t at = 0; at < a.dim(); ++at) {",
               "same_dim_order runs only after check_tensor has found both dim orders permutations of the same "
               "number of dims, and two such permutations that agree at every index but the first agree there too",
               site=0),
    Equivalent("runtime/src/device_copy.cpp", "logic",
               "if (ss == nullptr || os == nullptr || so == nullptr || oo == nullptr || st == nullptr || "
               "ot == nullptr) {",
               "differs only when exactly one of self's and out's sizes is null, and no tensor of rank >= 1 (rank 0 "
               "returned earlier) has null sizes: TensorImpl's constructor aborts on them (compute_numel's ET_CHECK)",
               site=0),
    Equivalent("runtime/src/d2h_filled_outputs.cpp", "int+1", "if (plan == 0) {",
               "with no plan of that name, reading a plan at offset 0 either fails (its vtable would lie at minus "
               "the root offset, or the root was already out of the file) or, for a root offset of 0, finds a "
               "vtable of size 0 and so no outputs: the answer is empty either way (a root offset of 2^31 or more "
               "would need a flatbuffer past the format's 2 GiB limit)"),
    Equivalent("runtime/src/sessions.cpp", "int+1", "return next.fetch_add(1);",
               "a step of 2 from 1 still gives every pool and session its own positive id (1, 3, 5, ...), and ids "
               "are only compared for equality (backends' cache keys, the runtime specs) and never counted"),
    Equivalent("runtime/src/sessions.cpp", "logic", "if (!size.ok() || !device.ok() || *size < 0) {",
               "MethodMeta refuses a negative planned size itself (memory_planned_buffer_size is then an error), and "
               "memory_planned_buffer_device fails only for an index out of range, where the size fails too: once "
               "size is ok, device is ok and *size >= 0, so both sides reduce to !size.ok()", site=1),
    Equivalent("runtime/src/sessions.cpp", "drop-exit", "return Error::NotFound;",
               "copy_in's only caller copies into the session's arena, whose device memory DeviceMemoryBuffer::create "
               "got from that device type's registered allocator (it fails without one), and an allocator is never "
               "unregistered, so the lookup cannot come back empty"),
    Equivalent("runtime/src/argument_kinds.cpp", "int+1", "size_t values_at = 0;",
               "Reader::vector() writes the elements' position on every path before anything reads it"),
    Equivalent("runtime/src/argument_kinds.cpp", "int+1", "size_t nbytes = 0;",
               "processed() writes *n whenever it returns bytes, and nbytes is read only then"),
    Equivalent("backends/simulated/src/simulated_device_backend.cpp", "rel",
               "for (size_t i = 0; i < meta->num_inputs(); ++i) {",
               "input_tensor_meta(num_inputs()) returns an error, and the loop skips an entry it cannot read"),
    Equivalent("backends/simulated/src/simulated_device_backend.cpp", "drop-exit",
               "return Error::InvalidArgument; // not from Method: it asks for the layout's size, which init matched",
               "Method calls load_data_into only after checking the tensor against get_tensor_layout, for that "
               "layout's nbytes, and init refuses a weight whose block differs from the layout in size"),
    Equivalent("runtime/src/simulated_device_allocator.cpp", "eq", "if (kind == CopyKind::kDeviceToDevice) {",
               "glibc's x86-64 memcpy is its memmove, so the overlap test (DeviceToDeviceCopyHandlesOverlap) "
               "passes either way here; only the sanitizer build's memcpy-param-overlap check tells them apart"),
    Equivalent("python/bindings/tensor_spec.cpp", "rel", "for (size_t i = 0; i < spec.rank; ++i) {",
               "i == rank writes dim_order[rank]: an unused slot below kMaxTensorDims, and at it the has_capacity "
               "flag, which read_tensor sets after reading the layout and dim_order_of never reads"),
    Equivalent("python/bindings/tensor_spec.cpp", "int-1", "for (size_t i = 1; i < spec.rank; ++i) {",
               "the insertion sort's pass for i = 0 takes order[0], moves nothing (j starts at 0) and writes it back"),
    Equivalent("python/bindings/tensor_spec.h", "int+1", "int device_index = 0;",
               "every TensorSpec that reaches a kernel, a view or a method's slot has its device set by its reader "
               "(torch_tensor.cpp, device_tensor.cpp's check_device); the rest (dense_strides, dim_order_of) never "
               "read it"),
    # A TensorSpec's defaults: each reader writes a field before anything reads it.
    Equivalent("python/bindings/tensor_spec.h", "int+1", "uintptr_t data = 0;",
               "read_torch_tensor writes data on every tensor it accepts and read_device_tensor writes the memory's "
               "address; the specs of a DeviceTensor's Layout, dense_strides, dim_order_of and the dim-order check "
               "never read data"),
    Equivalent("python/bindings/tensor_spec.h", "int+1", "int dtype = 0; ///< ExecuTorch ScalarType code",
               "read_torch_tensor and check_layout write dtype before any check reads it (a read that stops earlier "
               "is refused, its spec unread), and dense_strides, dim_order_of and the dim-order check never read it"),
    Equivalent("python/bindings/tensor_spec.h", "int+1", "size_t rank = 0;",
               "every reader writes rank before its loops (read_torch_tensor on both of its paths that go on, "
               "check_layout, the dim-order check's shape of ones, dense_strides and dim_order_of); a read that "
               "stops before is refused and its spec is not read"),
    Equivalent("python/bindings/tensor_spec.h", "int+1", "int dynamism = 0; ///< TensorShapeDynamism",
               "read_tensor writes dynamism for every torch tensor and make() for every DeviceTensor; the other "
               "specs (dense_strides, dim_order_of, the dim-order check, check_device's) never read it"),
    Equivalent("python/bindings/tensor_spec.h", "int+1", "int device_type = 0;",
               "as device_index's default: every reader sets a TensorSpec's device before anything reads it "
               "(read_torch_tensor for CPU and CUDA, refusing the rest; check_device; a DeviceTensor's spec copied "
               "whole), and dense_strides, dim_order_of and the dim-order check's shape of ones never read it"),
    # LoadArguments' defaults: both of its constructions (load_program and load_program_file's bindings)
    # give every field, from the Python arguments and their pybind defaults.
    Equivalent("python/bindings/program.cpp", "int+1",
               "int verification = 1; // 0: Minimal, 1: InternalConsistency",
               "LoadArguments is only built by aggregate initialisation with all its fields (the load and load_file "
               "bindings, from py::arg(\"verification\") = 1), so the member default is never used"),
    Equivalent("python/bindings/program.cpp", "int-1",
               "int verification = 1; // 0: Minimal, 1: InternalConsistency",
               "as int+1 on this line: every LoadArguments is built with its verification given"),
    Equivalent("python/bindings/program.cpp", "int+1", "size_t debug_buffer_size = 0;",
               "as verification's default: every LoadArguments is built with its debug_buffer_size given "
               "(py::arg(\"debug_buffer_size\") = 0)"),
    Equivalent("python/bindings/program.cpp", "int+1", "Py_ssize_t size = 0;",
               "run_load_check's program is a py::bytes (pybind11 refuses anything else before the call), so "
               "PyBytes_AsStringAndSize succeeds and writes size before anything reads it"),
    Equivalent("python/bindings/tensor_view.h", "int+1", "size_t rank_ = 0;",
               "TensorView's one constructor writes rank_ before anything reads it, or throws, and then no "
               "TensorView exists to read it (current_shape is its only reader)"),
    Equivalent("python/bindings/torch_tensor.cpp", "rel", "for (size_t i = 0; i < s.rank; ++i) {",
               "i == rank copies torch's sizes()[rank] and strides()[rank] into slots past the rank that nothing "
               "reads; at rank 16 they are strides[0], given torch's sizes()[16], which is strides()[0] (c10's "
               "SizesAndStrides keeps a large tensor's sizes then strides in one array), and dim_order[0], which "
               "dim_order_from_strides writes next; only a sanitizer sees the reads one past torch's arrays"),
    Equivalent("runtime/src/delegate_record.cpp", "rel", "if (at_ >= n_) {",
               "at at_ == n_ the memchr that follows searches 0 bytes, finds no newline and returns false as the "
               "check does"),
    Equivalent("runtime/src/device_access.cpp", "logic",
               "if (value < 0 || static_cast<uint64_t>(value) >= places.size()) {",
               "check_device_access runs check_program_indices first, which refuses any kernel or delegate argument "
               "outside the values table, so tensors_of never sees one (a negative value fails both halves alike)"),
    Equivalent("runtime/src/device_access.cpp", "rel",
               "if (value < 0 || static_cast<uint64_t>(value) >= places.size()) {",
               "value == places.size() is a kernel or delegate argument outside the values table, which "
               "check_program_indices refuses before tensors_of runs, so '>' and '>=' never meet a value that "
               "tells them apart", site=1),
    Equivalent("runtime/src/simulated_device_allocator.cpp", "rel",
               ": device_count_(device_count < 1 ? 1 : (device_count > kMaxDevices ? kMaxDevices : device_count)) {}",
               "each bound maps to itself: a count of 1 becomes 1 and kMaxDevices stays kMaxDevices whether the "
               "clamp's comparison includes the bound or not"),
    Equivalent("runtime/src/simulated_device_allocator.cpp", "int+1",
               ": device_count_(device_count < 1 ? 1 : (device_count > kMaxDevices ? kMaxDevices : device_count)) {}",
               "clamping below 2 instead of below 1 only adds the count 1, which it maps to 1 as before", site=0),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1", "kStaged = 1,",
               "the enumerators are only compared with each other and cross to Python by name ('direct', 'staged'); "
               "no integer form is stored, read or exchanged, and 2 collides with no other enumerator"),
    Equivalent("runtime/include/et_copy/counting_device_allocator.h", "int+1",
               "std::atomic<int> open_scopes_{0}; // read without the mutex on the fast path",
               "the count only lets allocate() and deallocate() skip taking the scope mutex; one too many sends them "
               "to scope_allocated/scope_freed, which find no scope (or no birth) under the mutex and return"),
    Equivalent("runtime/include/et_copy/counting_device_allocator.h", "int+1", "uint64_t next_serial_ = 0;",
               "allocation serials never leave the allocator and are only compared with each other (a scope's "
               "first serial is read from the same counter), so starting every serial one higher decides every "
               "comparison alike; the counter cannot reach 2**64 to wrap"),
    # The program reader's out-parameters and its failure paths, where the next read or the caller settles it.
    Equivalent("runtime/src/program_reader.cpp", "logic", "if (failed_ || vtable < 0) {",
               "a negative vtable position, as size_t, lies past any file, so reading its size fails the reader and "
               "field() returns 0 at the next check; a reader already failed returns 0 there too"),
    Equivalent("runtime/src/program_reader.cpp", "int+1",
               "return 0; // absent: *length untouched, as callers start it at 0",
               "string() and whole_string() start length at 0, so a string 'at' 1 of length 0 reads as the empty "
               "string an absent one gives"),
    Equivalent("runtime/src/program_reader.cpp", "int+1", "uint32_t length = 0;",
               "string_at() writes length on every path that returns a position, and the callers read it only then"),
    # Out-parameters and members written before any read: another starting value is never seen.
    Equivalent("runtime/src/program_check.cpp", "int+1", "uint32_t values = 0;",
               "plan() sets the count from the plan's values vector before anything reads it"),
    Equivalent("runtime/src/argument_kinds.cpp", "int+1", "uint32_t values = 0;",
               "plan() sets the count from the plan's values vector before lists() or a kernel call reads it"),
    Equivalent("runtime/src/delegate_record.cpp", "int+1", "size_t span = 0;",
               "span_nbytes writes it whenever it returns true, and the check and the message read it only then"),
    Equivalent("runtime/src/delegate_record.cpp", "int+1", "size_t at_end_ = 0;",
               "next_line() sets it first thing, and parse() reads it only after next_line() returned false"),
    Equivalent("runtime/src/delegate_record.cpp", "int+1", "size_t lines_read_ = 0;",
               "next_line() sets it on every line read, and parse() reads it only after the payload line was read"),
    Equivalent("runtime/src/method_kernels.cpp", "int+1",
               "size_t registry_size = 0; // the global registry only grows",
               "method_kernels() sets it to the registry's size right after making the snapshot, before any read"),
    Equivalent("runtime/src/failure_report.cpp", "int+1",
               "return std::strncmp(full, kPrefix, sizeof(kPrefix) - 1) == 0 ? full + sizeof(kPrefix) - 1 : full;",
               "every name ExecuTorch's to_string() gives starts with \"Error::\", so comparing its first 6 "
               "characters (\"Error:\") decides as comparing 7 does", site=0),
    Equivalent("runtime/src/failure_report.cpp", "int+1",
               "if (line.rfind(\"arg \", 0) != 0 || line.find(\" with type id \") == std::string::npos) {",
               "rfind(\"arg \", 1) is 0 exactly when rfind(\"arg \", 0) is: \"arg \" cannot start at both 0 and "
               "1, and a match at 1 is not 0 either way", site=0),
    Equivalent("runtime/src/argument_kinds.cpp", "rel",
               "if (base > r.size() || !internal::range_within(offset, nbytes, r.size() - base)) {",
               "base == size leaves a segment of 0 bytes at the file's end (nbytes > 0 is refused by the range "
               "check), and 0 bytes never parse as a delegate record, so the delegate is skipped either way"),
    # What a CUDA query found: each field its only maker leaves at its default is one it always writes, or one
    # the header says not to read; each buffer holds its longest text with room to spare either way.
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1",
               "int runtime_version = 0; ///< e.g. 13000 for 13.0",
               "cuda_runtime_status(), the only maker of a filled CudaRuntimeStatus, writes it from "
               "cudaRuntimeGetVersion, which the statically linked runtime answers with or without a driver"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1",
               "int driver_version = 0;  ///< 0 when no driver is installed",
               "cuda_runtime_status() writes it on every path: cudaDriverGetVersion's answer, or 0 when that fails"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1",
               "int device_count = 0;    ///< valid only when error is Ok",
               "written whenever error is Ok; otherwise the header says it is not valid, and neither use_cuda() nor "
               "the bindings' cuda_status() (None then) reads it"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1",
               "int cuda_error = 0;      ///< the cudaError_t behind `error` (0 when Ok)",
               "cuda_runtime_status() writes cudaGetDeviceCount's result into it before any return"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1",
               "char message[256] = {0}; ///< words for `error`: which of no driver, old driver, no device",
               "the longest message cuda_runtime_status() formats (a version pair or cudaGetErrorString's words in a "
               "fixed sentence) is under 200 bytes, so 257 bytes hold the same text", site=0),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int-1",
               "char message[256] = {0}; ///< words for `error`: which of no driver, old driver, no device",
               "as int+1 on this line: every message is under 200 bytes, so 255 hold it whole"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1", "char name[256] = {0};",
               "site 0: filled by snprintf from cudaDeviceProp::name, itself 256 bytes, so at most 255 characters "
               "and the NUL, which 257 bytes hold as 256 do; site 1: snprintf writes the name (and its NUL) on every "
               "path that returns properties"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1", "int major = 0; ///< compute capability",
               "cuda_device_properties() copies it from cudaDeviceProp on every path that returns properties"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1", "int minor = 0;",
               "cuda_device_properties() copies it from cudaDeviceProp on every path that returns properties"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1", "uint64_t total_memory = 0; ///< bytes",
               "cuda_device_properties() copies it from cudaDeviceProp on every path that returns properties"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int+1", "char pci_bus_id[32] = {0};",
               "site 0: a PCI bus id (domain:bus:device.function, at most \"00000000:00:00.0\") is at most 16 "
               "characters, so 33 bytes hold what 32 do; site 1: cudaDeviceGetPCIBusId fills it on every path that "
               "returns properties"),
    Equivalent("runtime/include/et_copy/cuda_device_allocator.h", "int-1", "char pci_bus_id[32] = {0};",
               "a PCI bus id is at most 16 characters and its NUL, so 31 bytes hold it whole"),
    # Thresholds no input can see: which copies release the GIL changes only how long other threads wait.
    Equivalent("python/bindings/copies.cpp", "int-1", "constexpr size_t kReleaseGilFromBytes = 64 * 1024;",
               "the size from which a copy releases the GIL: the same bytes move either way, and only timing (other "
               "Python threads running meanwhile) tells the sides apart"),
    # Every CUDA failure sets the calling thread's words first (fail/check), and they live in an array.
    Equivalent("python/bindings/cuda.cpp", "logic",
               "return (m != nullptr && m[0] != '\\0') ? std::string(m) : fallback;",
               "last_error_message() is a thread-local array, never null, and each failure a cuda.cpp call reports "
               "wrote its words there first (a device count read again on every thread included), so || takes "
               "the same words as &&"),
    # The debug buffer's slack for its 64-byte alignment: operator new already aligns to 16.
    Equivalent("python/bindings/etdump.cpp", "int-1",
               "lp.debug_storage.resize(debug_buffer_size + kDebugBufferAlignment - 1);",
               "64 bytes of slack instead of 63 only leave one byte more unused after the aligned buffer"),
    Equivalent("python/bindings/etdump.cpp", "int+1",
               "lp.debug_storage.resize(debug_buffer_size + kDebugBufferAlignment - 1);",
               "operator new aligns the storage to __STDCPP_DEFAULT_NEW_ALIGNMENT__ (16 on x86-64 and aarch64), so "
               "the padding to the next 64-byte boundary is at most 48 bytes, and 62 bytes of slack hold it as 63 do"),
    Equivalent("python/bindings/copies.cpp", "int+1", "constexpr size_t kReleaseGilFromBytes = 64 * 1024;",
               "as int-1 on this line: only timing tells which copies release the GIL"),
    Equivalent("python/bindings/copies.cpp", "rel", "if (self_view.tensor().nbytes() >= kReleaseGilFromBytes) {",
               "a copy of exactly the threshold keeping the GIL moves the same bytes; only timing tells"),
    Equivalent("python/bindings/copies.cpp", "negate", "if (self_view.tensor().nbytes() >= kReleaseGilFromBytes) {",
               "the same kernel runs on both branches; only whether other threads run meanwhile differs"),
    # snprintf scratch that must only hold its longest text: one byte more or less changes nothing.
    Equivalent("runtime/src/device_arguments.cpp", "int+1", "char where[64];",
               "holds \"%zu bytes at %p\", at most 20 + 10 + 18 characters and the NUL (49), so 65 bytes change "
               "nothing"),
    Equivalent("runtime/src/device_arguments.cpp", "int-1", "char where[64];",
               "as int+1 on this line: the longest text (49 bytes with the NUL) fits in 63 too"),
    Equivalent("python/bindings/allocators.cpp", "int+1", "char at[32];",
               "holds \"%#\" PRIxPTR, at most 18 characters and the NUL, so 33 bytes change nothing"),
    Equivalent("python/bindings/allocators.cpp", "int-1", "char at[32];",
               "as int+1 on this line: at most 19 bytes with the NUL fit in 31 too"),
    Equivalent("python/bindings/torch_tensor.cpp", "int+1", "s.data = 0;",
               "the address of a tensor with no elements and no storage: every copy or method moves 0 bytes of it, "
               "and a 0-byte copy reads no byte and asks no allocator about its range, so 1 is never dereferenced"),
    # A sentinel its one caller does not tell from its neighbours.
    Equivalent("python/bindings/torch_tensor.cpp", "int+1", "return -2;",
               "torch_dtype_code's one caller (check_layout) refuses every negative code with the same message, so "
               "-3 for a dtype argument that is not a torch.dtype changes nothing"),
    Equivalent("python/bindings/torch_tensor.cpp", "int-1", "return -2;",
               "as int+1 on this line: -3 is refused as -2 is; -1 happens to be the code of a dtype et_copy does not "
               "move, which that caller refuses with the same message"),
    # An allocation failure of a tiny tuple: only an interpreter out of memory takes the other side.
    Equivalent("python/bindings/torch_tensor.cpp", "logic", "bool ok = sizes != nullptr && strides != nullptr;",
               "PyTuple_New of at most 16 items returns null only when the interpreter is out of memory, which no "
               "input to the copy brings about; with both tuples made, && and || agree"),
    Equivalent("python/bindings/torch_tensor.cpp", "logic", "ok = a != nullptr && b != nullptr;",
               "as on the line above: PyLong_FromLongLong fails only out of memory, so both are made"),
    # TensorView re-checks what both of its spec's readers already refused (copies.cpp is its one caller):
    # read_torch_tensor refuses each such spec first, and check_layout/check_device refuse a DeviceTensor's.
    Equivalent("python/bindings/tensor_view.cpp", "drop-exit",
               "throw Failure(Error::InvalidArgument, \"tensor has \" + std::to_string(rank) + "
               "\" dims; ExecuTorch supports at most \" +",
               "no spec of more than kMaxTensorDims dims reaches TensorView: read_torch_tensor returns kTooManyDims "
               "and check_layout refuses such a shape, each with its own message, before any view is made"),
    Equivalent("python/bindings/tensor_view.cpp", "drop-exit",
               "throw Failure(Error::InvalidArgument, \"unsupported dtype code \" + std::to_string(spec.dtype));",
               "no spec of a dtype et_copy does not move reaches TensorView: read_torch_tensor returns kDtype and "
               "check_layout refuses such a dtype first, naming it"),
    Equivalent("python/bindings/tensor_view.cpp", "logic",
               "if (spec.device_type < 0 || spec.device_type > std::numeric_limits<int8_t>::max() ||",
               "a spec's device_type is 0 (a CPU tensor) or 1 (a CUDA tensor, a DeviceTensor) and its index at "
               "least kMinDeviceIndex (torch's int8 index; check_device), so the first three tests are all false "
               "and either joining of them is too"),
    Equivalent("python/bindings/tensor_view.cpp", "rel",
               "if (spec.device_type < 0 || spec.device_type > std::numeric_limits<int8_t>::max() ||",
               "a spec's device_type is 0 or 1 (read_torch_tensor, check_device), never 127: > and >= agree",
               site=1),
    Equivalent("python/bindings/tensor_view.cpp", "logic",
               "spec.device_index < kMinDeviceIndex || spec.device_index > kMaxDeviceIndex) {",
               "neither side is ever true (torch's index is int8, check_device refuses the rest), so || and && "
               "agree"),
    Equivalent("python/bindings/tensor_view.cpp", "drop-exit",
               "throw Failure(Error::InvalidArgument, \"device type or index out of range\");",
               "no spec outside CPU/CUDA and kMinDeviceIndex..kMaxDeviceIndex reaches TensorView: "
               "read_torch_tensor refuses other devices and check_device other types and indices first"),
    Equivalent("python/bindings/tensor_view.cpp", "logic", "if (initial[i] < 0 || spec.sizes[i] < 0) {",
               "no size is negative in any spec: torch's sizes are not, and check_layout refuses a negative one "
               "(a shrunk DeviceTensor's sizes come from a copy's self), so || and && agree"),
    Equivalent("python/bindings/tensor_view.cpp", "int+1",
               "for (size_t i = 0; i < rank; ++i) { // TensorImpl aborts on a negative size",
               "starting at dim 1 skips checking dim 0 for a negative size, which no spec has (see the || "
               "above): the loop only guards against a size no reader lets through"),
    # (The negative-size throw's own line is not listed: narrow()'s reachable throw has the same text.)
    Equivalent("python/et_copy/llm/_models.py", "int+1",
               "**_COMMON, **_VARIED, intermediate_size=128, moe_intermediate_size=32, "
               "shared_expert_intermediate_size=32,",
               "intermediate_size sizes only Qwen2-MoE's dense layers, and this tiny model has none: every layer is "
               "sparse (mlp_only_layers empty, decoder_sparse_step 1), so its value is never read", site=0),
    Equivalent("python/et_copy/llm/_models.py", "int-1",
               "**_COMMON, **_VARIED, intermediate_size=128, moe_intermediate_size=32, "
               "shared_expert_intermediate_size=32,",
               "intermediate_size sizes only Qwen2-MoE's dense layers, and this tiny model has none: every layer is "
               "sparse (mlp_only_layers empty, decoder_sparse_step 1), so its value is never read", site=0),
    Equivalent("python/bindings/method_meta.cpp", "int+1", "e[\"tag\"] = tag.ok() ? static_cast<int>(*tag) : -1;",
               "input_tag/output_tag of an index below the method's count fails only for a value index past the "
               "values, which check_program_indices refused when the program loaded"),
    Equivalent("python/bindings/method_meta.cpp", "int-1", "e[\"tag\"] = tag.ok() ? static_cast<int>(*tag) : -1;",
               "input_tag/output_tag of an index below the method's count fails only for a value index past the "
               "values, which check_program_indices refused when the program loaded"),
    Equivalent("runtime/src/counting_device_allocator.cpp", "rel",
               "if (open_scopes_.load(std::memory_order_acquire) > 0) {",
               "allocate's and deallocate's check (two lines): with no scope open, scope_allocated returns on an "
               "empty scopes_, and scope_freed finds nothing, since born_ was cleared when the last scope closed; "
               "the check only spares the lock"),
    Equivalent("runtime/src/argument_kinds.cpp", "int-1",
               "for (uint8_t tag = 1; tag <= kOptionalTensorList; ++tag) {",
               "tag 0 is no KernelTypes value: gen_argument_kinds.py sets only bits 1 to 11 (ANY, 0xffff, is "
               "skipped before a refusal), so starting at 0 adds no name"),
    Equivalent("python/bindings/tensor_view.cpp", "rel",
               "\"negative size \" + std::to_string(initial[i] < 0 ? initial[i] : spec.sizes[i]));",
               "the message of a negative size, which no spec has (see the throw above)"),
    Equivalent("python/bindings/tensor_view.cpp", "int+1",
               "\"negative size \" + std::to_string(initial[i] < 0 ? initial[i] : spec.sizes[i]));",
               "the message of a negative size, which no spec has (see the throw above)"),
    # c10::ScalarType is an int8_t enum whose values run from 0 (Byte) up: static_cast<int> is never negative.
    Equivalent("python/bindings/torch_tensor.cpp", "int-1",
               "return code >= 0 && code <= static_cast<int>(c10::ScalarType::UInt64) ? code : -1;",
               "code is static_cast<int> of a c10::ScalarType, never negative (Byte is 0), so >= 0 and >= -1 "
               "agree", site=0),
    Equivalent("python/bindings/device_tensor.cpp", "drop-exit",
               "throw py::error_already_set(); // MemoryError: exact ints of at most 31 bits, at most 16 of them",
               "the byte count's exact product: int_tuple's items are exact ints (PyNumber_Index), each checked "
               "to fit int32 and at most kMaxTensorDims of them, times the itemsize; multiplying such ints "
               "fails only when Python is out of memory, which no test can arrange"),
    # The bindings' C-API calls that fail only when Python is out of memory. No input gets there, and an
    # allocation failure injected with _testcapi.set_nomemory is no way in either: pybind11 itself
    # dereferences a failed tp_alloc when it makes a class instance (seen: a segfault on the first failed
    # allocation of _C.DeviceBuffer(...)).
    Equivalent("python/bindings/module.cpp", "drop-exit",
               "throw py::error_already_set(); // MemoryError at import: the name is a dotted constant",
               "PyErr_NewExceptionWithDoc fails for a name without a dot, and \"et_copy.EtCopyError\" has one, or "
               "out of memory while et_copy._C is imported"),
    Equivalent("python/bindings/module.cpp", "drop-exit", "throw py::error_already_set(); // MemoryError at import",
               "PyDescr_NewMethod of a fixed PyMethodDef fails only out of memory while et_copy._C is imported"),
    Equivalent("python/bindings/module.cpp", "drop-exit",
               "throw py::error_already_set(); // MemoryError: \"replace\" decodes any bytes",
               "PyUnicode_DecodeUTF8 with errors=\"replace\" turns every byte sequence into text, so it fails only "
               "out of memory"),
    Equivalent("python/bindings/copies.cpp", "drop-exit", "throw py::error_already_set(); // MemoryError at import",
               "PyCFunction_NewEx of a static PyMethodDef fails only out of memory while et_copy._C is imported"),
    Equivalent("python/bindings/device_tensor.cpp", "drop-exit", "throw py::error_already_set(); // MemoryError",
               "tp_alloc of a fixed-size DeviceTensor (or a subclass of it) fails only out of memory"),
    Equivalent("python/bindings/device_tensor.cpp", "drop-exit",
               "throw py::error_already_set(); // MemoryError at import",
               "PyType_FromSpec of the static DeviceTensor spec fails only out of memory while et_copy._C is "
               "imported"),
    Equivalent("python/bindings/cuda.cpp", "drop-exit", "throw py::error_already_set(); // MemoryError",
               "PyCapsule_New with a non-null pointer and a constant name fails only out of memory"),
    Equivalent("python/bindings/program.cpp", "drop-exit",
               "throw py::error_already_set(); // never: pybind11 passes only bytes objects",
               "run_load_check takes py::bytes, whose caster admits only PyBytes_Check objects, and "
               "PyBytes_AsStringAndSize with a size pointer fails only for a non-bytes object"),
    # ETDump's set_debug_buffer fails only for BufferDataSink::create's alignment check (a power of two), and
    # it passes the default alignment of 64.
    Equivalent("python/bindings/etdump.cpp", "drop-exit",
               "throw Failure(set.error(), \"et_copy.runtime: enable_etdump: ETDump refused the debug buffer of \" +",
               "ETDumpGen::set_debug_buffer fails only when BufferDataSink::create is given an alignment that is "
               "not a power of two, and it always passes the default 64"),
    # DeviceBuffer's member defaults: each is written before it is read. The allocating constructor sets
    # index_; a slice sets offset_ and nbytes_ and reads its root's index; a root reads neither offset_ nor
    # nbytes_ (ptr() and nbytes() take its buffer's).
    Equivalent("python/bindings/device_buffer.h", "int+1", "int index_ = 0;",
               "the allocating constructor sets index_, and a slice's device_index() is its root's, so the default "
               "is never read"),
    Equivalent("python/bindings/device_buffer.h", "int+1", "size_t offset_ = 0;",
               "read only through a slice (parent_ set), whose constructor sets it; a root's ptr() is its buffer's"),
    Equivalent("python/bindings/device_buffer.h", "int+1", "size_t nbytes_ = 0;",
               "read only through a slice (parent_ set), whose constructor sets it; a root's nbytes() is its "
               "buffer's size"),
    Equivalent("python/bindings/device_tensor.cpp", "int+1", "{nullptr, 0, 0, 0, nullptr},",
               "the PyMemberDef list's sentinel: CPython stops at the entry whose name is null and reads none of its "
               "other fields"),
    # device_tensor.cpp's defaults that are written before any read.
    Equivalent("python/bindings/device_tensor.cpp", "int+1", "size_t itemsize = 0;",
               "check_layout, the one maker of a Layout, sets itemsize before it reads it or returns"),
    Equivalent("python/bindings/device_tensor.cpp", "int+1", "uint64_t nbytes = 0;",
               "check_layout, the one maker of a Layout, sets nbytes before it returns, and nothing reads it sooner"),
    Equivalent("python/bindings/device_tensor.cpp", "int+1", "int overflow = 0;",
               "PyLong_AsLongLongAndOverflow sets *overflow to 0 before anything else, on every path"),
    Equivalent("python/bindings/device_tensor.cpp", "int+1", "Py_ssize_t alignment = 0;",
               "a required argument (\"OOOOOn\"): PyArg_ParseTupleAndKeywords writes it or the call returns first"),
    Equivalent("python/bindings/device_tensor.cpp", "int+1", "{nullptr, nullptr, 0, nullptr},",
               "the PyMethodDef list's sentinel: CPython stops at the entry whose name is null and reads none of its "
               "other fields"),
    Equivalent("python/bindings/tensor_view.cpp", "eq", "if (*c == code) {",
               "movable()'s one caller is TensorView's dtype check, which no unmovable spec reaches (see its "
               "drop-exit above): the original returns true for every code it is given, and != returns true too, "
               "at the first of the several movable codes that differs"),
    Equivalent("python/bindings/allocators.cpp", "int+1", "const int devices = count.ok() ? *count : 0;",
               "the simulated allocator counts its devices without asking anything (count_devices never fails), "
               "so the fallback after : is never taken"),
    Equivalent("python/bindings/program.cpp", "rel", "for (size_t i = 0; i < lp.program().num_methods(); ++i) {",
               "one index past the last: Program::get_method_name refuses an index >= num_methods() with an "
               "Error, which the loop skips, so the list is the same"),
    Equivalent("python/bindings/tensor_view.cpp", "drop-exit",
               "throw Failure(Error::InvalidArgument, // the readers refuse a negative size first",
               "no spec with a negative size or capacity reaches TensorView: torch sizes are never negative, "
               "DeviceTensor's constructor refuses them ('has a negative size') and takes its capacity from "
               "them, and a method output's shape is ExecuTorch's, never negative"),
    Equivalent("python/bindings/loops.cpp", "rel",
               "for (int64_t i = 0; i < n; ++i) { // the same bytes to the same place: only the time tells a copy more",
               "the memcpy kind's loop: one copy more of the same bytes to the same place leaves the device "
               "buffer as it was and returns the same count of timings; nothing counts a plain memcpy"),
    Equivalent("runtime/src/device_copy.cpp", "int+1",
               "return stride >= 0 && static_cast<uint64_t>(stride) == expected;",
               "stride >= 1 differs only for a stride of 0 equal to an expected 0, which needs a size-0 dim "
               "walked before it: the byte count is then 0, tensor_problem accepts an empty tensor whatever its "
               "strides, and common_case refusing it only sends it to the named checks, which decide the same"),
    Equivalent("runtime/src/simulated_device_allocator.cpp", "logic", "if (device < 0 || ptr == nullptr) {",
               "&& lets a missing device or a null pointer on to find(), which refuses both: no live allocation "
               "is on device -2, and none starts at or below address 0; the check only spares taking the lock"),
    Equivalent("python/bindings/method_meta.cpp", "drop-exit", 'throw Failure(r.error(), "cannot read " + what);',
               "read_in_range's callers ask only for planned buffers below num_memory_planned_buffers(), and "
               "MethodMeta's buffer size and device reads fail only past it, so the throw is never reached"),
    Equivalent("python/bindings/cuda.cpp", "int+1",
               "return (m != nullptr && m[0] != '\\0') ? std::string(m) : fallback;",
               "the allocator's message is a zeroed thread_local buffer that only snprintf ever writes, never "
               "cleared and never one character long (each starts 'cuda:'): m[0] and m[1] are NUL together or "
               "not at all"),
    Equivalent("python/et_copy/runtime.py", "int+1", "@functools.lru_cache(maxsize=1)",
               "Runtime.get() takes no arguments, so its cache only ever holds one key: a larger maxsize keeps "
               "the same single Runtime"),
    Equivalent("runtime/src/sha256.cpp", "int+1",
               "__m128i w[4]; // the schedule's last 16 words, four to a register: W[4g..4g+3] in w[g % 4]",
               "a fifth register nobody indexes: every index is masked with & 3"),
    Equivalent("runtime/src/sha256.cpp", "int+1", "unsigned a = 0, b = 0, c = 0, d = 0;",
               "cpuid's outputs: __get_cpuid(_count) writes all four before any is read, and when it fails "
               "(an unsupported leaf) the && stops before reading them"),
    Equivalent("runtime/src/sessions.cpp", "int+1", "executorch::runtime::BackendOptions<2> core;",
               "a capacity of 3 where the session sets two options (its pool and its own id): the view holds the "
               "same two"),
    # method_meta_dict's device_of: a program that loaded passed check_device_access, whose bounds-checked
    # reader already read every plan's inputs, outputs and values (check_program_indices, read_places); so
    # method_io_devices, reading the same bytes with the same reader, cannot fail, and its lists hold one
    # device per input, output and attribute (MethodMeta::num_attributes' rule): i < list.size() always holds.
    Equivalent("python/bindings/method_meta.cpp", "rel",
               "return i < list.size() ? list[i] : et::Device(et::DeviceType::CPU, 0);",
               "i <= size differs only at i == size, and every caller's i is below a count equal to the list's "
               "size for any program that loaded (see above), so the CPU fallback is never taken either way"),
    Equivalent("python/bindings/method_meta.cpp", "int+1",
               "return i < list.size() ? list[i] : et::Device(et::DeviceType::CPU, 0);",
               "the fallback's index: never taken, since i is below the list's size for any program that loaded"),
    Equivalent("python/bindings/method_meta.cpp", "rel", "for (size_t i = 0; i < meta.num_attributes(); ++i) {",
               "one index past the last: MethodMeta::attribute_tensor_meta refuses an index >= num_attributes() "
               "with an Error, which the loop skips (as method_names' loop), so the list is the same"),
    Equivalent("python/bindings/program.cpp", "rel",
               "for (size_t i = 0; i < executorch::runtime::get_num_registered_backends(); ++i) {",
               "one index past the last: get_backend_name refuses an index >= get_num_registered_backends() with "
               "an Error, which the loop skips, so backend_names() is the same list"),
    Equivalent("python/bindings/device_tensor.cpp", "int+1",
               "t->spec.dynamism = dynamic ? 1 : 0; // DYNAMIC_BOUND : STATIC",
               "2 is DYNAMIC_UNBOUND, which ExecuTorch's TensorImpl resizes exactly as DYNAMIC_BOUND (unbounded "
               "resizing is not supported: both are bounded by the tensor's capacity), and et-copy's kernels and "
               "is_dynamic ask only whether a tensor is STATIC", site=0),
]
# fmt: on


def reason(file: str, operator: str, line_text: str, site: int) -> str:
    """Why the mutant is equivalent, or "" when it is not listed."""
    for e in EQUIVALENT:
        if e.file == file and e.operator == operator and e.line == line_text.strip() and e.site in (-1, site):
            return e.why
    return ""
