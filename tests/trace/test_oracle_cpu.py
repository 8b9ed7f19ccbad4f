"""The GPU tests' independent oracle, run on the CPU fixtures: replaying each recorded op alone in strict
mode, with anomaly mode's record of each node's forward stack, gives exactly the scan's findings."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("torch")  # everything below runs torch; lint-only installs skip this file

import opscan  # noqa: E402
from opscan.trace.targets import Workload, run_workload  # noqa: E402
from tests.gpu.oracle import model_oracle, scan_keys  # noqa: E402
from tests.trace.helpers import FIXTURES  # noqa: E402


@pytest.mark.parametrize("name", ["put_model", "unpool_model", "function_model", "clean_model"])
def test_scan_equals_op_by_op_replay(name):
    spec = importlib.util.spec_from_file_location(f"_oracle_{name}", FIXTURES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, inputs, *loss = module.build()
    with opscan.trace(roots=(model,)) as t:
        run_workload(Workload(name, model, inputs, *loss))
    model.zero_grad(set_to_none=True)
    want, stats = model_oracle(model, inputs)
    assert stats["replay_errors"] == 0
    assert scan_keys(t.findings) == want
