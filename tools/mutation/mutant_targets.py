"""Which tests a generated mutant of each file runs (tools/mutation/mutant_generator.py).

A hand-written mutant names its own tests (tools/mutation/listed_mutants.py); a generated
one takes its file's row here: the first pattern (fnmatch) that matches.
List the narrowest suites that assert what the file does, fastest first
(pytest runs with -x, so a killed mutant stops at the first failure; only a
survivor runs them all). A file in the scope with no row is reported, not
mutated.
"""

from __future__ import annotations

from fnmatch import fnmatch

from listed_mutants import (
    P_BOUNDARY,
    P_COPY,
    P_FIELDS,
    PY_BINDINGS,
    PY_RUNTIME,
    T_CHECK,
    T_CUDA,
    T_FOREIGN,
    T_KERNELS,
    T_REG,
    T_SIM,
    T_TRACER,
)

T_BACKEND = "cpp:et_copy_test_simulated_device_backend"
# Beside another library's CUDA allocator, registered first (docs/cuda.md, "Beside upstream's CUDA backend").
T_FOREIGN_CUDA = "cpp:et_copy_test_foreign_cuda"
P_FOREIGN_CUDA = "py:tests/python/test_foreign_cuda.py"
T_KINDS = "cpp:et_copy_test_argument_kinds"
P_LLM_UNTRUSTED = "py:tests/python/llm/test_llm_untrusted.py"
T_DELEGATE = "cpp:et_copy_test_delegate_record"
T_REFERENCE = "cpp:et_copy_test_reference_backend"
# What linking et_copy_aoti gives before registration: its payload kind and its refusal hint.
T_AOTI_LIBRARY = "cpp:et_copy_test_aoti_library"
T_LAYOUT = "cpp:et_copy_test_tensor_layout"
T_ODD = "cpp:et_copy_test_odd_sizes"
T_METHOD_KERNELS = "cpp:et_copy_test_method_kernels"
T_RECORD = "cpp:et_copy_test_program_record"
T_THREADS = "cpp:et_copy_test_threads"
P_API = "py:tests/python/test_runtime_api.py"
# A debug buffer too small for a run: refused after it, exactly large enough: run and written.
P_DEBUG_BUFFER = P_API + "::test_a_debug_buffer_too_small_for_an_execution_is_refused_not_an_abort"
# A program whose weights are in a .ptd file, loaded through data_path and run.
P_PTD = P_API + "::test_weights_in_a_ptd_file_are_read_through_data_path"
# A method's metadata read unloaded: a device input, a constant method's output that is no tensor.
P_META = "py:tests/python/test_runtime.py::test_a_programs_metadata_places_device_inputs_and_outputs_on_the_device"
P_LAYOUTS = "py:tests/python/test_runtime_input_layouts.py"
P_LAYOUTS_1_0 = P_LAYOUTS + "::test_a_method_planned_in_dim_order_1_0_takes_that_layout_and_refuses_a_contiguous_one"
P_MEMORY = "py:tests/python/test_device_memory.py"
P_NOTHING_REGISTERED = "py:tests/python/test_nothing_registered.py"  # a fresh process, before any registration
P_SCALARS = "py:tests/python/test_runtime_scalar_inputs.py"
P_ADDRESS_SPACE = "py:tests/python/test_address_space_refused.py"
P_REGISTRY_OURS = (
    "py:tests/python/test_registration.py::"
    "test_run_registered_dispatches_et_copys_own_kernels_when_the_registry_holds_them"
)
P_SAMPLING = "py:tests/python/llm/test_sampling.py"
P_THREADS = "py:tests/backends/aoti/test_aoti_threads.py"  # runtime.load's threads, through the bindings and sessions
P_LLM_PTD = "py:tests/python/llm/test_llm_ptd.py"  # export.save, the .ptd route and generate --program/--data
# Compiled code and weights checked before use (issue 47): a compiled program's payload, swapped or flipped,
# refused before it loads; a flipped weight refused under verify_data; the load flags' types.
P_AOTI_TRUST = "py:tests/backends/aoti/test_aoti_trust.py"
P_VERIFY_WEIGHT = P_AOTI_TRUST + "::test_a_flipped_weight_byte_is_refused_under_verification_and_not_without"
P_LOAD_FLAGS = P_AOTI_TRUST + "::test_the_load_flags_are_bools"
# 60 mutants of a compiled program's record lines, payload and weights, each in a forked child (~3 s after a
# ~15 s export, less with the compile cache warm).
P_AOTI_UNTRUSTED = "py:tests/backends/aoti/test_aoti_untrusted.py"
# Compiled programs written by hand, run through et_copy.runtime on the simulated device.
P_AOTI_RUNTIME = "py:tests/backends/aoti/test_aoti_runtime.py"
P_CPU_LAYOUTS = ("py:tests/backends/aoti/test_cpu_layouts.py",)
P_QUANTIZED = tuple(
    "py:tests/backends/aoti/test_quantized_weights.py::" + name
    for name in (
        "test_each_scheme_multiplies_its_stored_bytes_and_equals_torchao",
        "test_a_biased_linear_keeps_its_bias",
        "test_int4_is_stored_two_values_a_byte_with_k_split_in_halves",
        "test_an_odd_count_of_int4_groups_or_an_odd_k_is_stored_a_byte_each",
        "test_a_float_model_is_handed_to_inductor_as_it_came",
        "test_a_long_reduction_is_summed_in_chunks_that_add_to_the_same",
        "test_a_weight_quantized_along_the_wrong_axis_is_refused_naming_it",
        "test_a_quantized_embedding_dequantizes_only_the_rows_it_gathers",
        "test_the_simulated_backend_runs_quantized_weights_with_portable_kernels",
        "test_the_simulated_backend_refuses_atens_packed_int4_naming_the_op_and_the_backend_that_runs_it",
    )
)
P_LLM_EXPERTS = tuple(
    "py:tests/python/llm/test_llm_experts.py::" + name
    for name in (
        "test_the_grouped_forward_equals_transformers_experts_for_every_moe_class",
        "test_experts_whose_rows_are_not_16_byte_multiples_run_batched_mm",
        "test_each_backend_exports_its_own_experts_implementation",
        "test_the_configs_are_restored_after_an_export_that_fails",
        "test_grouped_mm_traces_in_float32_and_float16_on_the_cpu",
        "test_a_static_program_with_a_grouped_mm_passes_to_edge",
    )
)
P_LLM_GGUF = tuple(
    "py:tests/python/llm/test_gguf.py::" + name
    for name in (
        "test_the_weights_are_the_files_integers_and_scales_bit_for_bit",
        "test_the_llama_q_and_k_rows_are_put_back_in_transformers_order",
        "test_logits_and_greedy_tokens_equal_transformers_dequantized_run",
        "test_a_tied_embedding_stays_tied_and_quantized",
        "test_float_tensors_load_as_float32",
        "test_another_tensor_type_is_refused_by_name_or_dequantized_on_request",
        "test_a_truncated_file_is_refused_naming_the_tensor_cut",
        "test_an_unknown_tensor_type_is_refused_by_name",
        "test_metadata_that_disagrees_with_a_tensor_is_refused_by_name",
        "test_the_export_cache_key_covers_the_files_integers",
        "test_the_command_takes_a_gguf_checkpoint_and_its_own_vocabulary",
        "test_the_command_refuses_a_file_load_gguf_refuses_and_dequantize_without_one",
        "test_moe_experts_load_in_float_and_in_the_files_own_bits_and_q4_1_ones_are_refused_or_dequantized",
        "test_experts_kept_in_their_bits_only_where_transformers_lays_them_out_as_a_gguf_does",
    )
)
P_LLM_QUANTIZE = tuple(
    "py:tests/python/llm/test_llm_quantized.py::" + name
    for name in (
        "test_quantize_leaves_the_callers_model_as_it_was_and_covers_linears_and_embeddings",
        "test_quantize_refuses_a_scheme_or_group_it_does_not_know_naming_the_argument",
        "test_a_quantized_llm_on_the_simulated_backend_gives_the_quantized_models_tokens",
    )
)
P_LLM_QUANTIZED_EXPERTS = tuple(
    "py:tests/python/llm/test_llm_quantized_experts.py::" + name
    for name in (
        "test_quantize_stores_every_experts_weight_and_leaves_the_callers_model_as_it_was",
        "test_the_stored_experts_hold_torchaos_values_within_a_step_of_the_float_weights",
        "test_a_quantized_model_deep_copies_and_requantizing_keeps_its_bits",
        "test_the_export_forwards_read_the_stored_experts_as_transformers_reads_them_dequantized",
        "test_a_prompts_experts_are_multiplied_a_slice_at_a_time_each_row_once",
        "test_the_portable_nibbles_equal_the_masked_ones",
        "test_experts_stored_in_groups_of_32_as_gguf_blocks_read_as_transformers_reads_them",
    )
)
P_CONSTANT_READS = tuple(
    "py:tests/backends/aoti/test_aoti_export.py::" + name
    for name in (
        "test_copies_returned_by_the_graph_become_a_view_and_a_clone",
        "test_the_graph_handed_to_inductor_reads_every_weight_in_place",
        "test_a_view_of_a_mutated_buffer_or_a_returned_view_is_still_a_fresh_tensor",
        "test_the_code_check_finds_each_kernel_that_copies_a_weight",
    )
)
P_ROUTES = "py:tests/python/test_export_routes.py"
P_EXPORT = "py:tests/python/test_export.py"
P_BACKEND_EXPORT = "py:tests/backends/simulated/test_backend_export.py"
P_STATE_EXPORT = "py:tests/python/test_state_export.py"
P_LLM = "py:tests/python/llm/test_llm.py"
# No export: tiny models, the wrapper run eagerly, checks made before exporting (~1 min).
P_LLM_UNITS = "py:tests/python/llm/test_llm_units.py"
# What llm/'s constants drive (known noise, the check's plan edges, tiny models' settings, imports; ~1 min).
P_LLM_CONSTANTS = "py:tests/python/llm/test_llm_constants.py"
# The check's rules edge by edge (tolerance, layer named, capture, chunked feed; ~30 s).
P_LLM_CHECK = "py:tests/python/llm/test_llm_check.py"
# The wrapper's state eagerly (layout, reset, sampling settings, HostStateStep, prefill padding; ~30 s).
P_LLM_STATE = "py:tests/python/llm/test_llm_state.py"
# Session's and DeviceLLM's rules on an eager stand-in for the runtime (chunks, bounds, settings, eos; ~40 s).
P_LLM_SESSION = "py:tests/python/llm/test_llm_session.py"
# What export_llm asks of et_copy.export per setting, the export stubbed out (~20 s).
P_LLM_EXPORT_ARGS = "py:tests/python/llm/test_llm_export_args.py"
# The program cache's key and reuse, export_llm stubbed (~30 s).
P_LLM_CACHE = "py:tests/python/llm/test_llm_cache.py"
# What importing et_copy.llm loads (a TYPE_CHECKING import made at run time shows here).
P_LLM_IMPORT = P_LLM_CONSTANTS + "::test_importing_et_copy_llm_loads_no_transformers_model_code"
P_LLM_EAGER = tuple(
    P_LLM + "::" + t
    for t in (
        "test_tiny_model_rejects_an_unknown_architecture_and_leaves_the_rng_alone",
        "test_export_llm_refuses_a_model_its_wrapper_computes_differently_naming_the_layer",
        "test_a_cache_layer_kind_with_no_static_form_is_refused_by_name",
        "test_the_wrapper_run_eagerly_gives_transformers_tokens_within_and_past_the_sliding_window",
    )
)
P_LLM_COVERS = (
    "py:tests/python/llm/test_llm_breadth.py::"
    "test_the_expectations_cover_every_tiny_architecture_and_what_the_issue_asks_for"
)
P_LLM_NOT_LLM = P_LLM + "::test_a_program_without_prefill_and_decode_is_refused"
# load_model: a checkpoint folder read, a config file built from seed 0 (~10 s).
P_LLM_LOAD = P_LLM_UNITS + "::test_load_model_reads_a_checkpoint_folder_and_builds_a_config_file_from_seed_0"
P_LLM_CACHE_DIR = P_LLM + "::test_the_program_cache_lives_under_xdg_cache_home_or_the_home_cache"
P_LLM_CACHED = P_LLM + "::test_export_llm_cached_reuses_a_program_only_for_the_same_model_weights_and_settings"
P_LLM_CLI_ARCHS = P_LLM + "::test_the_command_offers_every_tiny_architecture"
P_LLM_CLI = P_LLM + "::test_generate_command_prints_device_state_beside_host_state_and_eager_all_equal"
# One exported program (tests/python/helpers/llm_programs.py memoizes it across these):
# the dense qwen3 returning logits, run through every session rule test_llm.py checks.
P_LLM_QWEN3 = tuple(
    P_LLM + "::" + t + "[qwen3-host]"
    for t in (
        "test_tokens_equal_transformers_generate_and_decode_moves_only_the_pick",
        "test_state_starts_through_one_counted_h2d_copy_and_a_session_costs_its_state",
        "test_interleaved_sessions_each_equal_their_own_eager_run",
        "test_reset_reproduces_the_first_run_and_is_counted",
        "test_sampling_is_seeded_and_equals_the_eager_sampler_and_a_device_pick_costs_its_8_bytes",
        "test_bad_sampling_settings_are_refused_before_anything_runs",
        "test_a_sequence_longer_than_the_program_holds_is_refused_before_running",
        "test_the_weights_reach_the_device_once_when_the_program_loads_and_every_method_and_session_shares_them",
    )
)

