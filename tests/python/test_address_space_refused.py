"""When the system refuses the simulated device its address space (an
address-space limit, a strict overcommit policy), device allocations fail
with a clear error and the process goes on: et_copy.empty raises naming the
failure, the bench's own buffer says it could not be allocated, the log says
the reservation was refused and that no room was left in it (0 bytes
reserved), and a host-readable device still serves copies afterwards.

A child process lowers RLIMIT_AS to 1.5 GiB above what it already maps, so
the first host-unreadable allocation's reservation is refused: its smallest
(1 GiB of device addresses and 1 GiB of alias) does not fit, and it tries
nothing smaller (two halves of 512 MiB would)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# Every child starts here: the simulated device the host cannot read, and
# RLIMIT_AS `sys.argv[1]` bytes above what the process already maps.
PRELUDE = """
import json, resource, sys
import torch, et_copy

et_copy.use_simulated_device(host_readable=False)
vm_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:"))
_, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (vm_kib * 1024 + int(sys.argv[1]), hard))
out = {}
"""


def run_limited(body: str, room: int, *args: object) -> tuple[dict, str]:
    """Runs PRELUDE then `body` in a child with `room` bytes of address space
    to spare (more arguments follow as sys.argv[2:]); returns the dict `out`
    it prints, and its stderr."""
    script = PRELUDE + textwrap.dedent(body) + "print(json.dumps(out))\n"
    proc = subprocess.run(
        [sys.executable, "-c", script, str(room), *map(str, args)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


REFUSED = """
from et_copy._C import loops

try:
    et_copy.empty((1024,), dtype=torch.uint8)
    out["empty"] = None
except et_copy.EtCopyError as e:
    out["empty"] = [e.error, str(e)]
try:
    loops.bench_kernel("et_copy_h2d", 4096, 1, 1)
    out["bench"] = None
except RuntimeError as e:
    out["bench"] = str(e)
resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
et_copy.use_simulated_device(host_readable=True)
x = torch.arange(12, dtype=torch.float32)
out["round_trip"] = bool(torch.equal(et_copy.d2h_copy(et_copy.h2d_copy(x)), x))
"""


def test_a_refused_reservation_fails_each_allocation_clearly_and_the_process_goes_on():
    out, stderr = run_limited(REFUSED, 1536 << 20)
    error, message = out["empty"]
    assert error == "MemoryAllocationFailed", message
    assert out["bench"] == "bench_kernel: could not allocate 4096 device bytes"
    assert "simulated device: the system refused to reserve address space for device memory" in stderr
    assert "simulated device: no room for 1024 bytes in the 0-byte reservation" in stderr
    assert "no room for 4096 bytes in the 0-byte reservation" in stderr
    assert out["round_trip"] is True


# Room for the device range and its alias at `gib` GiB each (sys.argv[2]), not
# at twice that: the reservation halves from 64 GiB until both fit (down to
# 1 GiB), so it is `gib` GiB, and an allocation of one GiB more finds no room
# in it (nothing is written: it is refused).
HALVED = """
gib = int(sys.argv[2])
try:
    et_copy.empty((gib + 1, 1 << 30), dtype=torch.uint8)
    out["larger"] = None
except et_copy.EtCopyError as e:
    out["larger"] = e.error
x = torch.arange(1024 * 1024, dtype=torch.int32).to(torch.uint8)
out["round_trip"] = bool(torch.equal(et_copy.d2h_copy(et_copy.h2d_copy(x)), x))
"""


@pytest.mark.parametrize("gib", [16, 1])  # halved twice; halved six times, to the smallest it tries
def test_a_refused_reservation_is_halved_until_it_fits_and_then_serves_what_fits_in_it(gib):
    out, stderr = run_limited(HALVED, (2 * gib << 30) + (256 << 20), gib)
    assert out == {"larger": "MemoryAllocationFailed", "round_trip": True}
    assert f"in the {gib << 30}-byte reservation" in stderr, stderr[-4000:]
    assert "refused to reserve address space" not in stderr
