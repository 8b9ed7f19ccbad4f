"""`opscan compare A B`: where and why two records of a seeded run part.

    from opscan.compare import compare_records
    report = compare_records("a.jsonl", "b.jsonl")   # an opscan.findings.Report

The records are read step by step in lockstep (`reader`), each step's ops are
aligned (`align`), the aligned ops are compared fingerprint by fingerprint
and every divergence is classified (`cause`), and the result becomes a Report
(`report`) with the tables docs/record-format.md ("compare output")
describes. Bad input never raises: the Report carries it in `errors` (exit 2).

A feature: it reads JSON and needs no torch.
"""

from __future__ import annotations

import os

from typing import Any

from opscan.compare.cause import Walker
from opscan.compare.reader import Header, Record, RecordError
from opscan.compare.report import ABSENT, build as build_report
from opscan.findings import Problem, Report

__all__ = ["compare_records", "RecordError"]

# Header fields that say which run this is, not how it computes: they differ with a warning.
_RUN_FIELDS = ("target", "argv", "kind", "steps")


def same_target(a: Header, b: Header) -> bool:
    """Whether two records are of one target: typed alike, or the same file (the headers' `target_file`, a real
    path) with the same callable or the same script arguments, however each was typed (`../m.py:build`, `m.py:build`)."""
    if (a.target, a.argv) == (b.target, b.argv):
        return True  # two machines' records of one checkout: their real paths may differ
    if a.target_file is None or a.target_file != b.target_file or a.kind != b.kind or a.argv != b.argv:
        return False
    if a.kind == "callable":
        return (a.target or "").rpartition(":")[2] == (b.target or "").rpartition(":")[2]
    return a.kind == "script"


def env_differences(a: Header, b: Header) -> list[tuple[str, Any, Any]]:
    """(field, a's value, b's value) for every header field and `env` entry that differs, in the header's order.

    A target typed in two spellings of one file is no difference (same_target)."""
    rows = []
    run_a, run_b = a.run_fields(), b.run_fields()
    same = same_target(a, b)
    for name in run_a:
        if run_a[name] != run_b[name] and not (same and name == "target"):
            rows.append((name, run_a[name], run_b[name]))
    for name in [*a.env, *(k for k in b.env if k not in a.env)]:
        va, vb = a.env.get(name, ABSENT), b.env.get(name, ABSENT)
        if va != vb or type(va) is not type(vb):
            rows.append((name, va, vb))
    return rows


def changed_sources(a: Header, b: Header) -> tuple[bool | None, list[str]]:
    """Whether both records ran the same code, by their `sources` digests, and the files that differ.

    (True, []): every project file either run loaded is in both, alike. (False, files):
    a file both loaded differs. (None, []): no telling: a record without sources
    (older, or a target with no project file), or runs that loaded other files.
    """
    if not a.sources or not b.sources:
        return None, []
    changed = [name for name in a.sources if name in b.sources and a.sources[name] != b.sources[name]]
    if changed:
        return False, changed
    return (True, []) if a.sources.keys() == b.sources.keys() else (None, [])


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # missing or unreadable: _open says so
        return False


def _open(path: str, errors: list[Problem]) -> Record | None:
    try:
        return Record(path)
    except RecordError as exc:
        errors.append(Problem(str(exc), target=path))
        return None


