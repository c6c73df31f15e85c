"""Which tests a generated mutant of each file runs (scripts/mutant_generator.py).

A hand-written mutant names its own tests (scripts/mutants.py); a generated
one takes its file's row here: the first pattern (fnmatch) that matches.
List the narrowest suites that assert what the file does, fastest first
(pytest runs with -x, so a killed mutant stops at the first failure; only a
survivor runs them all). A file in the scope with no row is reported, not
mutated.
"""

from __future__ import annotations

from fnmatch import fnmatch

from mutants import (
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
T_DELEGATE = "cpp:et_copy_test_delegate_record"
T_LAYOUT = "cpp:et_copy_test_tensor_layout"
T_METHOD_KERNELS = "cpp:et_copy_test_method_kernels"
T_RECORD = "cpp:et_copy_test_program_record"
T_THREADS = "cpp:et_copy_test_threads"
P_API = "py:tests/python/test_runtime_api.py"
P_MEMORY = "py:tests/python/test_device_memory.py"

# fmt: off
FILE_TESTS: list[tuple[str, tuple[str, ...]]] = [
    # ---- runtime/: GoogleTest executables ------------------------------------------
    ("runtime/src/device_copy.*", (T_KERNELS,)),
    ("runtime/src/op_*.cpp", (T_KERNELS,)),
    ("runtime/include/et_copy/copy_ops.h", (T_KERNELS,)),
    ("runtime/*/simulated_device_allocator.*", (T_SIM, T_THREADS)),
    ("runtime/*/counting_device_allocator.*", (T_SIM, T_CUDA)),
    ("runtime/include/et_copy/cuda_device_allocator.h", (T_CUDA,)),
    ("runtime/*/registration.*", (T_REG, T_FOREIGN)),
    ("runtime/src/registry_lock.h", (T_REG, T_FOREIGN)),
    ("runtime/src/method_kernels.cpp", (T_METHOD_KERNELS,)),
    # device_backends() names the CUDA allocator's backend: the CUDA test checks that.
    ("runtime/*/program_check.*", (T_CHECK, T_CUDA)),
    ("runtime/*/program_record.*", (T_RECORD, T_BACKEND)),
    ("runtime/*/instruction_tracer.*", (T_TRACER,)),
    ("runtime/*/tensor_layout.*", (T_LAYOUT, T_KERNELS)),
    # Its constants are checked against ExecuTorch's at compile time, and pinned through _C.
    ("runtime/include/et_copy/limits.h", (T_SIM, "py:tests/python/test_limits.py", P_FIELDS)),
    ("runtime/*/delegate_record.*", (T_DELEGATE, T_BACKEND)),
    ("runtime/*/simulated_device_backend.*", (T_BACKEND, "py:tests/python/test_runtime_checks.py")),
    ("runtime/src/external_tensors.*", (T_BACKEND,)),
    # Sessions serve et_copy.runtime's methods; the tracer's test drives them in C++.
    ("runtime/*/sessions.*", (T_TRACER, *PY_RUNTIME)),
    # The one way to run a method: its gtest, then et_copy.runtime's checks through the bindings.
    ("runtime/*/loaded_method.*", ("cpp:et_copy_test_loaded_method", *PY_RUNTIME)),
    ("runtime/*/loaded_program.*", ("cpp:et_copy_test_loaded_method", *PY_RUNTIME)),
    ("runtime/*/failure_report.*", ("cpp:et_copy_test_loaded_method", "py:tests/python/test_errors.py")),
    ("runtime/*/log_capture.*", ("py:tests/python/test_quiet.py", "py:tests/python/test_errors.py")),
    # ---- python/bindings/: pytest against the development package ------------------
    ("python/bindings/allocators.*", (P_MEMORY, P_FIELDS)),
    ("python/bindings/cuda.*", ("py:tests/python/test_cuda.py",)),
    ("python/bindings/log_capture.*", ("py:tests/python/test_quiet.py", "py:tests/python/test_errors.py")),
    ("python/bindings/failure.h", ("py:tests/python/test_errors.py", *PY_BINDINGS)),
    ("python/bindings/module.cpp", ("py:tests/python/test_registration.py", P_FIELDS)),
    ("python/bindings/method_io.*", (*PY_RUNTIME, P_API)),
    ("python/bindings/program.*", (*PY_RUNTIME, P_API)),
    ("python/bindings/*", (*PY_BINDINGS, P_COPY)),
    # ---- the package's Python -------------------------------------------------------
    ("python/et_copy/runtime.py", (P_API, *PY_RUNTIME)),
    # test_backend_export.py holds the resident inputs/outputs (_keep_resident, _drop_copy).
    ("python/et_copy/export.py", ("py:tests/python/test_export.py", "py:tests/python/test_backend_export.py")),
    ("python/et_copy/llm/*", ("py:tests/python/test_llm.py",)),
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
