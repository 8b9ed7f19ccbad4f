"""`opscan diff`: record a run twice, then compare the two records (opscan.compare) into one Report.

By default each record is made by a fresh `python -m opscan record` process,
with the same interpreter and flags, one after the other, so that causes that
live in a process show: the string hash seed (set iteration order), cuDNN's
autotuning, handles and caches created on first use. `same_process=True`
records both in this process (faster; it sees only what differs within one).

    report = diff(parse_target("torchvision:resnet18"), steps=2, device="cuda")
    first_divergence(report)   # {"op": ..., "module": ..., "file": ..., "line": ..., "step": ..., "phase": ..., "cause": ...} or None

`check_workload` does the same for a model and inputs already built (the
`assert_reproducible` fixture), always in this process.

With `nproc=N`, each record is a torchrun launch of N ranks (a fresh
process group each time, on a port of its own) that writes
`a.rank0.jsonl` ... `a.rank{N-1}.jsonl`; then each rank's two records are
compared, and the Report has a `ranks` table (one row per rank: where its
two runs part) besides the first divergence of them all.

A feature: it builds on the trace engine (in-process records) and on
`opscan.compare`; importing it imports no torch.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

from opscan.findings import Column, Finding, Problem, Report, Table

RECORDS = ("a.jsonl", "b.jsonl")
FIRST_DIVERGENCE_KEYS = ("op", "module", "file", "line", "step", "phase", "cause")


def record_argv(target, path: str, *, steps: int, device: str | None, seed: int | None, deterministic: bool,
                benchmark: bool | None, input_shape, fingerprint: str, engine: str = "auto") -> list[str]:  # fmt: skip
    """The `opscan record` command line that records `target` into `path` with these settings."""
    argv = ["record", "--steps", str(steps), "-o", path, "--fingerprint", fingerprint]
    if engine != "auto":
        argv += ["--engine", engine]
    if device:
        argv += ["--device", device]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if deterministic:
        argv.append("--deterministic")
    if benchmark is not None:
        argv.append("--benchmark" if benchmark else "--no-benchmark")
    if input_shape:
        argv += ["--input-shape", ",".join(str(d) for d in input_shape)]
    if target.kind == "script":
        argv += ["--run", target.spec, *target.argv]  # --run takes the rest of the line: last
    else:
        argv.insert(1, target.spec)
    return argv


def _child_env() -> dict[str, str]:
    """This environment, with this opscan first on the path, so the child records with the same code."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_argv(nproc: int, argv: list[str]) -> list[str]:
    """`python -m torch.distributed.run` of `opscan ARGV` on `nproc` ranks of this host, on a free port of its own.

    `--` keeps torchrun from taking opscan's `--run` for its own `--run-path`
    (torch/distributed/run.py parses abbreviations).
    """
    return [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
        "--master-port", str(_free_port()), "-m", "opscan", "--", *argv,
    ]  # fmt: skip


