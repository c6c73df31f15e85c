"""``python -m et_copy bench``: a tiny configuration run in a child process,
checking what it prints and the structure of its JSON and PNG. No timing
assertions: the figures depend on the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

TINY = ["--quick", "--repeats", "2", "--sample-ms", "0.5"]


def run_bench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "et_copy", "bench", *args], capture_output=True, text=True, timeout=600, env=env
    )


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return proc


def check_stats(stats: dict) -> None:
    assert stats["samples"] == 2
    assert stats["iters_per_sample"] >= 1
    assert 0 < stats["min_ns"] <= stats["p10_ns"] <= stats["median_ns"] <= stats["p90_ns"]


@pytest.fixture(scope="module")
def micro_run(tmp_path_factory):
    """One run of the overhead, kernel and throughput sections at two sizes."""
    out = tmp_path_factory.mktemp("bench")
    json_path, png_path = out / "bench.json", out / "bench.png"
    proc = ok(
        run_bench(
            *TINY,
            "--only",
            "overhead,kernel,throughput,cuda",
            "--sizes",
            "4K",
            "64K",
            "--json",
            str(json_path),
            "--plot",
            str(png_path),
        )
    )
    return proc, json.loads(json_path.read_text()), png_path


def test_bench_json_describes_the_machine_and_the_method(micro_run):
    _, doc, _ = micro_run
    machine = doc["machine"]
    for key in ("cpu", "logical_cpus", "memory_gib", "python", "torch", "executorch", "et_copy", "torch_threads"):
        assert key in machine
    assert machine["torch"] == torch.__version__
    assert doc["config"]["repeats"] == 2
    assert doc["config"]["sizes"] == [4096, 65536]


def test_bench_call_overhead_sections_compare_against_their_baselines(micro_run):
    _, doc, _ = micro_run
    py = doc["python_overhead"]
    assert py["nbytes"] == 4096
    assert set(py["results"]) == {
        py["baseline"],
        "et_copy.h2d_copy (out=DeviceTensor)",
        "et_copy.d2h_copy (out=torch tensor)",
    }
    kernel = doc["kernel_overhead"]
    assert kernel["nbytes"] == 8
    assert kernel["baseline"] in kernel["results"]
    assert "et_copy h2d_copy_out_boxed (C++ loop)" in kernel["results"]
    assert set(kernel["registry"]) == {"et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"}
    for stats in [*py["results"].values(), *kernel["results"].values()]:
        check_stats(stats)


def test_bench_throughput_has_one_row_per_size_with_every_implementation(micro_run):
    _, doc, _ = micro_run
    rows = doc["throughput"]["rows"]
    assert [r["nbytes"] for r in rows] == [4096, 65536]
    names = set(rows[0]["results"])
    assert doc["throughput"]["baseline"] in names
    assert {"et_copy.h2d_copy (Python)", "et_copy.d2h_copy (Python)", "torch copy_ (CPU to CPU)"} <= names
    for row in rows:
        assert set(row["results"]) == names == set(row["gb_per_s"])
        for name, stats in row["results"].items():
            check_stats(stats)
            assert row["gb_per_s"][name] == pytest.approx(row["nbytes"] / stats["median_ns"])


def test_bench_reports_each_target_with_a_verdict(micro_run):
    proc, doc, _ = micro_run
    names = [t["name"] for t in doc["targets"]]
    assert sum("Python call overhead" in n for n in names) == 2
    assert sum("C++ kernel overhead" in n for n in names) == 2
    for t in doc["targets"]:
        assert isinstance(t["met"], bool)
        # The target's own line carries its verdict (a bare "met" would match "method").
        verdict = "[met   ]" if t["met"] else "[MISSED]"
        assert any(line.strip().startswith(f"{verdict} {t['name']}:") for line in proc.stdout.splitlines()), t
    assert "targets (reported, not asserted)" in proc.stdout
    assert "throughput: GB/s" in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skip message on machines without CUDA")
def test_bench_skips_cuda_rows_with_a_reason_when_there_is_no_gpu(micro_run):
    proc, doc, _ = micro_run
    assert doc["skipped"]["cuda"]
    assert "cuda: skipped (" in proc.stdout


def test_bench_writes_a_png_plot(micro_run):
    _, _, png = micro_run
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000  # a drawn figure, not an empty canvas


def test_bench_plot_without_matplotlib_says_how_to_get_it(tmp_path):
    # A matplotlib package that fails to import stands in for a missing one.
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("raise ImportError('matplotlib hidden by the test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    proc = run_bench(*TINY, "--only", "kernel", "--plot", str(tmp_path / "x.png"), env=env)
    assert proc.returncode == 2
    assert "pip install matplotlib" in proc.stderr
    assert not (tmp_path / "x.png").exists()


def test_bench_rejects_an_unknown_section():
    proc = run_bench("--only", "nonsense")
    assert proc.returncode == 2
    assert "unknown section" in proc.stderr


@pytest.mark.slow
def test_bench_program_section_runs_a_device_planned_pte_on_both_runtimes_and_its_host_twin(tmp_path):
    json_path = tmp_path / "program.json"
    ok(run_bench(*TINY, "--only", "program", "--json", str(json_path)))
    doc = json.loads(json_path.read_text())
    (row,) = doc["program"]["rows"]
    # The device-planned program really crosses the boundary on every run.
    assert row["copies_per_execution"] == {"h2d": 1, "d2h": 1}
    assert row["device_planned_bytes"] >= row["nbytes"]
    assert set(row["results"]) == {
        "device-planned .pte (h2d, model, d2h)",
        "same model, no device planning",
        "the same .pte on et_copy.runtime",
    }
    assert doc["program"]["runtimes"] == ["device-planned .pte (h2d, model, d2h)", "the same .pte on et_copy.runtime"]
    for stats in row["results"].values():
        check_stats(stats)


@pytest.mark.slow
def test_bench_verify_section_times_loads_with_and_without_verification_beside_hashlib(tmp_path):
    json_path = tmp_path / "verify.json"
    proc = ok(run_bench(*TINY, "--only", "verify", "--json", str(json_path)))
    section = json.loads(json_path.read_text())["verify"]
    assert (section["width"], section["layers"]) == (128, 2)
    assert section["weights_nbytes"] == 2 * 128 * 128 * 4
    assert set(section["results"]) == {
        "load + load_method",
        "the same, verify_data=True",
        "hashlib.sha256 over the weights",
    }
    for stats in section["results"].values():
        check_stats(stats)
    results = section["results"]
    assert section["ratio"] == pytest.approx(
        results["the same, verify_data=True"]["median_ns"] / results["load + load_method"]["median_ns"]
    )
    assert section["hashlib_gb_per_s"] > 0
    assert "verify_data: loading 2 float32 128x128 weights (128 KiB)" in proc.stdout
    assert "verified / plain: " in proc.stdout


def test_bench_verify_is_not_in_the_default_run():
    from et_copy.tools.bench import DEFAULT_SECTIONS, SECTIONS

    assert "verify" in SECTIONS and "verify" not in DEFAULT_SECTIONS


@pytest.mark.slow
def test_bench_llm_section_times_a_decode_step_on_both_runtimes_against_a_plain_host_program(tmp_path):
    json_path = tmp_path / "llm.json"
    proc = ok(run_bench(*TINY, "--only", "llm", "--backend", "simulated", "--json", str(json_path)))
    doc = json.loads(json_path.read_text())
    section = doc["llm"]
    assert section["backends"] == ["simulated"] and "aoti" not in section
    assert set(section["results"]) == {
        "device-state .pte on executorch.runtime",
        "the same .pte on et_copy.runtime",
        "the same .pte's decode_next on et_copy.runtime",
        "caller-held state .pte on executorch.runtime",
        "plain host .pte (no device) on executorch.runtime",
        "plain host .pte's decode_next on executorch.runtime",
    }
    assert section["baseline"] == "plain host .pte (no device) on executorch.runtime"
    assert section["pipeline"] == "the same .pte's decode_next on et_copy.runtime"
    # The pipeline is held against the same steps without a device: decode_next in both.
    assert section["pipeline_baseline"] == "plain host .pte's decode_next on executorch.runtime"
    # Loading uploads the weights: more than the state crosses, and the time is reported.
    assert section["load"]["h2d_bytes"] > 2 * section["state_nbytes"]
    assert section["load"]["seconds"] > 0 and section["load"]["plain_seconds"] > 0
    # The state stays on the device, and so does the token: the device pipeline's decode step moves
    # nothing in and the 8-byte token out, never the caches.
    assert section["state_nbytes"] > 0
    assert section["bytes_per_step"] == {"h2d": 0, "d2h": 8}
    for stats in section["results"].values():
        check_stats(stats)
    runtimes = [t for t in doc["targets"] if "et_copy.runtime against executorch.runtime" in t["name"]]
    assert [t["unit"] for t in runtimes if "LLM decode step" in t["name"]] == ["x executorch.runtime"]
    (pipeline,) = [t for t in doc["targets"] if "device pipeline (" in t["name"]]
    assert pipeline["unit"] == "x the plain host program" and pipeline["target"] == "<= 1.05"
    assert "LLM decode step" in proc.stdout
    assert "weights uploaded" in proc.stdout


# costly: CI time (82 s); the compiled backend's rows. The aoti export and run are in CI through test_llm.py.
@pytest.mark.costly
def test_bench_llm_section_times_the_compiled_backend_against_its_so_run_directly_by_torch(tmp_path):
    """--backend aoti: the compiled backend's decode and decode_next on et_copy.runtime, the same decode
    .so run by torch's AOTI runner, the ratio as a target, and the export and load times (compiled
    code from the cache when it is there: a cold compile is opt-in)."""
    json_path = tmp_path / "aoti.json"
    proc = ok(run_bench(*TINY, "--only", "llm", "--backend", "aoti", "--json", str(json_path)))
    doc = json.loads(json_path.read_text())
    section = doc["llm"]
    assert section["backends"] == ["aoti"] and doc["config"]["cold_compile"] is False
    aoti = section["aoti"]
    rows = {aoti["decode"], aoti["decode_next"], aoti["direct"]}
    assert set(section["results"]) == rows | {
        section["baseline"],
        "plain host .pte's decode_next on executorch.runtime",
    }
    assert "directly by torch" in aoti["direct"]
    for stats in section["results"].values():
        check_stats(stats)
    # Only the token leaves the device per step; the weights crossed at load.
    assert aoti["bytes_per_step"] == {"h2d": 0, "d2h": 8}
    assert aoti["load"]["h2d_bytes"] > aoti["state_nbytes"] > 0
    assert aoti["load"]["seconds"] > 0 and aoti["load"]["plain_seconds"] > 0
    export = aoti["export"]
    assert "cold" not in export and export["as_found"]["seconds"] > 0
    assert export["as_found"]["compiles"] + export["as_found"]["cache_hits"] == 4  # one partition per method
    (target,) = [t for t in doc["targets"] if "compiled backend" in t["name"]]
    assert target["unit"] == "x the .so run directly" and target["target"] == "<= 1.1"
    # Without the simulated backend's rows, their targets are not reported.
    assert not [t for t in doc["targets"] if "device pipeline (" in t["name"]]
    assert "run directly by torch" in proc.stdout and "--cold-compile" in proc.stdout
    assert "export_llm(backend='aoti')" in proc.stdout


# costly: CI time (189 s with a compile); a structure check of the mid-size bench, run by .ci/run-slow.
@pytest.mark.costly
def test_bench_llm_mid_section_compares_every_row_with_transformers_per_dtype(tmp_path):
    """--only llm-mid --quick: the mid-size section's structure on a small model of the same shape: per
    dtype, decode and prefill of every row (ours on both backends, the .so run directly, transformers eager
    and torch.compile), the bandwidth, the thread figures under both wait policies, and their targets."""
    from et_copy.tools.bench import _llm_mid

    json_path = tmp_path / "mid.json"
    proc = ok(run_bench(*TINY, "--only", "llm-mid", "--threads", "1", "--json", str(json_path)))
    doc = json.loads(json_path.read_text())
    assert "llm-mid" in doc["config"]["sections"] and doc["config"]["threads"] == 1
    section = doc["llm_mid"]
    assert section["threads"] == 1 and section["baseline"] == _llm_mid.EAGER
    assert section["config"] == _llm_mid.QUICK_CONFIG
    bw = section["bandwidth_gb_s"]
    assert bw["one_thread"] > 0 and bw["all_threads"] > 0 and bw["one_thread_threads"] == 1
    assert [e["dtype"] for e in section["dtypes"]] == [
        "float32",
        "bfloat16",
        "bfloat16, int8 weights",
        "bfloat16, int4 weights",
    ]
    assert [e["quantize"] for e in section["dtypes"]] == [None, None, "int8", "int4"]
    for entry in section["dtypes"]:
        for kind in ("decode", "prefill"):
            assert set(entry[kind]) == set(_llm_mid.ROWS)
            for stats in entry[kind].values():
                assert stats["samples"] >= 2 and 0 < stats["min_ns"] <= stats["median_ns"] <= stats["p90_ns"]
        assert 0 < entry["decode_weight_bytes"] < entry["weights_nbytes"]
        export = entry["export"]
        assert export["aoti"]["compiles"] + export["aoti"]["cache_hits"] == 4  # one partition per method
        assert export["simulated"]["seconds"] > 0
        assert entry["torch_compile_seconds"]["decode"] > 0 and entry["torch_compile_seconds"]["prefill"] > 0
        assert set(entry["first_decode_token"]) == {"aoti", "simulated", "direct", "eager"}
    # Stored bytes: int8 weights hold fewer than bf16's, int4 fewer than int8's.
    stored = [e["weights_nbytes"] for e in section["dtypes"][1:]]
    assert stored[0] > stored[1] > stored[2]
    # The float32 picks agree: the same model, the same prompt, each path's own arithmetic.
    assert len(set(section["dtypes"][0]["first_decode_token"].values())) == 1
    figures = section["thread_figures"]
    assert [f["wait_policy"] for f in figures][1] == "PASSIVE" and len(figures) == 2
    for f in figures:
        assert f["calls"] == 20 and f["one_thread"]["samples"] == f["two_threads"]["samples"] == 20
        assert f["two_threads_max_ns"] >= f["two_threads"]["median_ns"]
    names = [t["name"] for t in doc["targets"]]
    # three per variant, one per quantized variant against its unquantized step, two per wait policy
    assert sum("mid-size" in n for n in names) == 3 * 4 + 2 + 2 * 2
    assert "LLM mid-size step" in proc.stdout and "torch.compile" in proc.stdout


def test_bench_llm_mid_is_not_in_the_default_run():
    from et_copy.tools.bench import DEFAULT_SECTIONS, SECTIONS

    assert "llm-mid" in SECTIONS and "llm-mid" not in DEFAULT_SECTIONS
    assert "llm-moe" in SECTIONS and "llm-moe" not in DEFAULT_SECTIONS


def test_bench_rejects_a_thread_count_below_one():
    proc = run_bench("--only", "llm-mid", "--threads", "0")
    assert proc.returncode == 2
    assert "--threads must be at least 1, got 0" in proc.stderr


def test_bench_rejects_an_unknown_backend():
    proc = run_bench("--backend", "xla")
    assert proc.returncode == 2
    assert "invalid choice: 'xla'" in proc.stderr


def test_every_backend_of_the_table_has_rows_in_the_llm_section():
    """--backend takes every word of et_copy.backends' table: each shipped one is timed."""
    from et_copy.backends import BACKENDS
    from et_copy.tools.bench import _llm

    assert set(_llm.ROWS) == set(BACKENDS)
    assert [_llm.refusal(word) for word in sorted(BACKENDS)] == [None] * len(BACKENDS)


