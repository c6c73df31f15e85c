"""No order of et_copy.runtime's stateful calls crashes the process: load,
new_session, load_method, execute, reset, metadata, writing an ETDump (twice,
before any execution, after a failed write, after the methods are gone),
dropping objects and collecting garbage, in the orders hypothesis's stateful
testing picks (helpers/call_orders_child.py), each call working or raising
what the API documents. A crash would kill the test process, so the calls
run in a child and the test asserts it ended without a signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch.exir")

from et_copy.export import MethodInputs, export_device_methods  # noqa: E402

CHILD = Path(__file__).parent / "helpers" / "call_orders_child.py"
ROUNDTRIP = Path(__file__).parents[1] / "cpp" / "programs" / "roundtrip.pte"
# Fixed so the suite is repeatable; set ET_COPY_CALL_ORDERS_SEED to explore others.
SEED = int(os.environ.get("ET_COPY_CALL_ORDERS_SEED", "35"))
EXAMPLES = int(os.environ.get("ET_COPY_CALL_ORDERS_EXAMPLES", "25"))


class Counter(torch.nn.Module):
    """State on the device that two methods share (reset has something to do)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.arange(4, dtype=torch.float32))

    def forward(self, x):
        self.total.add_(x)
        return self.total * 2.0


def test_no_order_of_the_stateful_calls_ends_the_process_by_a_signal(tmp_path):
    counter = tmp_path / "counter.pte"
    counter.write_bytes(
        export_device_methods(
            Counter(), {"forward": MethodInputs((torch.ones(4),)), "add": MethodInputs((torch.ones(4),))}
        ).buffer
    )
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(tmp_path / "out"), str(SEED), str(EXAMPLES), str(ROUNDTRIP), str(counter)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # interleaved: ExecuTorch's log lines beside the step that wrote them
        text=True,
        timeout=600,
        cwd=CHILD.parent,
    )
    tail = "\n".join(proc.stdout.splitlines()[-40:])
    if proc.returncode < 0:
        pytest.fail(f"seed {SEED}: the child died by {signal.Signals(-proc.returncode).name}; its last steps:\n{tail}")
    assert proc.returncode == 0, f"seed {SEED}: the child failed:\n{tail}"
    assert proc.stdout.rstrip().endswith("done")
