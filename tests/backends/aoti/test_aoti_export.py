"""et_copy.backends.aoti ahead of time: what the compiled backend puts in a program,
checked without its C++ runtime. Each delegate record is parsed, and its
AOTInductor payload is loaded with torch's own AOTI runner, its constants
bound (user-managed) from the program's named data by the record's keys and
its state from an arena laid out as the record says: the outputs must equal
eager and the state must be updated in place, in the arena.

Compiles are cached (et_copy.backends.aoti._compile_cache, ~/.cache/et_copy/aoti), so a
second run takes seconds; a cold one compiles each model once (15-50 s each
on 2 cores). Programs are shared by module-scoped fixtures."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from et_copy._dtypes import SCALAR_TYPE_CODES  # noqa: E402
from et_copy.backends import BACKENDS, aoti  # noqa: E402
from et_copy.backends.aoti import BACKEND_ID, AotiDevicePartitioner, _compile_cache  # noqa: E402
from et_copy.backends.aoti import _constant_reads as aoti_views  # noqa: E402
from et_copy.backends.aoti._constant_reads import copies_as_views, weight_copies, weight_copies_in_code  # noqa: E402
from et_copy.backends.record import WEIGHT_KEY  # noqa: E402
from et_copy.export import MethodInputs, export_device_methods, export_device_program, lower_to_device  # noqa: E402
from plan_calls import plan_calls as kernel_calls  # noqa: E402

# Marked slow: a cold run compiles (the cache makes a warm one take seconds).
slow = pytest.mark.slow
DTYPES = {code: dtype for dtype, code in SCALAR_TYPE_CODES.items()}


@dataclass
class Record:
    lines: list[list[str]]  # each header line split at tabs
    kind: str
    payload: bytes
    by_kind: dict[str, list[list[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for line in self.lines:
            self.by_kind.setdefault(line[0], []).append(line)


def parse(blob: bytes) -> Record:
    lines, at = [], 0
    while True:
        end = blob.index(b"\n", at)
        line = blob[at:end].decode().split("\t")
        at = end + 1
        if line[0] == "payload":
            assert len(blob) - at == int(line[2])
            return Record(lines, line[1], blob[at:])
        lines.append(line)


def records(program) -> dict[str, list[Record]]:
    emitted = program.executorch_program
    return {
        plan.name: [parse(bytes(emitted.backend_delegate_data[d.processed.index].data)) for d in plan.delegates]
        for plan in emitted.execution_plan
    }


def named_bytes(program, key: str) -> bytes:
    named = program._named_data
    return bytes(named.buffers[named.pte_data[key].buffer_index])


def tensor_of(line: list[str], data) -> torch.Tensor:
    """A tensor over ``data`` as a record's tensor line describes it."""
    sizes = [int(s) for s in line[3].split(",")] if line[3] else []
    strides = [int(s) for s in line[4].split(",")] if line[4] else []
    flat = (
        torch.frombuffer(data, dtype=DTYPES[int(line[2])]) if len(data) else torch.empty(0, dtype=DTYPES[int(line[2])])
    )
    return flat.as_strided(sizes, strides)


class Arena:
    """One session's state: a byte buffer laid out as the record's state and arena lines say."""

    def __init__(self, program, record: Record) -> None:
        (arena,) = record.by_kind.get("arena", [["arena", "-", "0"]])
        assert arena[1] == "-"  # a compiled payload has no nested planned buffer
        self.bytes = torch.zeros(int(arena[2]), dtype=torch.uint8)
        for _, name, offset, nbytes, initial in record.by_kind.get("state", []):
            if initial != "-":
                self.bytes[int(offset) : int(offset) + int(nbytes)] = torch.frombuffer(
                    bytearray(named_bytes(program, initial)), dtype=torch.uint8
                )

    def tensor(self, record: Record, name: str) -> torch.Tensor:
        (state,) = [s for s in record.by_kind["state"] if s[1] == name]
        (line,) = [t for t in record.by_kind["tensor"] if t[1] == name]
        offset, nbytes = int(state[2]), int(state[3])
        return tensor_of(line, self.bytes[offset : offset + nbytes].numpy().data)


