"""Child process of test_fuzz.py: fuzzes et_copy's kernels as ExecuTorch's
kernel registry dispatches them (et_copy.run_registered).

Sound only where the registry holds et_copy's kernels, so this process never
loads the executorch wheel's kernel library (which registers the same names,
and whose kernels corrupt memory on a dtype mismatch). It checks that the
library is not mapped, registers et_copy's kernels through the private
binding (et_copy.register_kernels() would load the wheel's library first),
and confirms the registry now resolves to them. Prints one JSON line.

    python fuzz_registry_child.py [--also-direct]

--also-direct fuzzes the direct kernel calls too, for running this script
by hand under AddressSanitizer (docs/reliability.md).
"""

from __future__ import annotations

import json
import sys

import et_copy
import fuzz_strategies as fs
from hypothesis import given

WHEEL_KERNELS = "libexecutorch_kernels_optimized.so"


def wheel_kernels_mapped() -> bool:
    with open("/proc/self/maps") as maps:
        return WHEEL_KERNELS in maps.read()


def main() -> int:
    if wheel_kernels_mapped() or "executorch.runtime" in sys.modules:
        print("the executorch wheel's kernels are loaded; the registry path would not test et_copy", file=sys.stderr)
        return 2
    et_copy._C.register_kernels()
    owners = {op: et_copy.kernel_owner(op) for op in (fs.H2D, fs.D2H)}
    if set(owners.values()) != {"already et_copy"}:
        print(f"registry does not hold et_copy's kernels: {owners}", file=sys.stderr)
        return 2

    @fs.fuzz_settings()
    @given(case=fs.public_cases())
    def public(case):
        fs.run_public_case(case, "registered")

    @fs.fuzz_settings()
    @given(case=fs.public_cases())
    def public_direct(case):
        fs.run_public_case(case, "direct")

    et_copy.use_simulated_device(2)
    with fs.collector_paused():
        public()
        if "--also-direct" in sys.argv[1:]:
            public_direct()
    assert not wheel_kernels_mapped()
    stats = et_copy.allocator_stats()
    if stats["bytes_outstanding"] != 0:
        print(f"simulated device memory outstanding after the fuzz run: {stats}", file=sys.stderr)
        return 1
    print(json.dumps({"owner": owners[fs.H2D], "cases": fs.CASES, "seconds": fs.SECONDS}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
