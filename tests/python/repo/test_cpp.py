"""The C++ side through CMake: the GoogleTest suite under CTest, the
installed CMake package (with the compiled backend, et_copy::aoti), and
examples/executor (a C++ executor linking the wheel's kernel library and
XNNPACK backend, loading methods with et_copy::method_kernels() and
registering SimulatedDeviceBackend, and AotiDeviceBackend for a program
that names it) running device programs that must match eager PyTorch and
transformers, and refusing at load one whose host would touch device memory.

Everything runs in subprocesses (cmake, ctest, the executor, and the export,
which imports executorch.exir) with timeouts, in temporary folders.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from build_tools import CMAKE, CTEST, NINJA

REPO = Path(__file__).resolve().parents[3]
EXECUTOR_SRC = REPO / "examples" / "executor"

pytestmark = pytest.mark.slow


def run(
    cmd: list[str], *, timeout: float, env: dict | None = None, cwd: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if check and proc.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


def configure(
    src: Path, build: Path, *defs: str, env: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    return run(
        [
            CMAKE,
            "-S",
            str(src),
            "-B",
            str(build),
            "-G",
            "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={NINJA}",
            f"-DPython_EXECUTABLE={sys.executable}",
            *defs,
        ],
        timeout=180,
        env=env,
        check=check,
    )


def build(build_dir: Path) -> None:
    run([CMAKE, "--build", str(build_dir), "-j2"], timeout=600)


# ---- the repository's C++ build: unit tests, then a plain install ---------


@pytest.fixture(scope="module")
def repo_build(tmp_path_factory) -> Path:
    build_dir = tmp_path_factory.mktemp("cpp") / "build"
    # The compiled backend too: a plain build without the extension builds and installs it when asked.
    proc = configure(
        REPO,
        build_dir,
        "-DET_COPY_BUILD_TESTS=ON",
        "-DET_COPY_BUILD_PYTHON=OFF",
        "-DET_COPY_BUILD_AOTI=ON",
        check=False,
    )
    if proc.returncode != 0 and "GoogleTest" in proc.stderr:
        pytest.fail(
            "the C++ tests need GoogleTest: apt-get install libgtest-dev "
            f"(tests/run.sh does this)\n{proc.stderr[-3000:]}"
        )
    elif proc.returncode != 0:
        pytest.fail(f"configuring the C++ build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    build(build_dir)
    return build_dir


@pytest.fixture(scope="module")
def plain_install(repo_build, tmp_path_factory) -> Path:
    """`cmake --install` of the repository build: <prefix>/lib/cmake/et_copy."""
    prefix = tmp_path_factory.mktemp("prefix")
    run([CMAKE, "--install", str(repo_build), "--prefix", str(prefix)], timeout=120)
    return prefix / "lib" / "cmake" / "et_copy"


def test_cpp_unit_tests_pass_under_ctest(repo_build):
    proc = run(
        [CTEST, "--test-dir", str(repo_build), "--output-on-failure", "--timeout", "120"], timeout=300, check=False
    )
    summary = re.search(r"(\d+)% tests passed.* out of (\d+)", proc.stdout)
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]
    assert summary is not None, proc.stdout[-3000:]
    assert summary.group(1) == "100" and int(summary.group(2)) >= 4, summary.group(0)


def test_cmake_install_lays_out_library_headers_and_package(plain_install):
    prefix = plain_install.parents[2]
    assert (prefix / "lib" / "libet_copy_runtime.so").is_file()
    assert (prefix / "lib" / "libet_copy_aoti.a").is_file()
    assert (prefix / "lib" / "libet_copy_simulated.a").is_file()
    for header in (
        "aoti_backend.h",
        "backend_options.h",
        "code_trust.h",
        "copy_ops.h",
        "counting_device_allocator.h",
        "device_arguments.h",
        "device_backend.h",
        "device_residency.h",
        "failure_report.h",
        "instruction_tracer.h",
        "limits.h",
        "llm_methods.h",
        "loaded_method.h",
        "loaded_program.h",
        "log_capture.h",
        "program_check.h",
        "program_record.h",
        "registration.h",
        "sessions.h",
        "simulated_device_allocator.h",
        "simulated_device_backend.h",
        "tensor_layout.h",
    ):
        assert (prefix / "include" / "et_copy" / header).is_file(), header
    for f in (
        "et_copyConfig.cmake",
        "et_copyConfigVersion.cmake",
        "et_copyTargets.cmake",
        "et_copyAotiTargets.cmake",
        "et_copyTorch.cmake",
    ):
        assert (plain_install / f).is_file(), f


# ---- the installed package as a consumer sees it --------------------------


def installed_cmake_dir() -> Path | None:
    """The CMake package of the pip-installed et_copy (None in a source tree)."""
    proc = subprocess.run([sys.executable, "-m", "et_copy", "--cmake-dir"], capture_output=True, text=True, timeout=120)
    return Path(proc.stdout.strip()) if proc.returncode == 0 else None


@pytest.fixture(scope="module", params=["wheel", "cmake-install"])
def package_dir(request) -> Path:
    if request.param == "wheel":
        found = installed_cmake_dir()
        if found is None:
            pytest.skip("et_copy is not pip-installed here (no `python -m et_copy --cmake-dir`)")
        return found
    return request.getfixturevalue("plain_install")


def bare_env() -> dict:
    """An environment with no Python or venv on PATH: the package must find
    executorch on its own, not through the interpreter running the tests."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "CMAKE_PREFIX_PATH")}
    env["PATH"] = "/usr/bin:/bin"
    return env


