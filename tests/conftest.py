"""Session-wide test support, for every suite under tests/ (tests/python and
each backend's tests in tests/backends).

- Hypothesis profiles for the fuzz tests: "ci" (default, 500 cases per fuzz
  test) and "long" (10,000), chosen with ET_COPY_FUZZ_PROFILE; the summary
  reports how many fuzz cases ran and how long they took.
- ET_COPY_REQUIRE_ALL=1 (set by tests/run.sh, so CI) turns every skip that
  is not about a missing GPU into a failure: on a machine that has everything
  installed, a skip would hide a test that never ran.
- --costly: the costly tier (the docs' slow blocks, run as written), which
  is deselected otherwise.
- Device memory a test leaves to the garbage collector is collected when
  the test ends, so that no later test's counters (et_copy.counting(),
  allocator_stats(): process-wide) count its deallocation.
- A leak check: when the session ends, et_copy's simulated device (if this
  process registered it) must hold no memory. Every DeviceTensor a test made
  has been collected by then, so anything outstanding is a leak.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import fuzz_profiles
import pytest

fuzz_profiles.register_profiles()

_leak_report: list[str] = []
_worker_fuzz_lines: list[str] = []  # pytest-xdist's controller: what its workers' fuzz tests ran


@pytest.fixture(scope="session")
def exported_programs(tmp_path_factory) -> Path:
    """A real device-planned program (original.pte, et_copy.tools.models.RoundTrip)
    and tampered copies of it (helpers/tamper_programs.py), written by a child
    process because exporting imports executorch.exir."""
    out = tmp_path_factory.mktemp("programs")
    script = Path(__file__).parent / "python" / "helpers" / "tamper_programs.py"
    env = dict(os.environ)
    if "LD_PRELOAD" in env:
        # Under the sanitizer suite: export with the installed, uninstrumented
        # et_copy (the instrumented one needs the preloaded ASan runtime).
        for key in ("LD_PRELOAD", "PYTHONPATH", "ASAN_OPTIONS", "UBSAN_OPTIONS"):
            env.pop(key, None)
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode != 0:
        pytest.fail(f"exporting the test programs failed:\n{proc.stderr[-6000:]}")
    return out


def _live_device_allocations() -> int:
    """Live allocations of et_copy's allocator serving CUDA; 0 when none serves it."""
    et_copy = sys.modules.get("et_copy")
    if et_copy is None:
        return 0
    info = et_copy.allocator_info()
    return 0 if info is None or info["owner"] != "et_copy" else et_copy.allocator_stats()["live_allocations"]


@pytest.fixture(autouse=True)
def _device_memory_left_to_the_collector_is_freed_before_the_next_test():
    # The allocator's counters are process-wide: a device tensor that a test
    # leaves in a reference cycle would be freed by the garbage collector
    # whenever it next runs, perhaps inside a later test's counting() block
    # (seen: 6 deallocations in test_counting's round trip). A test that
    # leaves more device allocations live than it found has its garbage
    # collected at its end; one that frees what it made costs a counter read.
    before = _live_device_allocations()
    yield
    if _live_device_allocations() > before:
        gc.collect()


def pytest_addoption(parser):
    parser.addoption(
        "--costly",
        action="store_true",
        help="also run the tests marked costly: the docs' blocks too slow for every CI run (.ci/run-slow)",
    )


def pytest_collection_modifyitems(config, items):
    # Deselected rather than skipped: ET_COPY_REQUIRE_ALL=1 fails skips, and
    # the costly tier is a separate run, not a test that did not happen.
    if config.getoption("--costly"):
        return
    costly = [item for item in items if item.get_closest_marker("costly") is not None]
    if costly:
        config.hook.pytest_deselected(items=costly)
        items[:] = [item for item in items if item.get_closest_marker("costly") is None]


_GPU_WORDS = ("gpu", "cuda", "nvidia")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or os.environ.get("ET_COPY_REQUIRE_ALL") != "1" or hasattr(report, "wasxfail"):
        return
    reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    if item.get_closest_marker("gpu") is not None or any(w in reason.lower() for w in _GPU_WORDS):
        return
    report.outcome = "failed"
    report.longrepr = f"skipped, but ET_COPY_REQUIRE_ALL=1 forbids skips that are not about a GPU: {reason}"


def pytest_sessionfinish(session, exitstatus):
    leak = _simulated_device_leak()
    if leak:
        _leak_report.append(leak)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker (tests/run.sh): its controller reports, and fails on a leak
        workeroutput["et_copy_leaks"] = list(_leak_report)
        workeroutput["et_copy_fuzz"] = _fuzz_summary()
    if _leak_report:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    # pytest-xdist's controller, as each worker ends: its leak check's findings and its fuzz counts.
    output = getattr(node, "workeroutput", {})
    _leak_report.extend(output.get("et_copy_leaks", []))
    _worker_fuzz_lines.extend(output.get("et_copy_fuzz", []))


def _simulated_device_leak() -> str:
    """What the simulated device still holds after this process's tests; '' when nothing (or et_copy never ran)."""
    et_copy = sys.modules.get("et_copy")
    if et_copy is None:
        return ""
    gc.collect()
    info = et_copy.allocator_info()
    if info is None or info.get("name") != "simulated":
        return ""
    stats = et_copy.allocator_stats()
    if stats["bytes_outstanding"] == 0 and stats["live_allocations"] == 0:
        return ""
    return (
        f"simulated device leak: {stats['bytes_outstanding']} bytes in {stats['live_allocations']} "
        f"allocation(s) outstanding after the test session ({stats})"
    )


def _fuzz_summary() -> list[str]:
    """The fuzz tests' case counts and outcomes in this process; none when no fuzz test ran."""
    fuzz_strategies = sys.modules.get("fuzz_strategies")  # only if a fuzz test ran
    cases = fuzz_strategies.CASES if fuzz_strategies is not None else {}
    if not cases:
        return []
    total = sum(cases.values())
    seconds = sum(fuzz_strategies.SECONDS.values())
    parts = ", ".join(f"{k}: {n}" for k, n in sorted(cases.items()))
    outcomes = ", ".join(f"{k}: {n}" for k, n in sorted(fuzz_strategies.OUTCOMES.items(), key=lambda kv: -kv[1]))
    return [
        f"et_copy fuzz ({fuzz_profiles.profile_name()} profile): {total} cases in {seconds:.1f} s ({parts})",
        f"et_copy fuzz outcomes in this process: {outcomes}",
    ]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in _fuzz_summary() + _worker_fuzz_lines:
        terminalreporter.write_line(line)
    for line in _leak_report:
        terminalreporter.write_line(line, red=True)
