"""The intra-op threads a compiled program runs with: et_copy.runtime.load's
``threads``, which AotiDeviceBackend sets as the calling thread's OpenMP
thread count around each run of the model (the compiled code is built to
read it at each parallel region: et_copy.backends.aoti's ``cpp.dynamic_threads``).

The observable is the compiled code's OpenMP team: a parallel region run
with n threads starts n - 1 worker threads the first time, and a process
that has run no parallel region has none. Each case runs in a fresh child
process, so that no earlier region (an export's, another case's) has
started them; the program is exported once, here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from et_copy.export import export_device_program  # noqa: E402

CHILD = textwrap.dedent(
    """
    import json, os, sys
    import numpy
    import torch
    import et_copy, et_copy.runtime

    def tasks():
        return len(os.listdir("/proc/self/task"))

    path, threads, options = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    torch.set_num_threads(2)  # the caller's own count, which a run must leave as it found it
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()
    method = et_copy.runtime.load(path, threads=threads, backend_options=options).load_method("forward")
    # Made by numpy: a torch op over this many elements could start OpenMP workers of its own first.
    x = torch.from_numpy(numpy.random.default_rng(0).standard_normal((64, 4096), dtype=numpy.float32))
    before = tasks()
    (out,) = method.execute([x])
    started = tasks() - before
    print(json.dumps({
        "started": started,
        "caller_threads_after": torch.get_num_threads(),
        "equal": bool(torch.allclose(out, x.exp() * 2 + 1)),
    }))
    """
)


class Elementwise(torch.nn.Module):
    """Enough elements (262,144) that Inductor's kernel is one parallel region."""

    def forward(self, x):
        return x.exp() * 2 + 1


@pytest.fixture(scope="module")
def program_path(tmp_path_factory):
    program = export_device_program(Elementwise(), (torch.randn(64, 4096),), backend="aoti", strict=True)
    path = tmp_path_factory.mktemp("threads") / "elementwise.pte"
    path.write_bytes(program.buffer)
    return path


def _run(path, threads: int | None, backend_options: dict | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), json.dumps(threads), json.dumps(backend_options)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize(("threads", "workers"), [(None, 0), (1, 0), (3, 2)])
def test_the_compiled_code_runs_with_the_threads_the_load_asks_for(program_path, threads, workers):
    got = _run(program_path, threads)
    assert got["equal"]
    # n threads in the model's parallel region: n - 1 OpenMP workers started by it; the default is one thread.
    assert got["started"] == workers
    # The count is set for the run only: the caller's thread keeps its own.
    assert got["caller_threads_after"] == 2


@pytest.mark.slow
@pytest.mark.parametrize(("threads", "own", "workers"), [(None, 3, 2), (3, 1, 0)])
def test_the_thread_count_travels_as_the_compiled_backends_own_option_and_wins_over_the_convenience(
    program_path, threads, own, workers
):
    # backend_options reaches AotiDeviceBackend opaque to the runtime; its own value beats threads= (every backend's).
    got = _run(program_path, threads, {"AotiDeviceBackend": {"threads": own}})
    assert got["equal"] and got["started"] == workers and got["caller_threads_after"] == 2


@pytest.mark.parametrize(
    ("threads", "error", "message"),
    [
        (0, ValueError, "threads must be at least 1, got 0"),
        (-2, ValueError, "threads must be at least 1, got -2"),
        (True, TypeError, "threads must be an int or None, got bool"),
        ("2", TypeError, "threads must be an int or None, got str"),
        (2.0, TypeError, "threads must be an int or None, got float"),
    ],
)
def test_a_thread_count_that_is_not_a_positive_int_is_refused_before_loading(threads, error, message):
    with pytest.raises(error, match=f"et_copy.runtime.load: {message}"):
        et_copy.runtime.load(b"not a program", threads=threads)


def test_the_bindings_refuse_a_backend_option_the_runtime_cannot_pass_before_loading():
    # The runtime's own specs, and what ExecuTorch's BackendOption cannot hold, are refused by name.
    with pytest.raises(et_copy.EtCopyError, match="backend option 'pool' of 'AotiDeviceBackend' cannot be passed"):
        et_copy._C.load_program(b"not a program", backend_options={"AotiDeviceBackend": {"pool": 1}})
    with pytest.raises(et_copy.EtCopyError, match="backend option 'k{64}' of '\\*' cannot be passed"):
        et_copy._C.load_program(b"not a program", backend_options={"*": {"k" * 64: 1}})
    with pytest.raises(TypeError, match="backend option 'threads' of 'AotiDeviceBackend' is a float, not a bool"):
        et_copy.runtime.load(b"not a program", backend_options={"AotiDeviceBackend": {"threads": 2.0}})
    with pytest.raises(ValueError, match="backend option 'threads' of 'AotiDeviceBackend' is outside int32"):
        et_copy.runtime.load(b"not a program", backend_options={"AotiDeviceBackend": {"threads": 2**40}})
    for edge in (2**31, -(2**31) - 1):  # one past int32's ends is refused; the ends themselves pass on to the load
        with pytest.raises(ValueError, match="backend option 'k' of 'AotiDeviceBackend' is outside int32"):
            et_copy.runtime.load(b"not a program", backend_options={"AotiDeviceBackend": {"k": edge}})
    for edge in (2**31 - 1, -(2**31)):
        with pytest.raises(et_copy.EtCopyError) as refused:
            et_copy.runtime.load(b"not a program", backend_options={"AotiDeviceBackend": {"k": edge}})
        assert "backend option" not in str(refused.value)  # refused for its bytes, not its option
    with pytest.raises(TypeError, match="backend_options must be a mapping, got list"):
        et_copy.runtime.load(b"not a program", backend_options=[("AotiDeviceBackend", {})])
