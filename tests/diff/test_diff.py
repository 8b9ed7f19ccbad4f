"""`opscan diff` and `assert_reproducible`: a divergence is found at its line with its cause, and none where there is none.

These use opscan.compare (docs/record-format.md, "compare output") for the comparison.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

from tests.record.helpers import BRANCHING_SCRIPT, CPU, FIXTURES, env, line_of, opscan  # noqa: E402


def _first(doc: dict) -> dict | None:
    (table,) = [t for t in doc["tables"] if t["name"] == "first_divergence"]
    return table["rows"][0] if table["rows"] else None


def test_urandom_noise_is_found_at_its_line():
    proc = opscan("diff", "models.py:build_noisy", "--steps", "2", *CPU, "--output-format", "json")
    assert proc.returncode == 1, proc.stderr
    first = _first(json.loads(proc.stdout))
    assert first is not None
    assert (first["file"], first["line"]) == ("models.py", line_of("NOISE_LINE"))
    assert first["step"] in (0, 1) and first["phase"] == "forward"
    assert first["cause"] in ("kernel nondeterminism", "data")
    for key in ("op", "module", "file", "line", "step", "phase", "cause"):
        assert key in first


def test_without_the_noise_there_is_no_divergence():
    proc = opscan("diff", "models.py:build_clean", "--steps", "2", *CPU, "--output-format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert _first(doc) is None and doc["findings"] == [] and doc["errors"] == []
    assert doc["command"] == "diff" and doc["env"]["processes"] == "two fresh"


def test_same_process_and_keep(tmp_path):
    keep = tmp_path / "records"
    proc = opscan("diff", "models.py:build_clean", "--steps", "2", *CPU, "--same-process", "--keep", str(keep), "--output-format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["env"]["processes"] == "one" and _first(doc) is None
    assert sorted(os.listdir(keep)) == ["a.jsonl", "b.jsonl"]
    assert any("kept the records" in n for n in doc["notices"])


def test_a_script_is_diffed_in_two_processes(tmp_path):
    proc = opscan("diff", "--steps", "2", *CPU, "--output-format", "json", "--run", "train.py", "--epochs", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _first(json.loads(proc.stdout)) is None


def test_an_extra_random_draw_is_a_random_stream_shift(tmp_path):
    from opscan.compare import compare_records
    from opscan.diff import first_divergence
    from tests.record.helpers import read

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path, extra in ((a, {}), (b, {"OPSCAN_TEST_EXTRA_DRAW": "1"})):
        proc = opscan("record", "models.py:build_dropper", "--steps", "2", *CPU, "-o", str(path), **extra)
        assert proc.returncode == 0, proc.stderr
    # what the record carries: the state on every draw, so the shifted stream shows on the next one
    draws_a = [op for op in read(a)["ops"] if "rng" in op]
    draws_b = [op for op in read(b)["ops"] if "rng" in op]
    assert [op["op"] for op in draws_b] == ["aten.rand.default", "aten.bernoulli_.float"] * 2
    assert [op["op"] for op in draws_a] == ["aten.bernoulli_.float"] * 2
    assert draws_a[0]["rng"] == draws_b[0]["rng"]  # the extra draw starts where a's dropout would have
    assert draws_a[0]["rng"] != draws_b[1]["rng"]  # and b's dropout then draws from a moved stream
    first = first_divergence(compare_records(str(a), str(b)))
    assert first is not None and first["cause"] == "random stream"
    assert first["op"].startswith("aten.bernoulli") and first["line"] == line_of("DROPOUT_LINE") and first["step"] == 0


def _diff_parts(tmp_path, script: str, steps: int) -> dict:
    """`opscan diff --run train.py` of this script source, which must part (exit 1): the json report."""
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    proc = opscan("diff", "--steps", str(steps), *CPU, "--output-format", "json", "--run", "train.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_an_unseeded_script_is_told_to_seed_not_to_remove_a_draw(tmp_path):
    doc = _diff_parts(
        tmp_path,
        """\
        import torch, torch.nn as nn
        model = nn.Linear(4, 2); opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(3):
            opt.zero_grad(); model(torch.randn(3, 4)).sum().backward(); opt.step()
        """,
        steps=2,
    )
    first = doc["findings"][0]
    assert first["code"] == "DET201" and (first["path"], first["line"]) == ("train.py", 2)
    assert "The generator seeds differ (a: " in first["message"] and "the run is not seeded" in first["message"]
    assert "extra draw" not in first["help"] and first["help_code"] == "torch.manual_seed(0)"
    assert all(".;" not in f["message"] for f in doc["findings"])


def test_the_same_script_taking_another_path_is_not_called_different_code(tmp_path):
    # The second run takes another branch (here a file the first one leaves; in life a set's order or an
    # unseeded random.random()): diff ran the same code twice, so DET203 must not say the code differs.
    doc = _diff_parts(tmp_path, BRANCHING_SCRIPT, steps=1)
    (finding,) = [f for f in doc["findings"] if f["code"] == "DET203"]
    assert "Both records are of the same code (opscan diff recorded it twice), so something outside it chose the path: " in finding["message"]
    assert "PYTHONHASHSEED" in finding["message"] and "Python's random unseeded" in finding["message"]
    assert finding["help"].startswith("Make every run take the same path")
    assert "different code" not in finding["message"] + finding["help"] and "of the same code." not in finding["help"]


def test_bad_input_to_diff(tmp_path):
    (tmp_path / "file").write_text("")
    proc = opscan("diff", "models.py:build_clean", *CPU, "--keep", str(tmp_path / "file"))
    assert proc.returncode == 2 and "not a directory" in proc.stderr
    proc = opscan("diff", "models.py:build_clean", *CPU, "--seed", str(2**64))
    assert proc.returncode == 2 and f"argument --seed: {2**64} is out of range" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_target_file_that_cannot_be_run_is_an_error_in_the_report(tmp_path, fmt):
    """As scan's: json is still json (it printed nothing, the error was on stderr only), and -o's file is left as it was."""
    out_file = tmp_path / "diff.json"
    out_file.write_text("last good report\n")
    for args, message in (
        (["nowhere.py:build"], "nowhere.py: no such file"),
        (["--run", str(tmp_path)], f"{tmp_path} is a directory, not a Python script"),
    ):
        proc = opscan("diff", *CPU, "--output-format", fmt, *args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        if fmt == "json":
            doc = json.loads(proc.stdout)
            assert (doc["command"], doc["errors"]) == ("diff", [{"message": message, "target": args[-1]}])
        else:
            assert message in proc.stdout
        assert proc.stderr == ("" if fmt == "text" else f"opscan: error: {message}\n")  # text on stdout says it once
        proc = opscan("diff", *CPU, "--output-format", fmt, "-o", str(out_file), *args)
        assert (proc.returncode, proc.stdout, out_file.read_text()) == (2, "", "last good report\n")
        assert proc.stderr == f"opscan: error: {message}\nopscan: {out_file} not written: the run stopped before any result\n"


def test_a_builder_that_raises_is_said_once(tmp_path):
    """The child's own `opscan: error:` line was the message, and was repeated under it in the detail."""
    (tmp_path / "m.py").write_text("def build():\n    raise RuntimeError('builder exploded')\n")
    proc = opscan("diff", "m.py:build", *CPU, "--steps", "1", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout.count("builder exploded") == 3, proc.stdout  # the message, the traceback's raise line, its last line
    assert "opscan: error:" not in proc.stdout and "recording run a failed: m.py:build raised: RuntimeError: builder exploded" in proc.stdout


def test_a_bad_device_is_one_error_before_anything_runs(tmp_path):
    # In two processes the device used to be checked only inside each run's recording, which
    # said "recording run a failed" and, for a config's device, did not name the file.
    (tmp_path / "build.py").write_text(
        "import pathlib\nimport torch\n\ndef build():\n    pathlib.Path('BUILT').touch()\n    return torch.nn.Linear(2, 2), torch.ones(1, 2)\n"
    )
    proc = opscan("diff", "build.py:build", "--device", "tpu9", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "opscan: error: 'tpu9' is not a device; use cuda, cuda:N, cpu or auto\n")
    (tmp_path / "pyproject.toml").write_text("[tool.opscan.scan]\ndevice = 'tpu8'\n")
    proc = opscan("diff", "build.py:build", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"opscan: error: {tmp_path / 'pyproject.toml'}: "), proc.stderr
    assert "'tpu8' is not a device" in proc.stderr and not (tmp_path / "BUILT").exists()


@pytest.mark.parametrize("where", ["folder", "missing"])
def test_an_unwritable_report_is_refused_before_recording(tmp_path, where):
    # -o into a folder that does not exist (or onto a folder) failed only after both runs were
    # recorded: minutes of training, for an error that was known at the start.
    (tmp_path / "build.py").write_text(
        "import pathlib\nimport torch\n\n"
        "def build():\n"
        "    pathlib.Path('BUILT').touch()\n"
        "    return torch.nn.Linear(2, 2), torch.ones(1, 2)\n"
    )
    out = tmp_path if where == "folder" else tmp_path / "no" / "such" / "diff.json"
    proc = opscan("diff", "build.py:build", *CPU, "--steps", "1", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("is a directory" if where == "folder" else "no folder") in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "BUILT").exists()  # nothing was run
    proc = opscan("scan", "build.py:build", *CPU, "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 2 and not (tmp_path / "BUILT").exists(), proc.stderr


def test_html_is_self_contained():
    proc = opscan("diff", "models.py:build_noisy", "--steps", "2", *CPU, "--output-format", "html")
    assert proc.returncode == 1, proc.stderr
    page = proc.stdout
    assert "<svg" in page  # compare's per-step parameter difference, drawn inline
    assert not any(ref in page for ref in ('src="http', "src='http", 'href="http', "<link", "@import"))


PLUGIN_TESTS = '''
import os

import torch
from torch import nn


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) + torch.frombuffer(bytearray(os.urandom(64)), dtype=torch.int32).view(4, 4) * 1e-12  # NOISY


def test_linear_is_reproducible(assert_reproducible):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    before = [p.detach().clone() for p in model.parameters()]
    assert_reproducible(model, torch.randn(3, 4), steps=2)
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))  # the model itself is not trained


def test_noisy_is_not(assert_reproducible):
    assert_reproducible(Noisy(), torch.randn(4, 4), steps=2, device="cpu")


def test_cuda_skips_without_a_gpu(assert_reproducible):
    assert_reproducible(nn.Linear(2, 2), torch.randn(1, 2), device="cuda")
'''


def test_assert_reproducible_fixture(tmp_path):
    (tmp_path / "test_repro.py").write_text(PLUGIN_TESTS)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:opscan", "-p", "opscan.pytest_plugin", "-p", "no:cacheprovider", "test_repro.py"],
        cwd=tmp_path, env=env(), check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    skipped = "1 skipped" if "CUDA_VISIBLE_DEVICES" in env() and not _has_cuda() else ""
    assert "1 failed, 1 passed" in out and skipped in out, out
    noisy_line = next(i for i, text in enumerate(PLUGIN_TESTS.splitlines(), 1) if text.endswith("# NOISY"))
    assert "test_noisy_is_not" in out and "not reproducible" in out
    assert f"test_repro.py:{noisy_line}" in out, out
    if skipped:
        assert "no CUDA device here" in out


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "x") != ""


def test_first_divergence_reads_compare_or_findings():
    from opscan.diff import describe, first_divergence
    from opscan.findings import Column, Finding, Report, Table

    table = Table("first_divergence", "First divergence", [Column(k) for k in ("op", "module", "file", "line", "step", "phase", "cause")])
    table.add("aten.mm.default", "fc", "m.py", 3, 1, "backward", "kernel nondeterminism")
    assert first_divergence(Report("compare", tables=[table]))["line"] == 3
    finding = Finding("DET200", "x", "m.py", 4, properties={"op": "aten.add.Tensor", "step": 0, "phase": "forward", "cause": "data", "module": ""})
    got = first_divergence(Report("compare", [finding]))
    assert (got["file"], got["line"], got["cause"]) == ("m.py", 4, "data")
    assert "m.py:4" in describe(got) and "the root module" in describe(got)
    assert first_divergence(Report("compare")) is None


@pytest.mark.parametrize(
    ("held", "flags", "message"),
    [
        (["a.jsonl"], [], "--keep kept already holds a.jsonl; remove it or keep the records in another folder"),
        (["a.jsonl", "b.jsonl"], [], "--keep kept already holds a.jsonl, b.jsonl; remove them or keep the records in another folder"),
        (["b.rank1.jsonl"], ["--nproc-per-node", "2"], "--keep kept already holds b.rank1.jsonl; remove it or keep the records in another folder"),
        (["a.jsonl"], ["-o", "kept/a.jsonl"], "-o kept/a.jsonl is where --keep kept puts record a.jsonl; give -o another file"),
        ([], ["-o", "kept/b.jsonl"], "-o kept/b.jsonl is where --keep kept puts record b.jsonl; give -o another file"),
        (["b.jsonl.partial"], [], "--keep kept already holds b.jsonl.partial; remove it or keep the records in another folder"),
    ],
    ids=["a", "both", "a rank's", "-o onto one", "-o onto one not there yet", "a cut-short record's partial"],
)
def test_keep_refuses_a_folder_that_holds_the_records_before_anything_runs(tmp_path, held, flags, message):
    """The records replaced the user's files with no word, and -o onto one then replaced the record with the report."""
    (tmp_path / "build.py").write_text(
        "import pathlib\nimport torch\n\ndef build():\n    pathlib.Path('BUILT').touch()\n    return torch.nn.Linear(2, 2), torch.ones(1, 2)\n"
    )
    (tmp_path / "kept").mkdir()
    for name in held:
        (tmp_path / "kept" / name).write_text("the user's notes\n")
    proc = opscan("diff", "build.py:build", *CPU, "--keep", "kept", *flags, cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, f"opscan: error: {message}\n")
    assert not (tmp_path / "BUILT").exists()  # nothing was run
    assert {p.name: p.read_text() for p in (tmp_path / "kept").iterdir()} == dict.fromkeys(held, "the user's notes\n")
