"""A scan or a record under `torchrun`: which rank this process is, each rank's own output, and what rank 0 gathers.

torchrun sets RANK, LOCAL_RANK and WORLD_SIZE in every process it starts;
that is all this module reads to know it is one rank of several, so it
imports no torch (and never torch.distributed) to decide. Each rank scans
the script on its own and leaves its report, as json, in an exchange
folder; rank 0 waits for the others' (they end at about the same step),
merges them, and alone prints. A finding seen on several ranks is one
finding there, with the ranks it was seen on. A record works the same way:
each rank writes its own record (`run.rank1.jsonl`) and leaves a
`RankRecord` (what it wrote) in the exchange folder; rank 0 alone prints the
summary of them all.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass

from opscan.findings import Finding, Problem, Report

# How long rank 0 waits for the other ranks' reports, in seconds (OPSCAN_RANK_TIMEOUT overrides it).
DEFAULT_TIMEOUT = 120.0

# Finding.to_dict keys that are Finding fields; every other key is a property.
_FIELDS = ("code", "path", "line", "col", "end_line", "end_col", "message", "severity", "help", "help_code", "line_text")
_DROPPED = ("fixable", "fix")


class RankInfo:
    """This process's place in a torchrun launch."""

    __slots__ = ("rank", "local_rank", "world_size")

    def __init__(self, rank: int, local_rank: int, world_size: int):
        self.rank = rank
        self.local_rank = local_rank
        self.world_size = world_size

    def __repr__(self) -> str:
        return f"RankInfo(rank={self.rank}, local_rank={self.local_rank}, world_size={self.world_size})"


def from_env(environ=None) -> RankInfo | None:
    """The rank torchrun gave this process, or None when not under torchrun (RANK and WORLD_SIZE unset or unreadable)."""
    environ = os.environ if environ is None else environ
    try:
        rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
        local = int(environ.get("LOCAL_RANK", rank))
    except (KeyError, ValueError):
        return None
    if world < 1 or not 0 <= rank < world:
        return None
    return RankInfo(rank, local, world)


def nccl_env(environ=None) -> dict[str, str]:
    """Every NCCL_* variable this process sees, sorted by name."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in sorted(environ) if k.startswith("NCCL_")}


def backend() -> str | None:
    """The initialised process group's backend, or None; imports torch.distributed only if torch already did."""
    import sys

    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return str(dist.get_backend())
    except Exception:  # noqa: BLE001 - a half-torn-down group has no backend worth reporting
        return None
    return None


def nccl_version() -> str | None:
    """torch's NCCL version as "2.21.5" where CUDA is available, else None."""
    import torch

    try:
        if not torch.cuda.is_available():
            return None
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a torch built without NCCL
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def header_env(environ=None) -> dict:
    """What a record's header env says of this process's place in a torchrun launch; {} when not under torchrun.

    `rank`, `local_rank`, `world_size`, the process group's `backend` (None
    before the script initialised it) and every NCCL_* variable. The NCCL
    version is the header's `nccl` already.
    """
    environ = os.environ if environ is None else environ
    info = from_env(environ)
    if info is None:
        return {}
    return {
        "rank": info.rank, "local_rank": info.local_rank, "world_size": info.world_size, "backend": backend(),
        **nccl_env(environ),
    }  # fmt: skip


def rank_path(path: str, rank: int) -> str:
    """run.json -> run.rank1.json; a name without a suffix gets .rank1 at its end."""
    head, tail = os.path.split(path)
    stem, dot, suffix = tail.rpartition(".")
    name = f"{stem}.rank{rank}.{suffix}" if dot and stem else f"{tail}.rank{rank}"
    return os.path.join(head, name)


def exchange_dir(output_file: str | None, environ=None, kind: str = "scan") -> str:
    """Where the ranks leave their json reports (or, `kind="record"`, their RankRecords) for rank 0: next to -o FILE, else in the temp folder.

    The folder is named by the launch (torchrun's run id, or the master address
    and port), so that two launches at once do not read each other's reports.
    """
    environ = os.environ if environ is None else environ
    run_id = environ.get("TORCHELASTIC_RUN_ID") or "none"
    if run_id == "none":
        run_id = f"{environ.get('MASTER_ADDR', 'localhost')}-{environ.get('MASTER_PORT', '0')}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    base = os.path.dirname(os.path.abspath(output_file)) if output_file not in (None, "-") else tempfile.gettempdir()
    return os.path.join(base, f".opscan-{kind}-{safe}")


def tag(report: Report, info: RankInfo) -> Report:
    """Give each finding of this rank's report its rank."""
    report.findings = [f.replace(properties={**f.properties, "rank": info.rank}) for f in report.findings]
    return report


def leave(report: Report, info: RankInfo, folder: str) -> None:
    """Write this rank's report as json into the exchange folder, atomically."""
    _leave(report.to_dict(), info, folder)


