"""et_copy.backends: one word per device backend, and what the word means on
both sides (the partitioner that exports for it, the registration that runs
it); ``backend=`` checked once, None the default; the old module names
(et_copy.backend, et_copy.aoti) give the same objects, with a DeprecationWarning, until
et-copy 0.2.0 removes them."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
from et_copy import _C  # noqa: E402
from et_copy.backends import BACKENDS, DEFAULT_BACKEND, partitioner_for, resolve_backend  # noqa: E402
from et_copy.backends.simulated import SimulatedDevicePartitioner  # noqa: E402
from et_copy.export import ExportArgumentError, export_device_program, lower_to_device  # noqa: E402
from executorch.exir.backend.backend_details import BackendDetails  # noqa: E402


@pytest.mark.parametrize("word", sorted(BACKENDS))
def test_a_word_names_a_partitioner_for_its_backend_and_the_details_executorch_finds(word):
    backend = BACKENDS[word]
    partitioner = backend.partitioner("cuda:1")
    assert partitioner.backend_id == backend.backend_id
    assert partitioner.device == "cuda:1"
    # executorch finds preprocess among BackendDetails' direct subclasses, by the backend id.
    details = {c.__name__: c for c in BackendDetails.__subclasses__()}
    assert details[backend.backend_id].__module__ == backend.module


@pytest.mark.parametrize("word", sorted(BACKENDS))
def test_a_word_registers_its_runtime_backend_once(word):
    et_copy.use_simulated_device()
    BACKENDS[word].register()  # registered now, or already by an earlier test
    assert BACKENDS[word].register() == "already et_copy"
    assert BACKENDS[word].backend_id in _C.backend_names()


def test_none_is_the_default_and_a_bad_word_is_named():
    assert resolve_backend(None, op="op") is BACKENDS[DEFAULT_BACKEND]
    assert type(partitioner_for(None)) is SimulatedDevicePartitioner
    with pytest.raises(ValueError, match=r"^op: backend must be one of \['aoti', 'simulated'\], got 'gpu'$"):
        resolve_backend("gpu", op="op")


def test_an_explicit_backend_is_refused_beside_a_partitioner_or_without_copies():
    linear, x = torch.nn.Linear(4, 2), (torch.randn(1, 4),)
    with pytest.raises(ExportArgumentError, match="pass backend='simulated' or a partitioner, not both") as info:
        export_device_program(linear, x, backend="simulated", partitioner=SimulatedDevicePartitioner())
    assert info.value.argument == "partitioner"
    for chosen in ({"backend": "simulated"}, {"partitioner": SimulatedDevicePartitioner()}):
        with pytest.raises(ExportArgumentError, match="a backend or decompositions go with insert_copies=True") as info:
            export_device_program(linear, x, insert_copies=False, **chosen)
        assert info.value.argument == "insert_copies"
    with pytest.raises(ExportArgumentError, match="not both"):
        lower_to_device(linear, x, SimulatedDevicePartitioner(), backend="simulated")


OLD_NAMES = {
    "et_copy.backend": {
        "SimulatedDevicePartitioner": "et_copy.backends.simulated",
        "SimulatedDeviceBackend": "et_copy.backends.simulated",
        "BACKEND_ID": "et_copy.backends.simulated",
        "DevicePartitioner": "et_copy.backends.partitioner",
        "WEIGHT_KEY": "et_copy.backends.record",
        "STATE_KEY": "et_copy.backends.record",
        "TensorBytes": "et_copy.backends.record",
        "store_tensor": "et_copy.backends.record",
        "record_header": "et_copy.backends.record",
        "StateSlot": "et_copy.backends.state",
        "state_arena_layout": "et_copy.backends.state",
    },
    "et_copy.aoti": {
        "trust": "et_copy.backends.aoti",
        "AotiDevicePartitioner": "et_copy.backends.aoti",
        "AotiDeviceBackend": "et_copy.backends.aoti",
        "compile_options": "et_copy.backends.aoti",
        "compile_stats": "et_copy.backends.aoti",
        "GCC_FLAGS": "et_copy.backends.aoti",
    },
}


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_the_old_module_names_give_the_same_objects_with_a_warning_naming_the_new_home(old):
    module = importlib.import_module(old)
    for name, home in OLD_NAMES[old].items():
        message = rf"^{old} is deprecated and is removed in et-copy 0\.2\.0: use {home}\.{name}$"
        with pytest.warns(DeprecationWarning, match=message):
            found = getattr(module, name)
        assert found is getattr(importlib.import_module(home), name), name
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_the_old_module_names_are_gone_by_the_release_they_name(old):
    """Each shim names the release that removes it; this fails once the package reaches that version
    with the shim still there: delete the module, this test's OLD_NAMES entry and docs/export.md's table."""
    module = importlib.import_module(old)
    assert module.REMOVED_IN == "0.2.0"
    version = tuple(int(part) for part in et_copy.__version__.split(".")[:3])
    removed_in = tuple(int(part) for part in module.REMOVED_IN.split("."))
    assert version < removed_in, f"{old} outlived et-copy {module.REMOVED_IN}"


def test_the_tools_offer_the_tables_words():
    for tool, extra in (("generate", ["auto"]), ("bench", ["both"])):
        out = subprocess.run(
            [sys.executable, "-m", "et_copy", tool, "--help"], capture_output=True, text=True, timeout=120, check=True
        ).stdout
        assert "{" + ",".join([*sorted(BACKENDS), *extra]) + "}" in out, out