def find_package_project(tmp_path: Path, request: str) -> Path:
    src = tmp_path / "find"
    src.mkdir(exist_ok=True)
    (src / "CMakeLists.txt").write_text(
        textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.28)
        project(probe LANGUAGES CXX)
        find_package(et_copy {request} CONFIG REQUIRED)
        message(STATUS
          "et_copy ${{et_copy_VERSION}} cuda=${{et_copy_HAS_CUDA}} executorch=${{et_copy_EXECUTORCH_VERSION}}")
        if(NOT TARGET et_copy::runtime OR NOT TARGET executorch::runtime)
          message(FATAL_ERROR "et_copy::runtime or executorch::runtime missing")
        endif()
        if(NOT TARGET et_copy::simulated)
          message(FATAL_ERROR "et_copy::simulated missing")
        endif()
        """)
    )
    return src


def test_find_package_checks_the_version(package_dir, tmp_path):
    import et_copy

    ok = configure(
        find_package_project(tmp_path, "0.1"), tmp_path / "b1", f"-Det_copy_DIR={package_dir}", env=bare_env()
    )
    assert f"et_copy {et_copy.__version__} " in ok.stdout
    too_new = configure(
        find_package_project(tmp_path, "0.2"),
        tmp_path / "b2",
        f"-Det_copy_DIR={package_dir}",
        env=bare_env(),
        check=False,
    )
    assert too_new.returncode != 0
    assert "et_copy" in too_new.stderr and "0.2" in too_new.stderr, too_new.stderr


def test_find_package_without_executorch_fails_with_a_clear_message(package_dir, tmp_path):
    proc = configure(
        find_package_project(tmp_path, "0.1"),
        tmp_path / "b",
        f"-Det_copy_DIR={package_dir}",
        "-DCMAKE_DISABLE_FIND_PACKAGE_executorch=TRUE",
        env=bare_env(),
        check=False,
    )
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())
    assert "et_copy needs ExecuTorch's C++ runtime, executorch::runtime" in err, proc.stderr
    assert "pip install executorch==" in err


def aoti_project(tmp_path: Path, components: str) -> Path:
    """A consumer asking for the compiled backend, printing what it found."""
    src = tmp_path / "find_aoti"
    src.mkdir(exist_ok=True)
    (src / "CMakeLists.txt").write_text(
        textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.28)
        project(probe LANGUAGES CXX)
        find_package(et_copy 0.1 CONFIG REQUIRED {components})
        message(STATUS "aoti_found=${{et_copy_aoti_FOUND}} has_aoti=${{et_copy_HAS_AOTI}} "
                       "torch=${{et_copy_TORCH_VERSION}} lib=${{et_copy_TORCH_LIB_DIR}}")
        get_target_property(_runtime et_copy::runtime INTERFACE_LINK_LIBRARIES)
        message(STATUS "runtime links: ${{_runtime}}")
        if(TARGET et_copy::aoti)
          get_target_property(_aoti et_copy::aoti INTERFACE_LINK_LIBRARIES)
          message(STATUS "aoti links: ${{_aoti}}")
        endif()
        """)
    )
    return src


def test_find_package_components_aoti_gives_the_compiled_backend_with_libtorch_by_full_path(package_dir, tmp_path):
    import torch

    # No Python on PATH: the wheel's package finds torch beside itself in site-packages,
    # a plain install where torch was when it was built.
    proc = configure(
        aoti_project(tmp_path, "COMPONENTS aoti"), tmp_path / "b", f"-Det_copy_DIR={package_dir}", env=bare_env()
    )
    lib = Path(torch.__file__).parent / "lib"
    assert f"aoti_found=TRUE has_aoti=ON torch={torch.__version__} lib={lib}" in proc.stdout, proc.stdout
    aoti = re.search(r"^-- aoti links: (.*)$", proc.stdout, re.M)
    assert aoti is not None, proc.stdout
    assert {f"{lib}/libtorch_cpu.so", f"{lib}/libc10.so", "et_copy::runtime"} <= set(aoti.group(1).split(";"))
    # et_copy::runtime stays free of libtorch.
    runtime = re.search(r"^-- runtime links: (.*)$", proc.stdout, re.M)
    assert runtime is not None and runtime.group(1) == "executorch::runtime", proc.stdout


