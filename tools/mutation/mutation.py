#!/usr/bin/env python3
"""Mutation testing for et-copy: plant one plausible one-line bug at a time
and check that the tests notice.

Each mutant (MUTANTS in tools/mutation/listed_mutants.py) replaces one piece of one line
with another, and names the tests that should kill it. For each mutant the
tool

1. copies the repository (tracked and untracked, not ignored files) into a
   scratch tree, build/mutation/src, touching only files that differ, so the
   checkout itself is never edited and a cut-off run leaves nothing behind;
2. applies the mutant there and rebuilds only the targets its tests need in a
   persistent CMake build (build/mutation/build: runtime, C++ tests, the
   Python extension as a development package), so a rebuild is one object
   file and a few links;
3. runs those tests (GoogleTest executables directly, pytest with the
   development package first on PYTHONPATH): a failing test kills the
   mutant, passing tests let it survive;
4. puts the line back (the next mutant's build recompiles it).

Before the first mutant, every chosen mutant's tests run once on the
unmutated tree; a failure there stops the run (it would count every mutant
as killed).

It prints a table and a last line `mutation: K/N killed (P%; 95% CI a-b%)`
(Wilson's interval). Equivalent mutants (the program behaves the same) are
listed, not run, unless asked.

Generated mutants (tools/mutation/mutant_generator.py: every site of a fixed
operator set, over the core's files, with stable ids
`<file>:<line>:<operator>:<k>`) run through the same machinery, each with
its file's tests (tools/mutation/mutant_targets.py); the ones that cannot behave
differently are listed in tools/mutation/equivalent_mutants.py. A generated mutant
that does not compile is `unviable`: reported, not counted.

    python tools/mutation/mutation.py                 # the full list (~30 min on 2 cores, warm)
    python tools/mutation/mutation.py kernel-         # mutants whose id starts with kernel-
    python tools/mutation/mutation.py --check         # every mutant still applies (no build)
    python tools/mutation/mutation.py --smoke         # CI: 3 hand-written and 3 generated Python-level mutants
    python tools/mutation/mutation.py --list          # ids, files, tests
    python tools/mutation/mutation.py --generated --sample 60 --seed 1   # a fixed sample of the core's sites
    python tools/mutation/mutation.py --generated runtime/src/device_copy.cpp   # every site of one file
    python tools/mutation/mutation.py --changed origin/main   # every site on a line changed since that rev

--smoke needs no C++ build: its mutants are in Python files, so it lays out
the package from the sources and the installed extension (et_copy._C).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import mutant_generator as gen  # noqa: E402
from equivalent_mutants import EQUIVALENT  # noqa: E402
from equivalent_mutants import reason as equivalent_reason  # noqa: E402
from listed_mutants import MUTANTS, SMOKE, WHY, Mutant  # noqa: E402
from mutant_targets import tests_for  # noqa: E402

# --smoke's generated part: a fixed sample of the sites of two small Python
# files whose tests are fast, so CI proves the generator and runner end to end.
SMOKE_GENERATED_FILES = ("python/et_copy/_device.py",)
SMOKE_GENERATED_SAMPLE = (3, 0)  # (mutants, seed)

BUILD_TIMEOUT = 900
TEST_TIMEOUT = 300
BASELINE_TIMEOUT = 3600  # every chosen mutant's tests at once (test_llm.py alone takes minutes)


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed, survived, timeout, build-error, unviable, no-tests, equivalent, stale
    seconds: float
    detail: str = ""


def repo_files(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True, check=True
    ).stdout
    return [f for f in out.decode().split("\0") if f and (root / f).is_file()]


def sync_tree(src: Path, dst: Path) -> None:
    """Mirrors src's repository files into dst, writing only what differs
    (unchanged files keep their mtimes, so builds stay incremental)."""
    wanted = set(repo_files(src))
    for rel in wanted:
        s, d = src / rel, dst / rel
        data = s.read_bytes()
        if not d.is_file() or d.read_bytes() != data:
            d.parent.mkdir(parents=True, exist_ok=True)
            d.write_bytes(data)
    for d in list(dst.rglob("*")):
        rel = d.relative_to(dst).as_posix()
        if d.is_file() and rel not in wanted and not rel.startswith(("build/", ".pytest_cache", ".hypothesis")):
            if "__pycache__" not in rel:
                d.unlink()


def tool(module: str, attr: str, name: str) -> str:
    try:
        mod = __import__(module)
        return str(Path(getattr(mod, attr)) / name)
    except ImportError:
        return shutil.which(name) or name


def apply(tree: Path, m: Mutant) -> str:
    """Applies m in tree; returns the original text of the file."""
    path = tree / m.file
    text = path.read_text()
    if m.edits:
        path.write_text(gen.apply_edits(text, m.edits))
        return text
    if text.count(m.old) != 1:
        raise ValueError(f"{m.id}: {m.old!r} occurs {text.count(m.old)} times in {m.file} (must be once)")
    if not one_line(m):
        raise ValueError(f"{m.id}: a mutant changes exactly one line")
    path.write_text(text.replace(m.old, m.new))
    return text


def one_line(m: Mutant) -> bool:
    """`old` may carry neighbouring lines as context; exactly one line changes."""
    a, b = m.old.split("\n"), m.new.split("\n")
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1


class Runner:
    def __init__(self, work: Path, *, python_only: bool, verbose: bool, cmake_args: tuple[str, ...] = ()) -> None:
        self.work = work
        self.cmake_args = cmake_args  # extra configure options (tools/mutation/mutant_coverage.py: --coverage)
        self.tree = work / "src"
        self.build = work / "build"
        self.pkg = self.build / "pkg"
        self.python_only = python_only
        self.verbose = verbose
        self.cmake = tool("cmake", "CMAKE_BIN_DIR", "cmake")
        self.ninja = tool("ninja", "BIN_DIR", "ninja")
        self.test_timeout = TEST_TIMEOUT

    def log(self, msg: str) -> None:
        if self.verbose:
            print(msg, file=sys.stderr, flush=True)

    def prepare(self) -> None:
        self.tree.mkdir(parents=True, exist_ok=True)
        sync_tree(REPO, self.tree)
        for cache in self.pkg.rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)
        if self.python_only:
            self.lay_out_python_package()
            return
        if not (self.build / "build.ninja").is_file():
            import pybind11

            cmd = [
                self.cmake,
                "-S",
                str(self.tree),
                "-B",
                str(self.build),
                "-G",
                "Ninja",
                f"-DCMAKE_MAKE_PROGRAM={self.ninja}",
                f"-DPython_EXECUTABLE={sys.executable}",
                f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
                "-DCMAKE_BUILD_TYPE=Release",
                "-DET_COPY_BUILD_TESTS=ON",
                "-DET_COPY_BUILD_PYTHON=ON",
                *self.cmake_args,
            ]
            subprocess.run(cmd, check=True, capture_output=not self.verbose, timeout=600)
        ok, out = self.make(["all"])
        if not ok:
            raise SystemExit(f"mutation: the unmutated tree does not build:\n{out[-4000:]}")

    def lay_out_python_package(self) -> None:
        """The package from the sources plus the installed compiled parts (smoke mode): _C, each
        backend's own extension and the shared runtime (et_copy/lib)."""
        import importlib.util

        spec = importlib.util.find_spec("et_copy")
        if spec is None or spec.origin is None:
            raise SystemExit("mutation --smoke: et_copy is not installed (pip install .)")
        installed = Path(spec.origin).parent
        dst = self.pkg / "et_copy"
        shutil.copytree(self.tree / "python" / "et_copy", dst, dirs_exist_ok=True)
        for so in installed.rglob("*.so"):
            target = dst / so.relative_to(installed)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_bytes() != so.read_bytes():
                shutil.copy2(so, target)

    def gtest(self, exe: str) -> Path:
        """A gtest binary: in tests/cpp's build folder, or a folder it adds (tests/backends/reference)."""
        here = self.build / "tests" / "cpp" / exe
        if here.is_file():
            return here
        return next((p for p in (self.build / "tests").rglob(exe) if p.is_file()), here)

    def make(self, targets: list[str]) -> tuple[bool, str]:
        if self.python_only:
            self.lay_out_python_package()
            return True, ""
        proc = subprocess.run(
            [self.cmake, "--build", str(self.build), "-j2", "--target", *targets],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=BUILD_TIMEOUT,
        )
        return proc.returncode == 0, proc.stdout + proc.stderr

    def targets(self, m: Mutant) -> list[str]:
        ts = []
        for t in m.tests:
            kind, _, rest = t.partition(":")
            ts.append(rest.split(":")[0] if kind == "cpp" else "et_copy_dev_package")
        return sorted(set(ts))

    def commands(self, m: Mutant) -> list[tuple[list[str], dict]]:
        env = dict(os.environ)
        env.pop("ET_COPY_REQUIRE_ALL", None)
        env["PYTHONPATH"] = str(self.pkg) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["ET_COPY_PROGRAM_CACHE"] = str(self.work / "programs")
        # A mutant of a .py file can keep its size and mtime second (== for
        # !=): never let a cached .pyc of the other version be imported.
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if self.python_only:
            # The installed extension finds libexecutorch and libtorch relative
            # to site-packages ($ORIGIN/..); its copy in the scratch package cannot.
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                [*wheel_library_dirs(), *filter(None, [env.get("LD_LIBRARY_PATH")])]
            )
        cmds = []
        py: list[str] = []
        for t in m.tests:
            kind, _, rest = t.partition(":")
            if kind == "cpp":
                exe, _, filt = rest.partition(":")
                cmd = [str(self.gtest(exe)), "--gtest_brief=1"]
                if filt:
                    cmd.append(f"--gtest_filter={filt}")
                cmds.append((cmd, env))
            else:
                path = rest.split("::")[0]
                if (self.tree / path).is_file():
                    py.append(rest)
        if py:
            cmds.append(
                (
                    [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not gpu", *py],
                    env,
                )
            )
        return cmds

    def baseline(self, mutants: list[Mutant]) -> list[str]:
        """Runs every chosen mutant's tests on the unmutated tree; returns the
        failures (a test that fails unmutated would count every mutant killed)."""
        union = Mutant("baseline", "", "", "", tuple(dict.fromkeys(t for m in mutants for t in m.tests)))
        ok, out = self.make(self.targets(union))
        if not ok:
            return [f"build: {out[-2000:]}"]
        failures = []
        start = time.monotonic()
        for cmd, env in self.commands(union):
            proc = subprocess.run(
                cmd, cwd=self.tree, env=env, capture_output=True, text=True, errors="replace", timeout=BASELINE_TIMEOUT
            )
            if proc.returncode != 0:
                failures.append(f"{' '.join(cmd[:3])}...: {first_failure(proc.stdout + proc.stderr)}")
        # A mutant's tests are a subset of these: one that runs far longer
        # than all of them did unmutated hangs (killed), not merely slow.
        self.test_timeout = max(TEST_TIMEOUT, int(2 * (time.monotonic() - start)) + 60)
        return failures

    def run(self, m: Mutant) -> Outcome:
        start = time.monotonic()
        cmds = self.commands(m)
        if not cmds:
            return Outcome(m, "no-tests", 0.0)
        original = apply(self.tree, m)
        try:
            ok, out = self.make(self.targets(m))
            if not ok:
                # A generated mutant may not compile (an int in a template
                # argument, say); a hand-written one that does not is a bug in the list.
                status = "unviable" if m.edits else "build-error"
                return Outcome(m, status, time.monotonic() - start, last_error(out))
            for cmd, env in cmds:
                self.log(f"  $ {' '.join(cmd[-3:])}")
                try:
                    proc = subprocess.run(
                        cmd,
                        cwd=self.tree,
                        env=env,
                        capture_output=True,
                        text=True,
                        errors="replace",
                        timeout=self.test_timeout,
                    )
                except subprocess.TimeoutExpired:
                    return Outcome(m, "timeout", time.monotonic() - start, " ".join(cmd[-2:]))
                if proc.returncode != 0:
                    return Outcome(m, "killed", time.monotonic() - start, first_failure(proc.stdout + proc.stderr))
            return Outcome(m, "survived", time.monotonic() - start)
        finally:
            (self.tree / m.file).write_text(original)


def wheel_library_dirs() -> list[str]:
    import importlib.util

    dirs = []
    for package in ("torch", "executorch"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            dirs.append(str(Path(list(spec.submodule_search_locations)[0]) / "lib"))
    return dirs


def last_error(output: str) -> str:
    errors = [ln.strip() for ln in output.splitlines() if "error" in ln]
    return (errors[0] if errors else output.strip()[-200:])[:160]


def generated_mutants(files: list[str]) -> list[Mutant]:
    """The generated mutants of files that have tests (tools/mutation/mutant_targets.py)."""
    out = []
    for f in files:
        tests = tests_for(f)
        if not tests or not (REPO / f).is_file():
            continue
        text = (REPO / f).read_text()
        lines = text.splitlines()
        for g in gen.generate(f, text):
            line = lines[g.line - 1]
            site = int(g.id.rsplit(":", 1)[1])
            mutated = gen.apply_edits(text, g.edits).splitlines()
            new = mutated[g.line - 1] if g.line - 1 < len(mutated) else ""
            why = equivalent_reason(f, g.operator, line, site)
            out.append(Mutant(g.id, f, line.strip(), new.strip(), tests, why, edits=g.edits, operator=g.operator))
    return out


def changed_lines(base: str) -> dict[str, set[int]]:
    """Lines of the working tree added or changed since the branch left git
    rev base (git diff -U0 against their merge base, so commits made on base
    since then do not count), and every line of untracked files."""
    fork = subprocess.run(["git", "merge-base", base, "HEAD"], cwd=REPO, capture_output=True, text=True)
    if fork.returncode == 0:
        base = fork.stdout.strip()
    diff = subprocess.run(
        ["git", "diff", "-U0", "--no-color", "--no-ext-diff", base, "--"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    changed: dict[str, set[int]] = {}
    path = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and path is not None:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            if m:
                start, count = int(m.group(1)), int(m.group(2) or 1)
                changed.setdefault(path, set()).update(range(start, start + count))
    untracked = subprocess.run(
        ["git", "ls-files", "-o", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for f in untracked:
        if (REPO / f).is_file():
            changed[f] = set(range(1, (REPO / f).read_text(errors="replace").count("\n") + 2))
    return changed


def mutant_lines(m: Mutant, text: str) -> set[int]:
    """The lines of text a mutant changes."""
    if m.edits:
        return {text.count("\n", 0, e.start) + 1 for e in m.edits}
    at = text.find(m.old)
    if at < 0:
        return set()
    first = text.count("\n", 0, at) + 1
    return {first + i for i, (a, b) in enumerate(zip(m.old.split("\n"), m.new.split("\n"))) if a != b}


def on_changed_lines(mutants: list[Mutant], changed: dict[str, set[int]]) -> list[Mutant]:
    texts: dict[str, str] = {}
    out = []
    for m in mutants:
        if m.file not in changed:
            continue
        text = texts.setdefault(m.file, (REPO / m.file).read_text())
        if mutant_lines(m, text) & changed[m.file]:
            out.append(m)
    return out


def commit_seed() -> int:
    """The seed a fresh sample takes: HEAD's hash, read as a number (its first 8 hex digits)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    return int(head.stdout.strip()[:8], 16)


def sample(mutants: list[Mutant], n: int, seed: int) -> list[Mutant]:
    """n mutants drawn with a fixed seed from the list sorted by id (so
    the same source, n and seed give the same mutants), in file order."""
    ordered = sorted(mutants, key=lambda m: m.id)
    if n >= len(ordered):
        return ordered
    picked = set(id(m) for m in random.Random(seed).sample(ordered, n))
    return [m for m in ordered if id(m) in picked]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval for k successes in n trials (95% for z=1.96)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def score(outcomes: list[Outcome]) -> tuple[int, int, str]:
    live = [o for o in outcomes if o.status not in ("equivalent", "unviable", "no-tests")]
    killed = sum(o.status in ("killed", "timeout") for o in live)
    lo, hi = wilson(killed, len(live))
    pct = 100.0 * killed / len(live) if live else 100.0
    return killed, len(live), f"{killed}/{len(live)} killed ({pct:.0f}%; 95% CI {100 * lo:.0f}-{100 * hi:.0f}%)"


def area(path: str) -> str:
    return "/".join(path.split("/")[:2])


def first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED", "[  FAILED  ]", "ERROR ")):
            return line.strip()[:110]
    tail = [ln for ln in output.splitlines() if ln.strip()]
    return tail[-1][:110] if tail else ""


def table(outcomes: list[Outcome]) -> str:
    rows = [("mutant", "file", "result", "s", "killed by / why")]
    for o in outcomes:
        why = o.mutant.equivalent if o.status == "equivalent" else o.detail
        rows.append((o.mutant.id, o.mutant.file.split("/")[-1], o.status, f"{o.seconds:.0f}", why))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:  # noqa: C901
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prefix", nargs="*", help="run only mutants whose id starts with one of these")
    ap.add_argument("--smoke", action="store_true", help="a few Python-level mutants on the installed extension")
    ap.add_argument("--generated", action="store_true", help="generated mutants of the core instead of the list")
    ap.add_argument("--changed", metavar="BASE", help="mutants on lines changed since git rev BASE")
    ap.add_argument("--sample", type=int, metavar="N", help="run N mutants drawn with --seed")
    ap.add_argument(
        "--seed",
        default="commit",
        help="the sample's seed: an int, or 'commit' (default): the first 8 hex digits of HEAD's hash, so the "
        "commit being measured picks the sample, not whoever runs it (docs/reliability.md, first runs only)",
    )
    ap.add_argument("--check", action="store_true", help="check every mutant applies; build and run nothing")
    ap.add_argument("--list", action="store_true", help="list the mutants")
    ap.add_argument("--equivalent", action="store_true", help="run the equivalent mutants too")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default build/mutation, smoke: temp)")
    ap.add_argument("--baseline", action="store_true", help="only run the tests on the unmutated tree")
    ap.add_argument("--no-baseline", action="store_true", help="skip running the tests on the unmutated tree first")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    ids = [m.id for m in MUTANTS]
    assert len(ids) == len(set(ids)), "duplicate mutant ids"
    if args.smoke:
        n, seed = SMOKE_GENERATED_SAMPLE
        chosen = [m for m in MUTANTS if m.id in SMOKE] + sample(generated_mutants(list(SMOKE_GENERATED_FILES)), n, seed)
    elif args.changed:
        changed = changed_lines(args.changed)
        chosen = on_changed_lines(list(MUTANTS) + generated_mutants(sorted(changed)), changed)
    elif args.generated:
        chosen = generated_mutants(gen.scope_files(REPO, repo_files(REPO)))
    else:
        chosen = list(MUTANTS)
    if args.prefix:
        chosen = [m for m in chosen if any(m.id.startswith(p) for p in args.prefix)]
    if args.sample is not None:
        args.seed = commit_seed() if args.seed == "commit" else int(args.seed)
        chosen = sample(chosen, args.sample, args.seed)

    if args.list:
        for m in chosen:
            print(f"{m.id:34} {m.file:44} {' '.join(m.tests)}{'  [equivalent]' if m.equivalent else ''}")
        print(f"mutation --list: {len(chosen)} mutants")
        return 0
    if args.check:
        return check()

    if args.smoke and args.work is None:
        import tempfile

        work = Path(tempfile.mkdtemp(prefix="et_copy_mutation_smoke_"))
    else:
        work = args.work or REPO / "build" / "mutation"
    how = f" (sample of {args.sample}, seed {args.seed})" if args.sample is not None else ""
    if not chosen:
        print(f"mutation: no mutants{how}")
        return 0
    runner = Runner(work, python_only=args.smoke, verbose=args.verbose)
    t0 = time.monotonic()
    runner.prepare()
    prepared = time.monotonic() - t0
    print(f"mutation: {len(chosen)} mutants{how}, scratch tree {runner.tree} (prepared in {prepared:.0f} s)")
    if not args.no_baseline:
        t1 = time.monotonic()
        failures = runner.baseline([m for m in chosen if args.equivalent or not m.equivalent])
        if failures:
            print("mutation: the unmutated tree fails the mutants' tests, so no kill would mean anything:")
            print("\n".join("  " + f for f in failures))
            return 3
        print(f"mutation: the unmutated tree passes every mutant's tests ({time.monotonic() - t1:.0f} s)")
        if args.baseline:
            return 0
    outcomes: list[Outcome] = []
    for m in chosen:
        if m.equivalent and not args.equivalent:
            outcomes.append(Outcome(m, "equivalent", 0.0))
            continue
        o = runner.run(m)
        outcomes.append(o)
        print(f"  {m.id:34} {o.status:12} {o.seconds:5.0f} s  {o.detail}", flush=True)
    if not runner.python_only:
        runner.make(["all"])  # leave the scratch build unmutated
    elif args.work is None:
        shutil.rmtree(work, ignore_errors=True)  # the smoke run's temporary scratch tree
    print()
    print(table(outcomes))
    survivors = [o for o in outcomes if o.status in ("survived", "no-tests", "build-error")]
    unviable = [o for o in outcomes if o.status == "unviable"]
    print()
    if survivors:
        print("survivors: " + ", ".join(f"{o.mutant.id} ({o.status})" for o in survivors))
    if unviable:
        print(f"unviable (did not compile, not counted): {len(unviable)}")
    generated = [o for o in outcomes if o.mutant.edits]
    if generated:
        for name in sorted({area(o.mutant.file) for o in generated}):
            print(f"  {name:20} {score([o for o in generated if area(o.mutant.file) == name])[2]}")
        if len(generated) < len(outcomes):
            print(f"generated: {score(generated)[2]}")
            print(f"listed: {score([o for o in outcomes if not o.mutant.edits])[2]}")
    print(f"run time: {time.monotonic() - t0:.0f} s")
    print(f"mutation: {score(outcomes)[2]}")
    return 0 if not any(o.status == "build-error" for o in outcomes) else 2


def check() -> int:
    """Every listed mutant applies to exactly one line; every core file has
    tests for its generated mutants; every equivalent entry still matches."""
    bad = 0
    for m in MUTANTS:
        text = (REPO / m.file).read_text()
        if text.count(m.old) != 1 or not one_line(m):
            print(f"stale: {m.id}: {m.old!r} occurs {text.count(m.old)} times in {m.file}")
            bad += 1
        for t in m.tests:
            kind, _, rest = t.partition(":")
            if kind == "py" and not (REPO / rest.split("::")[0]).is_file():
                print(f"stale: {m.id}: no test file {rest}")
                bad += 1
    live = [m for m in MUTANTS if not m.equivalent]
    print(f"mutation --check: {len(MUTANTS)} mutants ({len(live)} live, {len(MUTANTS) - len(live)} equivalent)")
    print(f"                  over {len(set(m.file for m in MUTANTS))} files, {bad} stale")
    # A listed mutant either has a why (WHY) or is one an operator produces too.
    texts: dict[str, set[str]] = {}
    also_generated = []
    for m in MUTANTS:
        text = (REPO / m.file).read_text()
        if m.file not in texts:
            texts[m.file] = {gen.apply_edits(text, g.edits) for g in gen.generate(m.file, text)}
        if text.replace(m.old, m.new) in texts[m.file]:
            also_generated.append(m.id)
        elif m.id not in WHY:
            print(f"no why: {m.id}: say in WHY (tools/mutation/listed_mutants.py) why no operator produces it")
            bad += 1
    bad += sum(print(f"stale: WHY names no mutant {k}") or 1 for k in WHY if k not in {m.id for m in MUTANTS})
    print(f"                  {len(also_generated)} also generated by an operator (kept for the test they name)")
    files = gen.scope_files(REPO, repo_files(REPO))
    untested = [f for f in files if not tests_for(f)]
    for f in untested:
        print(f"untested: {f}: no row in tools/mutation/mutant_targets.py")
    generated = generated_mutants(files)
    matched = {(m.file, m.operator, m.old) for m in generated if m.equivalent}
    stale = [e for e in EQUIVALENT if (e.file, e.operator, e.line) not in matched]
    for e in stale:
        print(f"stale: equivalent entry {e.file} {e.operator} {e.line!r} matches no generated mutant")
    equivalent = sum(bool(m.equivalent) for m in generated)
    print(f"generated: {len(generated)} mutants over {len(files)} files ({equivalent} equivalent)")
    return 1 if bad or untested or stale else 0


if __name__ == "__main__":
    sys.exit(main())
