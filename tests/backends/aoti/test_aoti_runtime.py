"""AotiDeviceBackend (backends/aoti) end to end: programs whose delegate
record carries an AOTInductor model, compiled here with
``torch._inductor.aot_compile`` and wrapped in a record written by hand (the
test's own ``AotiRecordsByHand`` preprocess, not et_copy.backends.aoti's), run through
et_copy.runtime on the host-unreadable simulated device. exir picks a
preprocess by its class's name, so the test's class has a name of its own
(of the same length) and the serialized program's backend id is then
renamed to ``AotiDeviceBackend``, the runtime's.

Compiling takes 15-50 s a model on the CI machine, so each .so is compiled
once per process (``_SO_CACHE``) and every variant of a record (another
target, another torch version) is an edit of the compiled one's lines.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.backends.aoti  # noqa: E402
import et_copy.runtime  # noqa: E402
from et_copy import _C  # noqa: E402
from et_copy.backends.aoti import _aoti, compile_options  # noqa: E402
from et_copy.backends.simulated import SimulatedDevicePartitioner  # noqa: E402
from et_copy.backends.state import state_arena_layout  # noqa: E402
from et_copy.export import export_device_program  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.exir._serialize._named_data_store import NamedDataStore  # noqa: E402
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult  # noqa: E402
from executorch.exir.backend.compile_spec_schema import CompileSpec  # noqa: E402
from executorch.exir.backend.partitioner import DelegationSpec  # noqa: E402
from executorch.exir.tensor import scalar_type_enum  # noqa: E402
from torch.export.passes import move_to_device_pass  # noqa: E402

pytestmark = pytest.mark.slow

_SO_CACHE: dict[str, bytes] = {}  # graph code + input specs + target -> the compiled .so
EDIT: list[Callable[[list[str]], list[str]]] = []  # applied to the record's lines by the next preprocess
TARGET = {"device": "cpu"}  # what the next preprocess compiles for


def _bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _tensor_line(name: str, t: torch.Tensor) -> str:
    t = t.contiguous()
    sizes = ",".join(str(s) for s in t.shape)
    strides = ",".join(str(s) for s in t.stride())
    return f"tensor\t{name}\t{int(scalar_type_enum(t.dtype))}\t{sizes}\t{strides}"


def _compile(edge_program, target: str) -> bytes:
    user = set(edge_program.graph_signature.user_inputs)
    inputs = [n.meta["val"] for n in edge_program.graph.nodes if n.op == "placeholder" and n.name in user]
    key = hashlib.sha256(
        (edge_program.graph_module.code + repr([(tuple(v.shape), v.dtype) for v in inputs]) + target).encode()
    ).hexdigest()
    if key not in _SO_CACHE:
        if target == "cuda":  # as upstream's AotiBackend: the program, its fake inputs with it
            edge_program = move_to_device_pass(edge_program, "cuda")
            inputs = [n.meta["val"] for n in edge_program.graph.nodes if n.op == "placeholder" and n.name in user]
        module = edge_program.module()
        options = compile_options(target)  # et_copy.aoti's: no constant inlined or folded into the code
        with torch.no_grad():
            path = torch._inductor.aot_compile(module, tuple(inputs), options=options)
        with open(path if isinstance(path, str) else path[0], "rb") as f:
            _SO_CACHE[key] = f.read()
        # Compiled here but not through et_copy.aoti: trusted by digest, as a caller with its own compiler would.
        et_copy.backends.aoti.trust(hashlib.sha256(_SO_CACHE[key]).hexdigest())
    return _SO_CACHE[key]


HAND_ID = "AotiRecordsByHand"  # as long as "AotiDeviceBackend": a flatbuffer string renamed in place
assert len(HAND_ID) == len(_aoti.AOTI_BACKEND_ID)


class AotiRecordsByHand(BackendDetails):
    """The record of docs/design.md part 3 for an aoti payload, by hand."""

    @staticmethod
    def preprocess(edge_program, compile_specs: list[CompileSpec]) -> PreprocessResult:
        sig = edge_program.graph_signature
        values = {**edge_program.state_dict, **edge_program.constants}
        mutated = set(sig.buffers_to_mutate.values())
        constants = [
            *sig.inputs_to_parameters.values(),
            *sig.inputs_to_buffers.values(),
            *sig.inputs_to_lifted_tensor_constants.values(),
        ]
        store = NamedDataStore()
        lines = [f"{_C.DELEGATE_RECORD_MAGIC} {_C.DELEGATE_RECORD_VERSION}", "device\tcuda\t0"]
        tensors = []
        for fqn in constants:
            if fqn in mutated:
                continue
            data = _bytes(values[fqn])
            key = "et_copy.weight:" + hashlib.sha256(data).hexdigest()[:32]
            store.add_named_data(key, data, alignment=_C.TENSOR_ALIGNMENT)
            lines.append(f"weight\t{fqn}\t{key}\t{len(data)}")
            tensors.append(_tensor_line(fqn, values[fqn]))
        state = {name: values[name] for name in sorted(mutated)}
        layout, arena = state_arena_layout({n: t.numel() * t.element_size() for n, t in state.items()})
        for name, t in state.items():
            initial = "-"
            if any(_bytes(t)):
                initial = "et_copy.state:" + hashlib.sha256(_bytes(t)).hexdigest()[:32]
                store.add_named_data(initial, _bytes(t), alignment=_C.TENSOR_ALIGNMENT)
            lines.append(f"state\t{name}\t{layout[name].offset}\t{layout[name].nbytes}\t{initial}")
            tensors.append(_tensor_line(name, t))
        if state:
            lines.append(f"arena\t-\t{arena}")
        lines += tensors
        target = TARGET["device"]
        lines.append(f"target\t{target}\t{torch.__version__}")
        lines.append(f"io\t{len(sig.user_inputs)}\t{len(sig.user_outputs)}")
        for edit in EDIT:
            lines = edit(lines)
        so = _compile(edge_program, target)
        lines.append(f"digest\tsha256\t{hashlib.sha256(so).hexdigest()}")
        lines.append(f"payload\t{_aoti.PAYLOAD_AOTI}\t{len(so)}")
        record = ("\n".join(lines) + "\n").encode() + so
        return PreprocessResult(processed_bytes=record, data_store_output=store.get_named_data_store_output())


class AotiPartitioner(SimulatedDevicePartitioner):
    """The simulated partitioner's partitions, for the backend id above."""

    def __init__(self, device: str = "cuda:0", *, target_device: bool = True) -> None:
        super().__init__(device)
        specs = [CompileSpec("target_device", self.device.encode())] if target_device else []
        self.delegation_spec = DelegationSpec(HAND_ID, specs)


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Accumulator(torch.nn.Module):
    """A mutable buffer updated in place; it starts at non-zero values."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("acc", torch.arange(4, dtype=torch.float32))

    def forward(self, x):
        self.acc.add_(self.lin(x).sum(0))
        return self.acc * 1.0


class ThreeOutputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.w = torch.nn.Parameter(torch.randn(6, 3))

    def forward(self, x, y):
        h = x @ self.w
        return h + y, h.sum(1), (h * 2).to(torch.int32)


def _export(module: torch.nn.Module, inputs: tuple, *edits, target: str = "cpu") -> bytes:
    EDIT[:] = list(edits)
    TARGET["device"] = target
    try:
        return _as_aoti(export_device_program(module, inputs, partitioner=AotiPartitioner()).buffer)
    finally:
        EDIT.clear()
        TARGET["device"] = "cpu"


def _as_aoti(program: bytes) -> bytes:
    """The program with its delegate's backend id renamed from the test's to the runtime's."""
    assert program.count(HAND_ID.encode()) == 1
    return program.replace(HAND_ID.encode(), _aoti.AOTI_BACKEND_ID.encode())