@pytest.fixture
def added_backend():
    """A backend of another package in et_copy.backends' table (add_backend), as a plug-in adds one."""
    from et_copy.backends import BACKENDS, Backend, add_backend

    def register() -> str:
        raise AssertionError("the bench registered a backend it has no rows for")

    added = add_backend(
        Backend("elsewhere", "ElsewhereDeviceBackend", "elsewhere", "ElsewherePartitioner", register, "tests only")
    )
    yield added
    del BACKENDS["elsewhere"]


@pytest.mark.parametrize("choice", ["elsewhere", "both"])
def test_a_backend_added_to_the_table_is_refused_by_name_never_skipped(added_backend, choice, capsys):
    """A word --backend takes (it lists the table's words) that the llm section has no rows for stops the
    bench before anything runs, naming the word and its backend id; "both" (every word) includes it."""
    from et_copy.tools import bench

    assert bench.main(["--only", "llm", "--backend", choice, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("et_copy bench: --backend elsewhere: the llm section has no rows for the backend ")
    assert "'elsewhere' (ElsewhereDeviceBackend); it times aoti, simulated" in err
    assert "--backend simulated" not in err and "--backend aoti" not in err  # the table's own are timed


def test_the_llm_section_refuses_a_word_without_rows_before_it_exports(added_backend):
    from et_copy.tools.bench import _llm
    from et_copy.tools.bench._timing import Config

    with pytest.raises(ValueError, match=r"^et_copy bench: --backend elsewhere: the llm section has no rows"):
        _llm.decode_step(Config(), backends=("simulated", "elsewhere"))
    with pytest.raises(ValueError, match=r"--backend xla: not a backend of et_copy.backends \(one of aoti, "):
        _llm.decode_step(Config(), backends=("xla",))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU runs the whole CUDA copy benchmark (scripts/gpu_check.sh)")
def test_the_cuda_copy_benchmark_is_a_module_of_the_bench_and_says_when_there_is_no_gpu(capsys):
    """python -m et_copy.tools.bench.cuda_copy (scripts/gpu_check.sh's copy benchmark step): status 2 and the
    reason on a machine with no CUDA device, before it registers anything."""
    from et_copy.tools.bench import cuda_copy

    assert cuda_copy.main(["--sizes", "4K"]) == 2
    assert capsys.readouterr().err.startswith("no CUDA device: ")
    assert cuda_copy.parse_size("64M") == 64 << 20 and cuda_copy.label(1 << 30) == "1 GiB"


def test_device_to_device_probe_copies_through_the_registered_allocator_and_counts_it():
    """et_copy._C.loops.device_to_device (tests' and benchmarks' probe)
    reaches the allocator use_simulated_device() registered through
    ExecuTorch's registry: its copies land in allocator_stats()."""
    import et_copy
    from et_copy._C import loops as _loops

    et_copy.use_simulated_device()
    x = torch.arange(64, dtype=torch.uint8)
    a, b = et_copy.h2d_copy(x), et_copy.empty((64,), torch.uint8)
    try:
        before = et_copy.allocator_stats()["d2d_copies"]
        _loops.device_to_device(b.data_ptr(), a.data_ptr(), 64, 0)
        assert et_copy.allocator_stats()["d2d_copies"] == before + 1
        assert torch.equal(b.cpu(), x)
        with pytest.raises(RuntimeError, match="^InvalidArgument: device-to-device copy failed"):
            _loops.device_to_device(b.data_ptr(), a.data_ptr(), 65, 0)  # past the end of both allocations
        assert torch.equal(b.cpu(), x)
    finally:
        a.free()
        b.free()