def compare_records(path_a: str, path_b: str, *, same_code: bool = False) -> Report:
    """Compare two records; never raises on bad input (the Report's `errors` say what was wrong).

    `same_code`: the caller made both records from the same code (opscan diff), so ops that differ
    are the same code taking another path, not a change to the code.
    """
    errors: list[Problem] = []
    notices: list[str] = []
    if _same_file(path_a, path_b):
        # Not an error (it checks the reader), but a "match bit for bit" from it proves nothing.
        notices.append(f"warning: {path_a} and {path_b} are the same file; a record always matches itself")
    ra, rb = _open(path_a, errors), _open(path_b, errors)
    if ra is None or rb is None:
        for record in (ra, rb):
            if record is not None:
                record.close()
        return build_report(None, env_rows=[], notices=notices, errors=errors)
    ha, hb = ra.header, rb.header
    if ha.fingerprint != hb.fingerprint:
        ra.close()
        rb.close()
        errors.append(
            Problem(
                f"the records use different fingerprint schemes ({path_a}: {ha.fingerprint}, {path_b}: {hb.fingerprint}), "
                "so they cannot be compared bit for bit; record both with the same --fingerprint"
            )
        )
        return build_report(None, env_rows=[], notices=notices, errors=errors)
    engines = (ha.env.get("record_engine") or "python", hb.env.get("record_engine") or "python")  # records before the key: python
    if engines[0] != engines[1]:
        # Their ops differ in granularity (docs/record.md, Engines): aligned, the same run's records
        # differ in hundreds of places, and a DET203 saying the runs ran different ops would be false.
        ra.close()
        rb.close()
        errors.append(
            Problem(
                f"the records were made by different engines ({path_a}: {engines[0]}, {path_b}: {engines[1]}), "
                "which record ops at different granularity, so they cannot be compared op by op; "
                "record both with the same --engine (python works on every device)"
            )
        )
        return build_report(None, env_rows=[], notices=notices, errors=errors)
    env_rows = env_differences(ha, hb)
    if not same_target(ha, hb):
        notices.append(
            f"warning: the records are of different targets ({path_a}: {_run_name(ha)}; {path_b}: {_run_name(hb)}); "
            "compared op by op all the same"
        )
    alike, changed = changed_sources(ha, hb)
    if alike is False:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        notices.append(f"warning: the records are of different code: {shown} {'differs' if len(changed) == 1 else 'differ'} between them")
    # The same code: opscan diff recorded it twice (unless a file changed meanwhile), or the digests say so.
    why = "opscan diff recorded it twice" if same_code else f"the digests of {_count(len(ha.sources or ()), 'project file')} match"
    same = alike is True or (same_code and alike is not False)
    walker = Walker(ha, [name for name, _, _ in env_rows if name not in _RUN_FIELDS], hb, same_code=same, same_code_why=why)
    left = _walk(ra, rb, walker, errors)
    comparison = walker.result()
    for record in (ra, rb):
        notices.extend(record.notices)
    for record in (ra, rb):
        if record.cut_short:
            errors.append(Problem(_cut_short(record), target=record.path))
    if not comparison.steps and not errors:
        errors.append(Problem("no step to compare: neither record has a finished step"))
    notices.extend(_length_notices(ra, rb, left, comparison.steps))
    if walker.dropped_causes:
        notices.append(f"{walker.dropped_causes} more root causes not listed (the first {walker.MAX_CAUSES} are)")
    only_a, only_b = comparison.param_names_differ
    if only_a or only_b:
        notices.append(
            f"the models' parameters differ by name: {len(only_a)} only in {path_a}, {len(only_b)} only in {path_b} "
            f"(first: {(only_a or only_b)[0]}); "
            + ("the others are compared" if comparison.params_shared else "none has a name in both, so none is compared")
        )
    if comparison.identical and comparison.steps and not errors:
        notices.append(f"the runs match bit for bit: {_count(comparison.steps, 'step')}, {_count(comparison.ops, 'op')} compared")
    return build_report(comparison, env_rows=env_rows, notices=notices, errors=errors)


def _walk(ra: Record, rb: Record, walker: Walker, errors: list[Problem]) -> tuple[int, int]:
    """Feed both records' steps to the walker in lockstep; the steps left over on each side."""
    steps_a, steps_b = ra.steps(), rb.steps()
    left_a = left_b = 0
    try:
        while True:
            sa = next(steps_a, None)
            sb = next(steps_b, None)
            if sa is None or sb is None:
                left_a = 0 if sa is None else 1 + sum(1 for _ in steps_a)
                left_b = 0 if sb is None else 1 + sum(1 for _ in steps_b)
                break
            walker.add(sa, sb)
    except RecordError as exc:
        errors.append(Problem(str(exc)))
    finally:
        ra.close()
        rb.close()
    return left_a, left_b


def _run_name(h: Header) -> str:
    name = h.target or "(no target)"
    return f"{name} {' '.join(h.argv)}" if h.argv else name


def _cut_short(record: Record) -> str:
    if record.last_step is None:
        text = f"{record.path} was cut short before its first step finished (no `end` line)"
    else:
        text = f"{record.path} was cut short after step {record.last_step} (no `end` line); compared the steps both records have"
    if record.partial_ops:
        text += f"; the {record.partial_ops} ops of the unfinished step after it are not compared"
    return text


def _length_notices(ra: Record, rb: Record, left: tuple[int, int], compared: int) -> list[str]:
    left_a, left_b = left
    if not (left_a or left_b):
        return []
    longer, extra = (ra, left_a) if left_a else (rb, left_b)
    if (rb if longer is ra else ra).cut_short:
        return []  # the shorter record says it was cut short
    return [f"{longer.path} has {extra} more step{'s' if extra != 1 else ''}; compared the first {compared}, which both have"]
