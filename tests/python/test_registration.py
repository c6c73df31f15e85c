"""Registration with ExecuTorch's registries, which abort the process on a
duplicate: every import order and call order, each in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest


def run_fresh(code: str) -> subprocess.CompletedProcess:
    """Runs ``code`` in a new interpreter; returns the finished process."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def last_json(proc: subprocess.CompletedProcess):
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


ORDERS = {
    "et_copy then executorch.runtime": """
        import et_copy
        import executorch.runtime
    """,
    "executorch.runtime then et_copy": """
        import executorch.runtime
        import et_copy
    """,
    "register, then executorch.runtime": """
        import et_copy
        et_copy.register_kernels()
        et_copy.use_simulated_device()
        import executorch.runtime
    """,
    "executorch.runtime, then register": """
        import executorch.runtime
        import et_copy
        et_copy.register_kernels()
        et_copy.use_simulated_device()
    """,
    "register twice around executorch.runtime": """
        import et_copy
        et_copy.register_kernels(); et_copy.use_simulated_device()
        import executorch.runtime
        et_copy.register_kernels(); et_copy.use_simulated_device()
    """,
    "executorch pybindings then et_copy registration": """
        import executorch.extension.pybindings.portable_lib
        import et_copy
        et_copy.register_kernels(); et_copy.use_simulated_device()
    """,
}


@pytest.mark.parametrize("order", list(ORDERS), ids=list(ORDERS))
def test_import_and_registration_order_never_aborts(order):
    proc = run_fresh(
        ORDERS[order]
        + """
        import json, et_copy
        print(json.dumps({op: et_copy.kernel_owner(op) for op in (et_copy.H2D_COPY_OUT, et_copy.D2H_COPY_OUT)}))
    """
    )
    owners = last_json(proc)
    # The wheel's kernel library is loaded in every one of these processes,
    # so it, not et_copy, holds both names: et_copy never registered twice.
    assert owners == {"et_copy::_h2d_copy.out": "already other", "et_copy::_d2h_copy.out": "already other"}


def test_import_registers_nothing():
    owners = last_json(
        run_fresh("""
        import json, et_copy
        print(json.dumps([et_copy.kernel_owner(et_copy.H2D_COPY_OUT), et_copy.allocator_info()]))
    """)
    )
    assert owners == ["absent", None]


def test_register_kernels_reports_the_wheel_kernels_and_is_idempotent():
    result = last_json(
        run_fresh("""
        import json, et_copy
        print(json.dumps([et_copy.register_kernels(), et_copy.register_kernels()]))
    """)
    )
    expected = {"et_copy::_h2d_copy.out": "already other", "et_copy::_d2h_copy.out": "already other"}
    assert result == [expected, expected]


def test_one_runtime_per_process_the_benchmark_loops_see_the_kernel_the_bindings_registered():
    """et_copy._C.loops and the bindings share one copy of et-copy's runtime:
    the kernel _C registers is, to the address, the one the loops link, so
    "is this kernel ours" (kernel_owner) and the registry lock and served()
    cache beside it exist once. An extension linking its own copy would see
    the registry's entry as another library's kernel."""
    result = last_json(
        run_fresh("""
        import json
        from et_copy import _C
        registered = [outcome for _, outcome, _ in _C.register_kernels()]
        owners = [_C.kernel_owner(op) for op in (_C.H2D_COPY_OUT, _C.D2H_COPY_OUT)]
        same = [_C.loops.kernel_address("registry_" + d) == _C.loops.kernel_address("et_copy_" + d)
                for d in ("h2d", "d2h")]
        print(json.dumps([registered, owners, same]))
    """)
    )
    # No kernel library is loaded in this process, so et_copy's kernels are the registry's.
    assert result == [["registered", "registered"], ["already et_copy", "already et_copy"], [True, True]]


