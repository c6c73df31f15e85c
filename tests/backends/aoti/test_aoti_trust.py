"""A program's compiled code is code: AotiDeviceBackend runs a payload only
when it is the code the record's digest line names, and that code is
trusted (et_copy/code_trust.h; docs/runtime.md, "Untrusted programs").

The programs are a real ``backend="aoti"`` export, edited in place: the
payload and digest line keep their sizes, so the flatbuffer around them
stays valid. Every load that could run foreign code runs in a forked child
(helpers/forked.py's ``in_child``), which reports how it ended,
signals included."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.backends.aoti  # noqa: E402
import et_copy.runtime  # noqa: E402
from compiled_programs import DIGEST_LINE, Mlp, payload_span  # noqa: E402
from et_copy.backends.aoti import _aoti  # noqa: E402
from et_copy.export import export_device_program  # noqa: E402
from forked import in_child  # noqa: E402

# A shared library whose constructor writes the file its environment names:
# what a program from a stranger could carry instead of its model.
CONSTRUCTOR_SO = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void ran(void) {
  const char* path = getenv("ET_COPY_TEST_CONSTRUCTOR_FILE");
  FILE* f = path ? fopen(path, "w") : NULL;
  if (f) { fputs("the payload's code ran", f); fclose(f); }
}
"""


@pytest.fixture(scope="module", autouse=True)
def backends():
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()


@pytest.fixture(scope="module")
def program() -> bytes:
    """An MLP compiled for the simulated device: its .pte bytes."""
    return bytes(export_device_program(Mlp(), (torch.randn(2, 8),), backend="aoti").buffer)


def with_payload(data: bytes, so: bytes, *, digest: bool) -> bytes:
    """``data`` with its payload replaced by ``so`` (zero-padded to the same
    size), and with ``digest`` the digest line made to match it."""
    at, n = payload_span(data)
    assert len(so) <= n, (len(so), n)
    padded = so + bytes(n - len(so))
    out = bytearray(data)
    out[at : at + n] = padded
    if digest:
        line = DIGEST_LINE.search(data)
        assert line is not None
        out[line.start(1) : line.end(1)] = hashlib.sha256(padded).hexdigest().encode()
    return bytes(out)


def run_forward(data: bytes, **load) -> str:
    """'ran' after a forward on the program, or the load's refusal (in the child)."""
    method = et_copy.runtime.load(data, **load).load_method("forward")
    method.execute([torch.randn(2, 8)])
    return "ran"


