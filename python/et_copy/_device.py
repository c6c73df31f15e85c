"""Device strings ("cuda", "cuda:1") and ExecuTorch's DeviceType codes."""

from __future__ import annotations

from typing import NamedTuple

CPU = 0
CUDA = 1


class Device(NamedTuple):
    type: int  # ExecuTorch DeviceType code
    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose: torch.device spells it .index

    def __str__(self) -> str:
        return "cpu" if self.type == CPU else f"cuda:{self.index}"


def parse_device(device: object, *, op: str, arg: str = "device") -> Device:
    """Parses "cuda", "cuda:N" or a torch.device of type cuda."""
    text = str(device)
    kind, _, index = text.partition(":")
    if kind != "cuda":
        raise ValueError(f"{op}: {arg} must be 'cuda' or 'cuda:N', got {text!r}")
    if not index:
        return Device(CUDA, 0)
    if not index.isdigit() or int(index) > 127:
        raise ValueError(f"{op}: {arg} has a bad device index in {text!r}")
    return Device(CUDA, int(index))
