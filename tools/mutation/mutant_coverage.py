#!/usr/bin/env python3
"""Which generated mutants no test of their own row even reaches.

A mutant on a line its tests never execute survives whatever it changes, so
the lines no row reaches are the class of survivors that a fresh sample
keeps finding one at a time. This tool finds all of them at once:

1. builds the tree of tools/mutation/mutation.py instrumented for gcov
   (build/coverage by default: runtime, C++ tests, the extension);
2. runs each test of every chosen mutant's row once (GoogleTest executables
   directly; pytest under coverage.py, one process per test file), and keeps
   the lines each one executed, of the C++ (gcov) and of python/et_copy;
3. marks each mutant reached when any test of its row executed one of the
   lines it changes, and prints the unreached ones by file and line.

Unreached does not mean untestable: a new test, or a test already written
but missing from the file's row in tools/mutation/mutant_targets.py, reaches it.
A reached mutant may still survive; this finds the unreached ones only.

    python tools/mutation/mutant_coverage.py                       # every generated mutant (~40 min on 2 cores)
    python tools/mutation/mutant_coverage.py python/bindings/      # the mutants whose id starts so
    python tools/mutation/mutant_coverage.py --report              # the last run's lines, without running again

A run measured before is measured again only when its tests changed, or the
core's sources did (a fingerprint of them is saved with the lines), so after
adding tests a second run costs only the new ones.

Needs coverage.py (`pip install coverage`, in the test extra) and gcov.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mutant_generator as gen  # noqa: E402
import mutation  # noqa: E402
from listed_mutants import Mutant  # noqa: E402

REPO = mutation.REPO
COVERAGE_FLAGS = (
    # -O0 so each line keeps its own counter; NDEBUG as the release build has it.
    "-DCMAKE_CXX_FLAGS=--coverage",
    "-DCMAKE_C_FLAGS=--coverage",
    "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG",
    "-DCMAKE_C_FLAGS_RELEASE=-O0 -DNDEBUG",
    "-DCMAKE_EXE_LINKER_FLAGS=--coverage",
    "-DCMAKE_SHARED_LINKER_FLAGS=--coverage",
    "-DCMAKE_MODULE_LINKER_FLAGS=--coverage",
)

Lines = dict[str, set[int]]  # repository path -> executed line numbers


def runs(mutants: list[Mutant]) -> dict[str, tuple[str, ...]]:
    """One run per GoogleTest executable (with its filter) and per pytest file.

    A row naming single tests of a file runs them together, so their lines
    are one run's: a mutant whose row names only some of them may count as
    reached by the others (the report errs toward reached, never toward unreached)."""
    by_run: dict[str, list[str]] = defaultdict(list)
    for m in mutants:
        for t in m.tests:
            if t not in by_run[run_of(t)]:
                by_run[run_of(t)].append(t)
    return {k: tuple(v) for k, v in by_run.items()}


def run_of(test: str) -> str:
    """The run a test is measured in: its executable (with its filter), or its pytest file."""
    kind, _, rest = test.partition(":")
    return test if kind == "cpp" else "py:" + rest.split("::")[0]


def repo_path(path: str, tree: Path) -> str | None:
    """A path gcov or coverage.py names, as the repository's path (None outside it)."""
    p = Path(path)
    try:
        return p.resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        pass
    # The development package's copies of python/et_copy.
    head, sep, rest = p.as_posix().partition("/pkg/et_copy/")
    if sep:
        return "python/et_copy/" + rest
    return None


def gcov_lines(build: Path, tree: Path, suffix: str = ".gcda") -> Lines:
    """The lines the gcda files under build record as executed; with
    suffix=".gcno", every line that carries a counter, run or not."""
    objects = sorted(str(p) for p in build.rglob("*" + suffix))
    out: Lines = defaultdict(set)
    for i in range(0, len(objects), 64):
        proc = subprocess.run(
            ["gcov", "--json-format", "--stdout", *objects[i : i + 64]],
            cwd=build,
            capture_output=True,
            text=True,
            errors="replace",
        )
        for doc in proc.stdout.splitlines():
            if not doc.startswith("{"):
                continue
            for f in json.loads(doc).get("files", []):
                rel = repo_path(f["file"] if os.path.isabs(f["file"]) else str(build / f["file"]), tree)
                if rel is not None:
                    counted = f.get("lines", [])
                    out[rel].update(ln["line_number"] for ln in counted if suffix == ".gcno" or ln.get("count", 0) > 0)
    return out


