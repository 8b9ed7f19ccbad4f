"""`opscan compare --ranks RECORD...`: do the data-parallel replicas hold the same parameters after every step?

Each record is one rank's (`run.rank0.jsonl`, ...). The records are read in
lockstep; at each step every parameter's fingerprint after the optimizer
step is compared across the ranks. The first (step, parameter) where they
are not all equal is the finding (DET205), with the rank that differs from
the majority. Reads JSON only; no torch.
"""

from __future__ import annotations

import re
from collections import Counter

from opscan.compare.codes import RANKS, RANKS_RULE
from opscan.compare.reader import Record, RecordError
from opscan.findings import Column, Finding, Problem, Report, Table

_RANK_IN_NAME = re.compile(r"\.rank(\d+)\.")


def _rank_of(record: Record, index: int) -> int:
    """The rank a record is of: its header env's `rank`, else `.rankN.` in its file name, else its place in the list."""
    rank = record.header.env.get("rank")
    if isinstance(rank, int) and not isinstance(rank, bool):
        return rank
    m = _RANK_IN_NAME.search(record.path)
    return int(m.group(1)) if m else index


def _ranks_text(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def split(fps: dict[int, str | None]) -> tuple[list[int], list[int]]:
    """(the ranks that hold the majority value, the ranks that differ); with no strict majority, every rank differs."""
    counts = Counter(fps.values())
    (value, n), *rest = counts.most_common()
    if rest and rest[0][1] == n:  # a tie: no majority to trust
        return [], sorted(fps)
    return sorted(r for r, fp in fps.items() if fp == value), sorted(r for r, fp in fps.items() if fp != value)


def compare_ranks(paths: list[str]) -> Report:
    """The Report of a rank comparison: a DET205 finding where the replicas first part, or a notice that they never do."""
    report = Report("compare", rules=(RANKS_RULE,))
    table = Table(
        "rank_divergence", "Where the replicas part",
        (Column("step", align="right"), Column("param"), Column("ranks_differ"), Column("ranks_agree"), Column("params_differ", align="right")),
    )  # fmt: skip
    report.tables.append(table)
    if len(paths) < 2:
        report.errors.append(Problem("--ranks needs the records of at least two ranks"))
        return report
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
        report.errors.append(Problem(f"the records use different fingerprint schemes ({', '.join(sorted(schemes))}); record every rank with the same opscan"))
        return report
    ranks = [_rank_of(r, i) for i, r in enumerate(records)]
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
                    report.notices.append(f"{_ranks_text(short)} recorded fewer steps; compared the first {compared}")
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
                agree, differ = split(fps)
                table.add(step, name, differ, agree, len(parted))
                if agree:
                    who = f"differs on {_ranks_text(differ)} from {_ranks_text(agree)}"
                else:
                    who = f"differs between {_ranks_text(differ)} (no majority: with {len(fps)} ranks it cannot tell which drifted)"
                report.findings.append(
                    Finding(
                        RANKS,
                        f"Data-parallel replicas part at step {step}: parameter `{name}` after the optimizer step {who}"
                        + (f"; {len(parted)} parameters differ at that step" if len(parted) > 1 else ""),
                        help="Replicas must stay bitwise equal; look at what the named rank does differently at that step.",
                        properties={"step": step, "param": name, "rank": differ[0] if agree else None, "ranks_differ": differ, "ranks_agree": agree},
                    )
                )
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
