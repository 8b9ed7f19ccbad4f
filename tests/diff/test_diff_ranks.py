"""`opscan diff --nproc-per-node 2`: two torchrun launches of the DDP script (gloo on the CPU), compared rank by rank,
and each run's replicas checked; and the report that puts the ranks' comparisons together."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from opscan.cli import main
from opscan.compare import compare_records
from opscan.compare.ranks import compare_ranks
from opscan.diff import first_divergence, merge_rank_reports
from tests.compare.cases import FIXTURES
from tests.distributed.helpers import ROOT, child_env, copy_script

pytest.importorskip("torch")


@pytest.mark.slow
def test_two_clean_multi_rank_runs_match_rank_by_rank_and_their_replicas_are_equal(tmp_path):
    script = copy_script(tmp_path)
    command = [
        sys.executable, "-m", "opscan", "diff", "--nproc-per-node", "2", "--steps", "2", "--device", "cpu",
        "--keep", "kept", "--output-format", "json", "--run", script, "--steps", "3",
    ]  # fmt: skip
    proc = subprocess.run(command, cwd=tmp_path, env=child_env(), capture_output=True, text=True, check=False, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["command"] == "diff" and doc["findings"] == [] and doc["errors"] == []
    assert doc["env"]["ranks"] == 2 and doc["env"]["processes"] == "two torchrun launches of 2 rank(s)"
    tables = {t["name"]: t for t in doc["tables"]}
    assert tables["first_divergence"]["rows"] == []
    assert [(r["rank"], r["result"]) for r in tables["ranks"]["rows"]] == [(0, "match"), (1, "match")]
    kept = sorted(p.name for p in (tmp_path / "kept").iterdir())
    assert kept == ["a.rank0.jsonl", "a.rank1.jsonl", "b.rank0.jsonl", "b.rank1.jsonl"]
    assert "rank 1: the runs match bit for bit: 2 steps" in " ".join(doc["notices"])
    # A clean run's replicas are equal: compare --ranks says so, exit 0.
    report = compare_ranks([str(tmp_path / "kept" / f"a.rank{r}.jsonl") for r in (0, 1)])
    assert report.exit_code() == 0 and not report.findings
    assert report.notices[-1] == "the replicas hold bitwise-equal parameters after all 2 steps on 2 ranks"


def test_the_ranks_reports_are_put_together():
    same = compare_records(str(FIXTURES / "identical" / "a.jsonl"), str(FIXTURES / "identical" / "b.jsonl"))
    parted = compare_records(str(FIXTURES / "kernel_nondeterminism" / "a.jsonl"), str(FIXTURES / "kernel_nondeterminism" / "b.jsonl"))
    report = merge_rank_reports([(0, same), (1, parted)])
    first = first_divergence(report)
    assert (first["rank"], first["op"], first["step"], first["cause"]) == (1, "aten.mm.default", 0, "kernel nondeterminism")
    assert [(row[0], row[1]) for row in report.table("ranks").rows] == [(0, "match"), (1, "part")]
    (finding,) = report.findings
    assert finding.properties["ranks"] == [1] and finding.message.endswith("(on rank 1 only)")
    assert report.table("spread").title == "Spread per step (rank 1)"
    both = merge_rank_reports([(0, parted), (1, parted)])
    (finding,) = both.findings
    assert finding.properties["ranks"] == [0, 1] and "only" not in finding.message
    assert first_divergence(both)["rank"] == 0


def test_bad_flags(capsys):
    assert main(["diff", "--nproc-per-node", "2", "--same-process", "--run", str(ROOT / "tests" / "distributed" / "train_ddp.py")]) == 2
    assert "cannot go with --same-process" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["diff", "--nproc-per-node", "0", "--run", "x.py"])
    assert exc.value.code == 2


def test_a_failed_launch_keeps_the_ranks_lines_not_torchruns():
    from opscan.diff import _without_torchrun

    stderr = [
        "W1201 17:36:25.120000 4484 torch/distributed/run.py:982] ",
        "*****************************************",
        "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, ...",
        "Traceback (most recent call last):",
        '  File "bad_ddp.py", line 4, in <module>',
        "RuntimeError: rank 1 broke",
        "opscan: error: rank 1: bad_ddp.py raised: RuntimeError: rank 1 broke",
        "W1201 17:36:25.124000 4484 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 4490 closing signal SIGTERM",
        "E1201 17:36:25.239000 4484 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 2) local_rank: 1",
        "Traceback (most recent call last):",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    ]
    assert _without_torchrun(stderr) == stderr[3:7]


def test_each_runs_replicas_are_checked():
    from opscan.diff import _replicas
    from tests.compare.rank_cases import FIXTURES as RANK_FIXTURES

    drift, equal = str(RANK_FIXTURES / "ddp_drift" / "run.jsonl"), str(RANK_FIXTURES / "ddp_equal" / "run.jsonl")
    (finding,) = _replicas([drift, drift], 2)
    assert finding.code == "DET205" and finding.message.endswith("(in both runs)") and finding.properties["runs"] == ["a", "b"]
    (finding,) = _replicas([equal, drift], 2)
    assert finding.message.endswith("(in run b)") and finding.properties["step"] == 1
    assert _replicas([equal, equal], 2) == []
