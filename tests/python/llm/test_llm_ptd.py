"""Weights in a .ptd beside the .pte (export_llm(external_weights=True),
et_copy.export.save): the .pte holds no weight byte, a load without the
.ptd is refused naming data_path, and with it (mapped) the program gives
the tokens it gives with its weights inside, through DeviceLLM, et_copy.runtime
and ``python -m et_copy generate``."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from et_copy import llm  # noqa: E402
from et_copy.export import ExportArgumentError, export_device_program, lower_to_device, save  # noqa: E402

PROMPT = [5, 17, 3, 9]
TOKENS = 8
MAX_SEQ = 32


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The tiny Qwen3 exported with its weights outside, saved, and the same export with them inside."""
    model = llm.tiny_model("qwen3")
    folder = tmp_path_factory.mktemp("ptd")
    pte, ptd = save(llm.export_llm(model, max_seq_len=MAX_SEQ, pick="device", external_weights=True), folder / "m.pte")
    inside = folder / "inside.pte"
    assert save(llm.export_llm(model, max_seq_len=MAX_SEQ, pick="device"), inside) == (inside, None)
    return model, pte, ptd, inside


def _weight_bytes(model) -> list[bytes]:
    return [p.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes() for p in model.parameters()]


def test_the_pte_holds_no_weight_byte_and_the_ptd_holds_every_weight(saved):
    model, pte, ptd, inside = saved
    assert ptd == pte.with_suffix(".ptd")
    pte_bytes, ptd_bytes, inside_bytes = pte.read_bytes(), ptd.read_bytes(), inside.read_bytes()
    weights = _weight_bytes(model)
    assert all(w in ptd_bytes and w not in pte_bytes for w in weights)
    assert all(w in inside_bytes for w in weights)  # the same export keeps them inside without the flag
    total = sum(len(w) for w in weights)
    # The .pte lost the weights and nothing else: the two exports differ by the weights' bytes (and padding).
    assert abs(len(inside_bytes) - len(pte_bytes) - total) < total // 10, (len(inside_bytes), len(pte_bytes), total)


def test_a_load_without_the_ptd_is_refused_naming_data_path(saved):
    _, pte, _, _ = saved
    et_copy.use_simulated_device()
    device = llm.DeviceLLM(pte)  # the constant methods hold no weight
    with pytest.raises(et_copy.EtCopyError, match=r"et_copy\.weight:.*needs that file at load: data_path"):
        device.new_session()


def test_with_the_ptd_the_tokens_equal_transformers_and_the_weights_inside(saved):
    model, pte, ptd, inside = saved
    et_copy.use_simulated_device()
    expected = llm.eager_generate(model, PROMPT, TOKENS)
    run = llm.DeviceLLM(pte, data_path=ptd).new_session().generate(PROMPT, TOKENS)
    assert run.tokens == expected == llm.DeviceLLM(inside).new_session().generate(PROMPT, TOKENS).tokens
    decodes = [s for s in run.steps if s.kind == llm.DECODE]
    assert decodes and all((s.h2d_bytes, s.d2h_bytes) == (0, 8) for s in decodes)
    # A loaded Program takes its .ptd at et_copy.runtime.load, not at DeviceLLM.
    program = et_copy.runtime.load(pte, data_path=ptd)
    assert llm.DeviceLLM(program).new_session().generate(PROMPT, TOKENS).tokens == expected
    refusal = r"^et_copy\.llm\.DeviceLLM: data_path, verify_data and trust_code go with a program to load"
    for flags in ({"data_path": ptd}, {"verify_data": True}, {"trust_code": True}):
        with pytest.raises(ValueError, match=refusal):
            llm.DeviceLLM(program, **flags)
    # Verified as they are copied, the .ptd's weights give the same tokens.
    verified = llm.DeviceLLM(pte, data_path=ptd, verify_data=True).new_session().generate(PROMPT, TOKENS)
    assert verified.tokens == expected


def test_generate_command_runs_a_saved_program_with_the_ptd_beside_it(saved):
    model, pte, ptd, _ = saved
    command = [sys.executable, "-m", "et_copy", "generate", "--arch", "qwen3", "--program", str(pte)]
    proc = subprocess.run(
        [
            *command,
            "--tokens",
            str(TOKENS),
            "--max-seq-len",
            str(MAX_SEQ),
            "--no-baseline",
            "--verify-data",  # the .ptd's weights checked by their keys on the way
            "--prompt",
            *map(str, PROMPT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert f"loaded {pte} with {ptd}" in proc.stdout  # the .ptd beside it, found without --data
    generated = re.search(r"^generated \(\d+ tokens\): (.*)$", proc.stdout, re.M)
    assert generated is not None and list(map(int, generated[1].split())) == llm.eager_generate(model, PROMPT, TOKENS)
    bad = subprocess.run([*command[:4], "--data", str(ptd)], capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "--data goes with --program" in bad.stderr, bad.stderr[-2000:]


@pytest.mark.parametrize("route", [export_device_program, lower_to_device], ids=lambda f: f.__name__)
def test_each_route_keeps_a_linear_weight_in_the_ptd_and_runs_equal_to_eager(route, tmp_path):
    torch.manual_seed(0)
    module = torch.nn.Linear(64, 32).eval()
    x = torch.randn(2, 64)
    pte, ptd = save(route(module, (x,), external_weights=True), tmp_path / "linear.pte")
    assert ptd is not None and module.weight.detach().numpy().tobytes() not in pte.read_bytes()
    et_copy.use_simulated_device()
    (out,) = et_copy.runtime.load(pte, data_path=ptd).load_method("forward").execute([x])
    torch.testing.assert_close(out, module(x).detach())


def test_bad_arguments_name_the_function_and_the_argument(tmp_path):
    module, x = torch.nn.Linear(4, 4), torch.randn(1, 4)
    with pytest.raises(
        ExportArgumentError, match=r"^et_copy\.export\.export_device_program: external_weights must"
    ) as e:
        export_device_program(module, (x,), external_weights="yes")
    assert e.value.argument == "external_weights"
    with pytest.raises(ExportArgumentError, match="external_weights=True goes with insert_copies=True") as e:
        export_device_program(module, (x,), insert_copies=False, external_weights=True)
    assert e.value.argument == "external_weights"
    with pytest.raises(ExportArgumentError, match=r"^et_copy\.export\.save: path must end in \.pte") as e:
        save(export_device_program(torch.nn.Identity(), (x,)), tmp_path / "m.bin")
    assert e.value.argument == "path"
    with pytest.raises(TypeError, match=r"^et_copy\.export\.save: program must be an ExecutorchProgramManager"):
        save(b"bytes", tmp_path / "m.pte")
