"""`opscan compare --ranks`: the first step and parameter where data-parallel replicas part, and the rank that does."""

from __future__ import annotations

import json

import pytest

from opscan.cli import main
from opscan.compare.ranks import compare_ranks, split

PARAMS = ("fc.weight", "fc.bias")


def _write(path, rank: int, steps: int, drift: dict | None = None, end: bool = True, env_rank: bool = True) -> str:
    """A record of `steps` steps whose params are equal on every rank unless `drift` = {step: (param, ...)} says."""
    env = {"torch": "2.14.1", "rank": rank, "world_size": 4} if env_rank else {"torch": "2.14.1"}
    lines = [{"type": "header", "format": "opscan-record", "version": 1, "target": "train_ddp.py", "argv": [], "kind": "script",
              "seed": 0, "steps": steps, "device": "cpu", "fingerprint": "test", "env": env}]  # fmt: skip
    parted = False
    for step in range(steps):
        drifted = (drift or {}).get(step, ())
        params = {}
        for name in PARAMS:
            # once a replica parts it stays apart: every later step differs too
            fp = f"{step:04x}{PARAMS.index(name):04x}" + ("dead" if name in drifted or parted else "0000") + "0000"
            params[name] = {"fp": fp, "norm": 1.0, "sample": None}
        parted = parted or bool(drifted)
        lines.append({"type": "step", "step": step, "ops": 0, "params": params, "loss": None})
    if end:
        lines.append({"type": "end", "steps": steps, "ops": 0, "stopped": False, "seconds": 0.1})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def _records(tmp_path, n: int, steps: int = 4, drifting: dict | None = None, **kw) -> list[str]:
    return [_write(tmp_path / f"run.rank{r}.jsonl", r, steps, (drifting or {}).get(r), **kw) for r in range(n)]


def test_equal_replicas_pass(tmp_path):
    report = compare_ranks(_records(tmp_path, 2))
    assert report.exit_code() == 0 and not report.findings
    assert "bitwise-equal parameters after all 4 steps on 2 ranks" in report.notices[-1]


def test_the_drifting_rank_is_found_at_its_first_step_and_parameter(tmp_path):
    report = compare_ranks(_records(tmp_path, 4, drifting={2: {1: ("fc.bias",)}}))
    (finding,) = report.findings
    assert finding.code == "DET205"
    assert (finding.properties["step"], finding.properties["param"], finding.properties["rank"]) == (1, "fc.bias", 2)
    assert finding.properties["ranks_agree"] == [0, 1, 3]
    assert "step 1: parameter `fc.bias` after the optimizer step differs on rank 2 from ranks 0, 1, 3" in finding.message
    assert report.table("rank_divergence").rows == [(1, "fc.bias", [2], [0, 1, 3], 1)]
    assert report.exit_code() == 1


def test_two_ranks_name_the_one_that_differs_from_rank_0(tmp_path):
    report = compare_ranks(_records(tmp_path, 2, drifting={1: {0: PARAMS}}))
    (finding,) = report.findings
    props = finding.properties
    assert (props["rank"], props["ranks_differ"], props["ranks_agree"], props["majority"]) == (1, [1], [0], False)
    assert "differs on rank 1 from rank 0 (with two ranks, rank 0 is the reference)" in finding.message
    assert "2 parameters differ" in finding.message
    # These records hold no ops: there is no all-reduce to look after, and the finding says so.
    assert finding.message.endswith("ranks 0, 1 recorded no collective in that step, so there is no all-reduce to look after")
    assert report.table("gradient_divergence").rows == []


def test_a_tie_of_four_takes_rank_0s_side(tmp_path):
    report = compare_ranks(_records(tmp_path, 4, drifting={1: {2: ("fc.weight",)}, 3: {2: ("fc.weight",)}}))
    (finding,) = report.findings
    assert (finding.properties["rank"], finding.properties["ranks_agree"]) == (1, [0, 2])
    assert "(no majority: the side of rank 0 is the reference)" in finding.message


def test_ranks_from_file_names_and_cli(tmp_path, capsys):
    paths = _records(tmp_path, 3, drifting={0: {2: ("fc.weight",)}}, env_rank=False)
    rc = main(["compare", "--output-format", "json", "--ranks", *reversed(paths)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1
    (finding,) = doc["findings"]
    assert (finding["step"], finding["param"], finding["rank"]) == (2, "fc.weight", 0)


def test_fewer_steps_on_one_rank_and_bad_usage(tmp_path, capsys):
    paths = _records(tmp_path, 2)
    _write(tmp_path / "run.rank1.jsonl", 1, 2)
    report = compare_ranks(paths)
    assert not report.findings and "rank 1 recorded fewer steps; compared the first 2" in report.notices
    assert compare_ranks(paths[:1]).exit_code() == 2
    assert main(["compare", paths[0], "--ranks", *paths]) == 2
    assert main(["compare", paths[0]]) == 2
    assert "--ranks RECORD" in capsys.readouterr().err


def test_a_record_given_twice_is_an_error(tmp_path):
    paths = _records(tmp_path, 2)
    report = compare_ranks([paths[0], paths[1], paths[0]])
    assert report.exit_code() == 2 and not report.findings
    assert [p.message for p in report.errors] == [f"{paths[0]} is given twice (as {paths[0]}); give each rank's record once"]


def test_records_not_made_under_torchrun_are_compared_with_a_notice(tmp_path):
    paths = _records(tmp_path, 2, env_rank=False)
    report = compare_ranks(paths)
    assert report.exit_code() == 0
    assert "no record was made under torchrun (their headers name no rank)" in report.notices[0]
    assert not any("torchrun" in n for n in compare_ranks(_records(tmp_path, 2)).notices)


@pytest.mark.parametrize("n", [2, 3])
def test_split(n):
    assert split({r: "a" for r in range(n)}) == (list(range(n)), [], True)
    assert split({0: "a", 1: "b", 2: "a"}) == ([0, 2], [1], True)
    assert split({0: "a", 1: "b"}) == ([0], [1], False)
    assert split({0: "b", 1: "a", 2: "a", 3: "b"}) == ([0, 3], [1, 2], False)


def test_ranks_of_different_fingerprint_schemes_name_the_flag(tmp_path):
    paths = _records(tmp_path, 2)
    other = tmp_path / "run.rank1.jsonl"
    other.write_text(other.read_text().replace('"fingerprint": "test"', '"fingerprint": "xor64"', 1))
    report = compare_ranks(paths)
    assert [e.message for e in report.errors] == [
        "the records use different fingerprint schemes (test, xor64); record every rank with the same --fingerprint"
    ]
