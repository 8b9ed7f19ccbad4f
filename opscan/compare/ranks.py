"""`opscan compare --ranks RECORD...`: do the data-parallel replicas hold the same parameters after every step?

Each record is one rank's (`run.rank0.jsonl`, ...). The records are read in
lockstep; at each step every parameter's fingerprint after the optimizer
step is compared across the ranks. The first (step, parameter) where they
are not all equal is the finding (DET205), with the rank that differs: the
odd one out against the majority, and with two ranks (or a tie) the rank
that differs from rank 0's side. At that step the two ranks' ops after the
all-reduce are compared too (opscan/compare/gradients.py): the first op
whose gradients differ is named, at its line. Reads JSON only; no torch.
"""

from __future__ import annotations

import os
import re
from collections import Counter

from opscan.compare.codes import RANKS, RANKS_RULE
from opscan.compare.gradients import GradientDrift, first_drift
from opscan.compare.reader import Record, RecordError, Step
from opscan.findings import Column, Finding, Problem, Report, Table
from opscan.trace.ranks import ranks_text

_RANK_IN_NAME = re.compile(r"\.rank(\d+)\.")


def _rank_of(record: Record, index: int) -> int:
    """The rank a record is of: its header env's `rank`, else `.rankN.` in its file name, else its place in the list."""
    rank = record.header.env.get("rank")
    if isinstance(rank, int) and not isinstance(rank, bool):
        return rank
    m = _RANK_IN_NAME.search(record.path)
    return int(m.group(1)) if m else index


def split(fps: dict[int, str | None]) -> tuple[list[int], list[int], bool]:
    """(the ranks taken as the reference, the ranks that differ from them, whether the reference is a strict majority).

    With a strict majority the reference is the majority; without one (two
    ranks, or a tie) it is the ranks that hold the lowest rank's value.
    """
    counts = Counter(fps.values())
    (value, n), *rest = counts.most_common()
    majority = not rest or rest[0][1] < n
    if not majority:
        value = fps[min(fps)]
    return sorted(r for r, fp in fps.items() if fp == value), sorted(r for r, fp in fps.items() if fp != value), majority


def compare_ranks(paths: list[str]) -> Report:
    """The Report of a rank comparison: a DET205 finding where the replicas first part, or a notice that they never do."""
    report = Report("compare", rules=(RANKS_RULE,))
    table = Table(
        "rank_divergence", "Where the replicas part",
        (Column("step", align="right"), Column("param"), Column("ranks_differ"), Column("ranks_agree"), Column("params_differ", align="right")),
    )  # fmt: skip
    gradients = Table(
        "gradient_divergence", "The first op after the all-reduce whose gradients differ",
        (Column("step", align="right"), Column("rank", align="right"), Column("other", "compared with", align="right"),
         Column("op"), Column("module"), Column("file"), Column("line", align="right"), Column("phase"), Column("change")),
    )  # fmt: skip
    report.tables.extend([table, gradients])
    if len(paths) < 2:
        report.errors.append(Problem("--ranks needs the records of at least two ranks"))
        return report
    seen: dict[str, str] = {}
    for path in paths:
        key = os.path.realpath(path)
        if key in seen:  # a record compared with itself says nothing about the replicas
            report.errors.append(Problem(f"{path} is given twice (as {seen[key]}); give each rank's record once"))
            return report
        seen[key] = path
    records: list[Record] = []
    try:
        for path in paths:
            records.append(Record(path))
    except RecordError as exc:
        for record in records:
            record.close()
        report.errors.append(Problem(str(exc)))
        return report
    schemes = {r.header.fingerprint for r in records}
    if len(schemes) > 1:
        for record in records:
            record.close()
        report.errors.append(Problem(f"the records use different fingerprint schemes ({', '.join(sorted(schemes))}); record every rank with the same --fingerprint"))
        return report
    ranks = [_rank_of(r, i) for i, r in enumerate(records)]
    if not any("rank" in r.header.env for r in records):
        report.notices.append(
            "no record was made under torchrun (their headers name no rank): they are compared as if they were replicas of one run"
        )
    if len(set(ranks)) != len(ranks):
        ranks = list(range(len(records)))
        report.notices.append("the records do not name distinct ranks; numbered them in the order given")
    report.env = {"ranks": sorted(ranks), "world_size": len(ranks)}
    streams = [r.steps() for r in records]
    compared = 0
    try:
        while True:
            steps = [next(s, None) for s in streams]
            if any(s is None for s in steps):
                if not all(s is None for s in steps):
                    short = [rank for rank, s in zip(ranks, steps) if s is None]
                    report.notices.append(f"{ranks_text(short)} recorded fewer steps; compared the first {compared}")
                break
            step = steps[0].step
            names = list(dict.fromkeys(name for s in steps for name in s.params))
            parted = []
            for name in names:
                fps = {rank: (s.params[name].fp if name in s.params else None) for rank, s in zip(ranks, steps)}
                if len(set(fps.values())) > 1:
                    parted.append((name, fps))
            compared += 1
            if parted:
                name, fps = parted[0]
                agree, differ, majority = split(fps)
                table.add(step, name, differ, agree, len(parted))
                drift, why = _drift(steps, ranks, agree[0], differ[0])
                report.findings.append(_finding(step, name, agree, differ, majority, len(parted), drift, why))
                if drift is not None:
                    op = drift.op
                    gradients.add(drift.step, drift.rank, drift.other, op.op, op.module, op.file, op.line, op.phase, drift.change_text)
                break
    except RecordError as exc:
        report.errors.append(Problem(str(exc)))
    finally:
        for record in records:
            record.close()
    for record in records:
        report.notices.extend(record.notices)
        if record.cut_short and not report.findings:
            report.notices.append(f"{record.path} has no end line: the run was stopped or the file is incomplete")
    if not report.findings and not report.errors:
        if compared:
            report.notices.append(f"the replicas hold bitwise-equal parameters after all {compared} steps on {len(ranks)} ranks")
        else:
            report.errors.append(Problem("no step to compare: no record has a finished step"))
    return report


