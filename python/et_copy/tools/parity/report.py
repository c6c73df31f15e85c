"""The table, the findings list, the verdict, and the JSON result."""

from __future__ import annotations

import sys
from collections import defaultdict

from .cases import Case, dtype_name
from .runners import IMPLEMENTATIONS, LABELS, Result

# et-copy's own kernel: the implementation whose findings fail the run.
JUDGED = "et_copy"


def verdict(cases: list[Case], results: list[dict[str, Result]], programs: list | None = None) -> dict:
    """Exit-status facts: et-copy's kernel matches the AOT semantics on every
    valid case and rejects every invalid one cleanly; every end-to-end
    program gives eager's outputs on et_copy.runtime with exact copies, and
    every tampered program is rejected."""
    programs = programs or []
    valid = [(c, r[JUDGED]) for c, r in zip(cases, results) if c.valid]
    invalid = [(c, r[JUDGED]) for c, r in zip(cases, results) if not c.valid]
    return {
        "valid_cases": len(valid),
        "valid_matching": sum(r.verdict == "ok" and r.matches_aot is not False for _, r in valid),
        "invalid_cases": len(invalid),
        "invalid_rejected_cleanly": sum(r.verdict == "ok" for _, r in invalid),
        "et_copy_findings": sum(len(r[JUDGED].findings) for r in results),
        "harness_errors": sum(f.kind == "harness_error" for r in results for x in r.values() for f in x.findings),
        "programs": len(programs),
        "programs_ok": sum(p.verdict == "ok" for p in programs),
    }


def passed(v: dict) -> bool:
    return (
        v["valid_matching"] == v["valid_cases"]
        and v["invalid_rejected_cleanly"] == v["invalid_cases"]
        and v["et_copy_findings"] == 0
        and v["harness_errors"] == 0
        and v["programs_ok"] == v["programs"]
    )


def _who(impl: str, env: dict) -> str:
    """The implementation's column name, with the registry's owner."""
    return f"registry ({env['registry_owner']})" if impl == "registry" else LABELS[impl]


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    return [_row(header, widths), _row(["-" * w for w in widths], widths), *(_row(r, widths) for r in rows)]


