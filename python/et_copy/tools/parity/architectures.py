"""The architectures of the program section: small, random-weight versions of
the models people put behind a device boundary. Each entry builds the
module, its example inputs (for export), the inputs it runs on, and
torch.export dynamic shapes (or None)."""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import torch


def _gen(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def _randn(name: str, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(name)).to(dtype)


def _seeded(seed: int):
    """Runs a builder with the global RNG seeded, since module initialisation
    draws from it, and restores the caller's RNG state afterwards."""

    def wrap(build):
        @functools.wraps(build)
        def run():
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                return build()

        return run

    return wrap


class ConvNetBN(torch.nn.Module):
    """Two conv + batch-norm + ReLU stages, pooling and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
        )
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Attention(torch.nn.Module):
    """Multi-head self-attention returning the output and the averaged weights."""

    def __init__(self) -> None:
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mha(x, x, x, need_weights=True)


class Recurrent(torch.nn.Module):
    """An LSTM over a sequence: the outputs and both final states."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (h, c) = self.lstm(x)
        return out, h, c


class SplitHeads(torch.nn.Module):
    """Ops with several outputs (chunk, unbind) feeding more compute."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = x.chunk(2, dim=-1)
        rows = x.unbind(0)
        return torch.relu(a) * b, rows[0] + rows[-1]


class MixedDtypes(torch.nn.Module):
    """float16, int64 and bool in and out."""

    def forward(self, x: torch.Tensor, idx: torch.Tensor, mask: torch.Tensor):
        return x * 2, idx + 3, mask & (idx > 0)


class Passthrough(torch.nn.Module):
    """Returns its inputs: a copy-only program (every tensor goes to the
    device and back, nothing else)."""

    def forward(self, *xs: torch.Tensor):
        return tuple(xs)


@dataclass(frozen=True)
class Model:
    name: str
    description: str
    build: Callable[[], tuple[torch.nn.Module, tuple, tuple, Any]]
    control: bool = True  # has compute to compare with a plain export (a passthrough has none)


@_seeded(0)
def _convnet():
    m = ConvNetBN().eval()
    with torch.no_grad():  # non-trivial running statistics
        for bn in (m.features[1], m.features[4]):
            assert isinstance(bn, torch.nn.BatchNorm2d) and bn.running_mean is not None and bn.running_var is not None
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
    return m, (_randn("conv/ex", 2, 3, 16, 16),), (_randn("conv", 2, 3, 16, 16),), None


@_seeded(1)
def _encoder():
    m = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True).eval()
    return m, (_randn("enc/ex", 2, 6, 32),), (_randn("enc", 2, 6, 32),), None


@_seeded(2)
def _attention():
    return Attention().eval(), (_randn("mha/ex", 2, 5, 32),), (_randn("mha", 2, 5, 32),), None


@_seeded(3)
def _recurrent():
    return Recurrent().eval(), (_randn("lstm/ex", 2, 7, 8),), (_randn("lstm", 2, 7, 8),), None


def _split():
    return SplitHeads(), (_randn("split/ex", 4, 6),), (_randn("split", 4, 6),), None


def _dtypes():
    def inputs(tag: str):
        g = _gen(tag)
        return (
            _randn(tag, 3, 4, dtype=torch.float16),
            torch.randint(-5, 5, (3, 4), generator=g),
            torch.randint(0, 2, (3, 4), generator=g).to(torch.bool),
        )

    return MixedDtypes(), inputs("dtypes/ex"), inputs("dtypes"), None


@_seeded(4)
def _dynamic():
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    rows = torch.export.Dim("rows", min=1, max=16)
    return m, (_randn("dyn/ex", 8, 8),), (_randn("dyn", 5, 8),), ({0: rows},)


# The dtypes executorch 1.5.1's edge dialect lets through to_edge around the
# et_copy ops; the rest (float8, uint16/32/64, complex32, bits) fail its
# verification (SpecViolationError) before et-copy is involved, so programs
# carry these while the copy kernels move every SUPPORTED_DTYPES entry.
PROGRAM_DTYPES = (
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
    torch.bool,
    torch.bfloat16,
)


def _all_dtypes():
    def raw(dtype: torch.dtype, tag: str) -> torch.Tensor:  # random bytes, any bit pattern
        if dtype == torch.bool:
            return torch.randint(0, 2, (3, 5), generator=_gen(tag)).to(torch.bool)
        return (
            torch.randint(0, 256, (15 * dtype.itemsize,), generator=_gen(tag), dtype=torch.uint8)
            .view(dtype)
            .reshape(3, 5)
        )

    return (
        Passthrough(),
        tuple(torch.zeros(3, 5, dtype=d) for d in PROGRAM_DTYPES),
        tuple(raw(d, f"all_dtypes/{d}") for d in PROGRAM_DTYPES),
        None,
    )


MODELS = [
    Model(
        "copy_only_all_dtypes",
        "every dtype a program can carry, [3, 5] of random bytes each, to the device and back",
        _all_dtypes,
        control=False,
    ),
    Model("convnet_bn", "conv + batch norm + ReLU x2, pooling, linear; [2, 3, 16, 16]", _convnet),
    Model("transformer_encoder", "nn.TransformerEncoderLayer(32, 4 heads); [2, 6, 32]", _encoder),
    Model("attention", "nn.MultiheadAttention(32, 4 heads), output and weights; [2, 5, 32]", _attention),
    Model("lstm", "nn.LSTM(8 -> 16), outputs and (h, c); [2, 7, 8]", _recurrent),
    Model("split_outputs", "chunk and unbind feeding compute, two outputs; [4, 6]", _split),
    Model("mixed_dtypes", "float16, int64 and bool inputs and outputs; [3, 4] each", _dtypes),
    Model("dynamic_rows", "Linear-GELU-Linear on [rows, 8], planned for 16 rows, run with 5", _dynamic),
]
