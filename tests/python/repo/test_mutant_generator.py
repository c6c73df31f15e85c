"""tools/mutation/mutant_generator.py: each operator mutates the sites it names and
leaves comments, strings, preprocessor lines, template brackets and rvalue
references alone; ids are stable; a sample is the same for the same seed;
and mutation.py's score interval is Wilson's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools" / "mutation"))

import mutant_generator as gen  # noqa: E402
import mutation  # noqa: E402

CPP = """\
#include <vector>
#if LIMIT < 2
#endif
// a < b in a comment
Error f(std::vector<int>&& v, int a, int b) {
  const char* s = "a < b && c";
  if (a < b && v.size() == 16u) {
    return Error::InvalidArgument;
  }
  if (a >= b) return Error::NotFound;
  float x = 1.5f;
  return Error::Ok;
}
"""

PY = """\
# x < 1 in a comment
def f(x, y):
    s = "x < 1 and y"
    if x < 1 and y == 2:
        raise ValueError("x < 1")
    return x >= 0
"""


def mutated_lines(path: str, text: str) -> dict[str, str]:
    out = {}
    for m in gen.generate(path, text):
        new = gen.apply_edits(text, m.edits).splitlines()[m.line - 1].strip()
        out[m.id] = new
    return out


def test_cpp_operators_mutate_code_and_leave_comments_strings_templates_and_preprocessor_alone():
    got = mutated_lines("f.cpp", CPP)
    assert got == {
        "f.cpp:7:negate:0": "if (!(a < b && v.size() == 16u)) {",
        "f.cpp:7:rel:0": "if (a <= b && v.size() == 16u) {",
        "f.cpp:7:logic:0": "if (a < b || v.size() == 16u) {",
        "f.cpp:7:eq:0": "if (a < b && v.size() != 16u) {",
        "f.cpp:7:int+1:0": "if (a < b && v.size() == 17u) {",
        "f.cpp:7:int-1:0": "if (a < b && v.size() == 15u) {",
        "f.cpp:8:drop-exit:0": ";",
        "f.cpp:10:negate:0": "if (!(a >= b)) return Error::NotFound;",
        "f.cpp:10:rel:0": "if (a > b) return Error::NotFound;",
        "f.cpp:10:drop-exit:0": "if (a >= b) ;",
    }  # the last return is not early: no drop-exit there


def test_python_operators_mutate_code_and_leave_comments_and_strings_alone():
    got = mutated_lines("f.py", PY)
    assert got == {
        "f.py:4:negate:0": "if not (x < 1 and y == 2):",
        "f.py:4:rel:0": "if x <= 1 and y == 2:",
        "f.py:4:int+1:0": "if x < 2 and y == 2:",
        "f.py:4:int-1:0": "if x < 0 and y == 2:",
        "f.py:4:logic:0": "if x < 1 or y == 2:",
        "f.py:4:eq:0": "if x < 1 and y != 2:",
        "f.py:4:int+1:1": "if x < 1 and y == 3:",
        "f.py:4:int-1:1": "if x < 1 and y == 1:",
        "f.py:5:drop-exit:0": "pass",
        "f.py:6:rel:0": "return x > 0",
        "f.py:6:int+1:0": "return x >= 1",
    }


def test_a_stale_edit_is_refused_rather_than_applied_elsewhere():
    (m,) = [m for m in gen.generate("f.py", PY) if m.id == "f.py:6:rel:0"]
    with pytest.raises(ValueError, match="stale edit"):
        gen.apply_edits(PY.replace("x >= 0", "x == 0"), m.edits)


def test_a_sample_is_the_same_for_the_same_seed_and_in_id_order():
    mutants = mutation.generated_mutants(["runtime/src/device_copy.cpp"])
    a = [m.id for m in mutation.sample(mutants, 5, 7)]
    assert a == [m.id for m in mutation.sample(mutants, 5, 7)] == sorted(a)
    assert a != [m.id for m in mutation.sample(mutants, 5, 8)]
    assert len({m.id for m in mutants}) == len(mutants)


def test_the_interval_is_wilsons():
    assert mutation.wilson(0, 0) == (0.0, 1.0)
    lo, hi = mutation.wilson(8, 10)
    assert (round(lo, 3), round(hi, 3)) == (0.490, 0.943)
    assert mutation.wilson(10, 10)[1] == 1.0