def render(
    cases: list[Case],
    results: list[dict[str, Result]],
    env: dict,
    programs: list | None = None,
    *,
    verbose: bool = False,
) -> str:
    programs = programs or []
    out: list[str] = []
    impl_cols = [LABELS[i] for i in IMPLEMENTATIONS]
    out.append(
        f"et-copy parity: {len(cases)} cases x {len(IMPLEMENTATIONS)} implementations "
        f"(torch {env['torch']}, executorch {env['executorch']})"
    )
    out.append(
        f"  aot       torch.ops.et_copy._h2d_copy / _d2h_copy, on host stand-ins (namespace: {env['aot_namespace']})"
    )
    out.append("  aot.out   the .out overloads, on host stand-ins")
    out.append("  et_copy   et-copy's kernel, called directly (et_copy.h2d_copy / d2h_copy with out)")
    out.append(f"  registry  the kernel ExecuTorch's registry resolves for the op name: {env['registry_owner']}")
    if "device_memory" in env:
        out.append(f"  device memory of the cases: {env['device_memory']}")
    out.append("")

    footnotes: dict[tuple[str, str], int] = {}
    findings_lines: list[str] = []

    def note(case: Case, impl: str, r: Result) -> str:
        if r.verdict != "finding":
            return r.cell
        key = (case.name, impl)
        if key not in footnotes:
            footnotes[key] = len(footnotes) + 1
            findings_lines.append(f"[{footnotes[key]}] {_who(impl, env)} on {case.name}")
            findings_lines.append(f"     {case.describe()}")
            for f in r.findings:
                findings_lines.append(f"     {f.kind}: {f.message}")
            if r.log:
                findings_lines.append("     log: " + r.log.splitlines()[-1][:160])
        return f"{r.cell} [{footnotes[key]}]"

    valid = [(c, r) for c, r in zip(cases, results) if c.valid]
    invalid = [(c, r) for c, r in zip(cases, results) if not c.valid]
    if valid:
        out.append("valid cases: out must equal self, byte for byte (cells: cases ok / cases)")
        if verbose:
            rows = [[c.name] + [note(c, i, r[i]) for i in IMPLEMENTATIONS] for c, r in valid]
            out += _table(["case", *impl_cols], rows)
        else:
            groups: dict[tuple[str, str], list] = defaultdict(list)
            for c, r in valid:
                groups[(c.direction, dtype_name(c.dtype))].append((c, r))
            rows = []
            for (direction, dtype), members in groups.items():
                row = [direction, dtype, str(len(members))]
                for impl in IMPLEMENTATIONS:
                    ok = sum(r[impl].verdict == "ok" for _, r in members)
                    bad = [note(c, impl, r[impl]) for c, r in members if r[impl].verdict == "finding"]
                    cell = f"{ok}/{len(members)} ok"
                    if bad:
                        refs = sorted({b.rsplit("[", 1)[1].rstrip("]") for b in bad}, key=int)
                        cell += " [" + ",".join(refs[:4]) + (",..." if len(refs) > 4 else "") + "]"
                    row.append(cell)
                rows.append(row)
            out += _table(["dir", "dtype", "cases", *impl_cols], rows)
        out.append("")
    if invalid:
        out.append("invalid cases: each must be rejected with out untouched")
        rows = [[c.name] + [note(c, i, r[i]) for i in IMPLEMENTATIONS] for c, r in invalid]
        out += _table(["case", *impl_cols], rows)
        out.append("")

    if programs:
        from .programs import COLUMNS

        out.append(
            "programs: exported with et_copy.export, run in this process by eager PyTorch, "
            "executorch.runtime (the wheel's kernels serve the et_copy ops) and et_copy.runtime "
            "(et-copy's kernels, method-scoped), on et-copy's simulated device"
            + (f", its memory {env['program_device_memory']}" if "program_device_memory" in env else "")
        )
        rows = []
        for p in programs:
            cells = []
            for column in COLUMNS:
                c = p.cells.get(column)
                text = c.text if c is not None else "n/a"
                if c is not None and not c.ok:
                    key = (p.program.name, column)
                    if key not in footnotes:
                        footnotes[key] = len(footnotes) + 1
                        findings_lines.append(f"[{footnotes[key]}] {column} on {p.program.name}")
                        findings_lines.append(f"     {p.program.description}")
                        for f in p.findings:
                            if f.message.startswith(column):
                                findings_lines.append(f"     {f.kind}: {f.message}")
                    text = f"{text} [{footnotes[key]}]"
                cells.append(text)
            rows.append([p.program.name.removeprefix("program/"), "valid" if p.program.valid else "tampered", *cells])
        out += _table(["program", "kind", *COLUMNS], rows)
        out.append("")

    if findings_lines:
        per_impl: defaultdict[str, int] = defaultdict(int)
        for case_name, impl in footnotes:
            per_impl[LABELS.get(impl, impl)] += 1
        summary = ", ".join(f"{k}: {v}" for k, v in per_impl.items())
        out.append(f"findings ({len(footnotes)} case/implementation pairs; {summary}):")
        out += findings_lines
        oob = [
            (c, i, r[i])
            for c, r in zip(cases, results)
            for i in IMPLEMENTATIONS
            if any(f.kind == "out_of_bounds_write" for f in r[i].findings)
        ]
        if oob:
            out.append("")
            out.append("out-of-bounds writes (caught in guard bytes; the process was not harmed):")
            for c, i, res in oob:
                what = "; ".join(f.message for f in res.findings if f.kind == "out_of_bounds_write")
                out.append(f"  {_who(i, env)}: {c.name}: {what}")
    else:
        out.append("findings: none")
    out.append("")

    v = verdict(cases, results, programs)
    ok = passed(v)
    out.append(
        f"et_copy kernel: matches the AOT op on {v['valid_matching']}/{v['valid_cases']} valid cases, "
        f"rejects {v['invalid_rejected_cleanly']}/{v['invalid_cases']} invalid cases cleanly, "
        f"{v['et_copy_findings']} finding(s)"
        + (f", {v['harness_errors']} harness error(s)" if v["harness_errors"] else "")
    )
    if programs:
        out.append(
            f"programs: et_copy.runtime passes {v['programs_ok']}/{v['programs']} (valid ones equal eager "
            "with exact copies, tampered ones rejected)"
        )
    out.append(
        "PASS: et-copy agrees with the AOT semantics (findings about other implementations are reported, not failures)"
        if ok
        else "FAIL: et-copy has findings (see above)"
    )
    return "\n".join(out)


def to_json(
    cases: list[Case], results: list[dict[str, Result]], env: dict, seconds: float, programs: list | None = None
) -> dict:
    programs = programs or []
    v = verdict(cases, results, programs)
    flat = []
    for c, r in zip(cases, results):
        for impl in IMPLEMENTATIONS:
            for f in r[impl].findings:
                flat.append({"case": c.name, "impl": impl, **f.to_json()})
    for p in programs:
        for f in p.findings:
            flat.append({"case": p.program.name, "impl": f.message.split(":", 1)[0], **f.to_json()})
    return {
        "environment": env,
        "implementations": {impl: LABELS[impl] for impl in IMPLEMENTATIONS},
        "judged": JUDGED,
        "summary": {**v, "passed": passed(v), "cases": len(cases), "seconds": round(seconds, 2)},
        "programs": [p.to_json() for p in programs],
        "findings": flat,
        "cases": [
            {**c.to_json(), "results": {i: r[i].to_json() for i in IMPLEMENTATIONS}} for c, r in zip(cases, results)
        ],
    }


class Progress:
    """A one-line bar on stderr, redrawn in place; silent when stderr is
    not a terminal (logs and CI keep only the table)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled and total > 0

    def status(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r{text}")
            sys.stderr.flush()

    def update(self, done: int, label: str) -> None:
        if not self.enabled:
            return
        width = 30
        filled = width * done // self.total
        bar = "#" * filled + "." * (width - filled)
        sys.stderr.write(f"\r[{bar}] {done}/{self.total} {label[:50]:<50}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 100 + "\r")
            sys.stderr.flush()