def _replace(kind: str, line: str):
    return lambda lines: [line if x.split("\t")[0] == kind else x for x in lines]


@pytest.fixture(scope="module")
def device():
    et_copy.use_simulated_device()
    assert et_copy.use_aoti_backend() in ("registered", "already et_copy")
    assert et_copy.allocator_info()["host_readable"] is False


@pytest.fixture(scope="module")
def mlp(device) -> bytes:
    return _export(Mlp(), (torch.randn(3, 8),))


@pytest.fixture(scope="module")
def accumulator(device) -> bytes:
    return _export(Accumulator(), (torch.randn(2, 4),))


@pytest.fixture(scope="module")
def three(device) -> bytes:
    return _export(ThreeOutputs(), (torch.randn(5, 6), torch.randn(5, 3)))


def _load_error(program: bytes) -> str:
    with pytest.raises(et_copy.EtCopyError) as info:
        et_copy.runtime.load(program).load_method("forward")
    return str(info.value) + "\n" + "\n".join(info.value.log or ())


def test_use_aoti_backend_is_idempotent(device):
    assert et_copy.use_aoti_backend() == "already et_copy"
    assert _aoti.AOTI_TORCH_VERSION == torch.__version__.split("+")[0]


def test_the_delegate_holds_an_aoti_record(mlp):
    start = mlp.find(b"et_copy.delegate 2\n")
    assert start >= 0
    header = mlp[start : mlp.index(b"\npayload\taoti\t", start)].decode().split("\n")
    assert f"target\tcpu\t{torch.__version__}" in header and "io\t1\t1" in header


