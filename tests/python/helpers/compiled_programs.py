"""A small compiled (``backend="aoti"``) program and where its record's
lines and payload lie in the .pte bytes, for the tests of compiled code's
integrity and trust (tests/backends/aoti: test_aoti_trust.py,
test_aoti_untrusted.py; tests/python/tools/test_doctor.py). The record's
format: docs/design.md, "The delegate record"."""

from __future__ import annotations

import re

import torch

DIGEST_LINE = re.compile(rb"digest\tsha256\t([0-9a-f]{64})\n")
PAYLOAD_LINE = re.compile(rb"payload\taoti\t(\d+)\n")


class Mlp(torch.nn.Module):
    """Two seeded Linear layers: every test that compiles it shares one compile-cache entry."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def aoti_payloads(buffer: bytes) -> list[tuple[bytes, list[str]]]:
    """The compiled code of each aoti delegate of a program (the records'
    payloads, in delegate order), each with the FQNs of the state its
    record lists."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    payloads = []
    for data in deserialize_pte_binary(buffer).program.backend_delegate_data:
        blob = bytes(data.data)
        line = PAYLOAD_LINE.search(blob)
        if line is None:
            continue
        head = blob[: line.start()].decode()
        state = [row.split("\t")[1] for row in head.split("\n") if row.startswith("state\t")]
        payloads.append((blob[line.end() : line.end() + int(line.group(1))], state))
    return payloads


def payload_span(data: bytes) -> tuple[int, int]:
    """(offset, nbytes) of the first aoti payload in ``data``."""
    line = PAYLOAD_LINE.search(data)
    assert line is not None, "no aoti payload"
    return line.end(), int(line.group(1))