def test_find_package_says_which_torch_the_compiled_backend_lacks(plain_install, tmp_path):
    import torch

    # A copy of the plain install whose recorded torch is another release, and a python3 on
    # PATH that has none: COMPONENTS aoti fails naming what it found and what it needs.
    prefix = tmp_path / "prefix"
    shutil.copytree(plain_install.parents[2], prefix)
    package = prefix / "lib" / "cmake" / "et_copy"
    other = tmp_path / "site" / "torch"
    other.mkdir(parents=True)
    (other / "version.py").write_text("__version__ = '2.12.0+cpu'\n")
    lookup = (package / "et_copyTorch.cmake").read_text()
    assert str(Path(torch.__file__).parent) in lookup
    (package / "et_copyTorch.cmake").write_text(lookup.replace(str(Path(torch.__file__).parent), str(other)))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "python3").chmod(0o755)
    env = {**bare_env(), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    release = torch.__version__.split("+")[0]

    proc = configure(
        aoti_project(tmp_path, "COMPONENTS aoti"), tmp_path / "b1", f"-Det_copy_DIR={package}", env=env, check=False
    )
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())
    assert f"from torch {release}, the release it was compiled against, and found none" in err, proc.stderr
    assert f"torch 2.12.0 at {other}" in err and f"no torch in {bin_dir}/python3" in err, proc.stderr
    assert f"pip install torch=={release}" in err and "-DET_COPY_TORCH_DIR=" in err, proc.stderr
    # Not asked for: the package is found without it, and says so.
    proc = configure(aoti_project(tmp_path, ""), tmp_path / "b2", f"-Det_copy_DIR={package}", env=env)
    assert "et_copy: et_copy::aoti is not available: " in proc.stdout and "aoti_found=FALSE" in proc.stdout
    assert re.search(r"^-- aoti links: ", proc.stdout, re.M) is None, proc.stdout
    # ET_COPY_TORCH_DIR points it at a torch of the right release.
    proc = configure(
        aoti_project(tmp_path, "COMPONENTS aoti"),
        tmp_path / "b3",
        f"-Det_copy_DIR={package}",
        f"-DET_COPY_TORCH_DIR={Path(torch.__file__).parent}",
        env=env,
    )
    assert "aoti_found=TRUE" in proc.stdout, proc.stdout
    # A package built without the compiled backend refuses the component outright.
    config = package / "et_copyConfig.cmake"
    config.write_text(config.read_text().replace("set(et_copy_HAS_AOTI ON)", "set(et_copy_HAS_AOTI OFF)"))
    proc = configure(
        aoti_project(tmp_path, "COMPONENTS aoti"), tmp_path / "b4", f"-Det_copy_DIR={package}", env=env, check=False
    )
    assert proc.returncode != 0
    assert "was built without the compiled backend (et_copy::aoti)" in " ".join(proc.stderr.split()), proc.stderr


# ---- the executor ---------------------------------------------------------

