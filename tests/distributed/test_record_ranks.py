"""`opscan record --run` under `torchrun --nproc-per-node 2` (gloo on the CPU): one record per rank, rank 0's summary,
and `opscan compare --ranks` on them: an injected drift found at its step, parameter, rank and line; equal replicas pass.

Each torchrun launch of two ranks takes about 10 s on a 2-core machine; these tests make one (the clean run is
`tests/diff/test_diff_ranks.py`'s, recorded twice by `opscan diff --nproc-per-node 2`).
"""

from __future__ import annotations

import json

import pytest

from opscan.cli import main
from opscan.compare.reader import read_all
from opscan.trace import ranks
from tests.distributed.helpers import copy_script, line_of, torchrun

pytest.importorskip("torch")

DRIFT_LINE = "# after the all-reduce: this rank alone"


@pytest.fixture(scope="module")
def drift_run(tmp_path_factory):
    """Rank 1 adds noise to `fc.bias`'s gradient after the all-reduce at step 2 (of 4 recorded)."""
    folder = tmp_path_factory.mktemp("drift")
    script = copy_script(folder)
    proc = torchrun(
        "record", "--device", "cpu", "--steps", "4", "-o", "run.jsonl", "--run", script, "--steps", "6", "--drift-step", "2",
        cwd=folder,
    )  # fmt: skip
    return folder, proc


@pytest.mark.slow
def test_each_rank_writes_its_record_and_rank_0_alone_prints(drift_run):
    folder, proc = drift_run
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in folder.iterdir() if p.name != "train_ddp.py")
    assert names == ["run.rank0.jsonl", "run.rank1.jsonl"]  # no run.jsonl, no .partial, no exchange folder left
    lines = [line for line in proc.stderr.splitlines() if line.startswith("opscan: ")]
    assert lines == [
        "opscan: stopped after 4 optimizer step(s)",
        lines[1],
        "opscan: compare the replicas: opscan compare --ranks run.rank0.jsonl run.rank1.jsonl",
    ], proc.stderr
    assert lines[1].startswith("opscan: wrote run.rank0.jsonl, run.rank1.jsonl (2 of 2 rank(s)): 4 step(s), ")
    for r in (0, 1):
        record = read_all(str(folder / f"run.rank{r}.jsonl"))
        env = record.header.env
        assert (env["rank"], env["local_rank"], env["world_size"], env["backend"]) == (r, r, 2, "gloo")
        assert [s.step for s in record.steps] == [0, 1, 2, 3] and not record.cut_short


@pytest.mark.slow
def test_the_all_reduce_is_recorded_with_its_reduced_values(drift_run):
    # DDP's bucket all-reduce is `c10d.allreduce_.default`, asynchronous: the recorder waits for its work before it
    # fingerprints the bucket, so both ranks' outputs are the reduced values, bitwise equal (their inputs are not).
    folder, _ = drift_run
    steps = [read_all(str(folder / f"run.rank{r}.jsonl")).steps for r in (0, 1)]
    for s0, s1 in zip(*steps):
        (a,) = [op for op in s0.ops if op.op == "c10d.allreduce_.default"]
        (b,) = [op for op in s1.ops if op.op == "c10d.allreduce_.default"]
        assert a.phase == b.phase == "backward"
        assert a.ins != b.ins and a.outs == b.outs and a.outs[0] is not None


@pytest.mark.slow
def test_compare_ranks_finds_the_drift_at_its_step_parameter_rank_and_line(drift_run, capsys):
    folder, _ = drift_run
    paths = [str(folder / f"run.rank{r}.jsonl") for r in (0, 1)]
    assert main(["compare", "--output-format", "json", "--ranks", *paths]) == 1
    doc = json.loads(capsys.readouterr().out)
    (finding,) = doc["findings"]
    assert finding["code"] == "DET205"
    assert (finding["step"], finding["param"], finding["rank"], finding["ranks_agree"]) == (2, "module.fc.bias", 1, [0])
    assert (finding["op"], finding["op_rank"], finding["change"]) == ("aten.add_.Tensor", 1, "only on rank 1")
    assert (finding["path"], finding["line"]) == ("train_ddp.py", line_of(DRIFT_LINE))
    tables = {t["name"]: t for t in doc["tables"]}
    (row,) = tables["gradient_divergence"]["rows"]
    assert (row["step"], row["rank"], row["other"], row["op"], row["line"]) == (2, 1, 0, "aten.add_.Tensor", line_of(DRIFT_LINE))
    (row,) = tables["rank_divergence"]["rows"]
    assert (row["step"], row["param"], row["params_differ"]) == (2, "module.fc.bias", 1)


def test_a_rank_record_path_and_what_it_tells_rank_0(tmp_path):
    assert ranks.rank_path("run.jsonl", 1) == "run.rank1.jsonl"
    record = ranks.RankRecord(1, "run.rank1.jsonl", 4, 211, 57_000, 3.5, ("stopped after 4 optimizer step(s)",))
    assert ranks.RankRecord.from_dict(record.to_dict()) == record
    assert ranks.RankRecord.from_dict({"rank": "1"}) is None and ranks.RankRecord.from_dict([]) is None
    info = ranks.RankInfo(1, 1, 2)
    ranks.leave_record(record, info, str(tmp_path))
    found, missing = ranks.gather_records(ranks.RankInfo(0, 0, 3), str(tmp_path), since=0.0, timeout=0.2)
    assert found == {1: record} and missing == [2]
    assert ranks.header_env({}) == {}
    env = ranks.header_env({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "NCCL_ALGO": "Ring"})
    assert env == {"rank": 1, "local_rank": 1, "world_size": 2, "backend": None, "NCCL_ALGO": "Ring"}
