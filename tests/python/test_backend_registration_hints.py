"""A program whose device backend is not registered is refused at load with
what to call: each of et-copy's backends, in a fresh process (a registered
backend cannot be unregistered), from the same C++ refusal that C++
executors log."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

pytest.importorskip("executorch.exir")

from et_copy.export import export_device_program  # noqa: E402

CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    import et_copy, et_copy.runtime
    from et_copy import _C
    from et_copy.backends.simulated import _simulated

    simulated, aoti = sys.argv[1], sys.argv[2]

    def attempt(path):
        try:
            et_copy.runtime.load(path).load_method("forward").execute([torch.ones(2, 4)])
            return "ran"
        except et_copy.EtCopyError as e:
            return str(e)

    seen = {}
    _C.use_simulated_device(1, False)  # the allocator alone: no backend yet
    seen["simulated, no backend"] = attempt(simulated)
    _simulated.register_simulated_device_backend()
    seen["simulated"] = attempt(simulated)
    seen["aoti, no backend"] = attempt(aoti)
    et_copy.use_aoti_backend()
    seen["aoti"] = attempt(aoti)
    print(json.dumps(seen))
    """
)


def test_loading_names_the_backend_to_register_and_the_call_that_registers_it(tmp_path):
    module = torch.nn.Linear(4, 3)
    paths = []
    for backend in ("simulated", "aoti"):
        path = tmp_path / f"{backend}.pte"
        path.write_bytes(export_device_program(module, (torch.ones(2, 4),), backend=backend).buffer)
        paths.append(str(path))
    proc = subprocess.run([sys.executable, "-c", CHILD, *paths], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["simulated"] == seen["aoti"] == "ran", seen
    assert (
        "backend 'SimulatedDeviceBackend' is not registered: call et_copy.use_simulated_device() "
        "(C++: et_copy::register_simulated_device_backend()) before loading" in seen["simulated, no backend"]
    ), seen
    assert (
        "backend 'AotiDeviceBackend' is not registered: call et_copy.use_aoti_backend() "
        "(C++: et_copy::register_aoti_backend()) before loading" in seen["aoti, no backend"]
    ), seen
    assert "AotiDeviceBackend" not in seen["simulated, no backend"]