class Payload:
    """The record's .so run by torch's AOTI runner, as the C++ backend runs it:
    weights from the named data, state over the arena, all user-managed."""

    def __init__(self, program, record: Record, arena: Arena | None = None) -> None:
        assert record.kind == "aoti"
        with tempfile.NamedTemporaryFile(suffix=".so") as f:  # a loaded library stays mapped
            f.write(record.payload)
            f.flush()
            self.runner = torch._C._aoti.AOTIModelContainerRunnerCpu(f.name, 1)
        self.arena = arena or Arena(program, record)
        weights = {w[1]: w[2] for w in record.by_kind.get("weight", [])}
        self.constants = {}
        for line in record.by_kind.get("tensor", []):
            fqn = line[1]
            if fqn in weights:
                self.constants[fqn] = tensor_of(line, bytearray(named_bytes(program, weights[fqn])))
            else:
                self.constants[fqn] = self.arena.tensor(record, fqn)
        by_fqn = {fqn: name for name, fqn in self.runner.get_constant_names_to_original_fqns().items()}
        assert set(by_fqn) == set(self.constants), "the record's tensors are the compiled model's constants"
        self.runner.update_constant_buffer({by_fqn[f]: t for f, t in self.constants.items()}, False, True, True)

    def bind(self, fqn: str, value: torch.Tensor) -> None:
        """Writes ``value`` over a bound constant's memory: the next run must read it."""
        self.constants[fqn].copy_(value)

    def __call__(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        return self.runner.run(list(inputs))


# The models: tiny, each exercising what a real model needs of the compiled backend.


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x)


class DepthwiseConvs(torch.nn.Module):
    """Depthwise Conv1d (Qwen 3.5 MoE's linear attention) and Conv2d: AOTInductor falls back to ATen."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv1d(4, 4, 3, groups=4, padding=2)
        self.c2 = torch.nn.Conv2d(4, 4, 3, groups=4, padding=1)

    def forward(self, x, img):
        return torch.nn.functional.silu(self.c1(x)[..., : x.shape[-1]]), self.c2(img).relu()


class Attention(torch.nn.Module):
    def __init__(self, dim: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(y.transpose(1, 2).reshape(b, t, d))


class SeveralOutputs(torch.nn.Module):
    """Outputs of several dtypes (to_edge's _to_dim_order_copy), and slices,
    a select and a split whose results are viewed again (select_copy,
    slice_copy and split_copy have no Inductor lowering)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, n):
        y = self.lin(x)
        a, b = torch.split(y, 2, dim=-1)
        views = (y[:, 1:].reshape(-1), y.select(0, 1).unsqueeze(0), (a.reshape(-1) * b.reshape(-1)).view(2, 2))
        return y, y.sum(-1), (n * 2).to(torch.int32), y.to(torch.float16), *views


