"""Every code block in README.md and docs/*.md runs as written.

Blocks are found by their fences. How each is treated:

- ``python``: run in a fresh interpreter; ``sh``/``bash``: run with bash
  (``set -euo pipefail``). The blocks of one document run in order in one
  scratch directory, so a later block may use a file an earlier one wrote;
  none runs in the checkout.
- ``text``, ``console``: output shown to the reader, never run.
- A block that should not run in every CI run carries a mark on the line
  right before its fence:

  - ``<!-- doc-test: costly REASON -->``: a real command too slow for every
    run (it installs from the checkout, builds for minutes, fuzzes). The
    costly tier runs it as written, in a fresh copy of the checkout so its
    relative paths (``cmake -S .``, ``fuzz/run.sh``) mean what they say:
    ``python -m pytest tests/python/repo/test_docs.py --costly`` (.ci/run-slow).
    Without ``--costly`` these tests are deselected, not skipped.
  - ``<!-- doc-test: ci REASON -->``: what CI itself runs; every line of the
    block is a line of .ci/run, which a test checks.
  - ``<!-- doc-test: skip REASON -->``: cannot run on a CI machine (it needs
    a GPU, or downloads for one); the reason says which.
  - ``<!-- doc-test: excerpt -->``: a fragment of a larger file (CMake, C++,
    a JSON layout).
- Anything else fails: a fence without a language, or a block in another
  language without a mark. So a new doc's blocks are checked from the day
  it lands.
- What the blocks write goes under ``build/`` or a scratch folder, never
  into the checkout. The checks compare the checkout's untracked files with
  those that were there before the blocks ran, so a user's own files never
  fail them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CI_SCRIPT = REPO / ".ci" / "run"
RUN = {
    "python": [sys.executable, "-c"],
    "sh": ["bash", "-euo", "pipefail", "-c"],
    "bash": ["bash", "-euo", "pipefail", "-c"],
}
OUTPUT = {"text", "console"}
MARK = re.compile(r"^<!-- doc-test: (skip|excerpt|costly|ci)\b ?(.*?) ?-->$")
FENCE = re.compile(r"^\s*```(\S*)\s*$")  # indented too: a block inside a list


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    code: str
    mark: str | None  # "skip", "excerpt", "costly" or "ci"
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
        elif b.mark in ("skip", "costly", "ci") and not b.reason:
            problems.append(f"{b.name}: a {b.mark} mark must say why")
        elif b.mark in ("costly", "ci") and b.lang not in RUN:
            problems.append(f"{b.name}: only sh, bash and python blocks run; a {b.lang} block is an excerpt")
        elif b.lang not in RUN and b.lang not in OUTPUT and b.mark is None:
            problems.append(f"{b.name}: a {b.lang} block must be marked <!-- doc-test: excerpt --> or skip")
    assert not problems, "\n".join(problems)
    assert sum(b.lang in RUN and b.mark is None for b in ALL) >= 5  # the harness really runs blocks


# A tool a shell block uses -> how the block must install it, or name the
# command that does, before using it (a fresh Debian 12 has neither pytest
# nor clang, and its CMake is 3.25).
TOOLS = {
    "cmake >= 3.28": (r"^\s*cmake\s", r'pip install [^\n]*"cmake>=3\.28"'),
    "pytest": (r"-m pytest\b", r"pip install [^\n]*pytest"),
    "clang": (r"fuzz/run\.sh|^\s*clang", r"apt-get install [^\n]*clang"),
    "GoogleTest": (r"-DET_COPY_BUILD_TESTS=ON", r"apt-get install [^\n]*libgtest-dev"),
}


def test_shell_blocks_install_the_tools_they_use():
    problems = []
    for b in ALL:
        if b.lang not in ("sh", "bash") or b.mark in ("excerpt", "ci"):
            continue
        for tool, (use, install) in TOOLS.items():
            used = re.search(use, b.code, re.MULTILINE)
            named = re.search(install, b.code)
            if used and (named is None or named.start() > used.start()):
                problems.append(f"{b.name}: uses {tool} without installing it first ({install!r})")
    assert not problems, "\n".join(problems)


def test_ci_blocks_are_what_ci_runs():
    ci_lines = {line.strip() for line in CI_SCRIPT.read_text().splitlines()}
    ci_blocks = [b for b in ALL if b.mark == "ci"]
    assert ci_blocks
    for b in ci_blocks:
        missing = [line for line in b.code.splitlines() if line.strip() and line.strip() not in ci_lines]
        assert not missing, f"{b.name}: not in {CI_SCRIPT.relative_to(REPO)}: {missing}"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONSAFEPATH", None)
    # `python`, `pip` and `cmake` in a block are this environment's, as in an activated venv.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _untracked(root: Path) -> set[str]:
    """Files git does not track and does not ignore (build/ is ignored)."""
    out = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(filter(None, out.split("\0")))


def _run(b: Block, cwd: Path, timeout: float) -> None:
    proc = subprocess.run([*RUN[b.lang], b.code], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{b.name} ({b.lang}) exited {proc.returncode}\n{b.code}\n"
        f"--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-5000:]}"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "doc",
    [d for d in DOCS if any(b.lang in RUN and b.mark is None for b in blocks(d))],
    ids=lambda d: str(d.relative_to(REPO)),
)
def test_blocks_run_as_written(doc, tmp_path):
    before = _untracked(REPO)
    for b in blocks(doc):
        if b.lang in RUN and b.mark is None:
            _run(b, tmp_path, timeout=600)
    # Nothing a block wrote landed in the checkout; files that were there before are the user's.
    assert not _untracked(REPO) - before


def _copy_of_checkout(dest: Path) -> Path:
    """The checkout's tracked and untracked-but-not-ignored files, in a git
    repository of its own, so blocks run as they would in a fresh clone and
    anything they leave outside build/ shows as untracked."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for rel in sorted(_untracked(REPO) | set(filter(None, tracked.split("\0")))):
        src = REPO / rel
        if src.is_file():  # a deleted but still tracked file is absent
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    return dest


@pytest.mark.costly
@pytest.mark.parametrize(
    "doc",
    [d for d in DOCS if any(b.mark == "costly" for b in blocks(d))],
    ids=lambda d: str(d.relative_to(REPO)),
)
def test_costly_blocks_run_as_written_in_a_copy_of_the_checkout(doc, tmp_path):
    root = _copy_of_checkout(tmp_path / "checkout")
    for b in blocks(doc):
        if b.mark == "costly":
            _run(b, root, timeout=3600)
    assert not _untracked(root), "written outside build/"


def test_benchmarks_doc_quotes_the_defaults_the_code_uses():
    from et_copy.tools.bench._timing import Config

    text = (REPO / "docs" / "benchmarks.md").read_text()
    assert f"samples per case (default {Config.repeats})" in text
    assert f"one sample (default {Config.sample_s * 1e3:g} ms)" in text
