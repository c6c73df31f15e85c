"""The figures the docs quote stay true.

Each figure a doc quotes (case counts, seed counts, defaults) either comes
from the code, and FIGURES below compares it with the code, or from a run
recorded in the doc with its command and date ("Recorded 2026-12-03,
`time python -m et_copy parity`: ..."), which no test can redo for free.
A figure the code can produce goes in FIGURES; one it cannot says where it
came from.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

import fuzz_profiles
import pytest

REPO = Path(__file__).resolve().parents[3]
WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}


def supported_dtypes() -> int:
    import et_copy

    return len(et_copy.SUPPORTED_DTYPES)


def executorch_scalar_types() -> int:
    """ExecuTorch's dtypes, counted in the wheel's own header."""
    root = Path(importlib.util.find_spec("executorch").submodule_search_locations[0])
    header = (root / "include/executorch/runtime/core/portable_type/scalar_type.h").read_text()
    table = header.split("#define ET_FORALL_SCALAR_TYPES(_)", 1)[1].split("\n\n", 1)[0]
    return len(re.findall(r"/\* \d+ \*/", table))


def parity_cases() -> int:
    from et_copy.tools.parity.cases import all_cases

    return len(all_cases())


def parity_implementations() -> int:
    from et_copy.tools.parity.runners import IMPLEMENTATIONS

    return len(IMPLEMENTATIONS)


def parity_programs() -> int:
    from et_copy.tools.parity.programs import PROGRAMS

    return len(PROGRAMS)


def seed_corpus() -> int:
    return sum(1 for p in (REPO / "fuzz" / "corpus").iterdir() if p.is_file())


def bench_sizes() -> str:
    from et_copy.tools.bench._throughput import DEFAULT_SIZES

    def kib(n: int) -> str:
        return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"

    return f"{kib(DEFAULT_SIZES[0])}, {kib(DEFAULT_SIZES[1])}, ... {kib(DEFAULT_SIZES[-1])}"


def default_host_readable() -> bool:
    from et_copy import _C

    return _C.SIMULATED_DEVICE_DEFAULT_HOST_READABLE


def default_memory_words() -> str:
    return "host-readable" if default_host_readable() else "host-unreadable"


def max_tensor_dims() -> int:
    from et_copy import _C

    return _C.MAX_TENSOR_DIMS


# (doc, a pattern whose groups are the quoted figures, what the code says each is)
FIGURES: list[tuple[str, str, list[Callable[[], object]]]] = [
    ("README.md", r"for (\d+) of ExecuTorch's (\d+) dtypes", [supported_dtypes, executorch_scalar_types]),
    ("README.md", r"(\d+) of ExecuTorch's (\d+)\. Quantized", [supported_dtypes, executorch_scalar_types]),
    ("docs/parity.md", r"the (\d+) of the README's dtype", [supported_dtypes]),
    (
        "docs/parity.md",
        r"et-copy parity: (\d+) cases x (\d+) implementations",
        [parity_cases, parity_implementations],
    ),
    ("docs/parity.md", r"(\d+) matrix cases\s+and (\d+) programs", [parity_cases, parity_programs]),
    ("docs/parity.md", r"The (\w+) implementations \(table columns\)", [lambda: WORDS[parity_implementations()]]),
    ("docs/reliability.md", r"libFuzzer-merged set of (\d+) small inputs", [seed_corpus]),
    ("docs/reliability.md", r'"ci": (\d+) per fuzz test', [lambda: fuzz_profiles.PROFILES["ci"]]),
    ("docs/reliability.md", r'"long": ([\d,]+) per fuzz test', [lambda: f"{fuzz_profiles.PROFILES['long']:,}"]),
    ("docs/reliability.md", r"run by (\w+) fuzz tests", [lambda: WORDS[len(fuzz_profiles.KINDS)]]),
    (
        "docs/reliability.md",
        r"each named in the session summary:\s+`([^`]+)`\s+and\s+`([^`]+)`[^`]*and\s+`([^`]+)`",
        [lambda i=i: fuzz_profiles.KINDS[i] for i in range(3)],
    ),
    ("docs/benchmarks.md", r"throughput sizes \([^)]*; default ([^)]+)\)", [bench_sizes]),
    # Documented defaults, each against its constant in _C.
    ("README.md", r"`None` keeps the mode, which starts ([\w-]+)", [default_memory_words]),
    ("docs/reliability.md", r"The default is `host_readable=(\w+)`", [default_host_readable]),
    ("docs/reliability.md", r"the (\d+)-dim limit", [max_tensor_dims]),
]


@pytest.mark.parametrize("doc,pattern,sources", FIGURES, ids=[f"{d}:{p[:40]}" for d, p, _ in FIGURES])
def test_quoted_figure_is_what_the_code_says(doc, pattern, sources):
    text = (REPO / doc).read_text()
    found = list(re.finditer(pattern, text))
    assert found, f"{doc} no longer quotes {pattern!r}: update FIGURES with the doc"
    want = tuple(str(source()) for source in sources)
    for match in found:
        assert match.groups() == want, f"{doc}: {match.group(0)!r} quotes {match.groups()}, the code says {want}"


def test_recorded_runs_name_their_date_and_command():
    """A figure from a run says when and how it was taken."""
    problems = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for paragraph in re.split(r"\n\s*\n|\n(?=\s*- )", doc.read_text()):
            if re.search(r"\b[Rr]ecorded\b", paragraph) and not (
                re.search(r"\b20\d\d-\d\d-\d\d\b", paragraph) and "`" in paragraph
            ):
                problems.append(f"{doc.relative_to(REPO)}: {' '.join(paragraph.split())[:120]}")
    assert not problems, "\n".join(problems)


def test_parity_doc_names_every_kind_of_invalid_case():
    from et_copy.tools.parity.cases import all_cases

    kinds = {c.name.split("/")[2] for c in all_cases() if c.name.startswith("invalid/")}
    section = (REPO / "docs/parity.md").read_text().split("- invalid cases:", 1)[1].split("\n\n", 1)[0]
    assert kinds == set(re.findall(r"`([a-z]+_[a-z_]+)`", section)), section