def python_lines(data_file: Path, tree: Path) -> Lines:
    import coverage

    cov = coverage.Coverage(data_file=str(data_file))
    cov.load()
    data = cov.get_data()
    out: Lines = defaultdict(set)
    for f in data.measured_files():
        rel = repo_path(f, tree)
        if rel is not None:
            out[rel].update(data.lines(f) or ())
    return out


def measure(runner: mutation.Runner, key: str, tests: tuple[str, ...]) -> tuple[Lines, bool, float]:
    """Runs one executable or one pytest file from fresh counters; its executed lines."""
    for gcda in runner.build.rglob("*.gcda"):
        gcda.unlink()
    data_file = runner.work / "python.coverage"
    data_file.unlink(missing_ok=True)
    stand_in = Mutant("coverage", "", "", "", tests)
    ok = runner.make(runner.targets(stand_in))[0]
    start = time.monotonic()
    for cmd, env in runner.commands(stand_in):
        if key.startswith("py:"):
            i = cmd.index("pytest")
            cmd = [
                *cmd[: i - 1],
                "-m",
                "coverage",
                "run",
                f"--data-file={data_file}",
                "--include=*/et_copy/*",
                *cmd[i - 1 :],
            ]
            cmd.remove("-x")  # every test's lines, not only those before the first failure
        proc = subprocess.run(cmd, cwd=runner.tree, env=env, capture_output=True, text=True, errors="replace")
        ok = ok and proc.returncode == 0
    lines = gcov_lines(runner.build, runner.tree)
    if data_file.is_file():
        for f, ls in python_lines(data_file, runner.tree).items():
            lines[f] |= ls
    return lines, ok, time.monotonic() - start


def instrumented_lines(build: Path, tree: Path, files: set[str]) -> Lines:
    """The lines that carry code a test could run: gcov's lines of every
    object (counted or not), and coverage.py's statements. A line with none
    (a constant folded at compile time, a declaration) cannot be judged."""
    from coverage.python import PythonParser

    out = gcov_lines(build, tree, ".gcno")
    for f in sorted(x for x in files if x.endswith(".py")):
        parser = PythonParser(filename=str(REPO / f))
        parser.parse_source()
        out[f] = set(parser.statements)
    return out


def statement_lines(path: str, text: str, line: int, code: set[int] | None) -> set[int]:
    """A mutant's line as the counters see it. coverage.py counts a Python
    statement at its first line; gcov counts a C++ expression split over
    lines at the lines that start its parts, so a line with no counter takes
    the nearest counted line above it, unless a statement ends between them."""
    if path.endswith(".py"):
        from coverage.python import PythonParser

        parser = PythonParser(text=text, filename=str(REPO / path))
        parser.parse_source()
        return {parser.first_line(line)}
    if code is None or line in code:
        return {line}
    source = text.splitlines()
    for k in range(line - 1, max(0, line - 12), -1):
        above = source[k - 1].split("//")[0].rstrip()
        if not above or above.endswith((";", "{", "}")):
            break
        if k in code:
            return {k}
    return {line}


def unreached(
    mutants: list[Mutant], executed: dict[str, Lines], instrumented: Lines | None = None
) -> tuple[list[Mutant], list[Mutant]]:
    """(unreached, unmeasured): mutants on code no test of their row ran, and
    mutants on lines with no code to count (a constant folded at compile
    time, a declaration; none unless instrumented is given)."""
    texts: dict[str, str] = {}
    stmts: dict[tuple[str, int], set[int]] = {}
    out, unmeasured = [], []
    for m in mutants:
        text = texts.setdefault(m.file, (REPO / m.file).read_text())
        code = instrumented.get(m.file, set()) if instrumented is not None else None
        lines: set[int] = set()
        for ln in mutation.mutant_lines(m, text):
            lines |= stmts.setdefault((m.file, ln), statement_lines(m.file, text, ln, code))
        if code is not None and not (lines & code):
            unmeasured.append(m)
            continue
        ran: set[int] = set()
        for t in m.tests:
            ran |= executed.get(run_of(t), {}).get(m.file, set())
        if not (lines & ran):
            out.append(m)
    return out, unmeasured


