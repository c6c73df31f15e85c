"""Breadth: every tiny causal-LM architecture (et_copy.llm.tiny_model)
either generates transformers' greedy tokens through the device program or
is refused by name, as EXPECTED says.

Each architecture is exported once, as docs/llm.md's example does
(``export_llm(model, max_seq_len=32, pick="device")``), and run on the
simulated device (``DeviceLLM(...).new_session().generate(PROMPT, 16)``).
Anything else than the expected outcome fails: a refusal where tokens were
expected, tokens that differ from ``generate()``, or a raw torch or
executorch error. docs/llm.md's table "Which export works for which model"
is rendered from what this file measures, and a test compares the two.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

import et_copy  # noqa: E402
import llm_programs  # noqa: E402
from et_copy import llm  # noqa: E402
from et_copy.export import ExportError  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "llm.md"
UPDATE = "ET_COPY_UPDATE_DOCS"  # =1 writes the measured table into docs/llm.md instead of comparing
PROMPT = [5, 17, 3, 9, 42]
TOKENS = 16
MAX_SEQ = 32
WORKS, REFUSED = "works", "refused"

# tiny_model name: (name in the docs, kind, expected outcome). Written by
# hand: a change of outcome must show up here as well as in the docs.
EXPECTED = {
    "llama": ("Llama", "dense", WORKS),
    "mistral": ("Mistral", "dense", WORKS),
    "qwen2": ("Qwen2", "dense", WORKS),
    "qwen3": ("Qwen3", "dense", WORKS),
    "phi3": ("Phi-3", "dense", WORKS),
    "olmo2": ("OLMo 2", "dense", WORKS),
    "gemma2": ("Gemma 2", "dense", WORKS),
    "gemma3": ("Gemma 3 text", "dense", WORKS),
    "smollm3": ("SmolLM3", "dense", WORKS),
    "mixtral": ("Mixtral", "MoE", WORKS),
    "qwen2_moe": ("Qwen2-MoE", "MoE", WORKS),
    "qwen3_moe": ("Qwen3-MoE", "MoE", WORKS),
    "olmoe": ("OLMoE", "MoE", WORKS),
    "gpt_oss": ("GPT-OSS", "MoE", WORKS),
    "deepseek_v3": ("DeepSeek-V3", "MoE", WORKS),
    "deepseek_v32": ("DeepSeek-V3.2", "MoE", REFUSED),
    "qwen3_5_moe": ("Qwen 3.5 MoE", "hybrid, MoE", WORKS),
    "qwen3_next": ("Qwen3-Next", "hybrid, MoE", WORKS),
    "lfm2": ("LFM2", "hybrid", WORKS),
    "falcon_h1": ("Falcon-H1", "hybrid", REFUSED),
}

# What issue 26 asks the breadth to cover, at the least.
REQUIRED = {
    "llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2", "gemma3", "smollm3", "mixtral", "qwen2_moe", "qwen3_moe",
    "olmoe", "gpt_oss", "deepseek_v3", "qwen3_5_moe", "qwen3_next", "lfm2",
}  # fmt: skip


@dataclass
class Outcome:
    """What one architecture did: tokens from the device, or a refusal."""

    architecture: str  # the class and model_type, as et_copy's errors name it
    class_name: str
    layer_kinds: list[str]  # transformers' layer_types of the tiny config
    experts: str | None  # the MoE expert implementation the model was exported with
    reference: list[int]  # transformers' generate()
    tokens: list[int] | None = None
    decode_bytes: set[tuple[int, int]] = field(default_factory=set)  # (h2d, d2h) of every decode step
    state: list[str] = field(default_factory=list)  # the kinds of state the wrapper holds
    state_nbytes: int = 0
    refusal: Exception | None = None
    reached_torch_export: bool = False
    exported_here: bool = True  # False: test_llm.py's export was reused

    @property
    def result(self) -> str:
        if self.refusal is not None:
            return REFUSED
        return WORKS if self.tokens == self.reference else "wrong tokens"


def _state_kinds(model: torch.nn.Module) -> list[str]:
    names = llm.StatefulCausalLM(model, MAX_SEQ).state_names
    kinds = {"key_cache_": "KV caches", "conv_state_": "conv states", "recurrent_state_": "recurrent states"}
    return [kind for prefix, kind in kinds.items() if any(n.startswith(prefix) for n in names)]


def _measure(arch: str) -> Outcome:
    from transformers.cache_utils import get_layer_types_and_kwargs

    settings = dict(max_seq_len=MAX_SEQ, pick="device")
    model = llm_programs.exported(arch, **settings)[0] if llm_programs.is_exported(arch, **settings) else None
    model = model or llm.tiny_model(arch)
    config = model.config.get_text_config(decoder=True)
    outcome = Outcome(
        architecture=f"{type(model).__name__} (model_type {model.config.model_type})",
        class_name=type(model).__name__,
        layer_kinds=get_layer_types_and_kwargs(config)[0],
        experts=getattr(model.config, "_experts_implementation", None),
        reference=llm.eager_generate(model, PROMPT, TOKENS),
    )
    # Only et_copy's named refusals are outcomes; any other exception fails the test that measured it.
    # test_llm.py may have exported this one already (llm_programs): then no export runs here.
    outcome.exported_here = not llm_programs.is_exported(arch, **settings)
    with mock.patch("torch.export.export", wraps=torch.export.export) as torch_export:
        try:
            if outcome.exported_here:
                buffer = bytes(llm.export_llm(model, **settings).buffer)
            else:
                buffer = llm_programs.exported(arch, **settings)[1]
        except (llm.UnsupportedModelError, ExportError) as e:
            outcome.refusal = e
        outcome.reached_torch_export = torch_export.called
    if outcome.refusal is not None:
        return outcome
    et_copy.use_simulated_device()
    session = llm.DeviceLLM(buffer).new_session()
    run = session.generate(PROMPT, TOKENS)
    outcome.tokens = run.tokens
    outcome.decode_bytes = {(s.h2d_bytes, s.d2h_bytes) for s in run.steps if s.kind == llm.DECODE}
    outcome.state_nbytes = session.state_nbytes
    outcome.state = _state_kinds(model)
    return outcome


class _Outcomes(dict):
    """Each architecture measured on first use, then shared by every test."""

    def __missing__(self, arch: str) -> Outcome:
        self[arch] = _measure(arch)
        return self[arch]


@pytest.fixture(scope="module")
def outcomes() -> _Outcomes:
    return _Outcomes()


def test_the_expectations_cover_every_tiny_architecture_and_what_the_issue_asks_for():
    assert set(EXPECTED) == set(llm.ARCHITECTURES) | set(llm.REFUSED_ARCHITECTURES)
    assert {a for a, (_, _, want) in EXPECTED.items() if want == WORKS} == set(llm.ARCHITECTURES)
    assert REQUIRED <= set(EXPECTED) and len(EXPECTED) >= 15


# The slowest exports (20 to 90 s on the shared 2-core build machine, against 11 to 16 s
# for most); CI runs the slow tests too.
SLOW = {"qwen3_next", "qwen3_5_moe", "gemma3", "deepseek_v3", "gpt_oss"}
# Variants whose layers another architecture here already exercises: dense
# and MoE ones (about 25 s each), and Qwen3-Next, whose gated-delta and MoE
# layers Qwen 3.5 MoE has too (the slowest export). In the costly tier
# (.ci/run-slow), which runs every architecture and the docs table, to keep
# every CI run under 30 minutes.
COSTLY = {
    *("llama", "mistral", "qwen2", "phi3", "olmo2", "smollm3", "gemma2"),
    *("olmoe", "qwen2_moe", "mixtral"),
    "qwen3_next",
}


def _marks(arch: str) -> list:
    return [pytest.mark.slow] * (arch in SLOW) + [pytest.mark.costly] * (arch in COSTLY)


@pytest.mark.parametrize("arch", [pytest.param(a, marks=_marks(a)) for a in EXPECTED])
def test_the_architecture_generates_transformers_tokens_or_is_refused_by_name_as_expected(arch, outcomes):
    outcome = outcomes[arch]
    want = EXPECTED[arch][2]
    if want == WORKS:
        assert outcome.refusal is None, f"{arch} was expected to work and was refused: {outcome.refusal}"
        assert outcome.tokens == outcome.reference, f"{arch}: the device's tokens differ from generate()"
        # A reference that repeats one token could not tell a wrong cache from a right one.
        assert len(set(outcome.reference)) >= 4, f"{arch}: the tiny config's reference is degenerate"
        assert outcome.decode_bytes == {(0, 8)}, outcome.decode_bytes  # nothing in (decode_next), the token out
        assert outcome.state_nbytes > 0 and outcome.state
        # The spy the refusals are checked with sees a real export (when one ran here).
        assert outcome.reached_torch_export == outcome.exported_here
        return
    error = outcome.refusal
    assert error is not None, f"{arch} was expected to be refused and generated {outcome.tokens}"
    assert outcome.class_name in str(error), f"the refusal does not name the architecture: {error}"
    if isinstance(error, llm.UnsupportedModelError):
        assert error.architecture == outcome.architecture
        assert not outcome.reached_torch_export, "refused only after torch.export had started"


# The table in docs/llm.md sits between these two lines.
BEGIN = (
    "<!-- generated by tests/python/llm/test_llm_breadth.py from its measured outcomes; to rewrite it: "
    f"{UPDATE}=1 python -m pytest tests/python/llm/test_llm_breadth.py --costly -->"
)
END = "<!-- end of the generated table -->"


def _versions() -> str:
    import importlib.metadata

    import transformers

    torch_version = torch.__version__.split("+")[0]  # no local build tag (+cpu)
    return (
        f"transformers {transformers.__version__}, torch {torch_version}, "
        f"executorch {importlib.metadata.version('executorch')}"
    )


def _kinds(kinds: list[str]) -> str:
    counts = {k: kinds.count(k) for k in kinds}  # in order of first appearance
    return ", ".join(f"{n} `{k}`" for k, n in counts.items())


def _verdict(arch: str, outcome: Outcome) -> str:
    if outcome.result == WORKS:
        kind = EXPECTED[arch][1]
        return f"yes, with `{outcome.experts}` experts" if "MoE" in kind else "yes"
    if outcome.result == REFUSED:
        error = outcome.refusal
        if isinstance(error, llm.UnsupportedModelError) and error.layer is not None:
            return f"refused (`UnsupportedModelError`): layer {error.layer} is `{error.cache_type}`"
        return f"refused (`{type(error).__name__}`)"
    return "no: wrong tokens"


def render_table(outcomes: _Outcomes) -> str:
    """The docs' table, from the outcomes of every architecture in EXPECTED."""
    prompt = " ".join(map(str, PROMPT))
    lines = [
        f"{_versions()}. Each tiny seeded config",
        "(`llm.tiny_model(name)`) is exported with",
        f'`export_llm(model, max_seq_len={MAX_SEQ}, pick="device")` and run on the',
        f'simulated device. "yes": {TOKENS} tokens from the prompt `{prompt}` equal',
        "transformers' greedy `generate()`, and each decode step moves nothing in",
        '(`decode_next`) and 8 B out. "refused": `export_llm` raises the error named, naming the',
        "architecture (an `UnsupportedModelError` before anything is traced).",
        "",
        "| architecture | `tiny_model` | class | cache layers (tiny config) | state (per session) | works |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for arch, (name, kind, _) in EXPECTED.items():
        o = outcomes[arch]
        state = f"{'; '.join(o.state)} ({o.state_nbytes:,} B)" if o.state else "-"
        cells = [f"{name} ({kind})", f"`{arch}`", f"`{o.class_name}`", _kinds(o.layer_kinds), state, _verdict(arch, o)]
        lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines)


@pytest.mark.costly  # measures every architecture, the costly ones too
def test_the_docs_table_is_the_measured_one(outcomes):
    text = DOC.read_text()
    pattern = re.compile(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), re.S)
    found = pattern.search(text)
    assert found, f"docs/llm.md lacks the generated table's markers:\n{BEGIN}\n{END}"
    table = render_table(outcomes)
    if os.environ.get(UPDATE) == "1":
        DOC.write_text(text[: found.start(1)] + table + text[found.end(1) :])
        return
    assert found.group(1) == table, (
        f"docs/llm.md's table differs from the measured outcomes; rewrite it with: "
        f"{UPDATE}=1 python -m pytest tests/python/llm/test_llm_breadth.py --costly\nmeasured:\n{table}"
    )
