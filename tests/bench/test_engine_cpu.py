"""The bench engine end to end on the CPU (the command refuses the CPU; the engine runs there for these tests).

What is checked is what the GPU run relies on: each step runs in the variant
the plan says, the timings and the profile land in the right variant, a
deterministic variant that raises becomes findings, a script is driven
through its optimizer steps, and no torch state is left changed.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from opscan.bench.measure import bench  # noqa: E402
from opscan.bench.plan import make_plan  # noqa: E402
from opscan.bench.variants import variants_for  # noqa: E402
from opscan.trace.runner import parse_target, script_target  # noqa: E402
from tests.bench.helpers import FIXTURES, line_of  # noqa: E402
from tests.util import chdir  # noqa: E402

ROUNDS, WARMUP, PROFILE = 3, 1, 1


def run_bench(target, **kwargs):
    kwargs = {"device": "cpu", "rounds": ROUNDS, "warmup": WARMUP, "profile_steps": PROFILE, "top": 100, **kwargs}
    with chdir(FIXTURES):
        return bench(target, **kwargs)


def rows(report, name):
    table = report.table(name)
    keys = [c.key for c in table.columns]
    return [dict(zip(keys, row)) for row in table.rows]


@pytest.fixture
def flags():
    """Leave the global flags in a state no variant has, and check they come back."""
    saved = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic)
    torch.backends.cudnn.deterministic = True
    before = (False, False, True, torch.is_autocast_enabled("cpu"))
    yield
    after = (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
        torch.is_autocast_enabled("cpu"),
    )
    torch.use_deterministic_algorithms(saved[0])
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = saved[1], saved[2]
    assert after == before


def loaded_fixture():
    """The models.py module the target loader imported (under a name of its own)."""
    import sys

    path = str(FIXTURES / "models.py")
    return next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == path)


def test_every_step_runs_in_its_variant(flags):
    report = run_bench(parse_target("models.py:build"))
    models = loaded_fixture()
    assert report.exit_code() == 0, report.errors
    variants = variants_for(["fp32", "bf16"])
    plan = make_plan(6, warmup=WARMUP, rounds=ROUNDS, profile_groups=[(0, 1, 2), (3, 4, 5)], profile_steps=PROFILE)
    expected = []
    for slot in plan:
        v = variants[slot.variant]
        expected.append((v.deterministic, v.benchmark, v.precision == "bf16", torch.bfloat16 if v.precision == "bf16" else torch.float32))
    assert models.SEEN == expected  # one forward per step, in the main run (build() clears the list)
    got = {r["variant"]: r for r in rows(report, "variants")}
    assert {v: r["steps"] for v, r in got.items()} == {v.id: ROUNDS for v in variants}
    assert all(r["median_ms"] > 0 and r["status"] == "ok" and r["peak_mib"] is None for r in got.values())
    assert report.env["timer"] == "wall clock" and report.env["device"] == "cpu"
    assert report.summary.startswith("verdict: ")


def test_the_profile_names_the_lines_forward_and_backward(flags):
    report = run_bench(parse_target("models.py:build"), precisions=("fp32",), profile_steps=2)
    ops = {(r["phase"], r["op"], r["where"]) for r in rows(report, "ops")}
    conv, linear = f"models.py:{line_of('conv')}", f"models.py:{line_of('linear')}"
    assert ("forward", "aten::conv2d", conv) in ops
    assert ("backward", "aten::convolution_backward", conv) in ops  # the forward line of the backward op
    assert ("forward", "aten::linear", linear) in ops
    assert "CPU time" in report.table("ops").note


def test_a_variant_that_raises_is_reported_with_the_scans_finding(flags):
    report = run_bench(parse_target("models.py:build_put"), profile_steps=0)
    assert report.exit_code() == 1 and not report.errors
    put = [f for f in report.findings if f.properties["op"] == "aten.put_.default"]
    assert len(put) == 1
    (finding,) = put
    assert (finding.code, finding.path, finding.line) == ("DET100", "models.py", line_of("put"))
    assert finding.properties["precisions"] == ["fp32", "bf16"]
    got = {r["variant"]: r for r in rows(report, "variants")}
    for precision in ("fp32", "bf16"):
        assert got[f"{precision}/det"]["status"].startswith("blocked: aten.put_.default")
        assert got[f"{precision}/det"]["steps"] == 0
        assert got[f"{precision}/bench"]["steps"] == got[f"{precision}/default"]["steps"] == ROUNDS
    assert "cannot be measured: deterministic mode raises at aten.put_.default" in report.summary


def test_a_target_that_does_not_build_is_an_error_not_a_crash(flags):
    report = run_bench(parse_target("models.py:build_broken"))
    assert report.exit_code() == 2
    assert "the model cannot be built" in report.errors[0].message
    assert [r["status"] for r in rows(report, "variants")] == [f"not run: its first {p} step failed (see the errors)" for p in ("fp32", "bf16") for _ in range(3)]


def test_a_script_is_timed_between_its_optimizer_steps(flags):
    report = run_bench(script_target("train_bench.py", ["1000", "--cpu"]))
    assert report.exit_code() == 0, report.errors
    assert {r["steps"] for r in rows(report, "variants")} == {ROUNDS}
    assert not any("did not run as labelled" in n for n in report.notices)  # flags set at its top are overridden
    assert any("stopped after" in n for n in report.notices)
    ops = {(r["phase"], r["op"]) for r in rows(report, "ops")}
    assert ("forward", "aten::conv2d") in ops and ("optimizer", "aten::add_") in ops


def test_a_script_that_changes_the_flags_mid_step_is_reported(flags):
    report = run_bench(script_target("train_flips.py"), profile_steps=0)
    (notice,) = [n for n in report.notices if "did not run as labelled" in n]
    assert "bf16/default, bf16/det, fp32/default, fp32/det" in notice


def test_paths_are_shown_short():
    import os

    from opscan.bench.profiling import short_path

    assert short_path("/usr/lib/python3/site-packages/torchvision/models/resnet.py") == "torchvision/models/resnet.py"
    assert short_path(os.path.join(os.getcwd(), "pkg", "model.py")) == os.path.join("pkg", "model.py")


def test_a_script_that_ends_early_keeps_what_ran(flags):
    report = run_bench(script_target("train_bench.py", ["10", "--cpu"]), profile_steps=0)
    planned = 6 * (WARMUP + ROUNDS)
    assert f"10 of the {planned} planned steps ran" in " ".join(report.notices)
    steps = [r["steps"] for r in rows(report, "variants")]
    assert sum(steps) == 10 - 6 * WARMUP
