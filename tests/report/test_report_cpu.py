"""`opscan report` without a GPU: the rules' rows for the installed torch, the CPU reproducers measured, html, --load.

The CUDA rows come from the rules data and say so; the CPU rules (put_,
max_unpool) run here for real. The report is built once for the module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from opscan.report import matrix
from opscan.rules import NEWEST_TORCH, load
from tests.report.helpers import ROOT, opscan_report, ops_rows

torch = pytest.importorskip("torch")

DB = load()
CPU_RULES = {op.id for op in DB.ops if "cpu" in op.devices}


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.json"
    rc, _, err = opscan_report("--output-format", "json", "-o", str(out))
    assert rc == 0, err
    return out, json.loads(out.read_text())


def test_json_lists_every_rule_for_the_installed_torch(cpu_report):
    _, doc = cpu_report
    rows = ops_rows(doc)
    assert doc["env"]["scope"] == "rules" and doc["env"]["device"] == "cpu"
    for key in ("torch", "cuda", "cudnn", "torchvision", "gpu", "driver", "date"):
        assert key in doc["env"]
    version = doc["env"]["rules_torch"]
    assert version == torch.__version__
    want = {(op.id, device, dtype) for op in DB.ops for device in op.devices for dtype in op.dtypes}
    assert {(r["rule"], r["device"], r["dtype"]) for r in rows} == want
    by_rule = {op.id: op for op in DB.ops}
    for r in rows:
        rule = by_rule[r["rule"]]
        assert r["expected"] == ("raises" if rule.raises_on(version, r["device"]) else "no alert"), r
        assert r["aten"] == list(rule.aten) and r["phase"] == rule.phase
        if r["device"] == "cuda":
            assert r["measured"] is False and r["note"] == matrix.FROM_RULES and r["verdict"] == "not measured"
            assert r["strict"] == "not measured" and r["caller"] == r["default"] == r["strict_bits"] == ""


def test_the_cpu_reproducers_ran_for_real(cpu_report):
    _, doc = cpu_report
    measured = [r for r in ops_rows(doc) if r["measured"]]
    assert {r["rule"] for r in measured} == CPU_RULES
    callers = {op.id: op.callers for op in DB.ops}
    for r in measured:
        assert r["device"] == "cpu"
        assert r["strict"] == "raises" and r["verdict"] == "raises"
        assert r["caller"] in callers[r["rule"]] and r["raised_by"].startswith("aten.")
        assert r["default"] == "identical"  # the CPU kernels are serial
        assert r["remedy"] == "runs; identical in 5 runs", r["remedy"]
    summary = next(t for t in doc["tables"] if t["name"] == "summary")
    assert {"verdict": "raises", "measured": len(measured), "from_rules": 0} in summary["rows"]


def test_the_report_leaves_torch_as_it_was(monkeypatch):
    import os

    from opscan.trace.state import TorchFlags

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)  # measuring sets it (torch < 2.10 reads it)
    environ, cwd = dict(os.environ), os.getcwd()
    flags, rng, dtype = TorchFlags.capture(), torch.get_rng_state(), torch.get_default_dtype()
    rc, out, err = opscan_report("--output-format", "json", "--runs", "2")
    assert rc == 0, err
    assert TorchFlags.capture() == flags and torch.equal(torch.get_rng_state(), rng) and torch.get_default_dtype() == dtype
    assert dict(os.environ) == environ and os.getcwd() == cwd
    assert json.loads(out)["env"]["cublas_workspace_config"] == ":4096:8"  # as the reproducers ran


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.remote, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") or (value and "://" in value):
                self.remote.append((tag, name, value))

    def handle_data(self, data):
        self.text.append(data)


@pytest.mark.parametrize("how", ["measured, loaded from json", "rules only"])
def test_html_is_one_self_contained_page_with_every_op(cpu_report, tmp_path, how):
    out = tmp_path / "report.html"
    if how == "rules only":
        rc, _, err = opscan_report("--device", "none", "--output-format", "html", "-o", str(out))
    else:
        rc, _, err = opscan_report("--load", str(cpu_report[0]), "--output-format", "html", "-o", str(out))
    assert rc == 0, err
    page = _Page()
    page.feed(out.read_text(encoding="utf-8"))
    assert page.tags.count("html") == 1 and "link" not in page.tags and not page.remote
    assert "script" in page.tags and "input" in page.tags  # the filter and the sort, inline
    text = "\n".join(page.text)
    for op in DB.ops:
        assert op.id in text and matrix.api_label(op) in text
        for name in op.aten:
            assert name in text


def test_another_torch_is_reported_from_the_rules():
    rc, out, err = opscan_report("--torch-version", "2.0", "--output-format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["env"]["rules_torch"] == "2.0" and doc["env"]["device"] == "none"
    rows = ops_rows(doc)
    assert rows and all(r["measured"] is False for r in rows)
    bilinear = [r for r in rows if r["rule"] == "upsample_bilinear2d_backward"]
    assert bilinear and all(r["expected"] == "raises" for r in bilinear)  # < 2.1 in the rules
    assert any("not 2.0" in n for n in doc["notices"])


@pytest.mark.parametrize(("asked", "read_as", "word"), [("9.9", NEWEST_TORCH, "newer"), ("1.0", "1.8", "older")])
def test_a_torch_the_rules_do_not_cover_is_read_as_the_nearest_and_said_so(asked, read_as, word):
    rc, out, err = opscan_report("--torch-version", asked, "--device", "none", "--output-format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["env"]["rules_torch"] == read_as
    assert doc["notices"][0] == (
        f"warning: torch {asked} (from --torch-version) is {word} than any release the rules know "
        f"(1.8 to {NEWEST_TORCH}); checking against {read_as}"
    )


def test_without_torch_every_row_is_from_the_rules(tmp_path):
    """No torch installed (metadata says so and the import fails): the report still lists every rule."""
    code = (
        "import sys, importlib.metadata as m\n"
        "sys.modules['torch'] = None\n"
        "real = m.version\n"
        "def version(name):\n"
        "    if name == 'torch':\n"
        "        raise m.PackageNotFoundError(name)\n"
        "    return real(name)\n"
        "m.version = version\n"
        "from opscan.cli import main\n"
        "sys.exit(main(['report', '--output-format', 'json']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    rows = ops_rows(doc)
    assert {r["rule"] for r in rows} == {op.id for op in DB.ops}
    assert all(r["measured"] is False and r["note"] == matrix.FROM_RULES for r in rows)
    assert doc["env"]["rules_torch"] == NEWEST_TORCH and doc["env"]["torch"] is None
    assert "torch is not installed" in proc.stderr


def test_importing_the_report_command_imports_no_torch():
    code = (
        "import sys\n"
        "import opscan.cli, opscan.commands.report, opscan.report.build, opscan.report.matrix, opscan.report.diff\n"
        "opscan.cli.build_parser()\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr


def _env():
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_")}
    env["PYTHONPATH"] = str(ROOT)
    return env
