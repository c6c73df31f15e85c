"""``python -m et_copy doctor PROGRAM.pte``: the compiled code a program
carries, read with executorch's own deserializer from a real
``backend="aoti"`` export (docs/runtime.md, "Untrusted programs")."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
from compiled_programs import PAYLOAD_LINE, Mlp  # noqa: E402
from et_copy.export import export_device_program  # noqa: E402
from et_copy.tools import doctor  # noqa: E402


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, bytes]:
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()
    return {
        "aoti": bytes(export_device_program(Mlp(), (torch.randn(2, 8),), backend="aoti").buffer),
        "simulated": bytes(export_device_program(Mlp(), (torch.randn(2, 8),)).buffer),
    }


def payload(data: bytes) -> tuple[int, int]:
    line = PAYLOAD_LINE.search(data)
    assert line is not None, "no aoti payload"
    return line.end(), int(line.group(1))


def doctor_json(path, capsys) -> dict:
    assert doctor.main([str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_doctor_lists_a_compiled_programs_payload_its_sha256_and_that_this_machine_trusts_it(
    programs, tmp_path, capsys
):
    path = tmp_path / "mlp.pte"
    path.write_bytes(programs["aoti"])
    at, n = payload(programs["aoti"])
    sha256 = hashlib.sha256(programs["aoti"][at : at + n]).hexdigest()
    assert doctor_json(path, capsys) == {
        "program": str(path),
        "compiled_code": [
            {
                "method": "forward",
                "target": "cpu",
                "torch": torch.__version__,
                "payload_nbytes": n,
                "sha256": sha256,
                "payload_sha256": sha256,
                "matches": True,
                "trusted": True,  # compiled here
            }
        ],
    }
    assert doctor.main([str(path)]) == 0
    text = capsys.readouterr().out
    assert f"method forward: target cpu, torch {torch.__version__}, {n} bytes" in text, text
    assert f"SHA-256 {sha256} (the payload's bytes match it)" in text, text
    assert "trusted here" in text, text


def test_doctor_says_when_a_payloads_bytes_do_not_match_the_records_digest(programs, tmp_path, capsys):
    at, n = payload(programs["aoti"])
    data = bytearray(programs["aoti"])
    data[at + 100] ^= 0x01
    path = tmp_path / "flipped.pte"
    path.write_bytes(data)
    (code,) = doctor_json(path, capsys)["compiled_code"]
    assert code["sha256"] == hashlib.sha256(programs["aoti"][at : at + n]).hexdigest()
    assert code["payload_sha256"] == hashlib.sha256(bytes(data[at : at + n])).hexdigest()
    assert code["matches"] is False and code["trusted"] is False
    assert doctor.main([str(path)]) == 0
    text = capsys.readouterr().out
    assert f"{code['payload_sha256']}: changed after export; the runtime refuses it" in text, text


def test_doctor_says_a_program_without_compiled_code_has_none(programs, tmp_path, capsys):
    path = tmp_path / "simulated.pte"
    path.write_bytes(programs["simulated"])
    assert doctor_json(path, capsys)["compiled_code"] == []
    assert doctor.main([str(path)]) == 0
    assert "no compiled code (no AotiDeviceBackend delegate)" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["text", "truncated", "missing"])
def test_doctor_refuses_a_file_that_is_not_a_program_with_a_message_and_exit_1(programs, tmp_path, capsys, kind):
    path = tmp_path / "not.pte"
    if kind == "text":
        path.write_text("hello, not a program\n")
    elif kind == "truncated":
        path.write_bytes(programs["aoti"][:200])
    argv = [str(path), "--json"] if kind == "truncated" else [str(path)]
    assert doctor.main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("python -m et_copy doctor: ") and "Traceback" not in err, err
    expected = {
        "text": "not an ExecuTorch program (no 'ET' file identifier at byte 4)",
        "truncated": "not an ExecuTorch program executorch can read",
        "missing": "No such file or directory",
    }[kind]
    assert expected in err, err


def test_doctor_without_a_program_still_reports_this_process(capsys):
    assert doctor.main(["--json"]) == 0
    assert {"et_copy", "executorch", "torch", "kernels", "cuda"} <= set(json.loads(capsys.readouterr().out))
