"""Generated mutants: a fixed operator set applied to every site of a file.

tools/mutation/listed_mutants.py holds hand-picked slips; this module produces the
mechanical ones, so a score is a sample of every site rather than of the
sites someone thought of. The operators (OPERATORS) are:

- ``rel``: a relational boundary, ``<`` <-> ``<=`` and ``>`` <-> ``>=``;
- ``eq``: ``==`` <-> ``!=``;
- ``logic``: ``&&`` <-> ``||`` (C++), ``and`` <-> ``or`` (Python);
- ``negate``: an ``if`` condition ``c`` becomes ``!(c)`` / ``not (c)``;
- ``int+1`` / ``int-1``: an integer literal one more / one less;
- ``drop-exit``: an early exit removed, where a branch ends in an error:
  ``return ...Error::...;`` or ``throw ...;`` inside an ``if`` (C++), ``raise``
  inside an ``if`` (Python).

Comments, string and character literals, and C++ preprocessor lines are
never mutated. C++ is lexed here (a small tokenizer: comments, strings,
raw strings, characters, numbers, identifiers, punctuation); a binary
operator is told from a template bracket or an rvalue reference by the
spaces clang-format puts on both sides of a binary operator
(tools/lint.sh keeps the sources formatted). Python is read with
``tokenize`` (operators, numbers) and ``ast`` (conditions, ``raise``).

Why our own and not mutmut, cosmic-ray or universalmutator: the first two
mutate Python only and run their own test loop; universalmutator's regular
expressions mutate inside comments and strings and write whole mutant
files. Here each mutant is an edit the runner of tools/mutation/mutation.py
applies to its scratch tree, so generated mutants share its incremental
build, its per-file tests and its baseline check.

A mutant's id is ``<file>:<line>:<operator>:<k>``, k counting that
operator's sites on that line from 0: the same source gives the same ids,
so ``--sample N --seed S`` picks the same mutants on every machine.

To add an operator: write a function that yields ``Site``s for one file's
text (see ``_cpp_sites`` and ``_py_sites``), give it a name in OPERATORS,
and add a case to tests/python/repo/test_mutant_generator.py showing a site it
mutates and one it must leave alone.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

OPERATORS = ("rel", "eq", "logic", "negate", "int+1", "int-1", "drop-exit")

# Where generated mutants are drawn from (the core); tests for each file are
# in tools/mutation/mutant_targets.py.
SCOPE = (
    "runtime/src/",
    "runtime/include/",
    "python/bindings/",
    "python/et_copy/export/",
    "python/et_copy/runtime.py",
    "python/et_copy/llm/",
    "python/et_copy/backends/aoti/_constant_reads.py",
    "python/et_copy/backends/__init__.py",
    "python/et_copy/backends/aoti/_quantized.py",
    "python/et_copy/backends/aoti/_cpu_layouts.py",
    "python/et_copy/backends/simulated/_quantized_portable.py",
    "backends/aoti/src/aoti_record.cpp",
    "backends/simulated/src/simulated_device_backend.cpp",
    "backends/simulated/include/",
    "backends/simulated/bindings/",
    "backends/aoti/bindings/",
)
CPP_SUFFIXES = (".cpp", ".h")


@dataclass(frozen=True)
class Edit:
    start: int  # character offsets into the file's text
    end: int
    old: str
    new: str


@dataclass(frozen=True)
class Site:
    operator: str
    line: int  # 1-based, of the first edit
    edits: tuple[Edit, ...]


# ---- C++ -----------------------------------------------------------------------

_CPP_TOKEN = re.compile(
    r"""
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^(\s]{0,16})\(.*?\)(?P=delim)")
  | (?P<string>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")
  | (?P<char>(?:u8|u|U|L)?'(?:\\.|[^'\\\n])+')
  | (?P<number>\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.'])*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct><<=|>>=|->\*|\.\.\.|::|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%^&|]=|[^\sA-Za-z0-9_])
  | (?P<space>\s+)
    """,
    re.S | re.X,
)
_DECIMAL = re.compile(r"^(0|[1-9][0-9]*)([uUlLzZ]*)$")


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def cpp_tokens(text: str) -> list[Token]:
    """The tokens of C++ source, whitespace dropped; a preprocessor line
    (with its continuations) is one ``preproc`` token."""
    tokens: list[Token] = []
    pos, n = 0, len(text)
    line_start = True
    while pos < n:
        if line_start:
            m = re.compile(r"[ \t]*#(?:[^\n\\]|\\.)*", re.S).match(text, pos)
            if m:
                tokens.append(Token("preproc", m.group(0), pos))
                pos = m.end()
                continue
        m = _CPP_TOKEN.match(text, pos)
        if m is None:  # an unterminated literal: treat the rest of the line as opaque
            end = text.find("\n", pos)
            end = n if end < 0 else end
            tokens.append(Token("string", text[pos:end], pos))
            pos = end
            continue
        kind = m.lastgroup if m.lastgroup != "delim" else "raw"
        if kind == "raw":
            kind = "string"
        tok = m.group(0)
        if kind != "space":
            tokens.append(Token(kind, tok, pos))
            line_start = False
        elif "\n" in tok:
            line_start = True
        pos = m.end()
    return [t for t in tokens if t.kind not in ("comment",)]


def _spaced(text: str, t: Token) -> bool:
    """A binary operator as clang-format writes it: a space on each side."""
    return 0 < t.start and t.end < len(text) and text[t.start - 1] in " \t\n" and text[t.end] in " \t\n"


_SWAP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "&&": "||", "||": "&&"}
_KIND = {"<": "rel", "<=": "rel", ">": "rel", ">=": "rel", "==": "eq", "!=": "eq", "&&": "logic", "||": "logic"}


def _cpp_sites(text: str) -> list[Site]:
    toks = [t for t in cpp_tokens(text) if t.kind != "preproc"]
    line_of = _line_index(text)
    sites: list[Site] = []

    def add(op: str, *edits: Edit) -> None:
        sites.append(Site(op, line_of(edits[0].start), tuple(edits)))

    # Parentheses: where each '(' closes, and which ')' ends an if condition.
    match: dict[int, int] = {}
    stack: list[int] = []
    for i, t in enumerate(toks):
        if t.text == "(":
            stack.append(i)
        elif t.text == ")" and stack:
            match[stack.pop()] = i
    if_close: set[int] = set()
    for i, t in enumerate(toks):
        if t.text == "if" and i + 1 < len(toks) and toks[i + 1].text == "(" and (i + 1) in match:
            j = match[i + 1]
            if_close.add(j)
            a, b = toks[i + 1], toks[j]
            if j > i + 2:
                add("negate", Edit(a.end, a.end, "", "!("), Edit(b.start, b.start, "", ")"))

    # Blocks opened right after an if condition or an else: early exits live there.
    in_branch: list[bool] = []
    branch_depth = 0
    for i, t in enumerate(toks):
        prev = toks[i - 1] if i else None
        if t.text == "{":
            opened_branch = prev is not None and ((i - 1) in if_close or prev.text == "else")
            in_branch.append(opened_branch)
            branch_depth += opened_branch
        elif t.text == "}" and in_branch:
            branch_depth -= in_branch.pop()
        elif t.kind == "punct" and t.text in _SWAP and _spaced(text, t):
            add(_KIND[t.text], Edit(t.start, t.end, t.text, _SWAP[t.text]))
        elif t.kind == "number":
            m = _DECIMAL.match(t.text)
            if m and len(m.group(1)) < 18:
                value, suffix = int(m.group(1)), m.group(2)
                add("int+1", Edit(t.start, t.end, t.text, f"{value + 1}{suffix}"))
                if value > 0:
                    add("int-1", Edit(t.start, t.end, t.text, f"{value - 1}{suffix}"))
        elif t.text in ("return", "throw") and t.kind == "ident":
            braceless = prev is not None and ((i - 1) in if_close or prev.text == "else")
            if not (branch_depth > 0 and in_branch and in_branch[-1]) and not braceless:
                continue
            end = _statement_end(toks, i)
            if end is None:
                continue
            body = toks[i + 1 : end]
            if t.text == "return" and not any(
                b.text == "Error" and k + 1 < len(body) and body[k + 1].text == "::" for k, b in enumerate(body)
            ):
                continue
            add("drop-exit", Edit(t.start, toks[end].end, text[t.start : toks[end].end], ";"))
    return sites


def _statement_end(toks: list[Token], i: int) -> int | None:
    depth = 0
    for j in range(i + 1, len(toks)):
        s = toks[j].text
        if s in "([{":
            depth += 1
        elif s in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif s == ";" and depth == 0:
            return j
    return None


# ---- Python ---------------------------------------------------------------------

_PY_SWAP = {**{k: v for k, v in _SWAP.items() if k not in ("&&", "||")}, "and": "or", "or": "and"}
_PY_KIND = {**{k: v for k, v in _KIND.items() if k not in ("&&", "||")}, "and": "logic", "or": "logic"}


def _py_sites(text: str) -> list[Site]:
    offsets = _line_offsets(text)
    line_of = _line_index(text)

    def at(row: int, col: int) -> int:  # tokenize's (row, column in characters)
        return offsets[row - 1] + col

    def at_ast(row: int, col: int) -> int:  # ast's column is in UTF-8 bytes
        line = text[offsets[row - 1] : offsets[row] if row < len(offsets) else len(text)]
        return offsets[row - 1] + len(line.encode()[:col].decode(errors="replace"))

    sites: list[Site] = []

    def add(op: str, *edits: Edit) -> None:
        sites.append(Site(op, line_of(edits[0].start), tuple(edits)))

    fstring = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        name = tokenize.tok_name[tok.type]
        if name == "FSTRING_START":
            fstring += 1
        elif name == "FSTRING_END":
            fstring -= 1
        if fstring:
            continue
        s, e = at(*tok.start), at(*tok.end)
        if (tok.type == tokenize.OP or (tok.type == tokenize.NAME and tok.string in ("and", "or"))) and (
            tok.string in _PY_SWAP
        ):
            add(_PY_KIND[tok.string], Edit(s, e, tok.string, _PY_SWAP[tok.string]))
        elif tok.type == tokenize.NUMBER and re.fullmatch(r"0|[1-9][0-9_]*", tok.string):
            value = int(tok.string.replace("_", ""))
            add("int+1", Edit(s, e, tok.string, str(value + 1)))
            if value > 0:
                add("int-1", Edit(s, e, tok.string, str(value - 1)))

    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            c = node.test
            a, b = at_ast(c.lineno, c.col_offset), at_ast(c.end_lineno, c.end_col_offset)
            add("negate", Edit(a, a, "", "not ("), Edit(b, b, "", ")"))
            for stmt in node.body + node.orelse:
                if isinstance(stmt, ast.Raise):
                    a, b = at_ast(stmt.lineno, stmt.col_offset), at_ast(stmt.end_lineno, stmt.end_col_offset)
                    add("drop-exit", Edit(a, b, text[a:b], "pass"))
    return sites


# ---- both ------------------------------------------------------------------------


def _line_offsets(text: str) -> list[int]:
    offsets = [0]
    for m in re.finditer("\n", text):
        offsets.append(m.end())
    return offsets


def _line_index(text: str):
    import bisect

    offsets = _line_offsets(text)
    return lambda pos: bisect.bisect_right(offsets, pos)


def sites(path: str, text: str) -> list[Site]:
    """Every mutation site of one file, in source order."""
    found = _py_sites(text) if path.endswith(".py") else _cpp_sites(text) if path.endswith(CPP_SUFFIXES) else []
    return sorted(found, key=lambda s: (s.edits[0].start, OPERATORS.index(s.operator)))


@dataclass(frozen=True)
class Generated:
    id: str
    file: str
    line: int
    operator: str
    edits: tuple[Edit, ...]


def generate(path: str, text: str) -> list[Generated]:
    """The generated mutants of one file, with their stable ids."""
    out = []
    count: dict[tuple[int, str], int] = defaultdict(int)
    for s in sites(path, text):
        k = count[(s.line, s.operator)]
        count[(s.line, s.operator)] += 1
        out.append(Generated(f"{path}:{s.line}:{s.operator}:{k}", path, s.line, s.operator, s.edits))
    return out


def apply_edits(text: str, edits: tuple[Edit, ...]) -> str:
    """text with edits applied; each edit's ``old`` must be what is there."""
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        if text[e.start : e.end] != e.old:
            raise ValueError(f"stale edit at offset {e.start}: expected {e.old!r}, found {text[e.start : e.end]!r}")
        text = text[: e.start] + e.new + text[e.end :]
    return text


def in_scope(path: str) -> bool:
    return path.startswith(SCOPE) and path.endswith((*CPP_SUFFIXES, ".py"))


def scope_files(root: Path, files: list[str]) -> list[str]:
    return sorted(f for f in files if in_scope(f) and (root / f).is_file())
