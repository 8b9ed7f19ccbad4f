"""The pytest plugin's fixture, and the import rules: `import opscan`, the scan command and the plugin load no torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.trace.helpers import ROOT
from tests.util import needs_torch


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_light_imports_do_not_import_torch():
    code = textwrap.dedent(
        """
        import sys
        import opscan, opscan.cli, opscan.trace, opscan.commands.scan, opscan.trace.codes, opscan.trace.spec
        import opscan.trace.runner, opscan.pytest_plugin
        from opscan.registry import rule_info
        assert rule_info("DET100").command == "scan"
        opscan.cli.build_parser()
        heavy = sorted(m for m in ("torch", "torchvision", "libcst") if m in sys.modules)
        assert heavy == [], heavy
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], env=_env(), check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


TEST_FILE = '''
import torch
from torch import nn


def test_unpool_is_not_ready(assert_deterministic_ready):
    pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool, self.unpool = pool, unpool

        def forward(self, x):
            return self.unpool(*self.pool(x))

    assert_deterministic_ready(Net(), torch.randn(1, 1, 4, 4))


def test_linear_is_ready(assert_deterministic_ready):
    assert assert_deterministic_ready(nn.Linear(3, 2), torch.randn(4, 3), device="cpu") == []


def test_flags_are_back(assert_deterministic_ready):
    assert_deterministic_ready(nn.Linear(3, 2), torch.randn(4, 3))
    assert not torch.are_deterministic_algorithms_enabled()


def test_the_random_stream_is_as_if_the_check_had_not_run(assert_deterministic_ready):
    model, x = nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.5)), torch.randn(4, 3)
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    assert_deterministic_ready(model, x)  # its forward pass draws the dropout mask
    assert torch.equal(torch.rand(3), expected)
'''


@needs_torch
def test_fixture_fails_a_model_that_is_not_ready(tmp_path):
    (tmp_path / "test_models.py").write_text(TEST_FILE)
    # -p no:opscan: where opscan is installed its entry point loads the plugin; load it by module either way.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:opscan", "-p", "opscan.pytest_plugin", "-p", "no:cacheprovider", "test_models.py"],
        cwd=tmp_path,
        env=_env(),
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "1 failed, 3 passed" in out
    assert "test_unpool_is_not_ready" in out
    assert "aten.max_unpool2d.default (max_unpooling2d_forward_out), forward, module unpool, at test_models.py:15" in out