def test_an_mlp_equals_eager(mlp):
    x = torch.randn(3, 8)
    out = et_copy.runtime.load(mlp).load_method("forward").execute([x])[0]
    torch.testing.assert_close(out, Mlp()(x), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not et_copy.cuda.built_with_cuda(), reason="et_copy was built without the CUDA toolkit")
def test_a_callers_cuda_stream_does_not_reach_the_simulated_device(mlp):
    # The setting is for real CUDA: on the simulated device (a CPU model) the
    # compiled code runs as before, and never asks torch for a CUDA stream guard.
    x = torch.randn(3, 8)
    method = et_copy.runtime.load(mlp).load_method("forward")
    with et_copy.cuda.use_stream(0x1234):
        out = method.execute([x])[0]
    torch.testing.assert_close(out, Mlp()(x), rtol=1e-5, atol=1e-6)


def test_weights_upload_once_counted_and_every_execute_copies_only_the_io(mlp):
    program = et_copy.runtime.load(mlp)
    with et_copy.counting() as load:
        method = program.load_method("forward")
    weights = sum(p.numel() * 4 for p in Mlp().parameters())
    assert load.h2d_copies == 4 and load.h2d_bytes == weights
    with et_copy.counting() as run:
        method.execute([torch.randn(3, 8)])
        method.execute([torch.randn(3, 8)])
    assert run.h2d_copies == 2 and run.h2d_bytes == 2 * 3 * 8 * 4  # the input, twice: no weight again
    assert run.d2h_copies == 2 and run.d2h_bytes == 2 * 3 * 4 * 4
    with et_copy.counting() as second:
        other = et_copy.runtime.load(mlp).load_method("forward")
    assert second.h2d_copies == 0, "a second program with the same weights shares them"
    del method, other, program


