"""tools/mutation/mutant_coverage.py's judgement, without a build: which lines a run
executed decides which mutants are unreached, through their row's tests only,
and paths from gcov and coverage.py map back to the repository's files. The
instrumented run itself is by hand (docs/reliability.md, "Mutation testing")."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tools" / "mutation"))

import mutant_coverage as mc  # noqa: E402
from listed_mutants import Mutant  # noqa: E402
from mutant_generator import Edit  # noqa: E402

FILE = "runtime/src/tensor_layout.cpp"  # any C++ file of the repository: only line numbers matter here


def mutant(line: int, tests: tuple[str, ...], op: str = "negate", path: str = FILE) -> Mutant:
    text = (REPO / path).read_text()
    start = sum(len(ln) + 1 for ln in text.split("\n")[: line - 1])
    edit = Edit(start, start + 1, text[start], "x")
    return Mutant(f"{path}:{line}:{op}:0", path, "", "", tests, edits=(edit,), operator=op)


def test_a_mutant_is_reached_only_through_the_tests_of_its_own_row():
    a = mutant(3, ("cpp:et_copy_test_a", "py:tests/python/test_b.py::test_one"))
    b = mutant(5, ("py:tests/python/test_c.py",))
    executed = {
        "cpp:et_copy_test_a": {FILE: {1, 2}},
        "py:tests/python/test_b.py": {FILE: {3}},
        "py:tests/python/test_c.py": {FILE: {3, 4, 6}},  # line 5, b's line, is not run
    }
    assert mc.unreached([a, b], executed) == ([b], [])
    # The same lines run by a test outside a's row do not reach a.
    assert mc.unreached([a], {"py:tests/python/test_c.py": {FILE: {3}}}) == ([a], [])
    # A line of another file with the same number does not either.
    assert mc.unreached([a], {"cpp:et_copy_test_a": {"runtime/src/other.cpp": {3}}}) == ([a], [])


def test_a_mutant_on_a_line_with_no_code_to_count_is_not_judged_either_way():
    a, b = mutant(3, ("cpp:t",)), mutant(5, ("cpp:t",))
    code = {FILE: {3, 4}}  # line 5 carries no code gcov counts (a constant, a declaration)
    assert mc.unreached([a, b], {}, code) == ([a], [b])
    assert mc.unreached([a, b], {"cpp:t": {FILE: {3}}}, code) == ([], [b])
    text = mc.report([a, b], [], [b])
    assert "not judged: 1 mutants" in text
    assert text.splitlines()[-1].startswith("mutant coverage: 0 of 1 mutants (0.0%)")


def test_a_python_mutant_on_a_statements_later_line_counts_as_that_statement(tmp_path):
    # coverage.py records a statement at its first line only.
    path = "python/et_copy/runtime.py"
    source = (REPO / path).read_text().splitlines()
    later = next(
        i + 1
        for i, ln in enumerate(source)
        if ln.strip() and i > 40 and ln.startswith("        ") and source[i - 1].rstrip().endswith(("(", ","))
    )
    first = mc.statement_lines(path, (REPO / path).read_text(), later, None)
    assert first and max(first) < later
    m = mutant(later, ("py:tests/python/test_x.py",), path=path)
    assert mc.unreached([m], {"py:tests/python/test_x.py": {path: first}}) == ([], [])
    assert mc.unreached([m], {"py:tests/python/test_x.py": {path: {later}}}) == ([m], [])


def test_single_tests_of_one_file_run_together_and_executables_keep_their_filter():
    m1 = mutant(2, ("cpp:et_copy_test_a:Suite.One", "py:tests/python/test_b.py::test_one"))
    m2 = mutant(4, ("py:tests/python/test_b.py::test_two", "cpp:et_copy_test_a"))
    runs = mc.runs([m1, m2])
    assert runs == {
        "cpp:et_copy_test_a:Suite.One": ("cpp:et_copy_test_a:Suite.One",),
        "py:tests/python/test_b.py": ("py:tests/python/test_b.py::test_one", "py:tests/python/test_b.py::test_two"),
        "cpp:et_copy_test_a": ("cpp:et_copy_test_a",),
    }
    assert mc.run_of("py:tests/python/test_b.py::test_two") == "py:tests/python/test_b.py"
    assert mc.run_of("cpp:et_copy_test_a:Suite.One") == "cpp:et_copy_test_a:Suite.One"


def test_paths_from_gcov_and_coverage_py_map_to_the_repository(tmp_path):
    tree = tmp_path / "src"
    (tree / "runtime" / "src").mkdir(parents=True)
    assert mc.repo_path(str(tree / "runtime" / "src" / "a.cpp"), tree) == "runtime/src/a.cpp"
    # The development package's copy of a module is the repository's python/et_copy file.
    pkg = tmp_path / "build" / "pkg" / "et_copy" / "llm" / "_models.py"
    assert mc.repo_path(str(pkg), tree) == "python/et_copy/llm/_models.py"
    # Headers of ExecuTorch or the system are nobody's mutants.
    assert mc.repo_path("/usr/include/c++/12/vector", tree) is None
    assert mc.repo_path(str(tmp_path / "site-packages" / "et_copy" / "x.py"), tree) is None


def test_the_report_names_each_unreached_line_with_its_operators_and_the_share():
    ms = [
        mutant(3, ("cpp:t",), "negate"),
        mutant(3, ("cpp:t",), "eq"),
        mutant(7, ("cpp:t",), "drop-exit"),
        mutant(9, ("cpp:t",)),
    ]
    text = mc.report(ms, ms[:3])
    assert f"{FILE}: 3/4 unreached" in text
    assert "3 (eq/negate), 7 (drop-exit)" in text
    assert text.splitlines()[-1] == "mutant coverage: 3 of 4 mutants (75.0%) on lines no test of their row runs"
    # A line a run outside the row executes names it: that test may belong in the row.
    hinted = mc.report(ms, ms[:3], executed={"py:tests/python/test_z.py": {FILE: {7}}, "cpp:t": {FILE: {9}}})
    assert "3 (eq/negate), 7 (drop-exit) [run by py:tests/python/test_z.py]" in hinted


def test_a_cpp_mutant_on_an_expressions_later_line_counts_at_the_line_that_starts_it():
    # gcov gives `a ? b\n : c` one counter, on the first line.
    path = "runtime/src/argument_kinds.cpp"
    text = (REPO / path).read_text()
    source = text.splitlines()
    later = next(i + 1 for i, ln in enumerate(source) if ln.strip().startswith(": r.read<int32_t>("))
    code = {later - 1, later + 1}
    assert mc.statement_lines(path, text, later, code) == {later - 1}
    # No counted line above it within the statement: judged as itself (so not judged at all).
    assert mc.statement_lines(path, text, later, {later + 1}) == {later}
    # A statement ending in between stops the walk: the line after `...;` is not the line before it.
    after_statement = next(
        i + 1 for i, ln in enumerate(source) if i > 0 and source[i - 1].rstrip().endswith(";") and ln.strip()
    )
    assert mc.statement_lines(path, text, after_statement, {after_statement - 1}) == {after_statement}


def test_lines_measured_before_are_kept_only_for_the_same_sources(tmp_path):
    saved = tmp_path / "executed.json"
    executed = {"cpp:t": {FILE: {3, 4}}, "py:tests/python/test_b.py": {"python/et_copy/runtime.py": {40}}}
    measured = {"cpp:t": ("cpp:t",), "py:tests/python/test_b.py": ("py:tests/python/test_b.py::test_one",)}
    mc.save(saved, "sources-1", executed, measured)
    assert mc.load(saved, "sources-1") == (executed, measured)
    # A changed core moves lines: nothing measured before holds.
    assert mc.load(saved, "sources-2") == ({}, {})
    assert mc.load(tmp_path / "absent.json", "sources-1") == ({}, {})
    # The fingerprint follows the core's sources, not the time of day.
    assert mc.fingerprint() == mc.fingerprint() and len(mc.fingerprint()) == 64
