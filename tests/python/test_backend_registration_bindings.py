"""The device backends' registration bindings (each backend's own extension,
et_copy.backends.aoti._aoti and et_copy.backends.simulated._simulated) in a
fresh process: the first
call registers, every later one answers 'already et_copy' (never an error,
never a second registration), one backend's registration leaving the
other's alone."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from et_copy.backends.aoti import _aoti

CODE = """
import json
from et_copy.backends.aoti import _aoti
from et_copy.backends.simulated import _simulated
print(json.dumps([
    _aoti.register_aoti_backend(), _aoti.register_aoti_backend(),
    _simulated.register_simulated_device_backend(), _simulated.register_simulated_device_backend(),
    _aoti.register_aoti_backend(),
]))
"""


def test_each_backend_registers_once_and_then_answers_already_et_copy():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CODE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        "registered",
        "already et_copy",
        "registered",
        "already et_copy",
        "already et_copy",
    ]


# Another library's registrations, made in the child through libexecutorch.so's
# own register_backend (the library et-copy's shared runtime links): a name taken first, or
# ExecuTorch's fixed-size table filled. The interface pointer is never called:
# the child only registers and exits.
FOREIGN = """
import ctypes
import json
import os
import sys

import executorch
from et_copy import _C
from et_copy.backends.aoti import _aoti
from et_copy.backends.simulated import _simulated

lib = ctypes.CDLL(os.path.join(list(executorch.__path__)[0], "lib", "libexecutorch.so"))


class Backend(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("backend", ctypes.c_void_p)]


register = lib._ZN10executorch7runtime16register_backendERKNS0_7BackendE
register.argtypes = [ctypes.POINTER(Backend)]
register.restype = ctypes.c_uint32
interface = ctypes.create_string_buffer(64)
kept = []


def take(name):
    kept.append(Backend(name.encode(), ctypes.addressof(interface)))
    return register(ctypes.byref(kept[-1]))


if sys.argv[1] == "full":
    while take(f"Filler{len(kept)}") == 0:
        pass
else:  # a backend name to take first
    assert take(sys.argv[1]) == 0


def outcome(call):
    try:
        return ["ok", None, call()]
    except _C.EtCopyError as e:
        return ["EtCopyError", e.error, str(e)]


print(json.dumps([outcome(_simulated.register_simulated_device_backend), outcome(_aoti.register_aoti_backend)]))
"""


def run_foreign(mode: str) -> list:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FOREIGN), mode], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


TAKEN = {
    "SimulatedDeviceBackend": "et_copy.register_simulated_device_backend",
    _aoti.AOTI_BACKEND_ID: "et_copy.use_aoti_backend",
}


@pytest.mark.parametrize("taken", TAKEN)
def test_a_backend_name_another_library_took_is_refused_naming_it_and_the_other_backend_still_registers(taken):
    simulated, aoti = run_foreign(taken)
    refused = [
        "EtCopyError",
        "RegistrationAlreadyRegistered",
        f"{TAKEN[taken]}: another library registered a backend named {taken}; "
        "ExecuTorch cannot replace a registered backend",
    ]
    assert (simulated, aoti) == (
        (refused, ["ok", None, "registered"])
        if taken == "SimulatedDeviceBackend"
        else (["ok", None, "registered"], refused)
    )


def test_a_full_backend_registry_refuses_each_backend_with_executorchs_error():
    simulated, aoti = run_foreign("full")
    assert simulated == [
        "EtCopyError",
        "Internal",
        "et_copy.register_simulated_device_backend: ExecuTorch's backend registry refused SimulatedDeviceBackend",
    ]
    assert aoti == [
        "EtCopyError",
        "Internal",
        "et_copy.use_aoti_backend: ExecuTorch's backend registry refused AotiDeviceBackend",
    ]


NAMES = """
import json
from et_copy import _C
from et_copy.backends.aoti import _aoti
from et_copy.backends.simulated import _simulated
names = [_C.backend_names()]
_aoti.register_aoti_backend()
names.append(_C.backend_names())
_simulated.register_simulated_device_backend()
names.append(_C.backend_names())
print(json.dumps(names))
"""


def test_backend_names_lists_every_registered_backend_first_to_last_in_a_fresh_process():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(NAMES)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        [],
        [_aoti.AOTI_BACKEND_ID],
        [_aoti.AOTI_BACKEND_ID, "SimulatedDeviceBackend"],
    ]
