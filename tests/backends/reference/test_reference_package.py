"""The reference backend as another package's backend, all from Python: its
folder built as a wheel of its own (pyproject.toml: an extension linking the
installed et_copy's shared runtime, and one entry point), installed apart,
then in a fresh Python its word exported through et-copy's routes, its
runtime side registered by word, the program loaded by et_copy.runtime and
run, equal to eager.

    python -m pytest tests/backends/reference/test_reference_package.py
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.exir")
pytest.importorskip("scikit_build_core")

HERE = Path(__file__).parent
# What the wheel is built from: the backend's sources and its package, not its tests.
SOURCES = ("pyproject.toml", "CMakeLists.txt", "bindings.cpp", "reference_backend.cpp", "reference_backend.h")


def _wheel_key() -> str:
    """The wheel's content key: its sources, and the et_copy it builds against
    (the shared runtime it links and the headers it includes)."""
    import et_copy

    digest = hashlib.sha256(sys.version.encode())
    package = Path(et_copy.__file__).parent
    files = [HERE / name for name in SOURCES] + sorted((HERE / "et_copy_reference").glob("*.py"))
    files += [package / "lib" / "libet_copy_runtime.so"] + sorted((package / "include" / "et_copy").glob("*.h"))
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


@pytest.fixture(scope="module")
def reference_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the reference package installed from its own wheel, built
    once per content (the build takes about a minute)."""
    cache = (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "et_copy" / "reference_wheel" / _wheel_key()
    )
    wheels = sorted(cache.glob("*.whl"))
    if not wheels:
        build = tmp_path_factory.mktemp("reference_wheel")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(build), str(HERE)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        cache.mkdir(parents=True, exist_ok=True)
        for wheel in build.glob("*.whl"):
            os.replace(wheel, cache / wheel.name)
        wheels = sorted(cache.glob("*.whl"))
    site = tmp_path_factory.mktemp("reference_site")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheels[0])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return site


RUN = r"""
import json, sys
import torch
import et_copy
from et_copy import runtime
from et_copy.backends import BACKENDS, use_backend
from et_copy.export import export_device_program

class ScaleAddRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]]))

    def forward(self, x, y):
        return torch.relu(x * self.w + y)

torch.manual_seed(0)
model = ScaleAddRelu()
x, y = torch.randn(2, 3), torch.randn(2, 3)
report = {"words": sorted(BACKENDS), "module": BACKENDS["reference"].module}
program = export_device_program(model, (x, y), backend="reference")
report["delegated"] = b"payload\treference\t" in bytes(program.buffer)
et_copy.use_simulated_device()
try:
    runtime.load(bytes(program.buffer)).load_method("forward")
except Exception as e:
    report["before"] = str(e)
report["register"] = [use_backend("reference"), use_backend("reference")]
out = runtime.load(bytes(program.buffer)).load_method("forward").execute([x, y])
report["max_diff"] = (out[0] - model(x, y)).abs().max().item()
report["nonzero"] = bool(out[0].abs().sum() > 0)
print(json.dumps(report))
"""


def test_a_backend_from_another_package_exports_loads_and_runs_from_python(reference_site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(reference_site), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["words"] == ["aoti", "reference", "simulated"], "its entry point gave et-copy the word"
    assert report["module"] == "et_copy_reference.export"
    assert report["delegated"], "the whole graph went to one reference delegate"
    # Before its registration the load refuses its delegate, naming the call that registers it.
    assert "backend 'ReferenceDeviceBackend' (the word 'reference') is not registered: call " in report["before"]
    assert "et_copy.backends.use_backend('reference') before loading" in report["before"]
    assert report["register"] == ["registered", "already et_copy"]
    assert report["max_diff"] == 0.0 and report["nonzero"]


def test_the_wheel_holds_the_extension_linked_to_et_copys_shared_runtime(reference_site: Path) -> None:
    """Its extension has no runtime of its own: it takes the core from
    libet_copy_runtime.so, found beside it in site-packages/et_copy/lib."""
    import shutil

    extensions = sorted((reference_site / "et_copy_reference").glob("_reference*.so"))
    assert len(extensions) == 1
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    dynamic = subprocess.run([readelf, "-d", str(extensions[0])], capture_output=True, text=True, check=True).stdout
    assert "[libet_copy_runtime.so]" in dynamic
    assert "$ORIGIN/../et_copy/lib" in dynamic
    entry_points = (next(reference_site.glob("et_copy_reference-*.dist-info")) / "entry_points.txt").read_text()
    assert "[et_copy.backends]\nreference = et_copy_reference:BACKEND" in entry_points
