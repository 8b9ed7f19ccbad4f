"""From measurements to the Report: the tables, the cost split, the verdict, and every output format."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from opscan.bench import report
from opscan.findings import Finding
from opscan.output import render
from tests.bench.helpers import ADD, CONV_BWD, CONV_FWD, measurement, profiles

RESNET = {"fp32": (30.0, 31.0, 32.0), "bf16": (18.0, 18.4, 18.8)}


def rows(table):
    keys = [c.key for c in table.columns]
    return [dict(zip(keys, row)) for row in table.rows]


def resnet(**kwargs):
    added = {CONV_BWD: (10.0, 1.2), CONV_FWD: (5.0, 0.4), ADD: (1.0, -0.1)}
    return measurement(RESNET, profiled={**profiles("fp32", added), **profiles("bf16", {CONV_BWD: (6.0, 0.6)})}, **kwargs)


def test_variants_table():
    table = report.variants_table(resnet())
    got = {r["variant"]: r for r in rows(table)}
    assert list(got) == ["fp32/bench", "fp32/default", "fp32/det", "bf16/bench", "bf16/default", "bf16/det"]
    assert got["fp32/bench"]["cost_pct"] == 0 and got["fp32/bench"]["benchmark"] and not got["fp32/bench"]["deterministic"]
    assert got["fp32/det"]["cost_pct"] == pytest.approx(100 * (32 / 30 - 1), abs=0.01)
    assert got["bf16/det"]["cost_pct"] == pytest.approx(100 * (18.8 / 18 - 1), abs=0.01)
    assert got["fp32/det"]["median_ms"] == pytest.approx(32.0)
    assert got["fp32/det"]["steps"] == 25 and got["fp32/det"]["peak_mib"] == 3072
    assert 0.5 < got["fp32/det"]["spread_pct"] < 2  # the ±1 % wiggle
    assert {r["status"] for r in got.values()} == {"ok"}
    assert (table.chart.kind, table.chart.x, table.chart.y) == ("bar", "variant", "median_ms")


def test_cost_table_splits_the_cost_into_parts_that_add_up():
    fp32, bf16 = rows(report.cost_table(resnet()))
    assert fp32["precision"] == "fp32"
    assert fp32["cost_pct"] == pytest.approx(100 * 2 / 30, abs=0.01)
    assert fp32["autotuner_pp"] == pytest.approx(100 * 1 / 30, abs=0.01)
    assert fp32["determinism_pp"] == pytest.approx(100 * 1 / 30, abs=0.01)
    assert fp32["cost_pct"] == pytest.approx(fp32["autotuner_pp"] + fp32["determinism_pp"], abs=0.011)
    assert fp32["explained_by"] == "2 ops: 5.3 pp"  # 1.2 + 0.4 ms of a 30 ms step
    assert bf16["explained_by"] == "1 op: 3.3 pp"  # 0.6 ms of 18 ms


def test_ops_table():
    table = report.ops_table(resnet(), top=2)
    got = rows(table)
    assert [(r["precision"], r["op"]) for r in got] == [
        ("fp32", "aten::convolution_backward"),
        ("fp32", "aten::conv2d"),
        ("bf16", "aten::convolution_backward"),
    ]
    conv = got[0]
    assert (conv["phase"], conv["where"]) == ("backward", "torchvision/models/resnet.py:92")
    assert conv["added_ms"] == pytest.approx(1.2)
    assert conv["autotuner_ms"] == pytest.approx(0.6) and conv["determinism_ms"] == pytest.approx(0.6)
    assert conv["step_pct"] == pytest.approx(4.0, abs=0.01)  # 1.2 ms of 30
    assert conv["share_pct"] == pytest.approx(60.0, abs=0.1)  # 1.2 ms of the 2 ms measured
    assert conv["kernels"] == "sm90_xmma_dgrad → cudnn::dgrad_engine"
    assert got[1]["kernels"] == "sm90_xmma_dgrad (same kernels)"
    assert "GPU kernel time" in table.note


def test_verdict_names_the_cost_and_the_ops():
    assert report.verdict(resnet()) == (
        "verdict: determinism costs +6.7% (±1.1) here in fp32 (2 ops account for 5.3 points of it)"
        " and +4.4% (±1.0) in bf16 (1 op accounts for 3.3 points of it)"
    )


def test_verdict_when_the_kernels_do_not_explain_the_cost():
    m = measurement({"fp32": (30.0, 31.0, 33.0)}, profiled=profiles("fp32", {CONV_BWD: (10.0, 0.3)}))
    assert report.verdict(m).endswith("here in fp32 (the 1 op that slowed most accounts for only 1.0 points of it)")


def test_verdict_without_a_measurable_cost_or_a_measurement():
    m = measurement({"fp32": (30.0, 30.0, 30.05)})
    assert report.verdict(m) == "verdict: determinism costs nothing measurable in fp32 (+0.2% ±1.0)"
    blocked = measurement({"fp32": (30.0, 31.0, 32.0), "bf16": (18.0, 18.4, 18.8)}, blocked=("fp32",))
    assert report.verdict(blocked) == (
        "verdict: determinism costs +4.4% (±1.0) here in bf16; "
        "in fp32 it cannot be measured: deterministic mode raises at aten.put_.default (see the findings)"
    )
    assert report.verdict(measurement({})) == "verdict: nothing was measured"


def test_a_blocked_variant_is_a_row_without_timings():
    m = measurement({"fp32": (30.0, 31.0, 32.0)}, blocked=("fp32",))
    det = rows(report.variants_table(m))[2]
    assert det["variant"] == "fp32/det" and det["steps"] == 0
    assert det["median_ms"] is None and det["cost_pct"] is None
    assert det["status"] == "blocked: aten.put_.default"
    (cost,) = rows(report.cost_table(m))
    assert cost["cost_pct"] is None and cost["autotuner_pp"] == pytest.approx(100 / 30, abs=0.01)


def full_report(**kwargs):
    finding = Finding("DET100", "aten.put_.default (put_) has no deterministic implementation (forward)", "models.py", 30)
    return report.build(resnet(), env={"gpu": "NVIDIA H200", "torch": "2.11.0"}, findings=[finding], notices=["a notice"], **kwargs)


def test_the_verdict_is_the_last_notice_and_samples_are_optional():
    r = full_report()
    assert [t.name for t in r.tables] == ["variants", "cost", "ops"]
    assert r.notices == ["a notice"] and r.summary.startswith("verdict: determinism costs +6.7%")
    assert r.exit_code() == 1  # a finding: an op blocks deterministic mode
    with_samples = full_report(samples=True)
    table = with_samples.table("samples")
    assert len(table.rows) == 6 * 25 and table.rows[0][:2] == ("fp32/bench", 0)
    assert report.build(measurement(RESNET)).table("ops") is None  # nothing profiled, no ops table


def test_text():
    out = render(full_report(), "text")
    assert out.startswith("gpu=NVIDIA H200 torch=2.11.0\n")
    for title in ("Step time per variant:", "What determinism costs", "Where the cost goes"):
        assert title in out
    lines = out.rstrip("\n").splitlines()
    assert lines[-2].startswith("verdict: ") and lines[-1] == "Found 1 error."
    assert any(line.startswith("fp32/det ") and "yes" in line for line in lines)


def test_markdown():
    out = render(full_report(), "markdown")
    assert out.startswith("# opscan bench\n")
    assert "## Step time per variant" in out and "| fp32/det | no | yes | 25 | 32 |" in out
    assert "verdict: determinism costs" in out.splitlines()[-1]


def test_json():
    doc = json.loads(render(full_report(samples=True), "json"))
    assert doc["command"] == "bench" and doc["env"]["gpu"] == "NVIDIA H200"
    assert [t["name"] for t in doc["tables"]] == ["variants", "cost", "ops", "samples"]
    variants = {r["variant"]: r for r in doc["tables"][0]["rows"]}
    assert set(variants["fp32/det"]) == {
        "variant", "benchmark", "deterministic", "steps", "median_ms", "spread_pct", "cost_pct", "cost_spread_pp", "peak_mib", "status",
    }  # fmt: skip
    assert variants["fp32/det"]["deterministic"] is True
    ops = doc["tables"][2]["rows"]
    assert ops[0]["op"] == "aten::convolution_backward" and ops[0]["where"] == "torchvision/models/resnet.py:92"
    assert doc["findings"][0]["code"] == "DET100"
    assert doc["summary"].startswith("verdict: ")


class _Html(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.bars, self.remote = [], 0, []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "rect":
            self.bars += 1
        if attrs.get("src") or (tag == "link" and attrs.get("href")):
            self.remote.append(tag)


def test_html_is_self_contained_with_a_bar_per_variant():
    m = resnet()
    m.runs[2].samples.clear()  # a variant without timings gets no bar
    out = render(report.build(m), "html")
    parser = _Html()
    parser.feed(out)
    assert parser.tags.count("svg") == 1 and parser.bars == 5
    assert parser.remote == []
    assert "fp32/bench: 30" in out  # the bar's tooltip