@pytest.fixture(scope="module")
def constructor_so(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("constructor")
    (folder / "c.c").write_text(CONSTRUCTOR_SO)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", folder / "c.so", folder / "c.c"], check=True)
    return (folder / "c.so").read_bytes()


def test_the_record_carries_the_payloads_sha256_and_this_machine_trusts_what_it_compiled(program):
    at, n = payload_span(program)
    line = DIGEST_LINE.search(program)
    assert line is not None and line.start() < at
    digest = line.group(1).decode()
    assert digest == hashlib.sha256(program[at : at + n]).hexdigest()
    assert _aoti.is_trusted_code(digest)
    assert run_forward(program) == "ran"  # no extra step for code compiled here


@pytest.mark.parametrize("digest", [False, True], ids=["payload-only", "payload-and-digest"])
def test_a_payload_swapped_for_a_constructor_is_refused_before_its_code_runs(
    program, constructor_so, tmp_path, monkeypatch, digest
):
    evil = with_payload(program, constructor_so, digest=digest)
    marker = tmp_path / "ran.txt"
    monkeypatch.setenv("ET_COPY_TEST_CONSTRUCTOR_FILE", str(marker))
    kind, result = in_child(run_forward, evil)
    assert kind == "raised", (kind, result)
    name, message, error = result
    assert not marker.exists(), "the payload's constructor ran"
    if digest:  # the digest matches: the code is not trusted
        at, n = payload_span(program)
        found = hashlib.sha256(evil[at : at + n]).hexdigest()
        assert error == "AccessFailed", result
        assert f"SHA-256 {found})" in message and "not compiled here, and loading runs it" in message, message
        assert "trust_code=True" in message and "et_copy.backends.aoti.trust(digest)" in message, message
    else:
        assert error == "InvalidProgram", result
        assert "the payload was changed after export, not loaded" in message, message
        assert f"the record's digest line says SHA-256 {DIGEST_LINE.search(program).group(1).decode()}" in message
    # The control: trusted, the same bytes do run their constructor (and are then refused as no model).
    if digest:
        kind, result = in_child(functools.partial(run_forward, trust_code=True), evil)
        assert kind == "raised" and "does not export AOTInductorModelContainerCreateWithDevice" in result[1], result
        assert marker.read_text() == "the payload's code ran"


def test_payload_bit_flips_are_each_refused_with_no_signal(program):
    at, n = payload_span(program)
    rng = random.Random(20261205)
    outcomes: dict[str, int] = {}
    for _ in range(48):
        data = bytearray(program)
        # Most flips in the first 4 KiB (the ELF headers a loader reads first), the rest anywhere.
        reach = 4096 if rng.random() < 0.7 else n
        for _ in range(rng.randint(1, 8)):
            data[at + rng.randrange(min(reach, n))] ^= 1 << rng.randrange(8)
        if bytes(data) == program:
            continue  # flips that cancelled out
        kind, result = in_child(run_forward, bytes(data))
        key = f"{kind} {result[2]}" if kind == "raised" else f"{kind} {result}"
        outcomes[key] = outcomes.get(key, 0) + 1
    assert set(outcomes) == {"raised InvalidProgram"}, outcomes
    assert outcomes["raised InvalidProgram"] >= 40


def test_a_flipped_weight_byte_is_refused_under_verification_and_not_without(program):
    weight = Mlp().a.weight.detach().contiguous().numpy().tobytes()
    at = program.find(weight)
    assert at > 0 and program.find(weight, at + 1) < 0, "the weight's bytes, once in the file"
    data = bytearray(program)
    data[at + 5] ^= 0x10
    kind, result = in_child(functools.partial(run_forward, verify_data=True), bytes(data))
    assert kind == "raised" and result[2] == "InvalidProgram", (kind, result)
    assert re.search(
        r"weight 'a\.weight': named data 'et_copy\.weight:[0-9a-f]{32}' hashes to [0-9a-f]{32}, not its key: "
        r"the data is corrupted",
        result[1],
    ), result
    # Unverified, the flipped weight loads (the check is what refused it) ...
    assert in_child(run_forward, bytes(data)) == ("returned", "ran")
    # ... and the intact program passes verification.
    assert in_child(functools.partial(run_forward, verify_data=True), program) == ("returned", "ran")


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_the_load_flags_are_bools(program, value):
    for flag in ("verify_data", "trust_code"):
        with pytest.raises(TypeError, match=f"et_copy.runtime.load: {flag} must be a bool"):
            et_copy.runtime.load(program, **{flag: value})


def test_trust_takes_sha256_digests_in_lowercase_hex():
    with pytest.raises(TypeError, match="a digest is a str"):
        et_copy.backends.aoti.trust(b"0" * 64)  # type: ignore[arg-type]
    for bad in ("0" * 63, "0" * 65, "A" * 64, "g" * 64, "../" + "0" * 61):
        with pytest.raises(et_copy.EtCopyError, match="is not a SHA-256 in 64 lowercase hex digits"):
            et_copy.backends.aoti.trust(bad)
        assert not _aoti.is_trusted_code(bad)


@pytest.mark.parametrize(
    "setting,expected",
    [
        ("0", ""), ("false", ""), ("no", ""), (" off ", ""),
        ("/some/where", "/some/where"), ("1", "{xdg}/et_copy/aoti"), (None, "{xdg}/et_copy/aoti"),
    ],
)  # fmt: skip
def test_the_compile_cache_folder_is_decided_once_from_the_environment(monkeypatch, tmp_path, setting, expected):
    from et_copy.backends.aoti import _compile_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if setting is None:
        monkeypatch.delenv("ET_COPY_AOTI_CACHE", raising=False)
    else:
        monkeypatch.setenv("ET_COPY_AOTI_CACHE", setting)
    assert _aoti.compile_cache_dir() == expected.format(xdg=tmp_path)
    assert _compile_cache.cache_dir() == (Path(expected.format(xdg=tmp_path)) if expected else None)
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if expected.startswith("{xdg}"):
        assert _aoti.compile_cache_dir() == f"{tmp_path}/home/.cache/et_copy/aoti"


def test_code_compiled_here_is_marked_in_a_cache_folder_made_for_it(monkeypatch, tmp_path):
    digest = hashlib.sha256(b"code compiled in this test").hexdigest()
    folder = tmp_path / "a" / "b"  # none of it exists yet
    monkeypatch.setenv("ET_COPY_AOTI_CACHE", str(folder))
    _aoti.trust_compiled_code(digest, compiled_here=True)
    assert (folder / "trusted" / digest).is_file()
    other = hashlib.sha256(b"code trusted, not compiled here").hexdigest()
    _aoti.trust_compiled_code(other)
    assert _aoti.is_trusted_code(other) and not (folder / "trusted" / other).exists()  # the process's alone


ELSEWHERE = textwrap.dedent(
    """
    import json, os, sys
    import torch
    import et_copy, et_copy.backends.aoti, et_copy.runtime

    path, digest, mine = sys.argv[1], sys.argv[2], sys.argv[3]
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()

    def attempt(**load):
        try:
            et_copy.runtime.load(path, **load).load_method("forward").execute([torch.randn(2, 8)])
            return "ran"
        except et_copy.EtCopyError as e:
            return e.error

    seen = {}
    os.environ["ET_COPY_AOTI_CACHE"] = mine  # a machine whose cache never compiled it
    seen["untrusted"] = attempt()
    seen["trust_code"] = attempt(trust_code=True, verify_data=True, threads=1)  # every spec a load passes
    seen["after trust_code"] = attempt()  # one program's consent is not remembered
    os.environ["ET_COPY_AOTI_CACHE"] = sys.argv[4]  # the cache that compiled it
    seen["compiled here"] = attempt()
    os.environ["ET_COPY_AOTI_CACHE"] = mine
    et_copy.backends.aoti.trust(digest)
    seen["trusted digest"] = attempt()
    print(json.dumps(seen))
    """
)


def test_code_from_elsewhere_runs_once_trusted_through_each_way(program, tmp_path):
    path = tmp_path / "mlp.pte"
    path.write_bytes(program)
    digest = DIGEST_LINE.search(program).group(1).decode()  # type: ignore[union-attr]
    compiled_in = _aoti.compile_cache_dir()
    if not compiled_in:
        pytest.skip("the compile cache is off (ET_COPY_AOTI_CACHE=0): this machine keeps no marks")
    proc = subprocess.run(
        [sys.executable, "-c", ELSEWHERE, str(path), digest, str(tmp_path / "empty-cache"), compiled_in],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {
        "untrusted": "AccessFailed",
        "trust_code": "ran",
        "after trust_code": "AccessFailed",
        "compiled here": "ran",
        "trusted digest": "ran",
    }
