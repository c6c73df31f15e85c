"""Device strings ("cuda", "cuda:1") and ExecuTorch's DeviceType codes."""

from __future__ import annotations

from typing import NamedTuple

from . import _C

CPU = 0
CUDA = 1


class Device(NamedTuple):
    type: int  # ExecuTorch DeviceType code
    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose: torch.device spells it .index

    def __str__(self) -> str:
        return _C.device_name(self.type, self.index)


def parse_device(device: object, *, op: str, arg: str = "device") -> Device:
    """Parses "cuda", "cuda:N" or a torch.device of type cuda."""
    text = str(device)
    kind, _, index = text.partition(":")
    if kind != "cuda":
        raise ValueError(f"{op}: {arg} must be 'cuda' or 'cuda:N', got {text!r}")
    if not index:
        return Device(CUDA, 0)
    # Checked here, not left to the allocator: some devices never reach C++
    # (an export's target device).
    if not index.isdigit() or int(index) > _C.MAX_DEVICE_INDEX:
        raise ValueError(f"{op}: {arg} has a bad device index in {text!r}")
    return Device(CUDA, int(index))