def test_without_an_allocator_copies_fail_with_not_found():
    result = last_json(
        run_fresh("""
        import json, torch, et_copy
        from et_copy._tensors import DeviceTensor
        from et_copy._device import Device
        errors = []
        try:
            et_copy.empty((3,), torch.float32)
        except et_copy.EtCopyError as e:
            errors.append([e.error, str(e)])
        print(json.dumps(errors))
    """)
    )
    assert result[0][0] == "NotFound"
    assert "use_simulated_device" in result[0][1]


# A device tensor with no allocator behind it cannot be built from Python any
# more (the reader takes only DeviceBuffers et_copy allocated); the kernel's
# NotFound for a missing allocator is pinned in C++, on a fresh process:
# tests/cpp/test_registration.cpp, CopyWithNoAllocatorIsNotFoundAndLeavesOutUntouched.


def test_use_simulated_device_validates_its_argument():
    result = last_json(
        run_fresh("""
        import json, et_copy
        out = []
        for bad in (0, 128, "2", True):
            try:
                et_copy.use_simulated_device(bad)
            except (TypeError, ValueError) as e:
                out.append(type(e).__name__)
        out.append(et_copy.allocator_info())
        print(json.dumps(out))
    """)
    )
    assert result == ["ValueError", "ValueError", "TypeError", "TypeError", None]


def test_registry_kernel_runs_in_a_process_with_executorch_runtime():
    result = last_json(
        run_fresh("""
        import json, torch, et_copy
        import executorch.runtime
        et_copy.use_simulated_device()
        host = torch.arange(6, dtype=torch.int64)
        device = et_copy.empty((6,), torch.int64)
        et_copy.run_registered(et_copy.H2D_COPY_OUT, host, device)
        back = torch.zeros(6, dtype=torch.int64)
        et_copy.run_registered(et_copy.D2H_COPY_OUT, device, back)
        print(json.dumps(back.tolist()))
    """)
    )
    assert result == [0, 1, 2, 3, 4, 5]


def test_run_registered_with_no_kernel_is_operator_missing():
    result = last_json(
        run_fresh("""
        import json, torch, et_copy
        et_copy.use_simulated_device()
        out = et_copy.h2d_copy(torch.zeros(2))
        try:
            et_copy.run_registered("et_copy::_h2d_copy.out", torch.ones(2), out)
        except et_copy.EtCopyError as e:
            print(json.dumps([e.error, str(e), out.cpu().tolist()]))
    """)
    )
    # The op named, and out left as it was.
    assert result == ["OperatorMissing", "et_copy::_h2d_copy.out: no kernel is registered under this name", [0.0, 0.0]]


def test_run_registered_dispatches_et_copys_own_kernels_when_the_registry_holds_them():
    # A process that never loads the wheel's kernel library: the registry then
    # holds et_copy's boxed kernels (registered through the private binding, as
    # tests/python/helpers/fuzz_registry_child.py does), and run_registered must hand
    # them the op's whole argument stack (self, out, and the returned out).
    result = last_json(
        run_fresh("""
        import json, torch, et_copy
        et_copy._C.register_kernels()
        et_copy.use_simulated_device()
        owners = [et_copy.kernel_owner(op) for op in (et_copy.H2D_COPY_OUT, et_copy.D2H_COPY_OUT)]
        host = torch.arange(6, dtype=torch.int64)
        device = et_copy.empty((6,), torch.int64)
        et_copy.run_registered(et_copy.H2D_COPY_OUT, host, device)
        back = torch.zeros(6, dtype=torch.int64)
        et_copy.run_registered(et_copy.D2H_COPY_OUT, device, back)
        wrong = torch.full((6,), 7, dtype=torch.int32)
        try:
            et_copy.run_registered(et_copy.D2H_COPY_OUT, device, wrong)
            refused = None
        except et_copy.EtCopyError as e:
            refused = [e.error, str(e), wrong.tolist()]
        print(json.dumps([owners, back.tolist(), refused]))
    """)
    )
    failed = [
        "InvalidArgument",
        "et_copy::_d2h_copy.out: the registered kernel failed with InvalidArgument",
        [7] * 6,  # out left as it was
    ]
    assert result == [["already et_copy", "already et_copy"], [0, 1, 2, 3, 4, 5], failed]
