"""The measurement's verdicts on workloads made to be (non)deterministic, and the sweep's resume, limit and selection."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from opscan.report import matrix
from tests.report.helpers import ROOT, opscan_report, ops_rows, table

torch = pytest.importorskip("torch")

from opscan.report.measure import measure, measure_snippet  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "probe"))
import noisy_ops  # noqa: E402,F401 - registers torch.ops.opscan_fixture


def test_silent_nondeterminism_is_pinned_to_its_op():
    def work():
        x = torch.ones(4, requires_grad=True)
        (torch.ops.opscan_fixture.noisy(x.exp()) * 2).sum().backward()

    m = measure(work, device="cpu", runs=3)
    assert m.raised is None and not m.error
    assert (m.strict_bits, m.default) == ("differs", "differs")
    assert m.differs_at == "opscan_fixture.noisy.default"
    assert m.verdict == matrix.V_SILENT


def test_an_op_that_switches_path_in_strict_mode():
    def work():
        x = torch.ones(3)
        if not torch.are_deterministic_algorithms_enabled():
            x = torch.ops.opscan_fixture.noisy(x)
        x.mul(2)

    m = measure(work, device="cpu", runs=3)
    assert (m.strict_bits, m.default, m.verdict) == ("identical", "differs", matrix.V_SWITCHES)


def test_a_raising_reproducer_and_a_deterministic_one():
    m = measure_snippet("torch.zeros(6, device=device).put_(torch.tensor([1, 3], device=device), torch.ones(2, device=device))", device="cpu")
    assert m.raised == ("put_", "aten.put_.default") and m.verdict == matrix.V_RAISES
    assert m.default == "identical" and m.strict_bits == ""
    m = measure_snippet("x = torch.randn(8, device=device, requires_grad=True)\nx.sin().sum().backward()", device="cpu", dtype="float64")
    assert (m.strict_bits, m.default, m.verdict) == ("identical", "identical", matrix.V_DETERMINISTIC)
    assert "aten.sin.default" in m.seen and "aten.cos.default" in m.seen  # forward and backward were recorded


def test_random_ops_are_reseeded_each_run():
    m = measure_snippet("torch.nn.functional.dropout(torch.randn(64, device=device), 0.5)", device="cpu")
    assert m.verdict == matrix.V_DETERMINISTIC


def test_a_failing_reproducer_is_a_row_not_a_crash():
    m = measure_snippet("torch.ones(2, device=device) @ torch.ones(3, device=device)", device="cpu")
    assert m.verdict == matrix.V_ERROR and m.error.startswith("RuntimeError: ")
    assert measure_snippet("def (:", device="cpu").error.startswith("SyntaxError")


# ---------------------------------------------------------------- the sweep (on the CPU, a few ops)

OPS = "index_add,nn.functional.dropout,nonzero,torchvision.ops.nms"


def _sweep(state, *more):
    return opscan_report("--sweep", "--ops", OPS, "--samples", "2", "--runs", "2", "--state", str(state), "--output-format", "json", *more)


def test_sweep_runs_the_selected_ops_and_resumes(tmp_path):
    state = tmp_path / "state.jsonl"
    rc, out, err = _sweep(state)
    assert rc == 0, err
    doc = json.loads(out)
    rows = ops_rows(doc)
    assert {r["op"] for r in rows} == {"index_add", "nn.functional.dropout", "nonzero", "torchvision.ops.nms"}
    assert {r["source"] for r in rows} == {"opinfo", "torchvision"}
    assert all(r["measured"] is True and r["device"] == "cpu" for r in rows)
    assert all(r["verdict"] == matrix.V_DETERMINISTIC for r in rows), [(r["op"], r["verdict"], r["note"]) for r in rows]
    assert doc["env"]["sweep"] == "complete: 4 cases" and doc["env"]["sweep_tried_now"] == 4
    assert doc["env"]["scope"] == "sweep"
    lines = [json.loads(line) for line in state.read_text().splitlines()]
    assert lines[0]["opscan_sweep"] == 1 and sum(1 for line in lines if "row" in line) == 4

    rc, out, err = _sweep(state)
    assert rc == 0, err
    again = json.loads(out)
    assert again["env"]["sweep_tried_now"] == 0 and ops_rows(again) == rows, "a resumed sweep reruns nothing"


def test_ops_that_match_nothing_are_an_error(tmp_path):
    rc, out, err = opscan_report("--sweep", "--device", "cpu", "--ops", "nomatch_zzz", "--state", str(tmp_path / "state.jsonl"))
    assert rc == 2 and out == ""
    assert err.splitlines()[-1] == "opscan: error: --ops nomatch_zzz matches no op of the sweep on cpu"


def test_ops_that_match_nothing_leave_no_state_file_behind(tmp_path):
    """The header it wrote (runs 5, samples 3) refused the next sweep, with other flags, as "another sweep"."""
    state = tmp_path / "cache" / "state.jsonl"
    rc, _, err = opscan_report("--sweep", "--device", "cpu", "--ops", "nomatch_zzz", "--state", str(state))
    assert rc == 2 and "matches no op" in err
    assert not (tmp_path / "cache").exists()
    rc, out, err = opscan_report("--sweep", "--ops", "index_add", "--samples", "1", "--runs", "2", "--state", str(state), "--output-format", "json")
    assert rc == 0, err
    assert json.loads(out)["env"]["sweep"].startswith("complete:")


def test_ops_that_match_nothing_keep_an_earlier_sweeps_state_file(tmp_path):
    state = tmp_path / "state.jsonl"
    rc, _, err = _sweep(state)
    assert rc == 0, err
    kept = state.read_text()
    rc, _, err = opscan_report("--sweep", "--device", "cpu", "--ops", "nomatch_zzz", "--runs", "2", "--samples", "2", "--state", str(state))
    assert rc == 2 and "matches no op" in err
    assert state.read_text() == kept
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    rc, _, err = opscan_report("--sweep", "--device", "cpu", "--ops", "nomatch_zzz", "--state", str(empty))
    assert rc == 2 and empty.read_text() == ""


def test_sweep_stops_at_its_time_limit_and_says_so(tmp_path):
    state = tmp_path / "state.jsonl"
    rc, out, err = _sweep(state, "--time-limit", "0.01")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["env"]["sweep"].startswith("partial: 0 of 4 cases, stopped by the time limit")
    assert doc["notices"][0].startswith("sweep partial")
    assert ops_rows(doc) == []


def test_a_case_that_killed_the_process_is_skipped_on_resume(tmp_path):
    state = tmp_path / "state.jsonl"
    rc, _, err = _sweep(state)
    assert rc == 0, err
    lines = state.read_text().splitlines()
    header, rest = lines[0], [json.loads(line) for line in lines[1:]]
    killed = next(r["key"] for r in rest if "row" in r)
    kept = [json.dumps(r) for r in rest if r.get("key") != killed]
    state.write_text("\n".join([header, *kept, '{"row": {"op": "cut sh']) + "\n")  # and a line cut short by the crash
    rc, out, err = _sweep(state)
    assert rc == 0, err
    row = next(r for r in ops_rows(json.loads(out)) if killed.endswith(r["op"]))
    assert row["verdict"] == matrix.V_ERROR and "the process died running it" in row["note"]


def test_a_state_file_of_another_sweep_is_refused(tmp_path):
    state = tmp_path / "state.jsonl"
    state.write_text(json.dumps({"opscan_sweep": 1, "torch": "1.13.0", "device": "cpu", "gpu": None, "runs": 2, "samples": 2}) + "\n")
    rc, _, err = _sweep(state)
    assert rc == 2 and "belongs to another sweep" in err and "Traceback" not in err
    state.write_text("hello\nworld\n")
    rc, _, err = _sweep(state)
    assert rc == 2 and err.splitlines()[-1] == f"opscan: error: {state} is not a sweep state file; pass another --state"
    state.write_text(json.dumps({"opscan_sweep": 1, "torch": torch.__version__, "device": "cpu", "gpu": None, "runs": 2, "samples": 2}) + "\nhello\n{}\n")
    rc, _, err = _sweep(state)
    assert rc == 2 and err.splitlines()[-1] == f"opscan: error: {state}:2 is not a sweep state line; remove the file or pass another --state"


def test_a_state_option_that_names_no_state_file_is_refused_and_left_alone(tmp_path, monkeypatch):
    """Bytes that are not UTF-8 raised UnicodeDecodeError (a traceback); a directory, a device or a huge file is refused unread."""
    from opscan.report import sweep

    binary = tmp_path / "st.bin"
    binary.write_bytes(bytes(range(256)) * 12)
    rc, out, err = _sweep(binary)
    assert (rc, out) == (2, "") and err.splitlines()[-1] == f"opscan: error: {binary} is not a sweep state file; pass another --state"
    assert "Traceback" not in err and binary.read_bytes() == bytes(range(256)) * 12, "nothing appended to it"
    rc, _, err = _sweep(tmp_path)
    assert rc == 2 and err.splitlines()[-1] == f"opscan: error: {tmp_path} is a directory, not a sweep state file; pass another --state"
    monkeypatch.setattr(sweep, "MAX_STATE_BYTES", 1024 * 1024)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"\n" * (1024 * 1024 + 1))
    rc, _, err = _sweep(big)
    assert rc == 2 and err.splitlines()[-1] == f"opscan: error: {big} is larger than 1 MB, too large for a sweep state file; pass another --state"


def test_importing_the_test_databases_leaves_torch_as_it_was():
    from opscan.report import sweep
    from opscan.trace.state import TorchFlags

    before = TorchFlags.capture()
    script = torch._C.ScriptFunction.__call__
    assert len(sweep.op_db()) > 500 and len(sweep.module_db()) > 50
    assert TorchFlags.capture() == before and torch._C.ScriptFunction.__call__ is script
    torch.backends.cudnn.benchmark = before.cudnn_benchmark  # would raise were the flags still frozen
    stub = sys.modules.get("expecttest")
    assert stub is None or getattr(stub, "__file__", None), "the stand-in for expecttest is not left behind"


def test_the_test_databases_import_without_the_cuda_home_notice(tmp_path):
    """With a CUDA toolkit and no usable GPU, `common_utils` imports cpp_extension, which logged
    "No CUDA runtime is found, using CUDA_HOME=..." on stderr in the middle of the sweep."""
    import subprocess

    from tests.util import subprocess_env

    env = {**subprocess_env(), "CUDA_HOME": str(tmp_path), "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    plain = subprocess.run([sys.executable, "-c", "import torch.utils.cpp_extension"], env=env, capture_output=True, text=True, check=True)
    if "No CUDA runtime is found" not in plain.stderr:
        pytest.skip("this torch logs no CUDA_HOME notice here (a CPU-only build)")
    code = "from opscan.report import sweep; sweep.op_db(); import logging; print(logging.getLogger('torch.utils.cpp_extension').filters)"
    swept = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=300)
    assert "No CUDA runtime is found" not in swept.stderr, swept.stderr
    assert swept.stdout.strip() == "[]", "the filter goes once the databases are imported"


def test_notable_rows():
    from opscan.report.sweep import notable

    rows = [
        matrix.row(op="a", verdict=matrix.V_RAISES, rule="", expected=""),
        matrix.row(op="b", verdict=matrix.V_RAISES, rule="put", expected="raises"),
        matrix.row(op="c", verdict=matrix.V_SILENT),
        matrix.row(op="d", verdict=matrix.V_DETERMINISTIC, note="ran aten.x without its alert (r; ...)"),
        matrix.row(op="e", verdict=matrix.V_DETERMINISTIC),
    ]
    assert [r["op"] for r in notable(rows)] == ["a", "c", "d"]
    assert table({"tables": [matrix.summary(rows).to_dict()]}, "summary")["rows"][0] == {"verdict": "raises", "measured": 0, "from_rules": 2}


@pytest.mark.parametrize(("signum", "code", "said"), [(None, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_an_interrupted_sweep_exits_as_interrupted_and_resumes_the_rest(tmp_path, monkeypatch, signum, code, said):
    """Ctrl-C exited 0 and replaced -o with a partial report; every other command exits 130 and leaves -o alone."""
    from opscan.report import sweep

    state, out_file = tmp_path / "state.jsonl", tmp_path / "s.txt"
    out_file.write_text("old\n")
    real, calls = sweep.run_case, []

    def interrupted_on_the_second(case, *args, **kwargs):
        calls.append(case.key)
        if len(calls) == 2:
            if signum is None:
                raise KeyboardInterrupt  # Ctrl-C
            os.kill(os.getpid(), signum)  # `timeout` ends it: the sweep's handler raises here
        return real(case, *args, **kwargs)

    monkeypatch.setattr(sweep, "run_case", interrupted_on_the_second)
    handler = signal.getsignal(signal.SIGTERM)
    rc, out, err = _sweep(state, "-o", str(out_file))
    assert (rc, out) == (code, "") and out_file.read_text() == "old\n", err
    assert err.splitlines()[-1] == (
        f"opscan: {said}: 1 of 4 cases done, kept in {state}; run the same command again to resume (no report was written)"
    )
    assert signal.getsignal(signal.SIGTERM) is handler and "Traceback" not in err
    monkeypatch.setattr(sweep, "run_case", real)
    rc, out, err = _sweep(state)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["env"]["sweep"] == "complete: 4 cases" and doc["env"]["sweep_tried_now"] == 3, "the case done is not run again"
    assert all(r["verdict"] != matrix.V_ERROR for r in ops_rows(doc)), "an interrupted case is not a crashed one"


def test_the_state_file_is_closed_when_the_cases_cannot_be_built(tmp_path, monkeypatch):
    from opscan.report import sweep

    opened = []
    real_init = sweep._State.__init__

    def tracking(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        opened.append(self)

    def failing(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while torch's OpInfo database loads

    monkeypatch.setattr(sweep._State, "__init__", tracking)
    monkeypatch.setattr(sweep, "cases", failing)
    with pytest.raises(KeyboardInterrupt):
        sweep.sweep(None, device="cpu", env={}, state_path=str(tmp_path / "state.jsonl"), deadline=float("inf"))
    assert len(opened) == 1 and opened[0].file.closed