# fmt: off
FILE_TESTS: list[tuple[str, tuple[str, ...]]] = [
    # ---- runtime/: GoogleTest executables ------------------------------------------
    # test_allocator_words: a failed copy's diagnostic with an allocator's own words, or none.
    ("runtime/src/device_copy.*", (T_KERNELS, "cpp:et_copy_test_allocator_words")),
    ("runtime/src/op_*.cpp", (T_KERNELS,)),
    ("runtime/include/et_copy/copy_ops.h", (T_KERNELS,)),
    # test_odd_sizes: each size and alignment computation against odd sizes, and the device count's caching.
    # test_address_space_refused: the reservation refused (RLIMIT_AS), each allocation failing clearly.
    ("runtime/*/simulated_device_allocator.*", (T_ODD, T_SIM, T_THREADS, P_ADDRESS_SPACE)),
    # allocator_name / allocator_words: another library's allocator named "foreign" (test_foreign_cuda).
    ("runtime/*/counting_device_allocator.*", (T_ODD, T_SIM, T_CUDA, T_FOREIGN_CUDA)),
    ("runtime/include/et_copy/cuda_device_allocator.h", (T_CUDA, T_FOREIGN_CUDA)),
    # The caller's stream setting: its gtest (threads, devices, the guard) and the copies that read it,
    # then Python's use_stream over it.
    ("runtime/*/cuda_stream.*", (T_CUDA, "py:tests/python/test_cuda.py")),
    ("runtime/*/registration.*", (T_REG, T_FOREIGN)),
    ("runtime/src/registry_lock.h", (T_REG, T_FOREIGN)),
    ("runtime/src/method_kernels.cpp", (T_METHOD_KERNELS,)),
    # The load checks, one file per job; program_check.h declares them all.
    ("runtime/*/program_check.*", (T_CHECK,)),
    # The reader's own gtest (each bound on bytes), then the checks and the backend that read through it.
    ("runtime/src/program_reader.*", ("cpp:et_copy_test_program_reader", T_CHECK, T_KINDS, T_BACKEND)),
    ("runtime/src/instruction_operator.cpp", (T_CHECK, T_TRACER)),
    # The backends a program's delegates name: its gtest (real programs, edge cases, cut bytes).
    ("runtime/src/delegate_backend_ids.cpp", (T_CHECK,)),
    ("runtime/src/d2h_filled_outputs.cpp", (T_CHECK, "cpp:et_copy_test_loaded_method")),
    ("runtime/src/device_access.cpp", (T_CHECK,)),
    # The kernel-argument kinds: their gtest, the backend's nested check, then the LLM's records tampered.
    ("runtime/*/argument_kinds*", (T_KINDS, T_BACKEND, P_LLM_UNTRUSTED)),
    ("tools/gen_argument_kinds.py", (T_KINDS, P_LLM_UNTRUSTED)),
    ("runtime/*/program_record.*", (T_RECORD, T_BACKEND)),
    ("runtime/*/instruction_tracer.*", (T_TRACER, P_DEBUG_BUFFER)),
    ("runtime/*/tensor_layout.*", (T_LAYOUT, T_KERNELS)),
    # Its constants are checked against ExecuTorch's at compile time, and pinned through _C; the device
    # backends' two limits (not in _C) by the device-backend gtest, which fills an options map and the table.
    ("runtime/include/et_copy/limits.h",
     (T_SIM, "py:tests/python/test_limits.py", P_FIELDS, "cpp:et_copy_test_device_backend")),
    # The digest line's parse: the gtest, then a compiled program's record lines mutated.
    ("runtime/*/delegate_record.*", (T_DELEGATE, T_BACKEND, T_REFERENCE, P_AOTI_UNTRUSTED)),
    # A backend's load options, opaque to the core: the device-backend gtest (keys, count, what is refused), then
    # the compiled backend's thread count given as its own option and as the convenience.
    ("runtime/*/backend_options.*", ("cpp:et_copy_test_device_backend", P_THREADS)),
    # Each payload kind's own lines: the record's gtest, a third kind registered by the reference backend.
    ("runtime/src/payload_kinds.*", (T_DELEGATE, T_REFERENCE, P_AOTI_UNTRUSTED)),
    # The frame every backend runs in: the simulated backend's gtest, the reference backend's (the only
    # one reaching target_device, a missing handle, the argument count), then the compiled backend's.
    ("runtime/*/backend_frame.*", (
        T_BACKEND, T_REFERENCE, P_AOTI_RUNTIME, P_THREADS, P_AOTI_TRUST, P_AOTI_UNTRUSTED,
    )),
    # SHA-256: its gtest (the standard's vectors, pieces of every length), then the payload and weight checks
    # that use it.
    ("runtime/*/sha256.*", ("cpp:et_copy_test_sha256", P_VERIFY_WEIGHT, P_AOTI_UNTRUSTED)),
    # test_state_export.py runs delegated programs whose state starts at zero or at a stored value. Its payload
    # kind's rules (check_program) and its description: the record's gtest, the hint's.
    ("backends/simulated/*/simulated_device_backend.*", (
        T_BACKEND, T_DELEGATE, "py:tests/python/test_runtime_checks.py", "py:tests/python/test_state_export.py",
        T_FOREIGN_CUDA,
    )),
    ("runtime/src/content_hash.h", (T_BACKEND,)),
    # The one range bound: its own cases in the reader's gtest, then the reader's, the allocator's and a session's
    # users of it.
    ("runtime/src/byte_range.h", ("cpp:et_copy_test_program_reader", T_CHECK, T_SIM, T_BACKEND)),
    ("runtime/src/external_tensors.*", (T_BACKEND,)),
    # The seam: its own gtest, then the simulated backend that plugs into it.
    # device_backends() names the CUDA allocator's backend too: the CUDA test checks that.
    # backend_hint: what a refusal says to call, for each of et-copy's backends, in a fresh process; and why the
    # simulated backend cannot run where another library's GPU allocator serves (test_foreign_cuda).
    ("runtime/*/device_backend.*", (
        "cpp:et_copy_test_device_backend", T_FOREIGN_CUDA, T_BACKEND, T_CHECK, T_CUDA,
        "py:tests/python/test_backend_registration_hints.py", P_FOREIGN_CUDA,
    )),
    # Weights pinned per program and state arenas: the backend's gtest, the CUDA allocator's (a failing copy),
    # then programs with weights and state.
    # verify_data: a flipped weight refused by its content key, and every weight and state mutant of the sweep.
    ("runtime/*/device_residency.*", (
        T_BACKEND, T_CUDA, "py:tests/python/test_state_export.py", P_VERIFY_WEIGHT, P_AOTI_UNTRUSTED,
    )),
    # A host or foreign argument refused by name: the backend's gtest and et_copy.runtime's checks.
    ("runtime/*/device_arguments.*", (T_BACKEND, "py:tests/python/test_runtime_checks.py")),
    # The LLM's method names: an export and its runner must agree on them.
    ("runtime/include/et_copy/llm_methods.h", (P_LLM_UNITS, *P_LLM_QWEN3)),
    # Sessions serve et_copy.runtime's methods; the tracer's test drives them in C++.
    # test_state_arena_edges.py: another exporter's host state, each session's arena, reset;
    # named state beside et_copy's record refused.
    # The pool decides whether the registered _d2h_copy.out is et-copy's (a foreign one: outputs copied out).
    # The device-backend gtest: a session's specs, its state held in a backend, and reset going to it.
    # Planned buffers: a method's buffers on the devices it names (the loaded-method gtest), an absurd size
    # refused as a failed allocation (test_address_space_refused), then et_copy.runtime's checks.
    ("runtime/*/planned_buffer.*", ("cpp:et_copy_test_loaded_method", P_ADDRESS_SPACE, *PY_RUNTIME)),
    ("runtime/*/sessions.*", (
        "cpp:et_copy_test_loaded_method:LoadedMethod.AnOutputIsWrittenInTheCallersMemoryOnlyWhenEtCopysOwnD2hKernelFillsIt",
        "cpp:et_copy_test_device_backend", "py:tests/python/test_state_arena_edges.py", T_TRACER, *PY_RUNTIME,
        P_THREADS,  # the "threads" spec a session passes on, and only when the load asked for it
        P_AOTI_TRUST,  # all five specs at once (threads, verify_data and trust_code beside pool and session)
    )),
    # The one way to run a method: its gtest, then et_copy.runtime's checks through the bindings.
    ("runtime/*/loaded_method.*", ("cpp:et_copy_test_loaded_method", *PY_RUNTIME, P_DEBUG_BUFFER)),
    # P_PTD: a data file that reads (the gtest has the refusals).
    ("runtime/*/loaded_program.*", ("cpp:et_copy_test_loaded_method", *PY_RUNTIME, P_PTD)),
    ("runtime/*/failure_report.*", ("cpp:et_copy_test_loaded_method", "py:tests/python/test_errors.py")),
    # LogCapture's own gtest (levels kept and forwarded, scopes, cleaning, the line limit), then the
    # failure reports that quote it.
    ("runtime/*/log_capture.*", (
        "cpp:et_copy_test_log_capture",
        "cpp:et_copy_test_loaded_method",
        "py:tests/python/test_quiet.py",
        "py:tests/python/test_errors.py",
    )),
    # ---- python/bindings/: pytest against the development package ------------------
    # test_cuda.py: registration_result's kFailed path, use_cuda() on a machine without a GPU.
    # test_nothing_registered.py: a fresh process's refusals before any allocator is registered;
    # test_backend_registration_bindings.py: a backend name another library took, a full backend registry.
    ("python/bindings/allocators.*", (
        "py:tests/python/test_allocator_binding_args.py", P_MEMORY, P_FIELDS, "py:tests/python/test_boundary_enums.py",
        "py:tests/python/test_cuda.py::test_use_cuda_without_a_gpu_says_why_and_leaves_the_registry_usable",
        "py:tests/python/test_backend_registration_bindings.py", P_NOTHING_REGISTERED, P_FOREIGN_CUDA,
    )),
    # Each backend's own extension (backends/<name>/bindings): its registration, registered once, then
    # 'already et_copy', refused when the name is taken or ExecuTorch's backend table is full; the
    # compiled backend's trust of compiled code. backend_error.h: the EtCopyError they raise.
    ("backends/simulated/bindings/*", ("py:tests/python/test_backend_registration_bindings.py",)),
    ("backends/aoti/bindings/*", ("py:tests/python/test_backend_registration_bindings.py", P_AOTI_TRUST)),
    ("python/bindings/backend_error.h", ("py:tests/python/test_backend_registration_bindings.py", P_AOTI_TRUST)),
    # test_foreign_cuda.py: use_cuda()'s "already other", cuda_pointer_device's refusal without a driver.
    ("python/bindings/cuda.*", (
        "py:tests/python/test_cuda_binding_args.py", "py:tests/python/test_cuda.py", P_FOREIGN_CUDA,
    )),
    ("python/bindings/log_capture.*", ("py:tests/python/test_quiet.py", "py:tests/python/test_errors.py")),
    ("python/bindings/failure.h", ("py:tests/python/test_errors.py", *PY_BINDINGS)),
    # test_errors.py: EtCopyError's constructor (defaults, keyword-only fields, the log as a tuple, pickling).
    ("python/bindings/module.cpp", (
        "py:tests/python/test_errors.py", "py:tests/python/test_registration.py", P_FIELDS,
    )),
    # test_runtime_input_layouts.py: each input's bytes dense in the planned dim order, first to last.
    # test_method_io_loops.py: the first and the last of three inputs and of two outputs wrong, then bound.
    # test_runtime_scalar_inputs.py: int, float, bool and None inputs, each kind taken, another refused.
    # test_scalar_inputs.py: a method's Int input (a program value set after export), and what is refused there.
    ("python/bindings/method_io.*", (
        "py:tests/python/test_method_io_loops.py", P_SCALARS, "py:tests/python/test_scalar_inputs.py", P_LAYOUTS,
        *PY_RUNTIME, P_API,
    )),
    ("python/bindings/program.*", (
        P_DEBUG_BUFFER, "py:tests/python/test_load_check_bindings.py", "py:tests/python/test_program_binding_args.py",
        "py:tests/python/test_method_io_loops.py", P_SCALARS, P_THREADS, P_LOAD_FLAGS,
        "py:tests/python/test_runtime.py::test_inputs_may_be_a_tuple_and_outputs_must_be_a_sequence",
        # reset(): refused for a program with no state buffer of its own, a no-op with no method, zeroes an arena.
        P_STATE_EXPORT + "::test_a_session_of_a_program_without_a_state_arena_cannot_be_reset",
        "py:tests/python/test_state_arena_edges.py::"
        "test_another_exporters_host_state_is_each_sessions_arena_shared_by_its_methods_and_reset_zeroes_it",
        *PY_RUNTIME, P_LAYOUTS, P_API,
        # backend_names(): every registered backend, the first and the last, in a fresh process.
        "py:tests/python/test_backend_registration_bindings.py::"
        "test_backend_names_lists_every_registered_backend_first_to_last_in_a_fresh_process",
    )),
    # run_registered dispatches the registry's kernel: et_copy's own only where the wheel's library is not loaded.
    # The op missing from the registry: OperatorMissing naming it, out untouched.
    ("python/bindings/kernels.*", (
        P_REGISTRY_OURS,
        "py:tests/python/test_registration.py::test_run_registered_with_no_kernel_is_operator_missing",
        *PY_BINDINGS,
        P_COPY,
    )),
    # The bench's timing loops: their bounds and kinds, then the memcpy baseline on unreadable memory.
    # test_cuda.py: the CUDA baselines' errors on a machine without a GPU (their copies are gpu-marked).
    ("python/bindings/loops.*", (
        "py:tests/python/test_bench_loops.py", P_NOTHING_REGISTERED,
        "py:tests/python/test_cuda.py::"
        "test_without_a_gpu_the_benchs_cuda_baselines_fail_naming_cuda_and_an_unknown_kind_is_refused_first",
        P_MEMORY,
        P_ADDRESS_SPACE,
    )),
    # The dim-order rule reads a TensorSpec that execute() reuses from input to output:
    # a method planned in dim order (1, 0) reads a contiguous output after such an input.
    ("python/bindings/tensor_spec.*", (
        "py:tests/python/test_max_rank.py", P_FIELDS, P_LAYOUTS_1_0, P_BOUNDARY, P_COPY,
    )),
    # The torch reader: its rows below, then a method's host inputs (read as the CPU device 0 it plans);
    # test_dtype_message_names.py: a refused dtype's name as str() gives it (non-ASCII too) or '?';
    # test_torch_tensor_views.py: transposed, permuted, offset and gappy views as self and as out.
    ("python/bindings/torch_tensor.*", (
        "py:tests/python/test_max_rank.py", "py:tests/python/test_boundary_enums.py", *PY_BINDINGS, P_COPY, P_LAYOUTS,
        "py:tests/python/test_dtype_message_names.py", "py:tests/python/test_torch_tensor_views.py",
    )),
    # TensorView: int64 sizes and strides narrowed to int32, first dim to last, at int32's largest and one past.
    ("python/bindings/tensor_view.*", (
        "py:tests/python/test_tensor_metadata_narrowing.py", "py:tests/python/test_max_rank.py",
        "py:tests/python/test_boundary_enums.py", *PY_BINDINGS, P_COPY, "py:tests/python/test_torch_tensor_views.py",
    )),
    # DeviceBuffer: a slice's address, size and freed state from its root, before and after the root's free.
    ("python/bindings/device_buffer.*", (
        "py:tests/python/test_device_buffer_slices.py", "py:tests/python/test_max_rank.py",
        "py:tests/python/test_boundary_enums.py", *PY_BINDINGS, P_COPY,
    )),
    # DeviceTensor: its repr and fields at ranks 0, 1, 3 and 16, and each argument check's two sides.
    ("python/bindings/device_tensor.*", (
        "py:tests/python/test_device_tensor_views.py", "py:tests/python/test_max_rank.py",
        "py:tests/python/test_boundary_enums.py", *PY_BINDINGS, P_COPY,
    )),
    # The copies' own argument checks first (count, dynamic_out's truth, dense_strides' edges).
    ("python/bindings/copies.*", (
        "py:tests/python/test_copy_binding_args.py", "py:tests/python/test_max_rank.py",
        "py:tests/python/test_boundary_enums.py", *PY_BINDINGS, P_COPY,
    )),
    # The rooms of et_copy.runtime's bindings. execute: outputs= and scalar outputs (test_runtime_checks),
    # every input kind (test_runtime_scalar_inputs), the loops; method_meta: the metadata on its devices;
    # etdump: a profile and its debug buffer written; program: loading, sessions, the load checks.
    ("python/bindings/execute.*", (
        "py:tests/python/test_runtime_checks.py", "py:tests/python/test_runtime_scalar_inputs.py",
        "py:tests/python/test_method_io_loops.py", *PY_RUNTIME,
    )),
    ("python/bindings/method_meta.*", (P_META, P_API, *PY_RUNTIME)),
    ("python/bindings/etdump.*", (P_API, "py:tests/python/test_program_binding_args.py")),
    ("python/bindings/program.*", (
        "py:tests/python/test_program_binding_args.py", "py:tests/python/test_load_check_bindings.py", P_API,
        *PY_RUNTIME,
    )),
    # test_max_rank.py: every per-dim loop at the largest rank and one past it;
    # test_boundary_enums.py: dtype and device codes against ExecuTorch's schema.
    ("python/bindings/*", (
        "py:tests/python/test_max_rank.py", "py:tests/python/test_boundary_enums.py", *PY_BINDINGS, P_COPY,
        "py:tests/python/test_torch_tensor_views.py", "py:tests/python/test_device_tensor_views.py",
    )),
    # ---- the package's Python -------------------------------------------------------
    ("python/et_copy/runtime.py", (P_META, P_API, *PY_RUNTIME, P_THREADS, P_LOAD_FLAGS, P_VERIFY_WEIGHT,
                                   "py:tests/backends/reference/test_reference_export.py::"
                                   "test_a_load_before_its_registration_names_the_call_that_registers_it")),
    # export/: test_export_routes.py holds every route's contract (record, errors; ~20 s);
    # test_export.py the emitted programs (device tags, planning, with_target_device, the
    # boundary planner's counters); test_backend_export.py the resident inputs/outputs
    # (_keep_resident, _drop_copy); test_state_export.py the mutable buffers in the delegate's
    # state arena, their initial state, and the copy-only route's refusal of state.
    ("python/et_copy/export/__init__.py", (P_ROUTES, P_EXPORT)),
    ("python/et_copy/export/_errors.py", (P_ROUTES, P_BACKEND_EXPORT)),
    ("python/et_copy/export/_routes.py", (P_ROUTES, P_EXPORT, P_BACKEND_EXPORT)),
    # _lowering.py's resolve_backend_choice: every refusal per route (test_export_routes.py), the word beside a
    # partitioner (test_backends_table.py), export_llm's choice resolved first (test_llm_export_args.py).
    ("python/et_copy/export/_lowering.py", (
        P_ROUTES, "py:tests/python/test_backends_table.py", P_LLM_EXPORT_ARGS, P_EXPORT, P_BACKEND_EXPORT,
        P_STATE_EXPORT,
    )),
    ("python/et_copy/export/_copy_only.py", (P_ROUTES, P_EXPORT, P_STATE_EXPORT)),
    ("python/et_copy/export/_methods.py", (P_ROUTES, P_STATE_EXPORT, P_BACKEND_EXPORT)),
    ("python/et_copy/export/_graph_checks.py", (P_ROUTES, P_BACKEND_EXPORT, P_EXPORT)),
    ("python/et_copy/export/_named_data.py", (
        "py:tests/python/test_state_arena_edges.py", P_ROUTES, P_STATE_EXPORT, P_LLM_PTD,
    )),
    ("python/et_copy/export/_boundary.py", (P_EXPORT, P_STATE_EXPORT)),
    ("python/et_copy/export/_device_planning.py", (P_EXPORT, P_STATE_EXPORT)),
    ("python/et_copy/export/_boundary_planning.py", (P_EXPORT, P_BACKEND_EXPORT)),
    ("python/et_copy/export/_target_device.py", (P_EXPORT, P_ROUTES)),
    # llm/: each file's own rules first, then one exported program (qwen3 with
    # host picks, ~45 s to export) only where a rule shows in a run; never the
    # whole of test_llm.py, which exports several models (many minutes).
    ("python/et_copy/llm/_sampling.py", (P_SAMPLING, P_LLM_CONSTANTS)),
    ("python/et_copy/llm/_check.py", (P_LLM_CHECK, P_LLM_CONSTANTS, P_LLM_UNITS, *P_LLM_EAGER, *P_LLM_QWEN3)),
    ("python/et_copy/llm/_state.py", (P_LLM_STATE, P_LLM_CONSTANTS, P_LLM_UNITS, *P_LLM_EAGER, *P_LLM_QWEN3)),
    ("python/et_copy/llm/_models.py", (
        P_LLM_LOAD, P_LLM_CONSTANTS, P_LLM_UNITS, *P_LLM_EAGER, P_LLM_COVERS, *P_LLM_QWEN3,
    )),
    ("python/et_copy/llm/_export.py", (P_LLM_EXPORT_ARGS, P_LLM_UNITS, P_LLM_NOT_LLM, *P_LLM_QWEN3)),
    ("python/et_copy/llm/_generate.py", (P_LLM_SESSION, P_LLM_UNITS, P_LLM_IMPORT, *P_LLM_QWEN3)),
    ("python/et_copy/llm/_cache.py", (P_LLM_CACHE, P_LLM_CACHE_DIR, P_LLM_CACHED)),
    ("python/et_copy/llm/_conv.py", ("py:tests/python/llm/test_conv.py",)),
    ("python/et_copy/tools/generate.py", (P_LLM_UNITS, P_LLM_CLI_ARCHS, P_LLM_CLI, P_LLM_PTD)),
    ("python/et_copy/llm/__init__.py", (P_LLM_UNITS, *P_LLM_EAGER)),
    # The compiled partition's weight reads: the graph rewrite and both checks, no compile (seconds).
    ("python/et_copy/backends/aoti/_constant_reads.py", P_CONSTANT_READS),
    # Quantized weights: the graph rewrite on every torchao scheme, run eagerly, and the simulated backend's
    # portable dequantization (seconds; the compiled programs' tests recompile on every mutant of the kernels).
    ("python/et_copy/backends/aoti/_quantized.py", (*P_QUANTIZED, *P_CPU_LAYOUTS)),
    # The CPU's layouts: their bytes, kernels against a float product, which weight takes which (no compile).
    ("python/et_copy/backends/aoti/_cpu_layouts.py", (*P_CPU_LAYOUTS, *P_QUANTIZED)),
    ("python/et_copy/backends/simulated/_quantized_portable.py", P_QUANTIZED),
    ("python/et_copy/llm/_quantize.py", (*P_LLM_QUANTIZE, *P_LLM_QUANTIZED_EXPERTS)),
    # The grouped experts: their eager equality for every MoE class, the choice per backend, the configs restored,
    # the trace rule, the stride fallback (no compile; the compiled prefill's check recompiles per mutant).
    ("python/et_copy/llm/_experts.py", (*P_LLM_EXPERTS, *P_LLM_QUANTIZED_EXPERTS)),
    # Quantized experts: stored with torchao's rounding, the three forwards against transformers' (no compile).
    ("python/et_copy/llm/_quantized_experts.py", (*P_LLM_QUANTIZED_EXPERTS, *P_LLM_EXPERTS)),
    # GGUF: the files' own bits, the Q/K order, logits against transformers' load, every refusal (no compile).
    ("python/et_copy/llm/_gguf.py", P_LLM_GGUF),
    # ---- outside the generator's scope today (tools/mutation/mutant_generator.py's SCOPE); what covers them ----
    # The compiled backend's code checks: digest, then trust, before the payload is loaded.
    ("backends/aoti/src/code_trust.*", (P_AOTI_TRUST, P_AOTI_UNTRUSTED)),
    ("backends/aoti/include/et_copy/code_trust.h", (P_AOTI_TRUST, P_AOTI_UNTRUSTED)),
    # test_foreign_cuda.py: a target-cuda record accepted on another library's CUDA allocator (runs_on, check_target).
    # The backends' table: its own tests, then a word added from outside (the reference backend's).
    ("python/et_copy/backends/__init__.py", (
        "py:tests/python/test_backends_table.py", "py:tests/backends/reference/test_reference_export.py",
    )),
    # The aoti payload kind's own record lines: the record gtest compiles them in; the library's gtest.
    ("backends/aoti/src/aoti_record.*", (T_DELEGATE, T_AOTI_LIBRARY, P_AOTI_UNTRUSTED)),
    # Linking et_copy::aoti registers the backend: a consumer of the installed package that never calls
    # register_aoti_backend() runs a compiled program.
    ("backends/aoti/src/aoti_registration.cpp", ("py:tests/python/repo/test_cpp.py",)),
    # Linking et_copy::simulated describes its backend: the consumer built against the installed package.
    ("backends/simulated/src/simulated_description.cpp", ("py:tests/python/repo/test_cpp.py",)),
    ("backends/aoti/src/aoti_backend.cpp", (
        T_AOTI_LIBRARY, P_AOTI_TRUST, P_AOTI_UNTRUSTED, P_AOTI_RUNTIME, P_FOREIGN_CUDA,
    )),
    # Copies on the caller's stream: queued, staged, synchronised, against the fake CUDA runtime's streams.
    ("runtime/cuda_allocator/caller_stream.*", (T_CUDA,)),
    # doctor PROGRAM.pte: a real compiled export, a flipped payload byte, no compiled code, not a program.
    ("python/et_copy/tools/doctor.py", ("py:tests/python/tools/test_doctor.py",)),
    # Outside the core's scope; --smoke draws its generated mutants here (fast tests).
    ("python/et_copy/_device.py", PY_BINDINGS),
    ("python/et_copy/_tensors.py", PY_BINDINGS),
]
# fmt: on


def tests_for(path: str) -> tuple[str, ...]:
    for pattern, tests in FILE_TESTS:
        if fnmatch(path, pattern):
            return tests
    return ()