def report(
    mutants: list[Mutant],
    missed: list[Mutant],
    unmeasured: Sequence[Mutant] = (),
    executed: dict[str, Lines] | None = None,
) -> str:
    """Unreached mutants by file and line; a line some run outside the row
    executes names that run (its test may belong in the row)."""
    by_file: dict[str, list[Mutant]] = defaultdict(list)
    for m in missed:
        by_file[m.file].append(m)
    total: dict[str, int] = defaultdict(int)
    for m in mutants:
        total[m.file] += 1
    rows = []
    for f in sorted(total, key=lambda f: (-len(by_file[f]) / total[f], f)):
        if not by_file[f]:
            continue
        lines: dict[int, list[str]] = defaultdict(list)
        for m in by_file[f]:
            lines[int(m.id.split(":")[1])].append(m.operator)
        where = []
        for ln, ops in sorted(lines.items()):
            elsewhere = sorted(k for k, v in (executed or {}).items() if ln in v.get(f, ()))
            also = f" [run by {', '.join(elsewhere)}]" if elsewhere else ""
            where.append(f"{ln} ({'/'.join(sorted(set(ops)))}){also}")
        rows.append(f"{f}: {len(by_file[f])}/{total[f]} unreached\n    " + ", ".join(where))
    if unmeasured:
        rows.append(f"not judged: {len(unmeasured)} mutants on lines with no code to count (constants, declarations)")
    judged = len(mutants) - len(unmeasured)
    share = 100 * len(missed) / judged if judged else 0.0
    rows.append(f"mutant coverage: {len(missed)} of {judged} mutants ({share:.1f}%) on lines no test of their row runs")
    return "\n".join(rows)


def fingerprint() -> str:
    """The core's sources: measured lines hold only while these are unchanged
    (a test added changes nothing measured before it; a line moved does)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(gen.scope_files(REPO, mutation.repo_files(REPO))):
        h.update(f.encode() + b"\0" + (REPO / f).read_bytes() + b"\0")
    return h.hexdigest()


def load(saved: Path, sources: str) -> tuple[dict[str, Lines], dict[str, tuple[str, ...]]]:
    """The lines measured before, and each run's tests then; nothing if the sources changed since."""
    if not saved.is_file():
        return {}, {}
    data = json.loads(saved.read_text())
    if data.get("sources") != sources:
        print("mutant coverage: the core changed since the last run; measuring every run again")
        return {}, {}
    executed = {k: {f: set(ls) for f, ls in r["lines"].items()} for k, r in data["runs"].items()}
    return executed, {k: tuple(r["tests"]) for k, r in data["runs"].items()}


def save(saved: Path, sources: str, executed: dict[str, Lines], measured: dict[str, tuple[str, ...]]) -> None:
    runs_ = {
        k: {"tests": list(measured[k]), "lines": {f: sorted(ls) for f, ls in executed[k].items()}} for k in executed
    }
    saved.write_text(json.dumps({"sources": sources, "runs": runs_}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prefix", nargs="*", help="only mutants whose id starts with one of these")
    ap.add_argument("--work", type=Path, default=REPO / "build" / "coverage", help="scratch folder")
    ap.add_argument("--report", action="store_true", help="report the last run's lines; run nothing")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    mutants = [
        m for m in mutation.generated_mutants(gen.scope_files(REPO, mutation.repo_files(REPO))) if not m.equivalent
    ]
    if args.prefix:
        mutants = [m for m in mutants if any(m.id.startswith(p) for p in args.prefix)]
    saved = args.work / "executed.json"
    wanted = runs(mutants)
    sources = fingerprint()
    executed, measured = load(saved, sources)
    if not args.report:
        runner = mutation.Runner(args.work, python_only=False, verbose=args.verbose, cmake_args=COVERAGE_FLAGS)
        runner.test_timeout = mutation.BASELINE_TIMEOUT
        runner.prepare()
        failed = []
        for key, tests in wanted.items():
            if measured.get(key) == tests:
                continue  # measured on these very sources with these tests
            lines, ok, seconds = measure(runner, key, tests)
            executed[key], measured[key] = lines, tests
            print(f"  {key:70} {'ok' if ok else 'FAILED':6} {seconds:5.0f} s", flush=True)
            if not ok:
                failed.append(key)
            save(saved, sources, executed, measured)
        if failed:
            print("mutant coverage: these failed unmutated, so their lines are partial: " + ", ".join(failed))
    missing = [k for k, tests in wanted.items() if measured.get(k) != tests]
    if missing:
        # Their mutants count as unreached below: the share means nothing until they are measured.
        print(f"mutant coverage: {len(missing)} runs not measured yet (run without --report): {', '.join(missing)}")
    build = args.work / "build"
    code = instrumented_lines(build, args.work / "src", {m.file for m in mutants}) if build.is_dir() else None
    print(report(mutants, *unreached(mutants, executed, code), executed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
