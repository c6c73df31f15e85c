"""Every code block in README.md and docs/*.md runs as written.

Blocks are found by their fences. How each is treated:

- ``python``: run in a fresh interpreter; ``sh``/``bash``: run with bash
  (``set -euo pipefail``). The blocks of one document run in order in one
  scratch directory, so a later block may use a file an earlier one wrote;
  none runs in the checkout.
- ``text``, ``console``: output shown to the reader, never run.
- A block that should not run here carries a mark on the line right before
  its fence: ``<!-- doc-test: skip REASON -->`` (a real command that needs a
  GPU, installs, builds for minutes, or is what CI itself runs: the reason
  says which and where it is covered) or ``<!-- doc-test: excerpt -->`` (a
  fragment of a larger file: CMake, C++, a JSON layout).
- Anything else fails: a fence without a language, or a block in another
  language without a mark. So a new doc's blocks are checked from the day
  it lands.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN = {
    "python": [sys.executable, "-c"],
    "sh": ["bash", "-euo", "pipefail", "-c"],
    "bash": ["bash", "-euo", "pipefail", "-c"],
}
OUTPUT = {"text", "console"}
MARK = re.compile(r"^<!-- doc-test: (skip|excerpt)\b ?(.*?) ?-->$")
FENCE = re.compile(r"^\s*```(\S*)\s*$")  # indented too: a block inside a list


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    code: str
    mark: str | None  # "skip" or "excerpt"
    reason: str

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    lines = doc.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith("```")), len(lines))
        previous = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mark = MARK.match(previous)
        found.append(
            Block(
                doc,
                i + 1,
                fence.group(1),
                textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n",
                mark.group(1) if mark else None,
                mark.group(2) if mark else "",
            )
        )
        i = end + 1
    return found


ALL = [b for doc in DOCS for b in blocks(doc)]


def test_every_block_is_runnable_output_or_marked():
    problems = []
    for b in ALL:
        if not b.lang:
            problems.append(f"{b.name}: a fence without a language")
        elif b.mark == "skip" and not b.reason:
            problems.append(f"{b.name}: a skip mark must say why")
        elif b.lang not in RUN and b.lang not in OUTPUT and b.mark is None:
            problems.append(f"{b.name}: a {b.lang} block must be marked <!-- doc-test: excerpt --> or skip")
    assert not problems, "\n".join(problems)
    assert sum(b.lang in RUN and b.mark is None for b in ALL) >= 5  # the harness really runs blocks


@pytest.mark.slow
@pytest.mark.parametrize(
    "doc",
    [d for d in DOCS if any(b.lang in RUN and b.mark is None for b in blocks(d))],
    ids=lambda d: str(d.relative_to(REPO)),
)
def test_blocks_run_as_written(doc, tmp_path):
    runnable = [b for b in blocks(doc) if b.lang in RUN and b.mark is None]
    env = dict(os.environ)
    env.pop("PYTHONSAFEPATH", None)
    for b in runnable:
        proc = subprocess.run(
            [*RUN[b.lang], b.code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, (
            f"{b.name} ({b.lang}) exited {proc.returncode}\n{b.code}\n"
            f"--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-5000:]}"
        )
    # Nothing a block wrote landed in the checkout.
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True, text=True
    ).stdout
    assert not [line for line in status.splitlines() if line[3:].endswith((".pte", ".json", ".png", ".bin"))], status


def test_benchmarks_doc_quotes_the_defaults_the_code_uses():
    from et_copy.bench._timing import Config

    text = (REPO / "docs" / "benchmarks.md").read_text()
    assert f"samples per case (default {Config.repeats})" in text
    assert f"one sample (default {Config.sample_s * 1e3:g} ms)" in text
