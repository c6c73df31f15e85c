"""Clean output: et_copy's commands print no third-party warnings or info
lines unless ``-v`` asks for them (et_copy._quiet), and et_copy's log
capture never makes ExecuTorch complain about a second PAL."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# What torch, torchao and executorch print on import or first use, as seen
# with torch 2.13.0 and executorch 1.5.1.
NOISE = ("Warning", "Failed to load", "_pytree", "register_pal", "cpuinfo", "ComplexHalf")


def run(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return proc


def noise(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(word in line for word in NOISE)]


def test_demo_prints_only_its_table_and_v_brings_torchs_warning_back():
    quiet = run("-m", "et_copy", "demo")
    assert quiet.stderr == ""
    assert not noise(quiet.stdout)
    loud = run("-m", "et_copy", "demo", "-v")
    assert "ComplexHalf support is experimental" in loud.stderr


@pytest.mark.slow
def test_bench_program_section_prints_only_its_own_lines_and_v_brings_the_rest_back():
    # The program section exports (torch's FutureWarnings, torchao's load
    # failures, torch's _pytree lines) and runs both runtimes.
    args = ("-m", "et_copy", "bench", "--quick", "--repeats", "2", "--sample-ms", "0.5", "--only", "program")
    quiet = run(*args)
    assert not noise(quiet.stdout + quiet.stderr), quiet.stderr
    assert all(line.startswith("  [") for line in quiet.stderr.splitlines()), quiet.stderr  # progress lines only
    loud = run(*args, "--verbose")
    assert "FutureWarning" in loud.stderr


def test_doctor_is_quiet():
    proc = run("-m", "et_copy", "doctor")
    assert proc.stderr == ""


def test_quiet_restores_what_it_changed():
    import logging
    import warnings

    from et_copy._quiet import THIRD_PARTY_LOGGERS, quiet

    levels = [logging.getLogger(n).level for n in THIRD_PARTY_LOGGERS]
    filters = list(warnings.filters)
    with quiet():
        with warnings.catch_warnings(record=True) as seen:
            warnings.warn("hidden", FutureWarning)
        assert seen == []
        assert all(logging.getLogger(n).level == logging.ERROR for n in THIRD_PARTY_LOGGERS)
    assert [logging.getLogger(n).level for n in THIRD_PARTY_LOGGERS] == levels
    assert warnings.filters == filters
    with quiet(verbose=True):
        assert [logging.getLogger(n).level for n in THIRD_PARTY_LOGGERS] == levels


@pytest.mark.slow
def test_both_runtimes_in_one_process_log_no_pal_complaint(tmp_path):
    """et_copy.runtime installs its log capture, executorch.runtime's
    pybindings then register their PAL, and et_copy.runtime wraps it again:
    none of it may log "register_pal() called multiple times", and a failure
    still raises with the runtime's own words."""
    script = textwrap.dedent(
        """
        import torch
        import et_copy
        from et_copy.export import export_device_program

        class Double(torch.nn.Module):
            def forward(self, x):
                return x * 2.0

        x = torch.randn(4)
        program = export_device_program(Double(), (x,)).buffer
        et_copy.use_simulated_device()
        import et_copy.runtime

        assert torch.equal(et_copy.runtime.load(program).load_method("forward").execute([x])[0], x * 2)
        from executorch.runtime import Runtime

        Runtime.get().load_program(program).load_method("forward").execute([x])
        method = et_copy.runtime.load(program).load_method("forward")
        assert torch.equal(method.execute([x])[0], x * 2)
        try:
            method.execute([torch.randn(5)])
        except et_copy.EtCopyError as e:
            print("raised:", e)
        """
    )
    proc = run("-c", script)
    assert "register_pal" not in proc.stderr, proc.stderr
    assert "raised:" in proc.stdout


@pytest.mark.slow
def test_executorchs_info_lines_show_only_when_verbose():
    """The first execution that sizes ExecuTorch's thread pool logs cpuinfo
    info lines through the PAL; quiet() keeps them (and only them) off."""
    script = textwrap.dedent(
        """
        import sys
        import torch
        import et_copy
        from et_copy._quiet import quiet
        from et_copy.export import export_device_program

        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)).eval()
        x = torch.randn(4, 32)
        program = export_device_program(model, (x,)).buffer
        et_copy.use_simulated_device()
        import et_copy.runtime

        method = et_copy.runtime.load(program).load_method()
        print("running", file=sys.stderr, flush=True)
        with quiet(verbose=sys.argv[1] == "verbose"):
            if sys.argv[1].startswith("baseline"):
                # executorch.runtime, first imported while quiet (generate's baseline): its pybindings
                # register their own log hook over et_copy's; the tools then wrap it again.
                from executorch.exir import to_edge_transform_and_lower
                from executorch.runtime import Runtime
                from et_copy._quiet import wrap_log_hooks

                if sys.argv[1] == "baseline":
                    wrap_log_hooks()

                pte = to_edge_transform_and_lower(torch.export.export(model, (x,))).to_executorch().buffer
                Runtime.get().load_program(pte).load_method("forward").execute([x])
            else:
                method.execute([x])
        """
    )

    def after_running(mode: str) -> str:
        return run("-c", script, mode).stderr.split("running\n", 1)[1]

    assert "cpuinfo" in after_running("verbose")
    assert after_running("quiet") == ""
    assert after_running("baseline") == ""  # as generate's executorch.runtime baseline
    assert "cpuinfo" in after_running("baseline-unwrapped")  # their hook prints what ours would not


def test_quiet_nests():
    from et_copy import _C
    from et_copy._quiet import quiet

    with quiet():
        with quiet():
            pass
        assert _C.set_forwarded_log_levels(False) is False  # still off after the inner one ended
    assert _C.set_forwarded_log_levels(True) is True  # back on after the outer one
