"""`opscan scan --run` under `torchrun --nproc-per-node 2` with gloo on the CPU: per-rank reports, rank 0's merged one.

NCCL on GPUs is not tested here (no multi-GPU machine in CI); gloo runs the same launch on two CPU processes.
"""

from __future__ import annotations

import json
import os

import pytest

from opscan.trace import ranks
from tests.distributed.helpers import copy_script, free_port, torchrun
from tests.trace.helpers import scan
from tests.util import needs_torch

@needs_torch
@pytest.mark.slow
def test_each_rank_writes_its_report_and_rank_0_merges(tmp_path):
    script = copy_script(tmp_path)
    proc = torchrun(
        "scan", "--device", "cpu", "--output-format", "json", "-o", "run.json", "--max-steps", "2", "--run", script,
        cwd=tmp_path, extra_env={"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"},
    )  # fmt: skip
    assert proc.stdout == "", proc.stdout  # -o: the merged report goes to run.json, nothing to stdout
    for r in (0, 1):
        doc = json.loads((tmp_path / f"run.rank{r}.json").read_text())
        env = doc["env"]
        assert (env["rank"], env["world_size"], env["backend"]) == (r, 2, "gloo")
        assert env["nccl"] is None and (env["NCCL_ALGO"], env["NCCL_PROTO"]) == ("Ring", "Simple")
        (finding,) = doc["findings"]
        assert (finding["code"], finding["op"], finding["rank"]) == ("DET100", "aten.max_unpool2d.default", r)
        assert finding["count"] == 2
    merged = json.loads((tmp_path / "run.json").read_text())
    (finding,) = merged["findings"]
    assert finding["ranks"] == [0, 1] and "only" not in finding["message"]
    assert merged["env"]["ranks_reported"] == [0, 1]
    assert not any("no report came" in n for n in merged["notices"])
    assert not list(tmp_path.glob(".opscan-scan-*/*")), "rank 0 cleans the exchange folder"
    assert "exited with" not in proc.stderr


@needs_torch
@pytest.mark.slow
def test_a_merged_report_over_a_module_the_run_loaded_is_kept_in_its_partial_file(tmp_path):
    """-o names the module the launched script imports: each rank's report is written as ever, rank 0's merged one is kept
    in FILE.partial (it was lost, on every rank) and the launch exits 2 once, from rank 0."""
    copy_script(tmp_path)
    (tmp_path / "launch.py").write_text("import train_ddp\n\ntrain_ddp.main()\n")
    before = (tmp_path / "train_ddp.py").read_text()
    proc = torchrun("scan", "--device", "cpu", "--output-format", "json", "-o", "train_ddp.py", "--max-steps", "2", "--run", "launch.py", cwd=tmp_path)
    assert proc.returncode != 0 and proc.stdout == "", proc.stderr
    assert (tmp_path / "train_ddp.py").read_text() == before
    assert proc.stderr.count("the whole report is in train_ddp.py.partial: move it where you want it") == 1, proc.stderr
    merged = json.loads((tmp_path / "train_ddp.py.partial").read_text())
    assert merged["env"]["ranks_reported"] == [0, 1]


@needs_torch
@pytest.mark.slow
def test_injected_rank_drift_runs_and_only_rank_0_prints(tmp_path):
    # Rank 1 adds noise to its gradients after the all-reduce. The scan is of ops, not of values: it still
    # finds the one DET100 on both ranks and prints one summary. Finding the drift itself needs `opscan record`.
    script = copy_script(tmp_path)
    proc = torchrun("scan", "--device", "cpu", "--max-steps", "3", "--run", script, "--drift", "--steps", "5", cwd=tmp_path)
    out = proc.stdout
    assert out.count("Found 1 error.") == 1, out + proc.stderr
    assert "world_size=2" in out and "backend=gloo" in out and "ranks_reported=0, 1" in out
    assert out.count("DET100") == 1
    assert "stopped after 3 optimizer step(s)" in out


@needs_torch
def test_rank_0_says_which_ranks_never_reported(capsys, monkeypatch):
    # One process that believes it is rank 0 of 2: rank 1's report never comes.
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.setenv("OPSCAN_RANK_TIMEOUT", "0.3")
    rc, out, _err = scan(capsys, "--device", "cpu", "--output-format", "json", "--run", "train_loop.py")
    assert rc == 1
    doc = json.loads(out)
    assert doc["env"]["world_size"] == 2 and doc["env"]["ranks_reported"] == [0]
    assert "no report came from rank 1 of 2" in " ".join(doc["notices"])
    (finding,) = doc["findings"]
    assert finding["rank"] == 0 and finding["ranks"] == [0]
    assert finding["message"].endswith("(on rank 0 only)")


@pytest.mark.parametrize("value", ["nan", "-5", "banana"])
def test_a_garbage_rank_timeout_waits_the_default_not_forever(tmp_path, monkeypatch, value):
    # OPSCAN_RANK_TIMEOUT=nan made the deadline NaN, which no clock reaches: rank 0 waited forever for a
    # rank that never reported. A value that is no number of seconds >= 0 falls back to the default.
    import threading

    monkeypatch.setenv("OPSCAN_RANK_TIMEOUT", value)
    monkeypatch.setattr(ranks, "DEFAULT_TIMEOUT", 0.2)
    done = []
    waiter = threading.Thread(target=lambda: done.append(ranks.gather(ranks.RankInfo(0, 0, 2), str(tmp_path), since=0.0)), daemon=True)
    waiter.start()
    waiter.join(timeout=30)
    assert done == [({}, [1])]


@needs_torch
def test_not_under_torchrun_nothing_changes(capsys, monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    rc, out, _err = scan(capsys, "--device", "cpu", "--output-format", "json", "--run", "train_loop.py")
    assert rc == 1
    doc = json.loads(out)
    assert "world_size" not in doc["env"] and "rank" not in doc["findings"][0]


def test_merge_keeps_one_finding_per_site_with_its_ranks():
    own = ranks.tag(_report([("DET100", "aten.put_.default", "a.py", 3)]), ranks.RankInfo(0, 0, 3))
    other = ranks.tag(_report([("DET100", "aten.put_.default", "a.py", 3), ("DET100", "aten.put_.default", "a.py", 9)]), ranks.RankInfo(1, 1, 3))
    merged = ranks.merge(own, ranks.RankInfo(0, 0, 3), {1: other.to_dict()}, missing=[2])
    got = sorted((f.line, f.properties["ranks"], f.message) for f in merged.findings)
    assert got == [(3, [0, 1], "put_ (on ranks 0, 1 only)"), (9, [1], "put_ (on rank 1 only)")]
    assert merged.notices[-1].startswith("no report came from rank 2 of 3")


def test_rank_env_and_paths():
    assert ranks.from_env({}) is None
    assert ranks.from_env({"RANK": "1", "WORLD_SIZE": "2"}).local_rank == 1
    assert ranks.from_env({"RANK": "2", "WORLD_SIZE": "2"}) is None
    assert ranks.rank_path("out/run.json", 1) == os.path.join("out", "run.rank1.json")
    assert ranks.rank_path("report", 0) == "report.rank0"
    assert ranks.nccl_env({"NCCL_ALGO": "Tree", "PATH": "/bin"}) == {"NCCL_ALGO": "Tree"}


def _report(sites):
    from opscan.findings import Finding, Report

    return Report("scan", [Finding(c, op.split(".")[1], p, l, properties={"op": op, "file": p, "line": l}) for c, op, p, l in sites])