def _leave(doc: dict, info: RankInfo, folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"rank{info.rank}.json")
    partial = f"{path}.{os.getpid()}.tmp"
    with open(partial, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    os.replace(partial, path)


def gather(info: RankInfo, folder: str, *, since: float, timeout: float | None = None) -> tuple[dict[int, dict], list[int]]:
    """The other ranks' reports ({rank: json}) written after `since`, polling until all are there or `timeout` passes.

    Returns them with the ranks whose reports never came, in order.
    """
    if timeout is None:
        try:
            timeout = float(os.environ.get("OPSCAN_RANK_TIMEOUT", DEFAULT_TIMEOUT))
        except ValueError:
            timeout = DEFAULT_TIMEOUT
        if not timeout >= 0:  # nan (a deadline no clock reaches: rank 0 waited forever) or negative
            timeout = DEFAULT_TIMEOUT
    wanted = [r for r in range(info.world_size) if r != info.rank]
    found: dict[int, dict] = {}
    deadline = time.monotonic() + timeout
    while True:
        for r in wanted:
            if r in found:
                continue
            path = os.path.join(folder, f"rank{r}.json")
            try:
                if os.path.getmtime(path) < since:
                    continue  # a report left by an earlier launch with the same id
                with open(path, encoding="utf-8") as fh:
                    found[r] = json.load(fh)
            except (OSError, ValueError):
                continue
        if len(found) == len(wanted) or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return found, [r for r in wanted if r not in found]


def clean(folder: str, ranks) -> None:
    """Remove the exchange files rank 0 has read, and the folder if it is empty then."""
    for r in ranks:
        try:
            os.remove(os.path.join(folder, f"rank{r}.json"))
        except OSError:
            pass
    try:
        os.rmdir(folder)
    except OSError:
        pass


def finding_from_dict(d: dict) -> Finding:
    """A Finding back from its json (the fix, which a scan finding never has, is not kept)."""
    fields = {k: d[k] for k in _FIELDS if k in d}
    properties = {k: v for k, v in d.items() if k not in _FIELDS and k not in _DROPPED}
    return Finding(**fields, properties=properties)


def _key(f: Finding):
    return (f.code, f.properties.get("op"), f.properties.get("file", f.path), f.properties.get("line", f.line))


def ranks_text(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def merge(own: Report, info: RankInfo, others: dict[int, dict], missing: list[int]) -> Report:
    """Rank 0's summary: the union of every rank's findings by (code, op, file, line), each with the ranks it was on.

    A finding that was not on every rank says on which in its message. The
    env is rank 0's; the other ranks' errors and notices are kept, named by rank.
    """
    per_rank: dict[int, list[Finding]] = {info.rank: list(own.findings)}
    errors = list(own.errors)
    notices = list(own.notices)
    for r in sorted(others):
        doc = others[r]
        per_rank[r] = [finding_from_dict(d) for d in doc.get("findings", [])]
        errors.extend(
            Problem(f"rank {r}: {e.get('message', '')}", e.get("target"), e.get("detail", "")) for e in doc.get("errors", [])
        )
        notices.extend(f"rank {r}: {n}" for n in doc.get("notices", []) if n not in own.notices)
    merged: dict[tuple, tuple[Finding, list[int]]] = {}
    for r in sorted(per_rank):
        for f in per_rank[r]:
            key = _key(f)
            if key in merged:
                _first, ranks = merged[key]
                if r not in ranks:
                    ranks.append(r)
            else:
                merged[key] = (f, [r])
    reported = sorted(per_rank)
    findings = []
    for f, ranks in merged.values():
        message = f.message if ranks == reported and not missing else f"{f.message} (on {ranks_text(ranks)} only)"
        findings.append(f.replace(message=message, properties={**f.properties, "rank": ranks[0], "ranks": ranks}))
    if missing:
        notices.append(
            f"no report came from {ranks_text(missing)} of {info.world_size}: "
            "the merged summary holds the other ranks' findings alone"
        )
    env = dict(own.env)
    env["ranks_reported"] = reported
    return Report(own.command, findings, tables=list(own.tables), env=env, errors=errors, notices=notices, rules=own.rules)


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class RankRecord:
    """What one rank's `opscan record` wrote, as it tells rank 0 through the exchange folder."""

    rank: int
    path: str
    steps: int
    ops: int
    bytes: int
    seconds: float
    notices: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "rank": self.rank, "path": self.path, "steps": self.steps, "ops": self.ops, "bytes": self.bytes,
            "seconds": self.seconds, "notices": list(self.notices),
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict) -> RankRecord | None:
        """The RankRecord a rank left, or None where the json is not one (a file of another opscan)."""
        try:
            rank, path, notices = d["rank"], d["path"], d.get("notices", [])
            steps, ops, size, seconds = d["steps"], d["ops"], d["bytes"], d["seconds"]
        except (KeyError, TypeError):
            return None
        ints = (rank, steps, ops, size)
        if not all(type(v) is int for v in ints) or not isinstance(path, str) or type(seconds) not in (int, float):
            return None
        if not isinstance(notices, list) or not all(isinstance(n, str) for n in notices):
            return None
        return cls(rank, path, steps, ops, size, float(seconds), tuple(notices))


def leave_record(record: RankRecord, info: RankInfo, folder: str) -> None:
    """Tell rank 0 what this rank's record holds: a json file in the exchange folder, written atomically."""
    _leave(record.to_dict(), info, folder)


def gather_records(info: RankInfo, folder: str, *, since: float, timeout: float | None = None) -> tuple[dict[int, RankRecord], list[int]]:
    """The other ranks' RankRecords, as `gather` finds them, and the ranks that left none (or none readable)."""
    found, missing = gather(info, folder, since=since, timeout=timeout)
    records = {}
    for r, doc in found.items():
        record = RankRecord.from_dict(doc) if isinstance(doc, dict) else None
        if record is None:
            missing.append(r)
        else:
            records[r] = record
    return records, sorted(missing)
