"""Before anything is registered (a fresh process: importing et_copy
registers nothing), every call that needs the CUDA allocator or the
registry's copy kernels refuses, naming what is missing and what to call;
once the simulated device is registered the same calls run, and asking
for the CUDA allocator as well is refused, naming who serves CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = """
import json
import et_copy
import torch
from et_copy import _C
from et_copy._C import loops
from et_copy._device import CUDA


def outcome(call):
    try:
        value = call()
    except Exception as e:
        return [type(e).__name__, getattr(e, "error", None), str(e)]
    return ["ok", None, repr(value)]


calls = {
    "describe": lambda: _C.describe_allocator(CUDA),
    "empty": lambda: et_copy.empty((4,), torch.float32),
    "buffer": lambda: _C.DeviceBuffer(16, CUDA, 0, 256).nbytes,
    "bench": lambda: len(loops.bench_kernel("et_copy_h2d", 8, 1, 1)),
    "d2d": lambda: loops.device_to_device(0, 0, 0, 0),
    "registry_kernel": lambda: bool(loops.kernel_address("registry_h2d")),
}
before = {name: outcome(call) for name, call in calls.items()}
et_copy.use_simulated_device()
after = {name: outcome(call) for name, call in calls.items() if name != "registry_kernel"}
# CUDA is served now: asking for the CUDA allocator too is refused, naming who serves it, who still does.
cuda = [outcome(et_copy.use_cuda), _C.describe_allocator(CUDA)]
print(json.dumps({"before": before, "after": after, "cuda": cuda}))
"""


def test_calls_needing_the_allocator_or_the_kernels_name_what_is_missing_until_it_is_registered():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    no_allocator = (
        "no DeviceAllocator is registered for CUDA: call et_copy.use_simulated_device() or et_copy.use_cuda() first"
    )
    assert got["before"] == {
        "describe": ["ok", None, "'none'"],
        "empty": ["EtCopyError", "NotFound", no_allocator],
        "buffer": ["EtCopyError", "NotFound", no_allocator],
        "bench": [
            "RuntimeError",
            None,
            "bench_kernel: no DeviceAllocator is registered for CUDA: call et_copy.use_simulated_device() first",
        ],
        "d2d": ["RuntimeError", None, "NotFound: no et-copy allocator is registered for CUDA"],
        "registry_kernel": ["RuntimeError", None, "bench_kernel: no kernel is registered for et_copy::_h2d_copy.out"],
    }
    # Registered, the same calls run.
    after = got["after"]
    assert after["describe"] == ["ok", None, '"et_copy\'s simulated allocator"']
    assert after["empty"][0] == "ok" and after["buffer"] == ["ok", None, "16"]
    assert after["bench"] == ["ok", None, "1"] and after["d2d"] == ["ok", None, "None"]
    assert got["cuda"] == [
        [
            "EtCopyError",
            "RegistrationAlreadyRegistered",
            "et_copy.use_cuda: CUDA is already served by et_copy's simulated allocator; "
            "ExecuTorch cannot replace a registered allocator",
        ],
        "et_copy's simulated allocator",
    ]
