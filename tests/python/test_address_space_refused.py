"""When the system refuses the simulated device its address space (an
address-space limit, a strict overcommit policy), device allocations fail
with a clear error and the process goes on: et_copy.empty raises naming the
failure, the bench's own buffer says it could not be allocated, the log says
the reservation was refused and that no room was left in it (0 bytes
reserved), and a host-readable device still serves copies afterwards.

A child process lowers RLIMIT_AS just above what it already maps, so the
first host-unreadable allocation's reservation (1 GiB at the least) is
refused."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import json, resource
    import torch, et_copy
    from et_copy._C import loops

    et_copy.use_simulated_device(host_readable=False)
    vm_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:"))
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm_kib * 1024 + (256 << 20), hard))
    out = {}
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
    print(json.dumps(out))
    """
)


def test_a_refused_reservation_fails_each_allocation_clearly_and_the_process_goes_on():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    error, message = out["empty"]
    assert error == "MemoryAllocationFailed", message
    assert out["bench"] == "bench_kernel: could not allocate 4096 device bytes"
    assert "simulated device: the system refused to reserve address space for device memory" in proc.stderr
    assert "simulated device: no room for 1024 bytes in the 0-byte reservation" in proc.stderr
    assert "no room for 4096 bytes in the 0-byte reservation" in proc.stderr
    assert out["round_trip"] is True