class KVCache(torch.nn.Module):
    """A KV-cache-like state (index_put_), a step counter (copy_), a buffer
    that is never written and a lifted constant."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.register_buffer("cache", torch.zeros(6, 4))
        self.register_buffer("steps", torch.ones(1))  # starts non-zero: stored as the initial state
        self.register_buffer("scale", torch.full((4,), 0.5))

    def forward(self, x, pos):
        y = self.proj(x) * self.scale
        self.cache.index_put_((pos,), y)
        self.steps.copy_(self.steps + 1)
        weights = torch.tensor([1.0, -1.0, 2.0, 0.5])  # a lifted constant
        return (self.cache * weights).sum(0) * self.steps


def fresh(cls):
    torch.manual_seed(0)
    return cls().eval()


@pytest.fixture(scope="module")
def mlp():
    """An MLP with a dynamic batch (1..8): the .so must stay dynamic."""
    batch = torch.export.Dim("batch", min=1, max=8)
    return export_device_program(
        fresh(MLP), (torch.randn(3, 8),), backend="aoti", dynamic_shapes=({0: batch},), strict=True
    )


@pytest.fixture(scope="module")
def kv():
    """Two methods (prefill of 2 tokens, decode of 1) sharing the state."""
    methods = {
        "prefill": MethodInputs((torch.randn(2, 4), torch.tensor([0, 1]))),
        "decode": MethodInputs((torch.randn(1, 4), torch.tensor([2]))),
    }
    return export_device_methods(fresh(KVCache), methods, backend="aoti", strict=True)


def on_device(program):
    """The program loaded by et_copy.runtime on the host-unreadable simulated
    device, its delegates run by AotiDeviceBackend: the product's path, beside
    each test's run of the payload by torch's own runner."""
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()
    assert et_copy.allocator_info()["host_readable"] is False
    return et_copy.runtime.load(program.buffer)


def only(program, method: str = "forward") -> Record:
    (record,) = records(program)[method]
    return record


@slow
def test_the_whole_graph_is_one_aoti_delegate_between_the_copies(mlp):
    (plan,) = mlp.executorch_program.execution_plan
    assert kernel_calls(plan) == ["et_copy::_h2d_copy.out", f"delegate:{BACKEND_ID}", "et_copy::_d2h_copy.out"]
    (delegate,) = plan.delegates
    assert {s.key: bytes(s.value) for s in delegate.compile_specs} == {
        "target_device": b"cuda:0",
        "aoti_target": b"cpu",
    }


@slow
def test_the_record_header_is_version_2_in_the_designs_order(kv):
    record = only(kv, "decode")
    kinds = [line[0] for line in record.lines]
    assert record.lines[0] == ["et_copy.delegate 2"]
    assert record.lines[1] == ["device", "cuda", "0"]
    order = ["device", "weight", "state", "arena", "tensor", "target", "io", "digest"]
    assert [k for k in dict.fromkeys(kinds[1:])] == order
    assert record.by_kind["target"] == [["target", "cpu", torch.__version__]]
    assert record.by_kind["io"] == [["io", "2", "1"]]
    assert record.by_kind["digest"] == [["digest", "sha256", hashlib.sha256(record.payload).hexdigest()]]
    assert record.kind == "aoti" and record.payload[:4] == b"\x7fELF"


@slow
def test_every_constant_is_a_weight_by_its_original_fqn_and_the_state_is_not(kv):
    record = only(kv, "decode")
    weights = {w[1]: w for w in record.by_kind["weight"]}
    # parameters, a buffer never written, the lifted tensor and (to_edge's) scalar constants; the mutated
    # buffers are state
    scalars = {w for w in weights if w.startswith("_lifted_tensor_constant")}
    assert set(weights) - scalars == {"proj.weight", "proj.bias", "scale", "lifted_tensor_0"} and scalars
    assert {s[1] for s in record.by_kind["state"]} == {"cache", "steps"}
    tensors = {t[1]: t[2:] for t in record.by_kind["tensor"]}
    assert set(tensors) == set(weights) | {"cache", "steps"}
    assert tensors["proj.weight"] == [str(SCALAR_TYPE_CODES[torch.float32]), "4,4", "4,1"]
    assert tensors["cache"] == ["6", "6,4", "4,1"]
    for fqn, (_, _, key, nbytes) in weights.items():
        assert key.startswith(WEIGHT_KEY) and len(named_bytes(kv, key)) == int(nbytes)
    # no weight's bytes in the code
    assert fresh(KVCache).proj.weight.detach().numpy().tobytes() not in record.payload


@slow
def test_the_code_reads_every_constant_even_uniform_ones_from_the_bound_memory(kv):
    """Inductor would fold a constant whose elements are all equal (scale, 0.5 everywhere; steps, 1)
    into the code; then another value bound at run time would not be seen."""
    record = only(kv, "prefill")
    run, eager = Payload(kv, record), fresh(KVCache)
    with torch.no_grad():
        eager.scale.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
        eager.steps.fill_(5.0)
    run.bind("scale", eager.scale)
    run.bind("steps", eager.steps)
    x, pos = torch.randn(2, 4), torch.tensor([3, 4])
    (got,) = run(x, pos)
    torch.testing.assert_close(got, eager(x, pos).detach())


@slow
def test_methods_share_weight_keys_and_one_state_layout(kv):
    recs = records(kv)
    prefill, decode = recs["prefill"][0], recs["decode"][0]
    assert prefill.by_kind["weight"] == decode.by_kind["weight"]
    assert prefill.by_kind["state"] == decode.by_kind["state"]
    assert prefill.by_kind["arena"] == decode.by_kind["arena"] == [["arena", "-", "112"]]
    # name order, 16-byte aligned; steps starts at one (stored), cache at zeros (not)
    (cache, steps) = decode.by_kind["state"]
    assert cache[1:5] == ["cache", "0", "96", "-"] and steps[1:4] == ["steps", "96", "4"]
    assert steps[4] != "-"


@slow
def test_the_payload_runs_the_methods_and_updates_the_state_in_the_arena(kv):
    recs = records(kv)
    prefill = Payload(kv, recs["prefill"][0])
    decode = Payload(kv, recs["decode"][0], arena=prefill.arena)  # one session: one arena
    eager = fresh(KVCache)
    x, pos = torch.randn(2, 4), torch.tensor([0, 1])
    (got,) = prefill(x, pos)
    torch.testing.assert_close(got, eager(x, pos).detach())
    cache = prefill.arena.tensor(recs["prefill"][0], "cache")
    torch.testing.assert_close(cache, eager.cache)  # the state is updated where the runtime put it
    for step in range(2, 4):
        x1 = torch.randn(1, 4)
        (got,) = decode(x1, torch.tensor([step]))
        torch.testing.assert_close(got, eager(x1, torch.tensor([step])).detach())
    torch.testing.assert_close(decode.arena.tensor(recs["decode"][0], "steps"), eager.steps)


@slow
def test_the_methods_of_one_session_share_the_state_and_sessions_are_apart_on_the_runtime(kv):
    program = on_device(kv)
    eager, other = fresh(KVCache), fresh(KVCache)
    a, b = program.new_session(), program.new_session()
    x, pos = torch.randn(2, 4), torch.tensor([0, 1])
    torch.testing.assert_close(a.load_method("prefill").execute([x, pos])[0], eager(x, pos).detach())
    y = torch.randn(2, 4)
    torch.testing.assert_close(b.load_method("prefill").execute([y, pos])[0], other(y, pos).detach())
    for step in range(2, 4):  # a's decode reads a's prefill, not b's
        x1 = torch.randn(1, 4)
        got = a.load_method("decode").execute([x1, torch.tensor([step])])[0]
        torch.testing.assert_close(got, eager(x1, torch.tensor([step])).detach())
    a.reset()  # back to the start: zeros, and steps at its stored 1
    fresh_eager = fresh(KVCache)
    torch.testing.assert_close(a.load_method("prefill").execute([x, pos])[0], fresh_eager(x, pos).detach())


@slow
def test_the_mlp_payload_stays_dynamic_and_equals_eager(mlp):
    run, eager = Payload(mlp, only(mlp)), fresh(MLP)
    method = on_device(mlp).load_method("forward")
    for batch in (1, 3, 8):
        x = torch.randn(batch, 8)
        (got,) = run(x)
        torch.testing.assert_close(got, eager(x).detach())
        torch.testing.assert_close(method.execute([x])[0], eager(x).detach())


@slow
def test_a_depthwise_conv_compiles_to_aten_and_equals_eager():
    program = export_device_program(
        fresh(DepthwiseConvs), (torch.randn(1, 4, 7), torch.randn(1, 4, 5, 5)), backend="aoti", strict=True
    )
    record = only(program)
    assert b"aoti_torch_cpu_convolution" in record.payload  # the ATen fallback's C shim
    x, img = torch.randn(1, 4, 7), torch.randn(1, 4, 5, 5)
    got = Payload(program, record)(x, img)
    for g, w in zip(got, fresh(DepthwiseConvs)(x, img)):
        torch.testing.assert_close(g, w.detach())
    on = on_device(program).load_method("forward").execute([x, img])
    for g, w in zip(on, fresh(DepthwiseConvs)(x, img), strict=True):
        torch.testing.assert_close(g, w.detach())


@slow
def test_an_attention_block_equals_eager():
    program = export_device_program(fresh(Attention), (torch.randn(1, 5, 8),), backend="aoti", strict=True)
    x = torch.randn(1, 5, 8)
    (got,) = Payload(program, only(program))(x)
    torch.testing.assert_close(got, fresh(Attention)(x).detach())
    (on,) = on_device(program).load_method("forward").execute([x])
    torch.testing.assert_close(on, fresh(Attention)(x).detach())


@slow
def test_several_outputs_of_several_dtypes_equal_eager():
    program = export_device_program(
        fresh(SeveralOutputs), (torch.randn(2, 4), torch.tensor([3])), backend="aoti", strict=True
    )
    record = only(program)
    assert record.by_kind["io"] == [["io", "2", "7"]]
    assert aoti.PROXY_CALL.rstrip("(").encode() not in record.payload  # every op lowered or called by its C shim
    x, n = torch.randn(2, 4), torch.tensor([5])
    got = Payload(program, record)(x, n)
    # The partition orders its outputs its own way (the delegate's getitems put them in place):
    # match them by dtype and shape, which differ for every output here.
    want = {(w.dtype, tuple(w.shape)): w.detach() for w in fresh(SeveralOutputs)(x, n)}
    assert len(want) == 7 and {(g.dtype, tuple(g.shape)) for g in got} == set(want)
    for g in got:
        torch.testing.assert_close(g, want[(g.dtype, tuple(g.shape))])
    # Through the runtime the method's outputs come in the model's order.
    on = on_device(program).load_method("forward").execute([x, n])
    for g, w in zip(on, fresh(SeveralOutputs)(x, n), strict=True):
        torch.testing.assert_close(g, w.detach())


@slow
def test_a_second_export_is_a_cache_hit(mlp):
    before = (aoti.compile_stats.compiles, aoti.compile_stats.hits)
    batch = torch.export.Dim("batch", min=1, max=8)
    again = export_device_program(
        fresh(MLP), (torch.randn(3, 8),), backend="aoti", dynamic_shapes=({0: batch},), strict=True
    )
    assert (aoti.compile_stats.compiles, aoti.compile_stats.hits) == (before[0], before[1] + 1)
    assert only(again).payload == only(mlp).payload


def _parts(module: torch.nn.Module, *inputs, target: str = "cpu") -> dict:
    """The cache key's parts for ``module``'s one partition, with no compile."""
    from executorch.exir import to_edge

    edge = to_edge(torch.export.export(module, inputs, strict=True))
    ep = edge.exported_program()
    gm, example = aoti._compile_inputs(ep, "cpu")
    return aoti._key_parts(gm, example, ep, aoti.compile_options(target), target)


@slow
def test_the_cache_key_changes_with_graph_options_torch_and_target_but_not_weights():
    key = _compile_cache.cache_key
    base = _parts(fresh(MLP), torch.randn(2, 8))
    other_weights = MLP().eval()  # another seed: same graph, other values
    assert key(_parts(other_weights, torch.randn(2, 8))) == key(base)
    assert key(_parts(fresh(MLP), torch.randn(3, 8))) != key(base)  # another input shape
    assert key(_parts(fresh(Attention), torch.randn(1, 5, 8))) != key(base)  # another graph
    assert key({**base, "options": {**base["options"], "freezing": True}}) != key(base)
    assert key({**base, "torch": "2.99.0"}) != key(base)
    assert key(_parts(fresh(MLP), torch.randn(2, 8), target="cuda")) != key(base)


def test_the_cache_stores_atomically_and_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _compile_cache.lookup("k") is None
    path = _compile_cache.store("k", b"code")
    assert path == tmp_path / "et_copy" / "aoti" / "k.so" and _compile_cache.lookup("k") == b"code"
    assert sorted(p.name for p in path.parent.iterdir()) == ["k.so"]  # no temporary file left
    monkeypatch.setenv(_compile_cache.CACHE_ENV, "0")
    assert _compile_cache.lookup("k") is None and _compile_cache.store("k", b"x") is None
    assert _compile_cache.cache_dir() is None


def test_the_partitioner_defaults_its_target_by_who_serves_cuda():
    info = et_copy.allocator_info("cuda")
    served_by_ours = info is not None and info.get("owner") == "et_copy" and info.get("name") == "cuda"
    assert AotiDevicePartitioner().target == ("cuda" if served_by_ours else "cpu")
    assert AotiDevicePartitioner("cuda:1", target="cuda").delegation_spec.compile_specs[0].value == b"cuda:1"
    with pytest.raises(ValueError, match=r"target must be one of \('cpu', 'cuda'\), got 'tpu'"):
        AotiDevicePartitioner(target="tpu")


def test_one_word_chooses_the_backend_and_a_wrong_word_is_named():
    assert sorted(BACKENDS) == ["aoti", "simulated"]
    m, x = fresh(MLP), (torch.randn(1, 8),)
    with pytest.raises(ValueError, match=r"backend must be one of \['aoti', 'simulated'\], got 'xla'"):
        export_device_program(m, x, backend="xla")
    with pytest.raises(ValueError, match="backend must be one of"):
        lower_to_device(m, x, backend="xla")
    with pytest.raises(ValueError, match="pass backend='aoti' or a partitioner, not both"):
        export_device_program(m, x, backend="aoti", partitioner=AotiDevicePartitioner())
    with pytest.raises(ValueError, match="a backend or decompositions go with insert_copies=True"):
        export_device_program(m, x, backend="aoti", insert_copies=False)


@slow
def test_lower_to_device_takes_the_word(mlp):
    program = lower_to_device(fresh(MLP), (torch.randn(3, 8),), backend="aoti", strict=True)
    (plan,) = program.executorch_program.execution_plan
    assert f"delegate:{BACKEND_ID}" in kernel_calls(plan)
    x = torch.randn(3, 8)
    (got,) = Payload(program, only(program))(x)
    torch.testing.assert_close(got, fresh(MLP)(x).detach())


def test_export_llm_passes_the_word_and_a_partitioner_through(monkeypatch):
    import et_copy.llm._export as llm_export

    seen = []
    monkeypatch.setattr(llm_export, "export_methods", lambda op, module, methods, choice, **k: seen.append(choice))
    monkeypatch.setattr(llm_export, "check_wrapper", lambda *a, **k: None)
    monkeypatch.setattr(llm_export, "StatefulCausalLM", lambda *a, **k: torch.nn.Identity())
    monkeypatch.setattr(llm_export, "static_prefill_chunks", lambda *a, **k: _null())
    part = AotiDevicePartitioner(target="cpu")
    llm_export.export_llm(None, backend="aoti")
    llm_export.export_llm(None, partitioner=part)
    by_word, by_object = seen
    assert by_word.backend is BACKENDS["aoti"] and isinstance(by_word.partitioner, AotiDevicePartitioner)
    assert (by_object.backend, by_object.partitioner, by_object.name) == (None, part, "AotiDevicePartitioner")


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@slow
def test_no_compiled_file_is_left_behind_when_the_cache_cannot_keep_it(mlp, monkeypatch, tmp_path):
    """A cache that is off or cannot be written: the .so is read back from a
    temporary file (to list its constants), removed after."""
    monkeypatch.setattr(_compile_cache, "store", lambda key, data, source=None: None)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    batch = torch.export.Dim("batch", min=1, max=8)
    program = export_device_program(
        fresh(MLP), (torch.randn(3, 8),), backend="aoti", dynamic_shapes=({0: batch},), strict=True
    )
    assert only(program).payload == only(mlp).payload
    assert list(Path(tmp_path).iterdir()) == []


def test_copies_returned_by_the_graph_become_a_view_and_a_clone():
    """select/slice/split_copy (no Inductor lowering, no C shim) become views; a
    value the graph returns stays a fresh tensor, as the copy made it."""
    aten = torch.ops.aten

    class Copies(torch.nn.Module):
        def forward(self, x):
            a, b = aten.split_copy.Tensor(x, 2, 1)
            return aten.select_copy.int(x, 0, 1), aten.slice_copy.Tensor(x, 1, 1, 3), a, b

    gm = torch.fx.symbolic_trace(Copies())
    x = torch.randn(3, 4)
    want = gm(x)
    copies_as_views(gm, set())
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert aten.select.int in targets and aten.slice.Tensor in targets and aten.split.Tensor in targets
    assert not {aten.select_copy.int, aten.slice_copy.Tensor, aten.split_copy.Tensor} & set(targets)
    assert targets.count(aten.clone.default) == 4
    got = gm(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
        assert g.data_ptr() != x.data_ptr() and g._base is None  # fresh tensors, as the copies made


def _handed_to_inductor(module: torch.nn.Module, *inputs) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    """The edge program's module as it was, and as AOTInductor is given it (no compile)."""
    from executorch.exir import to_edge

    ep = to_edge(torch.export.export(module, inputs, strict=True)).exported_program()
    return ep.module(), aoti._compile_inputs(ep, "cpu")[0]


