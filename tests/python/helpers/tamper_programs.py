"""Writes a real device-planned program and tampered copies of it.

    python tamper_programs.py OUT_DIR
    python tamper_programs.py --run-on-wheel OUT_DIR   (after the above)

Writes et_copy.tools.parity.tamper's programs: et_copy.tools.models.RoundTrip (x ->
_h2d_copy -> _d2h_copy) exported with et_copy.export.export_device_program,
and copies with one malformation each. Run in a child process: it imports executorch.exir.
Prints the names of the files written, one per line.

--run-on-wheel runs each file on the executorch wheel's Python runtime (the
wheel's kernels, et_copy's simulated allocator for CUDA), one subprocess per
file since a file may crash it, and prints what happened: the comparison in
docs/reliability.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from et_copy.tools.parity.tamper import original_program, tampered_programs

WHEEL_RUN = """
import sys, torch, et_copy
et_copy.use_simulated_device()
from executorch.runtime import Runtime
x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
try:
    out = Runtime.get().load_program(sys.argv[1]).load_method("forward").execute([x])[0]
except Exception as e:
    print("error:", str(e).splitlines()[0][:160])
    sys.exit(1)
raw = bytes(out.contiguous().view(torch.uint8).flatten().numpy())
same = raw == bytes(x.view(torch.uint8).flatten().numpy())[:len(raw)]
same = "equal" if same else "differ from"
print(f"success: {out.dtype} {tuple(out.shape)} ({len(raw)} bytes), bytes {same} the input's")
"""


def run_on_wheel(out_dir: str) -> int:
    for pte in sorted(Path(out_dir).glob("*.pte")):
        proc = subprocess.run([sys.executable, "-c", WHEEL_RUN, str(pte)], capture_output=True, text=True, timeout=600)
        said = (proc.stdout.strip().splitlines() or [""])[-1]
        print(f"{pte.stem:<28} exit {proc.returncode:>4}  {said}")
    return 0


def main(out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    original = original_program()
    (out / "original.pte").write_bytes(original)
    print("original")
    for name, data in tampered_programs(original).items():
        (out / f"{name}.pte").write_bytes(data)
        print(name)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--run-on-wheel":
        sys.exit(run_on_wheel(sys.argv[2]))
    sys.exit(main(sys.argv[1]))
