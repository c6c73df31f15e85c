"""export_llm_cached's rules with export_llm stubbed (seconds): what names a
program in the cache (every tensor's bytes, first to last, and the
settings), when a stored program is reused, re-exported or never looked
at. test_llm.py checks the same with real exports."""

from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

from et_copy import llm  # noqa: E402
from et_copy.llm import _cache  # noqa: E402


def test_the_key_is_32_hex_digits_of_every_tensors_bytes_and_the_settings():
    model = llm.tiny_model("qwen3")
    settings = {"max_seq_len": 16}
    key = _cache.cache_key(model, settings)
    assert re.fullmatch(r"[0-9a-f]{32}", key)
    assert _cache.cache_key(llm.tiny_model("qwen3"), dict(settings)) == key  # the same model and settings
    assert _cache.cache_key(model, {"max_seq_len": 17}) != key
    params = list(model.parameters())
    for p in (params[0], params[-1]):  # the first tensor and the last, each at its last element
        with torch.no_grad():
            old = p.reshape(-1)[-1].item()
            p.reshape(-1)[-1] += 1.0
            assert _cache.cache_key(model, settings) != key
            p.reshape(-1)[-1] = old
    assert _cache.cache_key(model, settings) == key


@pytest.fixture
def exports(monkeypatch):
    made = []

    class _Program:
        def __init__(self, data: bytes) -> None:
            self.buffer = data

    def export(model, **settings):
        made.append(settings)
        return _Program(b"program %d" % len(made))

    monkeypatch.setattr(_cache, "export_llm", export)
    return made


def test_a_stored_program_is_reused_an_empty_one_exported_again_and_no_cache_touches_nothing(tmp_path, exports):
    model = llm.tiny_model("qwen3")
    first = llm.export_llm_cached(model, cache_dir=tmp_path, max_seq_len=16)
    assert (first.buffer, first.hit, first.path.parent) == (b"program 1", False, tmp_path)
    again = llm.export_llm_cached(model, cache_dir=tmp_path, max_seq_len=16)
    assert (again.buffer, again.hit, again.path) == (b"program 1", True, first.path)
    first.path.write_bytes(b"")  # a file cut short (a full disk): not a program
    rewritten = llm.export_llm_cached(model, cache_dir=tmp_path, max_seq_len=16)
    assert (rewritten.buffer, rewritten.hit) == (b"program 2", False) and first.path.read_bytes() == b"program 2"
    off = llm.export_llm_cached(model, cache_dir=tmp_path, use_cache=False, max_seq_len=16)
    assert (off.buffer, off.hit, off.path) == (b"program 3", False, None)
    assert first.path.read_bytes() == b"program 2"  # neither read nor written
    assert exports == [{"max_seq_len": 16}] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.path.name]  # no partial file left