def _record_in_child(argv: list[str], label: str, nproc: int | None = None) -> Problem | None:
    command = [sys.executable, "-m", "opscan", *argv] if nproc is None else torchrun_argv(nproc, argv)
    proc = subprocess.run(command, env=_child_env(), capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return None
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if nproc is not None:
        lines = _without_torchrun(lines)
    said = [i for i, line in enumerate(lines) if line.startswith("opscan: error: ")]
    if said:  # the child's error line is the message: the detail (its traceback) does not say it again
        reason = lines.pop(said[-1]).removeprefix("opscan: error: ")
    else:
        reason = lines[-1] if lines else f"exit status {proc.returncode}"
    return Problem(f"recording run {label} failed: {reason}", detail="\n".join(lines[-40:]))


# torchrun's own log lines ("E1201 17:35:47.038000 4325 torch/distributed/...") and its report of the failed ranks.
_TORCHRUN_LOG = re.compile(r"^[DEIWF]\d{4} \d\d:\d\d:\d\d")


def _without_torchrun(lines: list[str]) -> list[str]:
    """The ranks' own lines of a failed launch: torchrun's log lines and what follows its first error line left out.

    After a rank fails, torchrun (torch/distributed/elastic/multiprocessing/api.py) logs the failure and
    raises ChildFailedError with its own traceback and a table of the ranks: about the launcher, not the run.
    """
    out = []
    for line in lines:
        if _TORCHRUN_LOG.match(line):
            if line[0] == "E":
                break
            continue
        if line.startswith("Setting OMP_NUM_THREADS") or set(line.strip()) == {"*"}:  # its banner (torch/distributed/run.py)
            continue
        out.append(line)
    return out


def _record_here(target, path: str, label: str, *, engine: str, **settings) -> Problem | None:
    from opscan.trace.native import recorder_for
    from opscan.trace.record import record

    try:
        make_recorder, notice = recorder_for(engine, settings["device"])
    except ValueError as exc:  # --engine native where it cannot be built
        return Problem(f"recording run {label} failed: {exc}")
    try:
        result = record(target, path, make_recorder=make_recorder, notices=[notice] if notice else [], **settings)
    except OSError as exc:
        return Problem(f"recording run {label} failed: cannot write {path}: {exc.strerror or exc}")
    if result.problem is not None:
        return Problem(f"recording run {label} failed: {result.problem.message}", result.problem.target, result.problem.detail)
    return None


def _compare(paths: list[str]) -> Report:
    """Compare two records diff made: of the same code, so ops that differ are the same code taking another path."""
    try:
        from opscan.compare import compare_records
    except ImportError as exc:
        return Report("diff", errors=[Problem(f"opscan diff needs opscan.compare, which would not import: {exc}")])
    return compare_records(*paths, same_code=True)


def _as_diff(report: Report, notices: list[str], env: dict) -> Report:
    """compare's report under the diff command's name, with what diff adds."""
    return Report(
        "diff",
        report.findings,
        tables=report.tables,
        env={**report.env, **env},
        errors=report.errors,
        notices=notices + report.notices,
        rules=report.rules,
    )


def diff(
    target,
    *,
    steps: int = 2,
    device: str | None = None,
    seed: int | None = None,
    deterministic: bool = False,
    benchmark: bool | None = None,
    input_shape=None,
    fingerprint: str = "xor64+sum",
    engine: str = "auto",
    same_process: bool = False,
    keep: str | None = None,
    nproc: int | None = None,
    loaded: set[str] | None = None,
) -> Report:
    """Record `target` twice and compare. `keep` is a folder for the two records (else a temporary one, removed).

    `nproc`: record each run with torchrun on that many ranks, and compare rank by rank (never in this process).
    `loaded`, a set, gets the real paths of the project's files the runs loaded (their records' `sources`).
    """
    folder, problem = _records_folder(keep, "opscan-diff-", f"--keep {keep}")
    if problem is not None:
        return Report("diff", errors=[problem])
    paths = [os.path.join(folder, name) for name in RECORDS]
    try:
        for path, label in zip(paths, "ab"):
            if same_process:
                from opscan.trace.runner import resolve_device

                problem = _record_here(
                    target, path, label, device=resolve_device(device or "auto"), steps=steps, seed=seed,
                    deterministic=deterministic, benchmark=benchmark, input_shape=input_shape, scheme=fingerprint,
                    engine=engine,
                )  # fmt: skip
            else:
                argv = record_argv(
                    target, path, steps=steps, device=device, seed=seed, deterministic=deterministic,
                    benchmark=benchmark, input_shape=input_shape, fingerprint=fingerprint, engine=engine,
                )  # fmt: skip
                problem = _record_in_child(argv, label, nproc)
                if problem is None and nproc is not None:
                    problem = _all_ranks_there(path, label, nproc)
            if problem is not None:
                return Report("diff", errors=[problem])
        report = _compare(paths) if nproc is None else _compare_ranks(paths, nproc)
        if loaded is not None:
            every = paths if nproc is None else [rank_path(p, r) for p in paths for r in range(nproc)]
            loaded |= _sources_of(target, every)
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    kept = RECORDS if nproc is None else [rank_path(name, r) for name in RECORDS for r in range(nproc)]
    notices = [f"kept the records in {folder}: {', '.join(kept)}"] if keep is not None else []
    env = {"processes": "one" if same_process else "two fresh", "steps": steps}
    if nproc is not None:
        env = {"processes": f"two torchrun launches of {nproc} rank(s)", "steps": steps, "ranks": nproc}
    return _as_diff(report, notices, env)


def _sources_of(target, paths: list[str]) -> set[str]:
    """The real paths of the project files that the records at `paths` list in their headers' `sources`.

    Their keys are relative to the target's folder, or to the working directory the child ran in (this one).
    """
    from opscan.compare.reader import Record, RecordError
    from opscan.trace.sources import target_file

    named = target_file(target.spec, target.kind)
    base = os.path.dirname(os.path.realpath(named)) if named else os.path.realpath(os.getcwd())
    out: set[str] = set()
    for path in paths:
        try:
            record = Record(path)  # the header alone is read
        except RecordError:  # not written, or unreadable: the comparison says so
            continue
        record.close()
        out.update(os.path.normpath(os.path.join(base, key)) for key in record.header.sources or ())
    return out


def rank_path(path: str, rank: int) -> str:
    """a.jsonl -> a.rank1.jsonl, as `opscan record` names a rank's record under torchrun (opscan.trace.ranks.rank_path)."""
    from opscan.trace.ranks import rank_path as named

    return named(path, rank)


def _all_ranks_there(path: str, label: str, nproc: int) -> Problem | None:
    missing = [r for r in range(nproc) if not os.path.isfile(rank_path(path, r))]
    if missing:
        return Problem(f"recording run {label} failed: no record from rank(s) {', '.join(map(str, missing))} of {nproc}")
    return None


# The `ranks` table of a multi-rank diff: per rank, where its two runs part (the first_divergence row's leading columns).
RANK_COLUMNS = (
    Column("rank", align="right"), Column("result"), Column("op"), Column("module"), Column("file"),
    Column("line", align="right"), Column("step", align="right"), Column("phase"), Column("cause"),
)  # fmt: skip


def _compare_ranks(paths: list[str], nproc: int) -> Report:
    """Compare run a's and run b's record of each rank, put the ranks' reports together, and check each run's replicas."""
    per_rank = [(r, _compare([rank_path(p, r) for p in paths])) for r in range(nproc)]
    report = merge_rank_reports(per_rank)
    if nproc > 1:
        report.findings.extend(_replicas(paths, nproc))
    return report


def _replicas(paths: list[str], nproc: int) -> list[Finding]:
    """DET205 where a run's replicas part (opscan compare --ranks), once for a finding both runs have."""
    from opscan.compare.ranks import compare_ranks

    found: dict[tuple, tuple[Finding, list[str]]] = {}
    for path, label in zip(paths, "ab"):
        for f in compare_ranks([rank_path(path, r) for r in range(nproc)]).findings:
            key = (f.message, f.path, f.line)
            if key in found:
                found[key][1].append(label)
            else:
                found[key] = (f, [label])
    out = []
    for f, labels in found.values():
        runs = "both runs" if len(labels) == 2 else f"run {labels[0]}"
        out.append(f.replace(message=f"{f.message} (in {runs})", properties={**f.properties, "runs": labels}))
    return out


def merge_rank_reports(per_rank: list[tuple[int, Report]]) -> Report:
    """One Report of each rank's comparison of its two runs.

    Findings are each rank's, with `rank` (one finding per (code, op, file,
    line, step) where several ranks have it, with their `ranks`);
    `first_divergence` is the earliest divergence of any rank (by step, then
    rank), with its `rank` last; `spread` is that rank's (else rank 0's);
    `ranks` has one row per rank; errors and notices are named by rank.
    """
    from opscan.trace.ranks import ranks_text

    merged = Report("compare", rules=per_rank[0][1].rules if per_rank else ())
    ranks_table = Table("ranks", "Rank by rank", RANK_COLUMNS)
    seen: dict[tuple, Finding] = {}
    first = None  # (step, rank, row, columns, report)
    for rank, report in per_rank:
        merged.errors.extend(Problem(f"rank {rank}: {e.message}", e.target, e.detail) for e in report.errors)
        merged.notices.extend(f"rank {rank}: {n}" for n in report.notices)
        table = report.table("first_divergence")
        row = dict(zip([c.key for c in table.columns], table.rows[0])) if table is not None and table.rows else None
        result = "error" if report.errors else ("part" if report.findings else "match")
        keys = ("op", "module", "file", "line", "step", "phase", "cause")
        ranks_table.add(rank, result, *((row or {}).get(k) for k in keys))
        if row is not None and (first is None or (row["step"], rank) < first[:2]):
            first = (row["step"], rank, table, report)
        for f in report.findings:
            key = (f.code, f.properties.get("op"), f.path, f.line, f.properties.get("step"))
            if key in seen:
                seen[key].properties["ranks"].append(rank)
            else:
                seen[key] = f.replace(properties={**f.properties, "rank": rank, "ranks": [rank]})
        if not merged.env:
            merged.env = dict(report.env)
    everyone = [rank for rank, _ in per_rank]
    merged.findings = [
        f if f.properties["ranks"] == everyone else f.replace(message=f"{f.message} (on {ranks_text(f.properties['ranks'])} only)")
        for f in seen.values()
    ]
    source = first[3] if first is not None else (per_rank[0][1] if per_rank else None)
    if source is not None:
        for table in source.tables:
            if table.name == "env_diff":
                merged.tables.append(table)
    divergence = Table("first_divergence", "First divergence", (*_columns(source, "first_divergence"), Column("rank", align="right")))
    if first is not None:
        divergence.rows.append((*first[2].rows[0], first[1]))
    merged.tables.extend([divergence, ranks_table])
    spread = source.table("spread") if source is not None else None
    if spread is not None:
        rank = first[1] if first is not None else per_rank[0][0]
        merged.tables.append(Table(spread.name, f"{spread.title} (rank {rank})", spread.columns, spread.rows, chart=spread.chart, note=spread.note))
    return merged


def _columns(report: Report | None, name: str) -> tuple:
    table = report.table(name) if report is not None else None
    if table is not None:
        return table.columns
    from opscan.compare.report import FIRST_DIVERGENCE_COLUMNS

    return FIRST_DIVERGENCE_COLUMNS




def _records_folder(keep: str | None, prefix: str, named: str) -> tuple[str, Problem | None]:
    """The folder for the two records: `keep`, made if missing, or a new temporary one (the caller removes it)."""
    if keep is None:
        return tempfile.mkdtemp(prefix=prefix), None
    try:
        os.makedirs(keep, exist_ok=True)
    except OSError as exc:
        return keep, Problem(f"cannot use {named}: {exc.strerror or exc}")
    return keep, None


def check_workload(model, inputs, loss_fn=None, *, steps: int = 2, device: str | None = None, seed: int = 0,
                   keep: str | None = None, engine: str = "auto") -> Report:  # fmt: skip
    """Train copies of `model` twice in this process from the same state and seed, record both, compare.

    `engine` is record's (opscan.trace.native.recorder_for): "auto" records with the native engine on CUDA.
    """
    import copy

    from opscan.trace.native import recorder_for
    from opscan.trace.record import record
    from opscan.trace.spec import Target
    from opscan.trace.targets import Workload

    if device is None:
        first = next(iter(model.parameters()), None)
        device = str(first.device) if first is not None else "cpu"
    try:
        make_recorder, notice = recorder_for(engine, device)
    except ValueError as exc:
        return Report("diff", errors=[Problem(str(exc))])
    folder, problem = _records_folder(keep, "opscan-reproducible-", f"keep={keep!r}")
    if problem is not None:
        return Report("diff", errors=[problem])
    paths = [os.path.join(folder, name) for name in RECORDS]
    target = Target("<model>", "callable")
    try:
        for path, label in zip(paths, "ab"):
            workload = Workload(None, copy.deepcopy(model), inputs, loss_fn)
            result = record(target, path, device=device, steps=steps, seed=seed, workload=workload, make_recorder=make_recorder)
            if result.problem is not None:
                return Report("diff", errors=[Problem(f"recording run {label} failed: {result.problem.message}", detail=result.problem.detail)])
        report = _compare(paths)
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return _as_diff(report, [notice] if notice else [], {"processes": "one", "steps": steps})


def first_divergence(report: Report) -> dict | None:
    """The first divergence compare found: op, module, file, line, step, phase, cause (and what else it gives); None if none.

    Read from compare's `first_divergence` table (docs/record-format.md, "compare output"),
    else from the first finding's properties.
    """
    table = report.table("first_divergence")
    if table is not None and table.rows:
        return dict(zip([c.key for c in table.columns], table.rows[0]))
    for finding in report.findings:
        props = finding.properties
        if "op" in props:
            out = {key: props.get(key) for key in FIRST_DIVERGENCE_KEYS}
            out["file"] = out["file"] or finding.path
            out["line"] = out["line"] or finding.line
            return out
    return None


def describe(divergence: dict) -> str:
    """One line for a person: where the runs part and why."""
    where = f"{divergence.get('file')}:{divergence.get('line')}" if divergence.get("file") else "an unknown line"
    module = divergence.get("module")
    module_text = f"module {module}" if module else ("the root module" if module == "" else "outside any module")
    return (
        f"{divergence.get('op')} at step {divergence.get('step')} ({divergence.get('phase')}), {module_text}, "
        f"at {where}; cause: {divergence.get('cause')}"
    )