EXPORT_SCRIPT = r"""
import json, sys
from pathlib import Path

import torch
from et_copy.export import export_device_program

out = Path(sys.argv[1])


class Swap(torch.nn.Module):
    def forward(self, a, b):
        return b, a


cases = {
    # Identity: D2H(H2D(x)); generated inputs, checked against eager below.
    "roundtrip": (torch.nn.Identity(), None),
    # Two inputs of different dtypes and ranks, returned swapped.
    "swap": (Swap(), (torch.randn(4, 3, dtype=torch.float64),
                      torch.arange(10, dtype=torch.int64).reshape(2, 5) - 3)),
}
meta = {}
for name, (module, inputs) in cases.items():
    example = inputs if inputs is not None else (torch.randn(3, 5),)
    program = export_device_program(module, example)  # alloc_graph_input=False by default
    (out / f"{name}.pte").write_bytes(program.buffer)
    meta[name] = {"n_inputs": len(example)}
    if inputs is not None:
        expected = module(*inputs)
        for i, t in enumerate(inputs):
            (out / f"{name}.in{i}.bin").write_bytes(t.contiguous().numpy().tobytes())
        for i, t in enumerate(expected):
            (out / f"{name}.expect{i}.bin").write_bytes(t.contiguous().numpy().tobytes())
        meta[name]["n_outputs"] = len(expected)
        meta[name]["in_bytes"] = sum(t.numel() * t.element_size() for t in inputs)

# Arithmetic between the copies, in a SimulatedDeviceBackend delegate: the
# backend runs aten::mul/add (the kernel library the executor links) over
# the simulated device's memory; only the copies run outside it.
class Affine(torch.nn.Module):
    def forward(self, x, y):
        return x * 2.0 + y


inputs = (torch.randn(3, 4), torch.randn(3, 4))
program = export_device_program(Affine(), inputs)
(out / "affine.pte").write_bytes(program.buffer)
plan = program.executorch_program.execution_plan[0]
meta["affine"] = {
    "operators": sorted(f"{o.name}.{o.overload}" for o in plan.operators),
    "delegates": [d.id for d in plan.delegates],
}
for i, t in enumerate(inputs):
    (out / f"affine.in{i}.bin").write_bytes(t.numpy().tobytes())
(out / "affine.expect0.bin").write_bytes(Affine()(*inputs).numpy().tobytes())

# The same program with its host output retyped to Half (tamper_programs.py):
# a checked d2h kernel rejects it, the wheel's writes 96 bytes into 48.
sys.path.insert(0, sys.argv[2])
import tamper_programs
tamper_programs.main(str(out / "tampered"))

# An LLM with its state on the device (et_copy.llm: tiny Qwen3-MoE, the
# token picked on the device), and transformers' tokens for two prompts.
from et_copy import llm

model = llm.tiny_model("qwen3_moe")
(out / "llm.pte").write_bytes(llm.export_llm(model, max_seq_len=32, pick="device").buffer)
prompts = [[5, 17, 3, 9], [7, 7, 1]]
meta["llm"] = {"prompts": prompts, "tokens": [llm.eager_generate(model, p, 16) for p in prompts]}
# The same LLM with its weights in a .ptd beside the .pte (external_weights=True).
from et_copy.export import save

save(llm.export_llm(model, max_seq_len=32, pick="device", external_weights=True), out / "llm_ptd.pte")
# The same LLM compiled (backend="aoti": AOTInductor code for the CPU, which AotiDeviceBackend
# runs), compiled on this machine, so trusted here. About a minute with the compile cache warm
# (tests/python/llm compiles the same code); seconds when et_copy.llm's program cache has it.
aoti = llm.export_llm_cached(model, max_seq_len=32, pick="device", backend="aoti")
(out / "llm_aoti.pte").write_bytes(aoti.buffer)

# XNNPACK annotated as the device (lower_to_device): its delegate would take
# buffers planned on cuda:0, which a CPU backend cannot read on a GPU, so
# the executor refuses the program at load.
try:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
except ImportError:
    XnnpackPartitioner = None
if XnnpackPartitioner is not None:
    from et_copy.export import lower_to_device

    class AddRelu(torch.nn.Module):
        def forward(self, a, b):
            return torch.relu(a + b)

    inputs = (torch.randn(4, 8), torch.randn(4, 8))
    program = lower_to_device(AddRelu(), inputs, XnnpackPartitioner())
    plan = program.executorch_program.execution_plan[0]
    (out / "xnnpack.pte").write_bytes(program.buffer)
    for i, t in enumerate(inputs):
        (out / f"xnnpack.in{i}.bin").write_bytes(t.numpy().tobytes())
    (out / "xnnpack.expect0.bin").write_bytes(AddRelu()(*inputs).numpy().tobytes())
    meta["xnnpack"] = {
        "operators": sorted(f"{o.name}.{o.overload}" for o in plan.operators),
        "delegates": [d.id for d in plan.delegates],
        "device_buffers": [int(b.device_type) for b in plan.non_const_buffer_device or []],
    }
# A compiled program for the consumer that links et_copy::aoti and never registers it
# (compiled_programs.Mlp: one compile-cache entry shared with the trust tests).
from compiled_programs import Mlp

mlp = Mlp()
x = torch.randn(2, 8)
(out / "mlp_aoti.pte").write_bytes(export_device_program(mlp, (x,), backend="aoti").buffer)
(out / "mlp_aoti.in0.bin").write_bytes(x.numpy().tobytes())
(out / "mlp_aoti.expect0.bin").write_bytes(mlp(x).detach().numpy().tobytes())
(out / "meta.json").write_text(json.dumps(meta))
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> Path:
    """Device-planned programs from et_copy.export, exported in a child
    process (importing executorch.exir mutates torch.library state)."""
    out = tmp_path_factory.mktemp("programs")
    run([sys.executable, "-c", EXPORT_SCRIPT, str(out), str(Path(__file__).parents[1] / "helpers")], timeout=300)
    return out


@pytest.fixture(scope="module")
def executor(package_dir, tmp_path_factory) -> Path:
    build_dir = tmp_path_factory.mktemp("executor") / "build"
    configure(EXECUTOR_SRC, build_dir, f"-Det_copy_DIR={package_dir}", env=bare_env())
    build(build_dir)
    exe = build_dir / "et_copy_executor"
    assert exe.is_file()
    return exe


def test_executor_links_the_wheels_kernel_library_and_xnnpack_backend(executor):
    needed = run(["readelf", "-d", str(executor)], timeout=60).stdout if shutil.which("readelf") else ""
    if not needed:
        pytest.skip("readelf not available")
    libs = re.findall(r"Shared library: \[([^\]]+)\]", needed)
    assert {"libexecutorch.so", "libexecutorch_kernels_optimized.so", "libexecutorch_backend_xnnpack.so"} <= set(libs)


METHOD_SCOPED = "kernels: et_copy's, method-scoped"


def test_executor_runs_arithmetic_in_the_device_backend_between_method_scoped_copies_like_eager(executor, programs):
    # A delegated device program: the copies outside SimulatedDeviceBackend's
    # delegate, the arithmetic inside it.
    meta = json.loads((programs / "meta.json").read_text())["affine"]
    assert meta["operators"] == ["et_copy::_d2h_copy.out", "et_copy::_h2d_copy.out"], meta
    assert meta["delegates"] == ["SimulatedDeviceBackend"], meta
    cmd = [
        str(executor),
        str(programs / "affine.pte"),
        "--require-copies",
        "--input",
        str(programs / "affine.in0.bin"),
        "--input",
        str(programs / "affine.in1.bin"),
        "--expect",
        str(programs / "affine.expect0.bin"),
    ]
    proc = run(cmd, timeout=120)
    # The copies are et_copy's method-scoped kernels; the executor registered
    # the backend itself.
    assert METHOD_SCOPED in proc.stdout and "output 0: matches" in proc.stdout, proc.stdout
    assert "backend SimulatedDeviceBackend: registered" in proc.stdout, proc.stdout
    # Neither the method nor the backend's nested program logs a
    # "kernel ... not found" line (aten::mul/add, the copies).
    assert "not found" not in proc.stderr, proc.stderr
    # Two inputs in, one output out, nothing else crosses (no weights here).
    s = stats(proc.stdout)
    assert (s["h2d_copies"], s["h2d_bytes"], s["d2h_copies"], s["d2h_bytes"]) == (2, 96, 1, 48), s
    assert s["failed_calls"] == 0, s


def test_executor_generates_like_transformers_in_two_interleaved_sessions_with_the_state_on_the_device(
    executor, programs
):
    meta = json.loads((programs / "meta.json").read_text())["llm"]
    proc = run(generate_command(executor, programs / "llm.pte", meta), timeout=300)
    # The LLM computes in SimulatedDeviceBackend's delegates, which the
    # executor registered; each session's state is its own arena there (the
    # session id SessionPool passes as a runtime spec), of the same size.
    assert "backend SimulatedDeviceBackend: registered" in proc.stdout, proc.stdout[-3000:]
    assert "AotiDeviceBackend" not in proc.stdout  # registered only for a program that names it
    check_generation(proc.stdout, meta)


def check_generation(stdout: str, meta: dict) -> None:
    """--generate's output for meta's prompts (a program of export_llm(pick="device")):
    transformers' tokens, two sessions with state of one size, per step the prompt's
    ids and positions in and the 8-byte token out, every device byte freed at exit."""
    states = re.findall(r"^session (\d): (\d+) bytes of state on the device$", stdout, re.M)
    assert [s for s, _ in states] == ["0", "1"] and states[0][1] == states[1][1] and int(states[0][1]) > 0, states
    for i, expected in enumerate(meta["tokens"]):
        tokens = re.search(rf"^session {i} tokens: (.*)$", stdout, re.M)
        assert tokens is not None and [int(t) for t in tokens.group(1).split()] == expected, stdout[-3000:]
    steps = re.findall(
        r"^session (\d) (prefill|decode_next): (\d+) in, .* h2d_bytes=(\d+) d2h_bytes=(\d+)$", stdout, re.M
    )
    assert len(steps) == 2 * len(meta["tokens"][0])
    for session, kind, n, h2d, d2h in steps:
        # The prompt's ids and positions in (8 bytes each), then nothing: decode_next feeds the
        # token back on the device. The token comes out; the state never crosses.
        assert (int(h2d), int(d2h)) == (16 * int(n), 8), (session, kind, n, h2d, d2h)
        assert kind == ("prefill" if int(n) > 1 else "decode_next") and (kind == "prefill") == (int(n) > 0)
    # Every device byte (the scratch, both sessions' state) is given back at exit.
    assert stats(stdout)["bytes_outstanding"] == 0


def generate_command(executor: Path, pte: Path, meta: dict) -> list[str]:
    args = [str(executor), str(pte), "--generate", str(len(meta["tokens"][0]))]
    for prompt in meta["prompts"]:
        args += ["--prompt", ",".join(map(str, prompt))]
    return args


def test_executor_runs_compiled_code_like_transformers_with_the_compiled_backend_registered_by_linking(
    executor, programs, tmp_path
):
    # The LLM of the test above exported with backend="aoti": its delegates carry AOTInductor
    # code, which AotiDeviceBackend (et_copy::aoti, linked to libtorch) runs in this executable,
    # with no Python. Linking et_copy::aoti registered the backend; the executor read its name
    # from the program and its own registration call found it registered (never twice).
    assert "aoti: available" in run([str(executor), "--help"], timeout=60).stdout
    meta = json.loads((programs / "meta.json").read_text())["llm"]
    args = generate_command(executor, programs / "llm_aoti.pte", meta)
    proc = run(args, timeout=300)
    assert "backend AotiDeviceBackend: already et_copy" in proc.stdout, proc.stdout[-3000:]
    check_generation(proc.stdout, meta)
    # The code was compiled on this machine, so its digests are marked in the compile cache;
    # a cache without the marks (the program come from elsewhere) runs it only with --trust-code.
    elsewhere = {**os.environ, "ET_COPY_AOTI_CACHE": str(tmp_path / "another-cache")}
    refused = run(args, timeout=300, env=elsewhere, check=False)
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]
    assert "not compiled here" in refused.stderr and "--trust-code runs compiled code" in refused.stderr
    assert "tokens:" not in refused.stdout
    trusted = run([*args, "--trust-code"], timeout=300, env=elsewhere)
    check_generation(trusted.stdout, meta)


COMPILED_CONSUMER = r"""
// Links et_copy::runtime, et_copy::simulated and et_copy::aoti, and calls no backend's
// registration: linking et_copy::aoti registered the compiled backend, and linking
// et_copy::simulated described the simulated one (a refusal names its registration call;
// nothing here references its library). Runs a compiled program through ExecuTorch's
// own Module. argv: program, input (float32 [2, 8]).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include <et_copy/aoti_backend.h>
#include <et_copy/device_backend.h>
#include <et_copy/registration.h>
#include <et_copy/simulated_device_backend.h>
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/backend/interface.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    return 2;
  }
  const bool linked = executorch::runtime::get_backend_class(et_copy::kAotiDeviceBackend) != nullptr;
  std::printf("registered before main: %s\n", linked ? "yes" : "no");
  // The allocator and the copy kernels stay the program's choice.
  if (et_copy::use_simulated_device() == et_copy::Registration::kFailed) {
    return 3;
  }
  std::printf("simulated: %s\n", et_copy::backend_hint(et_copy::kSimulatedDeviceBackend).c_str());
  for (const et_copy::KernelRegistration& k : et_copy::register_kernels()) {
    if (k.outcome == et_copy::Registration::kFailed) {
      return 3;
    }
  }
  std::ifstream file(argv[2], std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<float> x(bytes.size() / sizeof(float));
  std::memcpy(x.data(), bytes.data(), x.size() * sizeof(float));
  auto input = executorch::extension::make_tensor_ptr({2, 8}, std::move(x));
  executorch::extension::Module module(argv[1]);
  auto out = module.forward(*input);
  if (!out.ok()) {
    std::fprintf(stderr, "forward failed: 0x%x\n", static_cast<unsigned>(out.error()));
    return 4;
  }
  const auto& y = (*out)[0].toTensor();
  for (ssize_t i = 0; i < y.numel(); ++i) {
    std::printf("%.9g\n", y.const_data_ptr<float>()[i]);
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def compiled_consumer(package_dir, tmp_path_factory) -> Path:
    """COMPILED_CONSUMER built against the installed package."""
    src = tmp_path_factory.mktemp("consumer")
    (src / "main.cpp").write_text(COMPILED_CONSUMER)
    (src / "CMakeLists.txt").write_text(
        textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.28)
        project(compiled_consumer LANGUAGES CXX)
        set(CMAKE_CXX_STANDARD 17)
        find_package(et_copy 0.1 CONFIG REQUIRED COMPONENTS simulated aoti)
        add_executable(run_compiled main.cpp)
        target_link_libraries(run_compiled PRIVATE et_copy::runtime et_copy::simulated et_copy::aoti)
        """)
    )
    configure(src, src / "build", f"-Det_copy_DIR={package_dir}", env=bare_env())
    build(src / "build")
    return src / "build" / "run_compiled"


def test_a_program_linking_et_copy_aoti_runs_compiled_code_through_module_without_registering_it(
    compiled_consumer, programs
):
    # As ExecuTorch's backend libraries: linking et_copy::aoti registers AotiDeviceBackend, so
    # a program that never calls register_aoti_backend() runs a compiled program through
    # ExecuTorch's own Module (no et-copy loader), the allocator and kernels its own choice.
    proc = run(
        [str(compiled_consumer), str(programs / "mlp_aoti.pte"), str(programs / "mlp_aoti.in0.bin")],
        timeout=120,
    )
    assert "registered before main: yes" in proc.stdout, proc.stdout + proc.stderr
    got = np.array([float(v) for v in proc.stdout.split("\n")[2:] if v], dtype=np.float32)
    expected = np.frombuffer((programs / "mlp_aoti.expect0.bin").read_bytes(), dtype=np.float32)
    assert got.shape == expected.shape and np.allclose(got, expected, rtol=1e-5, atol=1e-6), (got, expected)


def test_a_program_linking_et_copy_simulated_is_told_how_to_register_its_backend_before_anything_registers_it(
    compiled_consumer, programs
):
    # Linking et_copy::simulated describes SimulatedDeviceBackend (an object on the link line, which
    # the linker keeps though nothing references it): a load check's refusal names its registration.
    proc = run(
        [str(compiled_consumer), str(programs / "mlp_aoti.pte"), str(programs / "mlp_aoti.in0.bin")],
        timeout=120,
    )
    hint = re.search(r"^simulated: (.*)$", proc.stdout, re.M)
    assert hint is not None, proc.stdout
    assert "'SimulatedDeviceBackend' is not registered" in hint.group(1), hint.group(1)
    assert "et_copy::register_simulated_device_backend()" in hint.group(1), hint.group(1)
    # Describing it at start succeeded, so the start logged no failure of it.
    assert "describing it when the program started failed" not in proc.stdout + proc.stderr


def test_executor_reads_the_weights_from_the_ptd_given_by_data_and_refuses_the_program_without_it(executor, programs):
    meta = json.loads((programs / "meta.json").read_text())["llm"]
    args = [str(executor), str(programs / "llm_ptd.pte"), "--generate", "8", "--prompt", "5,17,3,9"]
    proc = run([*args, "--data", str(programs / "llm_ptd.ptd"), "--verify-data"], timeout=300)
    tokens = re.search(r"^session 0 tokens: (.*)$", proc.stdout, re.M)
    assert tokens is not None and [int(t) for t in tokens.group(1).split()] == meta["tokens"][0][:8], proc.stdout
    missing = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "needs that file at load: data_path" in missing.stdout + missing.stderr


def test_executor_serves_copies_with_et_copys_kernels_though_the_kernel_library_registered_the_names(
    executor, programs, tmp_path
):
    # The host output retyped to Half: et-copy's d2h kernel rejects it by name.
    pte = programs / "tampered" / "output_dtype_half.pte"
    proc = run([str(executor), str(pte), "--output", str(tmp_path / "out.bin")], timeout=120, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "et_copy::_d2h_copy.out: dtype mismatch: self has Float, out has Half" in proc.stderr, proc.stderr
    assert not (tmp_path / "out.bin").exists()
    # The registry's kernel for the name is the wheel's, which copies 96 bytes
    # into the 48-byte output: what method-scoped kernels keep away.
    proc = run([str(executor), str(pte), "--global-kernels"], timeout=120, check=False)
    assert "kernel et_copy::_d2h_copy.out: already other" in proc.stdout, proc.stdout
    assert "output 0: Half [2, 3, 4] on CPU, 48 bytes" in proc.stdout, proc.stdout + proc.stderr
    assert stats(proc.stdout)["d2h_bytes"] == 96


def stats(stdout: str, allocator: str = "simulated") -> dict[str, int]:
    line = re.search(rf"^allocator {allocator}: (.*)$", stdout, re.M)
    assert line is not None, stdout
    return {k: int(v) for k, v in (kv.split("=") for kv in line.group(1).split())}


def test_executor_runs_a_device_planned_program_with_generated_inputs_like_eager(executor, programs, tmp_path):
    import torch

    proc = run(
        [
            str(executor),
            str(programs / "roundtrip.pte"),
            "--seed",
            "7",
            "--save-inputs",
            str(tmp_path),
            "--output",
            str(tmp_path / "out0.bin"),
            "--require-copies",
        ],
        timeout=120,
    )
    assert METHOD_SCOPED in proc.stdout, proc.stdout
    x = torch.from_numpy(np.fromfile(tmp_path / "input0.bin", dtype=np.float32).reshape(3, 5))
    got = torch.from_numpy(np.fromfile(tmp_path / "out0.bin", dtype=np.float32).reshape(3, 5))
    assert x.abs().max() > 0  # generated data, not an all-zero buffer
    torch.testing.assert_close(got, torch.nn.Identity()(x), rtol=0, atol=0)
    s = stats(proc.stdout)
    # One planned device buffer, one copy each way of the 60-byte tensor.
    assert (s["h2d_copies"], s["h2d_bytes"], s["d2h_copies"], s["d2h_bytes"]) == (1, 60, 1, 60), s
    assert s["allocations"] >= 1 and s["failed_calls"] == 0, s


def test_executor_output_files_equal_eager_for_inputs_from_files(executor, programs, tmp_path):
    meta = json.loads((programs / "meta.json").read_text())["swap"]
    ins = [str(programs / f"swap.in{i}.bin") for i in range(meta["n_inputs"])]
    outs = [tmp_path / f"out{i}.bin" for i in range(meta["n_outputs"])]
    expects = [programs / f"swap.expect{i}.bin" for i in range(meta["n_outputs"])]
    cmd = [str(executor), str(programs / "swap.pte"), "--require-copies"]
    for f in ins:
        cmd += ["--input", f]
    for o, e in zip(outs, expects):
        cmd += ["--output", str(o), "--expect", str(e)]
    proc = run(cmd, timeout=120)
    for o, e in zip(outs, expects):
        assert o.read_bytes() == e.read_bytes()
    assert proc.stdout.count(": matches ") == meta["n_outputs"], proc.stdout
    s = stats(proc.stdout)
    assert s["h2d_copies"] == meta["n_inputs"] and s["d2h_copies"] == meta["n_outputs"], s
    assert s["h2d_bytes"] == meta["in_bytes"] == s["d2h_bytes"], s


def test_executor_reports_an_output_that_differs(executor, programs, tmp_path):
    wrong = tmp_path / "wrong.bin"
    wrong.write_bytes(bytes(60))
    proc = run([str(executor), str(programs / "roundtrip.pte"), "--expect", str(wrong)], timeout=120, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "DIFFERS" in proc.stdout


def test_executor_rejects_an_input_file_of_the_wrong_size(executor, programs, tmp_path):
    short = tmp_path / "short.bin"
    short.write_bytes(bytes(59))
    proc = run([str(executor), str(programs / "roundtrip.pte"), "--input", str(short)], timeout=120, check=False)
    assert proc.returncode == 2
    assert "has 59 bytes; input 0 takes 60" in proc.stderr


def test_executor_built_with_add_subdirectory_runs_the_program(programs, tmp_path):
    # The same consumer, with et-copy's source tree added in-line instead of
    # the installed package (CUDA off: the installed-package runs cover it).
    build_dir = tmp_path / "build"
    configure(EXECUTOR_SRC, build_dir, f"-DET_COPY_SOURCE_DIR={REPO}", "-DET_COPY_WITH_CUDA=OFF")
    build(build_dir)
    meta = json.loads((programs / "meta.json").read_text())["swap"]
    cmd = [str(build_dir / "et_copy_executor"), str(programs / "swap.pte"), "--require-copies"]
    for i in range(meta["n_inputs"]):
        cmd += ["--input", str(programs / f"swap.in{i}.bin")]
    for i in range(meta["n_outputs"]):
        cmd += ["--expect", str(programs / f"swap.expect{i}.bin")]
    proc = run(cmd, timeout=120)
    assert proc.stdout.count(": matches ") == meta["n_outputs"], proc.stdout
    # Built without et_copy::aoti (ET_COPY_BUILD_AOTI is off here): a program of
    # backend="aoti" is refused before it loads, saying why.
    exe = build_dir / "et_copy_executor"
    assert "aoti: unavailable" in run([str(exe), "--help"], timeout=60).stdout
    proc = run(
        [str(exe), str(programs / "llm_aoti.pte"), "--generate", "2", "--prompt", "5,17"], timeout=120, check=False
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "has delegates of AotiDeviceBackend" in proc.stderr and "built without it" in proc.stderr, proc.stderr
    assert "-DET_COPY_BUILD_AOTI=ON" in proc.stderr and "tokens:" not in proc.stdout


def gpu_present() -> bool:
    return Path("/dev/nvidiactl").exists()


def test_executor_cuda_flag_uses_the_gpu_or_fails_cleanly_without_one(executor, programs, tmp_path):
    if "--cuda: available" not in run([str(executor), "--help"], timeout=60).stdout:
        pytest.skip("this executor was built without et_copy::cuda")
    out = tmp_path / "out0.bin"
    proc = run(
        [
            str(executor),
            str(programs / "roundtrip.pte"),
            "--cuda",
            "--seed",
            "3",
            "--save-inputs",
            str(tmp_path),
            "--output",
            str(out),
            "--require-copies",
        ],
        timeout=120,
        check=False,
    )
    if gpu_present():
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert out.read_bytes() == (tmp_path / "input0.bin").read_bytes()
        s = stats(proc.stdout, "cuda")
        assert (s["h2d_copies"], s["d2h_copies"]) == (1, 1), s
    else:
        # No driver here: a clear error and exit status 2, not a crash.
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "cannot use the CUDA allocator" in proc.stderr, proc.stderr
        assert not out.exists()


def test_executor_refuses_a_cpu_delegate_on_device_buffers_at_load(executor, programs, tmp_path):
    meta = json.loads((programs / "meta.json").read_text()).get("xnnpack")
    if meta is None:
        pytest.skip("executorch has no XNNPACK partitioner here")
    # Only the two et_copy ops outside the delegate, and a buffer on CUDA.
    assert meta["operators"] == ["et_copy::_d2h_copy.out", "et_copy::_h2d_copy.out"], meta
    assert meta["delegates"] == ["XnnpackBackend"] and 1 in meta["device_buffers"], meta
    # The executor links the XNNPACK backend itself, so only the load check
    # keeps it off the device: XNNPACK runs on the CPU and on a GPU would
    # read device memory from the host.
    out = tmp_path / "out0.bin"
    proc = run(
        [
            str(executor),
            str(programs / "xnnpack.pte"),
            "--input",
            str(programs / "xnnpack.in0.bin"),
            "--input",
            str(programs / "xnnpack.in1.bin"),
            "--output",
            str(out),
        ],
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    assert "delegate:XnnpackBackend" in err and "planned on cuda:0" in err, err
    # Allowed there: the simulated backend the executor registered, and the compiled one, which linking
    # et_copy::aoti registered (every executor built here has it).
    assert "aoti: available" in run([str(executor), "--help"], timeout=60).stdout
    allowed = "AotiDeviceBackend, SimulatedDeviceBackend"
    assert f"backend 'XnnpackBackend' does not run on that device (allowed there: {allowed})" in err, err
    # Refused before anything loaded or ran.
    assert "output 0" not in proc.stdout and not out.exists(), proc.stdout
    assert "allocator simulated: " not in proc.stdout, proc.stdout


def test_cmake_dir_cli_prints_the_package_folder_or_says_why_not():
    proc = subprocess.run([sys.executable, "-m", "et_copy", "--cmake-dir"], capture_output=True, text=True, timeout=120)
    if proc.returncode == 0:
        folder = Path(proc.stdout.strip())
        assert (folder / "et_copyConfig.cmake").is_file() and (folder / "et_copyConfigVersion.cmake").is_file()
        assert folder.parts[-4:] == ("et_copy", "lib", "cmake", "et_copy"), folder
    else:
        # A source-tree et_copy has no package: one line saying so, no traceback.
        assert proc.returncode == 1
        assert "no CMake package" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