def _drift(steps: list[Step], ranks: list[int], reference: int, other: int) -> tuple[GradientDrift | None, str]:
    """The first op after the all-reduce whose gradients differ between the two ranks, or why none is named."""
    by_rank = dict(zip(ranks, steps))
    try:
        drift = first_drift(by_rank[reference], reference, by_rank[other], other)
    except LookupError as exc:
        (missing,) = exc.args
        return None, f"{ranks_text(missing)} recorded no collective in that step, so there is no all-reduce to look after"
    if drift is None:
        return None, "no op after the all-reduce was seen to write other gradients (code the record does not see, such as compiled code, may)"
    return drift, ""


def _finding(step: int, name: str, agree: list[int], differ: list[int], majority: bool, count: int,
             drift: GradientDrift | None, why: str) -> Finding:  # fmt: skip
    if majority:
        who = f"differs on {ranks_text(differ)} from {ranks_text(agree)}"
    elif len(agree) + len(differ) == 2:
        who = f"differs on {ranks_text(differ)} from {ranks_text(agree)} (with two ranks, rank {agree[0]} is the reference)"
    else:
        who = f"differs on {ranks_text(differ)} from {ranks_text(agree)} (no majority: the side of rank {agree[0]} is the reference)"
    message = f"Data-parallel replicas part at step {step}: parameter `{name}` after the optimizer step {who}"
    if count > 1:
        message += f"; {count} parameters differ at that step"
    message += f"; {drift.describe()}" if drift is not None else f"; {why}"
    properties = {"step": step, "param": name, "rank": differ[0], "ranks_differ": differ, "ranks_agree": agree, "majority": majority}
    path, line = None, 1
    if drift is not None:
        op = drift.op
        properties.update(
            {"op": op.op, "op_rank": drift.rank, "module": op.module, "file": op.file, "line": op.line, "phase": op.phase,
             "change": drift.change_text}
        )  # fmt: skip
        path, line = op.file, op.line or 1
    return Finding(
        RANKS, message, path, line,
        help="Replicas must stay bitwise equal; look at what the named rank does differently at that step, between backward() and the optimizer step.",
        properties=properties,
    )  # fmt: skip
