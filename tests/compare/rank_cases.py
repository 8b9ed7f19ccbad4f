"""The golden cases of `opscan compare --ranks`: real records of tests/distributed/train_ddp.py, one per rank.

`tests/fixtures/compare_ranks/<case>/` holds `run.rank0.jsonl` ... (recorded by
`torchrun --nproc-per-node N -m opscan -- record --device cpu -o run.jsonl --run train_ddp.py ARGS`
with gloo on the CPU) and `expected.txt`: the whole text output of
`opscan compare --ranks run.rank*.jsonl`, run in that folder, with its exit
code on the last line. `python scripts/gen_golden_compare.py --record-ranks`
records them again (it needs torch); without the flag, the expected files
are rewritten from the records there.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "compare_ranks"
SCRIPT = Path(__file__).resolve().parents[1] / "distributed" / "train_ddp.py"


@dataclass(frozen=True)
class RankCase:
    nproc: int
    steps: int  # recorded
    script_args: tuple[str, ...]  # train_ddp.py's


CASES = {
    # Rank 1 adds noise to fc.bias's gradient after the all-reduce at step 1.
    "ddp_drift": RankCase(2, 3, ("--steps", "4", "--drift-step", "1")),
    # Rank 2 of 3 adds noise to fc.weight's gradient at step 1: the odd one out.
    "ddp_drift_three_ranks": RankCase(3, 2, ("--steps", "3", "--drift-step", "1", "--drift-rank", "2", "--drift-param", "fc.weight")),
    # Rank 0 adds the noise: with two ranks, rank 1 differs from rank 0, and the op is rank 0's.
    "ddp_drift_on_rank_0": RankCase(2, 2, ("--steps", "3", "--drift-step", "1", "--drift-rank", "0")),
    "ddp_equal": RankCase(2, 2, ("--steps", "3",)),
}


def paths(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("run.rank*.jsonl"))


def record(name: str, folder: Path) -> None:
    """Record the case's ranks into folder with torchrun (needs torch; about 10 s)."""
    from tests.distributed.helpers import torchrun

    case = CASES[name]
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("run.rank*.jsonl"):
        old.unlink()
    (folder / SCRIPT.name).write_text(SCRIPT.read_text())
    proc = torchrun(
        "record", "--device", "cpu", "--steps", str(case.steps), "-o", "run.jsonl", "--run", SCRIPT.name, *case.script_args,
        cwd=folder, nproc=case.nproc,
    )  # fmt: skip
    (folder / SCRIPT.name).unlink()
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise subprocess.CalledProcessError(proc.returncode, "torchrun")


def compare_text(folder: Path) -> tuple[int, str]:
    """The exit code and the text output of `opscan compare --ranks run.rank*.jsonl`, run in folder."""
    from opscan.compare.ranks import compare_ranks
    from opscan.output import render
    from tests.util import chdir

    with chdir(folder):
        report = compare_ranks(paths(folder))
    return report.exit_code(), render(report, "text")
