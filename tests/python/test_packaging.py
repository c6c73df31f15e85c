"""The installed extension: loadable anywhere, linked to nothing it must not be."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import et_copy._C as ext
import pytest

PACKAGE = Path(ext.__file__).parent
RUNTIME = PACKAGE / "lib" / "libet_copy_runtime.so"


def dynamic_section(library: str | Path = ext.__file__) -> str:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    return subprocess.run([readelf, "-d", str(library)], capture_output=True, text=True, check=True).stdout


def runpath(library: str | Path) -> list[str]:
    runpaths = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", dynamic_section(library))
    return [p for line in runpaths for p in line.split(":") if p]


def test_extension_runpath_finds_the_runtime_torch_and_executorch_beside_itself():
    # No folder of the build machine (a deleted build-isolation env) may be searched.
    if "/build" in ext.__file__:
        pytest.skip("in-tree development build: RUNPATH points at the configured wheels on purpose")
    assert runpath(ext.__file__) == ["$ORIGIN/lib", "$ORIGIN/../torch/lib", "$ORIGIN/../executorch/lib"]
    # et_copy/lib/libet_copy_runtime.so finds libexecutorch.so in site-packages/executorch/lib.
    assert runpath(RUNTIME) == ["$ORIGIN/../../executorch/lib"]


def test_importing_et_copy_loads_torch_before_the_extension():
    """_C finds libtorch_python by name. Beside the torch wheel its RUNPATH
    finds it; installed apart (pip --target, as scripts/gpu_check.sh does,
    where the import failed on the H200 machine) it is found only because
    torch already loaded it."""
    import sys

    code = "import et_copy, sys; m = list(sys.modules); print(m.index('torch') < m.index('et_copy._C'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == "True", proc.stderr[-2000:]


def test_extension_links_libtorch_as_executorchs_pybindings_do_and_no_shared_cudart():
    """The bindings read at::Tensor (docs/design.md, "How the Python bindings
    read torch tensors"): libtorch_python, libtorch_cpu and libc10 from the
    torch wheel, ExecuTorch's runtime and its ETDump profiler (enable_etdump)
    from the executorch wheel; CUDA's
    runtime is linked statically, libpython not at all (the interpreter
    provides it)."""
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dynamic_section())
    prefixes = ("libtorch", "libc10", "libexecutorch", "libpython", "libcudart", "libet_copy")
    ours = sorted(n for n in needed if n.startswith(prefixes))
    assert ours == [
        "libc10.so",
        "libet_copy_runtime.so",
        "libexecutorch.so",
        "libexecutorch_etdump.so",
        "libtorch_cpu.so",
        "libtorch_python.so",
    ]


def test_the_extension_users_import_carries_no_benchmark_code():
    """The timing loops live in the submodule et_copy._C.loops, not beside
    the functions et_copy wraps."""
    benchy = [n for n in dir(ext) if n.startswith("bench") or n == "cuda_raw_memcpy"]
    assert benchy == []
    assert callable(ext.loops.bench_kernel) and callable(ext.loops.bench_memcpy)


def test_every_extension_links_the_one_shared_runtime_and_none_holds_a_copy():
    """One runtime per process: the core is libet_copy_runtime.so, which every
    extension of the package links (and a backend's extension from another
    package links too), so there is one registry lock, one table of device
    backends and payload kinds, one residency module. An extension that held
    the core itself (a static copy) would define the core's functions: here
    each takes them from the shared runtime, undefined in its own symbols
    (the backend table, or the sessions)."""
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    libraries = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.so"))
    assert "lib/libet_copy_runtime.so" in libraries and Path(ext.__file__).name in libraries
    for extension in [PACKAGE / p for p in libraries if p != "lib/libet_copy_runtime.so"]:
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dynamic_section(extension))
        assert "libet_copy_runtime.so" in needed, extension
        symbols = subprocess.run([nm, "-C", "-D", "--undefined-only", str(extension)], capture_output=True, text=True)
        # _C's sessions and backend table, or a backend's registration (its own extension's).
        core = ("et_copy::registered_device_backends()", "et_copy::SessionPool", "et_copy::register_device_backend(")
        assert any(name in symbols.stdout for name in core), extension


# Each shipped backend's bindings: an extension of its own in its subpackage (backends/<name>/bindings),
# linking the shared runtime and, for the compiled backend, libtorch's C shims.
BACKEND_EXTENSIONS = {
    "backends/simulated/_simulated": ["$ORIGIN/../../lib", "$ORIGIN/../../../executorch/lib"],
    "backends/aoti/_aoti": ["$ORIGIN/../../lib", "$ORIGIN/../../../executorch/lib", "$ORIGIN/../../../torch/lib"],
}


@pytest.mark.parametrize("stem", sorted(BACKEND_EXTENSIONS))
def test_each_backend_has_its_own_extension_finding_the_runtime_and_its_libraries_beside_itself(stem):
    found = sorted(PACKAGE.glob(f"{stem}.*.so"))
    assert len(found) == 1, found
    if "/build" in ext.__file__:
        pytest.skip("in-tree development build: RUNPATH points at the configured wheels on purpose")
    assert runpath(found[0]) == BACKEND_EXTENSIONS[stem]


def test_the_core_extension_names_no_backend():
    """_C binds the core alone: each backend's registration is in its own extension."""
    assert not [n for n in dir(ext) if "aoti" in n.lower() or n.startswith(("PAYLOAD_", "register_simulated"))]


def test_running_programs_imports_no_tool():
    """What a user imports to export and run programs (the library) holds
    no fixture, demo, parity harness or benchmark: those live in
    et_copy.tools, which nothing in the library imports."""
    import sys

    code = (
        "import sys, et_copy, et_copy.runtime, et_copy.export, et_copy.cuda\n"
        "import et_copy.backends.simulated, et_copy.backends.aoti\n"
        "import et_copy.llm\n"
        "print(sorted(m for m in sys.modules if m.startswith('et_copy.tools')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"


def test_the_installed_package_holds_every_module_of_the_source_tree_subpackages_included():
    """wheel.packages names python/et_copy, and scikit-build-core takes its
    subpackages with it: et_copy.export, et_copy.llm and et_copy.tools are
    folders. A module missing from the wheel would fail only where it is imported."""
    from pathlib import Path

    import et_copy

    source = Path(__file__).resolve().parents[2] / "python" / "et_copy"
    installed = Path(et_copy.__file__).parent
    if not source.is_dir():
        pytest.skip("no source tree beside the tests")
    wanted = sorted(p.relative_to(source).as_posix() for p in source.rglob("*.py"))
    assert "export/__init__.py" in wanted and "export/_lowering.py" in wanted
    assert [m for m in wanted if not (installed / m).is_file()] == []
    assert not (installed / "export.py").exists()  # the package, not a stale module beside it