def test_state_persists_across_executes_and_is_its_own_per_session(accumulator):
    program = et_copy.runtime.load(accumulator)
    eager = Accumulator()
    xs = [torch.randn(2, 4) for _ in range(3)]
    first = program.new_session().load_method("forward")
    for x in xs:
        torch.testing.assert_close(first.execute([x])[0], eager(x), rtol=1e-5, atol=1e-5)
    other = program.new_session().load_method("forward")
    fresh = Accumulator()
    torch.testing.assert_close(other.execute([xs[0]])[0], fresh(xs[0]), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(first.execute([xs[1]])[0], eager(xs[1]), rtol=1e-5, atol=1e-5)


def test_several_outputs_of_several_dtypes(three):
    x, y = torch.randn(5, 6), torch.randn(5, 3)
    got = et_copy.runtime.load(three).load_method("forward").execute([x, y])
    want = ThreeOutputs()(x, y)
    assert [t.dtype for t in got] == [t.dtype for t in want]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_a_dynamic_batch_resizes_the_output_to_the_models(device):
    batch = torch.export.Dim("batch", max=8)
    program = _as_aoti(
        export_device_program(
            Mlp(), (torch.randn(4, 8),), partitioner=AotiPartitioner(), dynamic_shapes={"x": {0: batch}}
        ).buffer
    )
    method = et_copy.runtime.load(program).load_method("forward")
    for n in (1, 3, 8):
        x = torch.randn(n, 8)
        out = method.execute([x])[0]
        assert out.shape == (n, 4)
        torch.testing.assert_close(out, Mlp()(x), rtol=1e-5, atol=1e-6)


def test_a_host_tensor_is_refused_naming_the_argument(device):
    # Without target_device no copies go in: the delegate gets the host input.
    edge = to_edge_transform_and_lower(
        torch.export.export(Mlp(), (torch.randn(3, 8),)), partitioner=[AotiPartitioner(target_device=False)]
    )
    program = et_copy.runtime.load(_as_aoti(edge.to_executorch().buffer))
    with pytest.raises(et_copy.EtCopyError) as info:
        program.load_method("forward").execute([torch.randn(3, 8)])
    text = str(info.value) + "\n".join(info.value.log or ())
    assert "input 0 is host memory (cpu)" in text, text


def test_a_cuda_record_on_the_simulated_device_is_refused_saying_why(device):
    text = _load_error(_export(Mlp(), (torch.randn(3, 8),), _replace("target", f"target\tcuda\t{torch.__version__}")))
    assert "compiled for target cuda" in text and "simulated allocator" in text, text


def test_another_torch_version_is_refused_naming_both(mlp):
    text = _load_error(_export(Mlp(), (torch.randn(3, 8),), _replace("target", "target\tcpu\t2.11.0+cu130")))
    assert f"compiled by torch 2.11.0+cu130, and this backend runs torch {_aoti.AOTI_TORCH_VERSION}" in text, text


def test_a_record_that_does_not_cover_the_models_constants_is_refused(mlp):
    drop = lambda lines: [x for x in lines if "fc1.weight" not in x]  # noqa: E731
    text = _load_error(_export(Mlp(), (torch.randn(3, 8),), drop))
    assert "the model reads constant 'fc1_weight' (original name 'fc1.weight')" in text, text


def test_an_io_line_that_disagrees_with_the_model_is_refused(mlp):
    text = _load_error(_export(Mlp(), (torch.randn(3, 8),), _replace("io", "io\t2\t1")))
    assert "the model takes 1 inputs and gives 1 outputs; the record's io line says 2 and 1" in text, text


_GPU_SCRIPT = textwrap.dedent(
    """
    import sys, torch, et_copy, et_copy.runtime
    sys.path.insert(0, sys.argv[1])
    import test_aoti_runtime as t
    et_copy.use_cuda()
    et_copy.use_aoti_backend()
    program = t._export(t.Mlp(), (torch.randn(3, 8),), target="cuda")
    x = torch.randn(3, 8)
    method = et_copy.runtime.load(program).load_method("forward")
    out = method.execute([x])[0]
    torch.testing.assert_close(out, t.Mlp()(x), rtol=1e-4, atol=1e-5)
    acc = et_copy.runtime.load(t._export(t.Accumulator(), (torch.randn(2, 4),), target="cuda"))
    eager, m = t.Accumulator(), acc.new_session().load_method("forward")
    for _ in range(3):
        x = torch.randn(2, 4)
        torch.testing.assert_close(m.execute([x])[0], eager(x), rtol=1e-4, atol=1e-4)
    # On the caller's stream: copies, the compiled code and its output copies queued on s,
    # behind work torch queued there first; the d2h synchronises s.
    s = torch.cuda.Stream()
    with et_copy.cuda.use_stream(s):
        for _ in range(3):
            x = torch.randn(2, 4)
            with torch.cuda.stream(s):
                torch.cuda._sleep(50_000_000)
            torch.testing.assert_close(m.execute([x])[0], eager(x), rtol=1e-4, atol=1e-4)
            assert s.query()
        x = torch.randn(3, 8)
        torch.testing.assert_close(method.execute([x])[0], t.Mlp()(x), rtol=1e-4, atol=1e-5)
    print("ok")
    """
)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device and a CUDA build of torch")
def test_a_cuda_model_runs_on_the_gpu_in_place():
    # Its own process: the simulated device, once registered, serves CUDA for good.
    proc = subprocess.run(
        [sys.executable, "-c", _GPU_SCRIPT, os.path.dirname(__file__)], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-3000:] + proc.stderr[-6000:]