class BigLinears(torch.nn.Module):
    """A Linear on a 3-d input (view_copy around the matmul), one on a 2-d input,
    and a weight read through a chain of views (a slice of its transpose)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(16, 64)
        self.down = torch.nn.Linear(64, 16, bias=False)

    def forward(self, x):
        h = torch.nn.functional.silu(self.up(x))
        return self.down(h).reshape(-1, 16) @ self.up.weight.t()[:, :8]


@pytest.mark.parametrize("cls, inputs", [(BigLinears, (torch.randn(2, 3, 16),)), (Attention, (torch.randn(1, 5, 8),))])
def test_the_graph_handed_to_inductor_reads_every_weight_in_place(cls, inputs):
    # The same rewrite serves target="cuda": _compile_inputs makes it for every target.
    module = fresh(cls)
    edge, given = _handed_to_inductor(module, *inputs)
    assert weight_copies(edge)  # the edge dialect's permute_copy of each weight: the check sees them
    assert weight_copies(given) == []
    copies = [n for n in given.graph.nodes if n.op == "call_function" and aoti_views.view_of_copy(n.target)]
    # An activation's view copies stay (Inductor fuses them); none reads a constant, through any views.
    assert copies and {aoti_views.view_root(n.args[0]).op for n in copies} <= {"placeholder", "call_function"}
    with torch.no_grad():
        torch.testing.assert_close(given(*inputs), module(*inputs))


def test_a_bf16_weight_is_read_in_place_too():
    module = fresh(BigLinears).to(torch.bfloat16)
    x = torch.randn(2, 3, 16, dtype=torch.bfloat16)
    edge, given = _handed_to_inductor(module, x)
    assert weight_copies(edge) and weight_copies(given) == []
    with torch.no_grad():
        torch.testing.assert_close(given(x), module(x))


class TransposedBf16(torch.nn.Module):
    """Two bf16 tensors read transposed, as attention reads a bf16 KV cache's K: Inductor's kernel
    transposes 32x32 tiles with at::vec::transpose_mxn<BFloat16>, twice in the file."""

    def forward(self, k, v):
        return (k.float() * 0.5).transpose(-1, -2).contiguous(), (v.float() * 2.0).transpose(-1, -2).contiguous()


@slow
def test_bf16_tensors_read_transposed_equal_eager():
    # GCC 12 at -O3 compiled this kernel's tile transpose into a copy of uninitialized stack (every
    # element but a few wrong; a bf16 Qwen3's prefill gave NaN logits) until aoti.GCC_FLAGS.
    inputs = (torch.randn(2, 64, 64, dtype=torch.bfloat16), torch.randn(2, 64, 64, dtype=torch.bfloat16))
    program = export_device_program(fresh(TransposedBf16), inputs, backend="aoti", strict=True)
    record = only(program)
    want = fresh(TransposedBf16)(*inputs)
    for got in (Payload(program, record)(*inputs), on_device(program).load_method("forward").execute(list(inputs))):
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_gcc_compiles_with_the_flags_that_keep_the_bf16_transpose_right():
    from torch._inductor.cpp_builder import is_gcc

    march = aoti.compile_options("cpu")["cpp.march"].split(" ")
    assert march[1:] == (list(aoti.GCC_FLAGS) if is_gcc() else [])
    assert march[0] == (torch._inductor.config.cpp.march or "native")
    # The flags ride on -march=; the cache key still names the machine that "native" means.
    assert _parts(fresh(MLP), torch.randn(2, 8))["host"] == (aoti._host_fingerprint() if march[0] == "native" else "")


def test_a_view_of_a_mutated_buffer_or_a_returned_view_is_still_a_fresh_tensor():
    class Viewed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("state", torch.arange(12.0).reshape(3, 4))
            self.w = torch.nn.Parameter(torch.randn(4, 3))

        def forward(self, x):
            row = self.state[0] * 2.0  # a view of the state (select_copy), read before its update
            self.state.add_(1.0)
            return row, self.w.t(), x.t()  # the weight's and the input's transposes, returned

    from executorch.exir import to_edge

    x = torch.randn(2, 3)
    ep = to_edge(torch.export.export(fresh(Viewed), (x,), strict=True)).exported_program()
    given = aoti._compile_inputs(ep, "cpu")[0]
    cloned = [n.args[0].target for n in given.graph.nodes if n.target == torch.ops.aten.clone.default]
    # The state's select (no lowering: a view and a clone) and the returned view of w; the input's
    # transpose keeps its copy.
    assert sorted(map(str, cloned)) == ["aten.permute.default", "aten.select.int"]
    kept = [n.target for n in given.graph.nodes if aoti_views.view_of_copy(n.target)]
    assert len(kept) == 1 and "aten.permute_copy.default" in str(kept[0])
    # Only the returned transpose of w copies a weight: the user asked for that tensor.
    assert [c.split(" ")[-1] for c in weight_copies(given, ep.graph_signature.buffers_to_mutate.values())] == ["w"]
    with torch.no_grad():
        got, want = given(x), fresh(Viewed)(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
        assert g._base is None


# AOTInductor's CPU wrapper for the MLP of two bias-free Linears before the rewrite (torch 2.13, lines
# unindented, the dtype and device arguments shortened): the transposed copy of each weight, one alone
# and one fused with the activation (its name shortened); and a norm's weight read, and a slice of unknown size.
COPYING_WRAPPER = """
constants_info_[0].name = "a_weight";
constants_info_[0].shape = {3072, 768};
constants_info_[1].name = "b_weight";
constants_info_[1].shape = {768, 3072};
constants_info_[2].name = "norm_weight";
constants_info_[2].shape = {768};
static constexpr int64_t int_array_0[] = {768L, 3072L};
static constexpr int64_t int_array_1[] = {1L, 768L};
AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, dtype, device, idx, &buf0_handle));
cpp_fused_permute_copy_0((const float*)(a_weight.data_ptr()), (float*)(buf0.data_ptr()));
static constexpr int64_t int_array_2[] = {1L, 3072L};
AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_2, int_array_3, dtype, device, idx, &buf1_handle));
AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_mm_out(buf1, arg2_1, buf0));
auto buf2 = std::move(buf1);  // reuse
static constexpr int64_t int_array_4[] = {3072L, 768L};
AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_4, int_array_2, dtype, device, idx, &buf3_handle));
cpp_fused_permute_copy_1((float*)(buf2.data_ptr()), (const float*)(b_weight.data_ptr()), (float*)(buf3.data_ptr()));
cpp_fused_norm_2((const float*)(buf2.data_ptr()), (const float*)(norm_weight.data_ptr()), (float*)(buf2.data_ptr()));
cpp_fused_slice_3((const float*)(a_weight.data_ptr()), (float*)(buf4.data_ptr()));
"""  # fmt: skip


def test_the_code_check_finds_each_kernel_that_copies_a_weight():
    assert weight_copies_in_code(COPYING_WRAPPER) == [
        "cpp_fused_permute_copy_0 writes buf0 (2359296 elements) from a_weight (2359296)",
        "cpp_fused_permute_copy_1 writes buf3 (2359296 elements) from b_weight (2359296)",
    ]  # not the 1-d norm weight, nor a buffer of unknown size
    one_less = COPYING_WRAPPER.replace("{768L, 3072L}", "{768L, 3071L}")
    assert len(weight_copies_in_code(one_less)) == 1  # a buffer one element smaller than the weight is no copy
    # A mutable buffer's next value is written from it every step: state, named by FQN, is left out.
    fqns = COPYING_WRAPPER + '\nconstants_info_[0].original_fqn = "a.weight";\nconstants_info_[1].original_fqn = "b.w";'
    assert [c.split(" ")[0] for c in weight_copies_in_code(fqns, ["b.w"])] == ["cpp_fused_permute_copy_0"]
    assert len(weight_copies_in_code(fqns, ["b_weight"])) == 2  # the FQN, not the wrapper's name


@slow
def test_the_compiled_code_reads_each_weight_through_its_matmul(mlp, kv):
    for program in (mlp, kv):
        for plan in records(program).values():
            for record in plan:
                source = _compile_cache.source_of(record.payload)
                assert source is not None  # this machine compiled it, so the cache holds its C++
                assert weight_copies_in_code(source) == []
                assert "aten.permute_copy" not in source  # in no kernel's "Original ATen" list


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine with no GPU")
def test_a_cuda_target_without_a_gpu_is_refused_by_name():
    from et_copy.export import ExportError

    with pytest.raises(ExportError, match="compile spec 'aoti_target' is 'cuda'.*sees none"):
        export_device_program(fresh(MLP), (torch.randn(1, 8),), partitioner=AotiDevicePartitioner(target="cuda"))
