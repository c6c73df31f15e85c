"""AddressSanitizer + UndefinedBehaviorSanitizer over et_copy's C++.

Configures a separate build with -DET_COPY_SANITIZE=ON (the runtime, the
C++ tests and the Python extension, all instrumented), then
- runs the C++ tests under CTest with LeakSanitizer on;
- runs et_copy's Python suites (fuzzing, threads, lifetime, kernels and
  rejections) against the instrumented extension, with libasan preloaded
  into Python and leak detection off (CPython and torch keep memory to exit).
Any finding aborts the process it happens in, which fails the test.

The build goes to build/sanitize in the checkout (incremental on re-runs),
or to $ET_COPY_SANITIZE_BUILD_DIR.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from build_tools import CMAKE, CTEST, NINJA

REPO = Path(__file__).resolve().parents[3]
CORE_TESTS = Path(__file__).resolve().parents[1]  # tests/python, where ASAN_SUITES live

pytestmark = pytest.mark.slow

# The Python suites rerun under ASan (fuzzing at the small "dev" budget).
ASAN_SUITES = [
    "test_fuzz.py",
    "test_threads.py",
    "test_lifetime.py",
    "test_copy_kernels.py",
    "test_copy_rejections.py",
    "test_runtime_untrusted.py",
]

SANITIZER_ENV = {
    # allocator_may_return_null: a request no host can meet (the allocators' SIZE_MAX tests) returns null, as
    # without ASan, so the code under test reports it; ASan's default aborts the process instead.
    "ASAN_OPTIONS": "halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1:"
    "allocator_may_return_null=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


def _run(cmd, *, timeout, env=None, cwd=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout[-8000:]}\n--- stderr ---\n{proc.stderr[-12000:]}"
        )
    return proc


@pytest.fixture(scope="module")
def sanitize_build() -> Path:
    build = Path(os.environ.get("ET_COPY_SANITIZE_BUILD_DIR", REPO / "build" / "sanitize"))
    import pybind11

    _run(
        [
            CMAKE,
            "-S",
            REPO,
            "-B",
            build,
            "-G",
            "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={NINJA}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            "-DET_COPY_SANITIZE=ON",
            "-DET_COPY_BUILD_TESTS=ON",
            "-DET_COPY_BUILD_PYTHON=ON",
            "-DET_COPY_WITH_CUDA=OFF",  # no GPU in CI: keep the instrumented build small
            "-DCMAKE_BUILD_TYPE=",
            "-DCMAKE_CXX_FLAGS=-O1",
        ],
        timeout=300,
    )
    _run([CMAKE, "--build", build, "-j2"], timeout=1200)
    return build


def _compiler(build: Path) -> str:
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith("CMAKE_CXX_COMPILER:"):
            return line.split("=", 1)[1]
    pytest.fail("no CMAKE_CXX_COMPILER in the sanitizer build's cache")


def _python_env(build: Path) -> dict:
    """Python with the instrumented extension first on the path and the ASan
    runtime (plus libstdc++, whose __cxa_throw ASan must see at start-up)
    preloaded."""
    cxx = _compiler(build)
    libs = []
    for name in ("libasan.so", "libstdc++.so"):
        path = subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        if not os.path.isabs(path):
            pytest.fail(f"{cxx} does not know where {name} is (got {path!r})")
        libs.append(path)
    env = dict(os.environ, **SANITIZER_ENV)
    env["ASAN_OPTIONS"] += ":detect_leaks=0"
    env["LD_PRELOAD"] = " ".join(libs)
    env["PYTHONPATH"] = os.pathsep.join([str(build / "pkg"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["ET_COPY_FUZZ_PROFILE"] = "dev"
    return env


def test_cpp_tests_pass_under_address_undefined_and_leak_sanitizers(sanitize_build):
    env = dict(os.environ, **SANITIZER_ENV)
    env["ASAN_OPTIONS"] += ":detect_leaks=1"
    proc = _run([CTEST, "--test-dir", sanitize_build, "--output-on-failure", "-j2"], timeout=900, env=env)
    assert "et_copy_test_threads" in proc.stdout  # the thread test ran instrumented too
    assert "tests passed" in proc.stdout


def test_python_suites_pass_against_the_sanitized_extension(sanitize_build):
    env = _python_env(sanitize_build)
    where = _run([sys.executable, "-c", "import et_copy._C as c; print(c.__file__)"], timeout=120, env=env)
    assert Path(where.stdout.strip()).resolve().is_relative_to(sanitize_build.resolve()), where.stdout
    missing = [s for s in ASAN_SUITES if not (CORE_TESTS / s).exists()]
    assert not missing, f"suites moved or renamed: {missing}"  # else pytest would run all of testpaths
    suites = [str(CORE_TESTS / s) for s in ASAN_SUITES]
    _run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *suites],
        timeout=1200,
        env=env,
        cwd=REPO,
    )


def test_a_heap_overflow_under_the_sanitizer_environment_fails_the_process(sanitize_build):
    """The harness is live: the same environment turns an out-of-bounds
    write into a failing exit with ASan's report, and the extension links
    the sanitizer runtimes."""
    env = _python_env(sanitize_build)
    ext = next((sanitize_build / "pkg" / "et_copy").glob("_C*.so"))
    needed = subprocess.run(["readelf", "-d", str(ext)], capture_output=True, text=True).stdout
    assert "libasan" in needed and "libubsan" in needed, needed
    overflow = (
        "import ctypes; libc = ctypes.CDLL(None); libc.malloc.restype = ctypes.c_void_p; "
        "p = libc.malloc(16); ctypes.memset(p, 0, 17)"
    )
    proc = subprocess.run([sys.executable, "-c", overflow], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0
    assert "heap-buffer-overflow" in proc.stderr, proc.stderr[-4000:]
