"""Golden tests of `opscan compare --ranks`: real per-rank records of the DDP script and the whole text output.

The records in tests/fixtures/compare_ranks/ were recorded by torchrun with gloo (tests/compare/rank_cases.py);
`python scripts/gen_golden_compare.py` rewrites expected.txt from them (OPSCAN_UPDATE_FIXTURES=1 while running
this file does too), `--record-ranks` records them again. Review the diff.
"""

from __future__ import annotations

import json
import os

import pytest

from opscan.compare.ranks import compare_ranks
from opscan.output import render
from tests.compare.rank_cases import CASES, FIXTURES, compare_text, paths
from tests.util import chdir

UPDATE = os.environ.get("OPSCAN_UPDATE_FIXTURES") == "1"

# (step, param, rank, op, op's rank, change) of each case's DET205; None for none.
EXPECTED = {
    "ddp_drift": (1, "module.fc.bias", 1, "aten.add_.Tensor", 1, "only on rank 1"),
    "ddp_drift_three_ranks": (1, "module.fc.weight", 2, "aten.add_.Tensor", 2, "only on rank 2"),
    "ddp_drift_on_rank_0": (1, "module.fc.bias", 1, "aten.add_.Tensor", 0, "only on rank 0"),
    "ddp_equal": None,
}


def test_every_case_has_a_fixture_and_no_fixture_lacks_a_case():
    assert {p.name for p in FIXTURES.iterdir() if p.is_dir()} == set(CASES) == set(EXPECTED)
    for name, case in CASES.items():
        assert paths(FIXTURES / name) == [f"run.rank{r}.jsonl" for r in range(case.nproc)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_text_output(name):
    folder = FIXTURES / name
    code, text = compare_text(folder)
    want = f"{text}exit code {code}\n"
    if UPDATE:
        (folder / "expected.txt").write_text(want, encoding="utf-8")
    assert (folder / "expected.txt").read_text(encoding="utf-8") == want


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_finding(name):
    folder = FIXTURES / name
    with chdir(folder):
        doc = json.loads(render(compare_ranks(paths(folder)), "json"))
    want = EXPECTED[name]
    if want is None:
        assert doc["findings"] == [] and doc["errors"] == []
        return
    (f,) = doc["findings"]
    assert (f["step"], f["param"], f["rank"], f["op"], f["op_rank"], f["change"]) == want
    assert f["path"] == "train_ddp.py" and f["phase"] == "forward"  # between backward() and step(): no autograd node
    (row,) = [t for t in doc["tables"] if t["name"] == "gradient_divergence"][0]["rows"]
    assert (row["step"], row["op"], row["change"]) == (want[0], want[3], want[5])
