"""The device backends' registration bindings in a fresh process: the first
call registers, every later one answers 'already et_copy' (never an error,
never a second registration), one backend's registration leaving the
other's alone."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CODE = """
import json
from et_copy import _C
print(json.dumps([
    _C.register_aoti_backend(), _C.register_aoti_backend(),
    _C.register_simulated_device_backend(), _C.register_simulated_device_backend(),
    _C.register_aoti_backend(),
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
