"""The parity harness: `python -m et_copy parity` end to end (in subprocesses,
since it imports executorch.runtime), its guard bytes, and its case matrix."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import et_copy
import pytest
import torch
from et_copy.tools.parity import cases as parity_cases
from et_copy.tools.parity import guards, runners
from et_copy.tools.parity.guards import GuardedDevice, GuardedHost, guard_size, pattern

SHARP_EDGE = "invalid/{}/dtype_mismatch/float64_into_float32"  # docs/design.md, sharp edge 3


def run_parity(*args: str, tmp_path=None, code: str | None = None) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Runs the harness in a fresh interpreter; returns the process and its JSON."""
    json_path = None
    argv = ["--no-progress", *args]
    if tmp_path is not None:
        json_path = tmp_path / "parity.json"
        argv += ["--json", str(json_path)]
    if code is None:
        cmd = [sys.executable, "-m", "et_copy", "parity", *argv]
    else:
        cmd = [sys.executable, "-c", textwrap.dedent(code), *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    result = json.loads(json_path.read_text()) if json_path is not None and json_path.exists() else None
    return proc, result


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """The default run (every case), once for the tests that read it."""
    return run_parity(tmp_path=tmp_path_factory.mktemp("parity"))


# --- the command ----------------------------------------------------------------------------


@pytest.mark.slow
def test_default_run_exits_0_with_no_et_copy_findings(default_run):
    proc, result = default_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["summary"]["passed"] is True
    assert result["summary"]["cases"] == len(parity_cases.all_cases())
    assert result["summary"]["programs_ok"] == result["summary"]["programs"] == len(result["programs"]) > 20
    assert [f for f in result["findings"] if f["impl"] == "et_copy"] == []
    for case in result["cases"]:
        assert case["results"]["et_copy"]["verdict"] == "ok", case["name"]
        if case["expect"] == "copy":
            assert case["results"]["et_copy"]["matches_aot"] is True, case["name"]
        else:
            assert case["results"]["et_copy"]["error"]["type"] == "EtCopyError", case["name"]


@pytest.mark.slow
def test_default_run_reports_the_wheel_kernels_out_of_bounds_write(default_run):
    proc, result = default_run
    assert result["environment"]["registry_owner"] == "the executorch wheel's kernels"
    for direction in ("h2d", "d2h"):
        name = SHARP_EDGE.format(direction)
        kinds = {f["kind"] for f in result["findings"] if f["case"] == name and f["impl"] == "registry"}
        assert "out_of_bounds_write" in kinds, name
        oob = next(
            f
            for f in result["findings"]
            if f["case"] == name and f["impl"] == "registry" and f["kind"] == "out_of_bounds_write"
        )
        assert "16 byte(s) past the end of out" in oob["message"]  # 32 bytes into a 16-byte out
        assert f"registry (the executorch wheel's kernels): {name}: wrote 16 byte(s) past the end of out" in proc.stdout


@pytest.mark.slow
def test_default_run_prints_a_table_naming_every_finding(default_run):
    proc, result = default_run
    out = proc.stdout
    for header in ("valid cases:", "invalid cases:", "findings (", "PASS:"):
        assert header in out
    for dtype in et_copy.SUPPORTED_DTYPES:
        assert f"h2d  {str(dtype).removeprefix('torch.')}" in out
    # Every (case, implementation) with a finding has a numbered entry that names it.
    pairs = {(f["case"], f["impl"]) for f in result["findings"]}
    entries = [line for line in out.splitlines() if line.startswith("[")]
    assert len(entries) == len(pairs)
    for case, impl in pairs:
        label = runners.LABELS.get(impl, impl)  # programs' findings name their runtime column
        assert any(line.endswith(f" on {case}") and line.split("] ", 1)[1].startswith(label) for line in entries), (
            case,
            impl,
        )


@pytest.mark.slow
def test_default_run_reports_the_aot_out_op_converting_and_broadcasting(default_run):
    _, result = default_run
    aot_out = {(f["case"], f["kind"]): f["message"] for f in result["findings"] if f["impl"] == "aot_out"}
    assert "converts float64 to float32" in aot_out[(SHARP_EDGE.format("h2d"), "accepts_invalid")]
    assert "broadcasts [1] to [4]" in aot_out[("invalid/d2h/shape_mismatch/static_1_into_4", "accepts_invalid")]


@pytest.mark.slow
def test_cases_option_runs_only_the_selected_cases(tmp_path):
    proc, result = run_parity("--cases", "invalid/*/bad_device_index/*,h2d/bool/*", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [c["name"] for c in result["cases"]]
    assert names and all("/bad_device_index/" in n or n.startswith("h2d/bool/") for n in names)
    assert {n for n in names if "bad_device_index" in n} == {
        f"invalid/{d}/bad_device_index/cuda{i}" for d in ("h2d", "d2h") for i in (1, 5)
    }
    for case in result["cases"]:
        if "bad_device_index" in case["name"]:
            assert "device" in case["results"]["et_copy"]["error"]["message"]


def test_every_case_runs_on_host_unreadable_device_memory_with_the_same_verdicts(tmp_path):
    """The guards go through the inspection hook and every kernel (the
    wheel's too: it calls the allocator's copies) through the host alias, so
    a host access of device memory, which would fault, appears nowhere."""
    proc, result = run_parity("--no-programs", "--device-memory", "unreadable", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["environment"]["device_memory"].startswith("host-unreadable")
    assert "device memory of the cases: host-unreadable" in proc.stdout
    assert result["summary"]["cases"] == len(parity_cases.all_cases())
    assert [f for f in result["findings"] if f["impl"] == "et_copy"] == []
    for direction in ("h2d", "d2h"):  # the wheel's overrun still lands in the guard
        name = SHARP_EDGE.format(direction)
        assert any(f["case"] == name and f["kind"] == "out_of_bounds_write" for f in result["findings"]), name


def test_list_prints_the_selected_cases_and_runs_nothing():
    proc, result = run_parity("--list", "--cases", "bfloat16,!large,program/dynamic_rows/*")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    expected = [c.name for c in parity_cases.select(parity_cases.all_cases(), "bfloat16,!large")]
    assert [line.split()[0] for line in lines] == [
        *expected,
        "program/dynamic_rows/device",
    ]
    assert "PASS" not in proc.stdout


def test_a_pattern_matching_nothing_exits_2():
    proc, _ = run_parity("--cases", "no/such/case")
    assert proc.returncode == 2
    assert "no case matches" in proc.stderr


@pytest.mark.slow
def test_exit_status_is_1_when_et_copys_kernel_has_a_finding(tmp_path):
    # Swap the wheel's kernel in for et-copy's: the harness must fail the run.
    code = """
        import sys
        from et_copy.tools.parity import main, runners
        runners._RUNNERS["et_copy"] = runners._run_kernel("et_copy", runners._registry_kernel)
        sys.exit(main(sys.argv[1:]))
    """
    proc, result = run_parity("--cases", "dtype_mismatch/float64", tmp_path=tmp_path, code=code)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout
    assert result["summary"]["passed"] is False
    assert {f["kind"] for f in result["findings"] if f["impl"] == "et_copy"} >= {
        "out_of_bounds_write",
        "accepts_invalid",
    }


@pytest.mark.slow
def test_program_section_runs_real_models_on_both_runtimes_equal_to_eager_with_exact_copies(default_run):
    from et_copy.tools.parity.architectures import MODELS

    _, result = default_run
    programs = {p["name"]: p for p in result["programs"]}
    valid = {f"program/{m.name}/device" for m in MODELS}
    assert valid <= set(programs)
    for name in valid:
        p = programs[name]
        assert p["verdict"] == "ok", p
        for column in ("executorch.runtime", "et_copy.runtime"):
            assert p["cells"][column] == {"text": "= eager, copies exact", "ok": True}, (name, p["cells"])
            assert p["details"][column]["copies"] == p["details"]["expected_copies"], name
        # The same model exported without device planning computes the same bytes.
        model = name.split("/")[1]
        if next(m for m in MODELS if m.name == model).control:
            assert p["cells"]["control"] == {"text": "= eager", "ok": True}, (name, p["cells"])
    from et_copy.tools.parity.architectures import PROGRAM_DTYPES

    every_dtype = programs["program/copy_only_all_dtypes/device"]["details"]["expected_copies"]
    assert every_dtype["h2d_copies"] == every_dtype["d2h_copies"] == len(PROGRAM_DTYPES)
    assert every_dtype["d2h_bytes"] == 15 * sum(d.itemsize for d in PROGRAM_DTYPES)
    dynamic = programs["program/dynamic_rows/device"]["details"]["expected_copies"]
    assert dynamic["h2d_bytes"] == 5 * 8 * 4  # the rows it ran with, not the planned 16


@pytest.mark.slow
def test_program_section_et_copy_runtime_rejects_every_tampered_program(default_run):
    _, result = default_run
    tampered = [p for p in result["programs"] if not p["valid"]]
    assert len(tampered) >= 13
    for p in tampered:
        cell = p["cells"]["et_copy.runtime"]
        assert cell["ok"] and cell["text"].startswith("rejected: "), p
    by_name = {p["name"].rsplit("/", 1)[1]: p for p in tampered}
    half = by_name["output_dtype_half"]
    assert half["details"]["et_copy.runtime"]["operator"] == "et_copy::_d2h_copy.out"
    assert "dtype mismatch: self has Float, out has Half" in half["details"]["et_copy.runtime"]["message"]
    # The wheel's kernel takes it: 96 bytes into a 48-byte output, reported as its finding.
    assert half["cells"]["executorch.runtime"]["text"].startswith("accepted: torch.float16[2, 3, 4]")
    assert {"case": half["name"], "impl": "executorch.runtime", "kind": "accepted_tampered"}.items() <= next(
        f for f in result["findings"] if f["case"] == half["name"]
    ).items()


@pytest.mark.slow
def test_exit_status_is_1_when_a_program_fails(tmp_path):
    # Counters that never move: the copies cannot match the plan.
    code = """
        import sys
        from et_copy import _registration
        from et_copy.tools.parity import main
        frozen = _registration.allocator_stats  # what et_copy.counting() reads
        _registration.allocator_stats = lambda *a: {k: 0 for k in frozen()}
        sys.exit(main(sys.argv[1:]))
    """
    proc, result = run_parity("--cases", "program/dynamic_rows/device", tmp_path=tmp_path, code=code)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    kinds = {f["kind"] for f in result["findings"] if f["impl"] == "et_copy.runtime"}
    assert kinds == {"wrong_copies"}
    assert "FAIL" in proc.stdout


# --- guard bytes ----------------------------------------------------------------------------


@pytest.fixture(params=[True, False], ids=["host_readable", "unreadable"])
def device(request):
    """The simulated device, in each memory mode (the mode before restored)."""
    et_copy.use_simulated_device()
    before = et_copy.allocator_info()["host_readable"]
    et_copy.use_simulated_device(host_readable=request.param)
    yield
    et_copy.use_simulated_device(host_readable=before)


def test_intact_guards_report_nothing(device):
    host = GuardedHost("out", torch.float32, (4,), 256, pattern(16, 3))
    dev = GuardedDevice("out", torch.float32, (4,), 256, pattern(16, 3))
    try:
        assert host.check(body_must_not_change=True) == []
        assert dev.check(body_must_not_change=True) == []
    finally:
        dev.free()


def test_host_guard_catches_a_write_past_the_end():
    buf = GuardedHost("out", torch.float32, (4,), 256, pattern(16, 3))
    buf.raw[256 : 256 + 32].view(torch.float64).fill_(1.5)  # 32 bytes into a 16-byte tensor
    (violation,) = buf.check()
    assert (violation.buffer, violation.where, violation.reach) == ("out", "after", 16)
    assert "16 byte(s) past the end of out" in violation.describe()


def test_host_guard_catches_a_write_before_the_start():
    buf = GuardedHost("self", torch.uint8, (8,), 256, pattern(8, 3))
    buf.raw[256 - 3] ^= 0xFF
    (violation,) = buf.check()
    assert (violation.where, violation.reach, violation.changed) == ("before", 3, 1)


def test_device_guard_catches_an_overrun_inside_the_allocation(device):
    buf = GuardedDevice("out", torch.float32, (4,), 256, pattern(16, 3))
    try:
        # A copy 8 bytes too long, as a kernel with a wrong byte count would make.
        too_long = guards.device_view(buf.whole, buf.guard, (6,), torch.float32)
        et_copy.h2d_copy(torch.arange(6, dtype=torch.float32), out=too_long)
        (violation,) = buf.check()
        assert (violation.where, violation.reach) == ("after", 8)
        assert torch.equal(buf.body().view(torch.float32), torch.arange(4, dtype=torch.float32))
    finally:
        buf.free()


def test_body_check_catches_a_changed_source():
    buf = GuardedHost("self", torch.int32, (3,), 256, pattern(12, 3))
    buf.tensor[1] = 7
    (violation,) = buf.check(body_must_not_change=True)
    assert violation.where == "inside" and violation.buffer == "self"


def test_guards_are_larger_than_the_widest_overrun_a_byte_copy_can_make():
    for self_nbytes, out_nbytes in [(32, 16), (16, 32), (0, 0), (3_003_000, 8), (1, 1 << 22)]:
        assert guard_size(self_nbytes, out_nbytes) > max(self_nbytes - out_nbytes, 0)
        assert guard_size(self_nbytes, out_nbytes) % 256 == 0


def test_judge_turns_an_overrunning_kernel_into_a_finding_and_leaves_out_of_the_process(device):
    case = next(c for c in parity_cases.all_cases() if c.name == SHARP_EDGE.format("h2d"))
    inputs = runners.Inputs(case, host_only=False)
    try:

        def wheel_like_kernel():  # copies self.nbytes (32) into a 16-byte out
            wide = guards.device_view(inputs.out_buf.whole, inputs.out_buf.guard, (8,), torch.float32)
            et_copy.h2d_copy(inputs.self.view(torch.float32), out=wide)

        result = runners._judge(
            runners.Result("et_copy"), case, inputs, runners.CapturedStderr(), wheel_like_kernel, {}, kernel=True
        )
    finally:
        inputs.free()
    kinds = [f.kind for f in result.findings]
    assert kinds == ["out_of_bounds_write", "accepts_invalid"]
    assert result.cell == "OOB WRITE +16B"


def test_judge_calls_a_rejection_that_touched_out_a_finding(device):
    case = next(c for c in parity_cases.all_cases() if c.name == "invalid/d2h/capacity_overflow/static_6_into_4")
    inputs = runners.Inputs(case, host_only=False)

    def writes_then_raises():
        inputs.out.fill_(0)
        raise et_copy.EtCopyError("rejected too late", error="InvalidArgument")

    try:
        result = runners._judge(
            runners.Result("et_copy"), case, inputs, runners.CapturedStderr(), writes_then_raises, {}, kernel=True
        )
    finally:
        inputs.free()
    assert [f.kind for f in result.findings] == ["touched_out_on_reject"]


# --- the program section's models ----------------------------------------------------------


def test_program_models_build_the_same_weights_every_time_and_leave_the_callers_rng_alone():
    from et_copy.tools.parity.architectures import MODELS

    torch.manual_seed(1234)
    state = torch.get_rng_state()
    for model in MODELS:
        first, second = model.build()[0], model.build()[0]
        for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items()):
            assert torch.equal(a, b), f"{model.name}: {name} differs between builds"
    assert torch.equal(torch.get_rng_state(), state)


# --- the case matrix ------------------------------------------------------------------------


def test_matrix_covers_every_dtype_in_both_directions_with_static_and_dynamic_out():
    cases = [c for c in parity_cases.all_cases() if c.valid]
    for direction in ("h2d", "d2h"):
        for dtype in et_copy.SUPPORTED_DTYPES:
            mine = [c for c in cases if c.direction == direction and c.dtype == dtype]
            shapes = {c.shape for c in mine}
            assert {(), (0,), (1,), (7,)} <= shapes
            assert any(c.out_dynamic and c.out_shape != c.shape for c in mine)
            assert any(c.dim_order == parity_cases.CHANNELS_LAST for c in mine)
        assert any("large" in c.tags and c.self_nbytes() >= 2 << 20 for c in cases if c.direction == direction)


def test_matrix_has_every_kind_of_invalid_case_in_both_directions():
    kinds = {(c.direction, c.name.split("/")[2]) for c in parity_cases.all_cases() if not c.valid}
    for direction in ("h2d", "d2h"):
        for kind in (
            "dtype_mismatch",
            "dim_order_mismatch",
            "capacity_overflow",
            "wrong_direction",
            "bad_device_index",
            "shape_mismatch",
            "rank_mismatch",
            "not_dense",
        ):
            assert (direction, kind) in kinds


def test_case_names_are_unique():
    names = [c.name for c in parity_cases.all_cases()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("h2d/float32/3x5", ["h2d/float32/3x5", "h2d/float32/3x5/dynamic", "h2d/float32/3x5/dynamic_in_4x6"]),
        ("h2d/float32/3x5/*", ["h2d/float32/3x5/dynamic", "h2d/float32/3x5/dynamic_in_4x6"]),
        ("invalid/h2d/bad_device_index/*,!cuda5", ["invalid/h2d/bad_device_index/cuda1"]),
    ],
)
def test_case_selection_uses_globs_substrings_and_exclusions(spec, expected):
    assert [c.name for c in parity_cases.select(parity_cases.all_cases(), spec)] == expected


def test_excluding_alone_starts_from_every_case():
    everything = parity_cases.all_cases()
    chosen = parity_cases.select(everything, "!large")
    assert len(chosen) == len(everything) - sum("large" in c.tags for c in everything)
