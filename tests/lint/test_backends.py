"""Libraries that run torch only under one backend (frameworks.BACKENDS: keras): what a run puts on torch.

The findings are in the golden fixtures (tests/fixtures/lint/frameworks/keras_*); here, what no finding
shows: which libraries the context takes to run torch, and that keras' seed helper seeds torch only there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from opscan.lint.context import Context
from opscan.lint.engine import _FactsLoader
from opscan.lint.project import Project
from opscan.lint.relevance import CallFilter


def _context(tmp_path: Path, source: str) -> Context:
    script = tmp_path / "train.py"
    script.write_text(source)
    project = Project(_FactsLoader(None, None, CallFilter.for_lint()), [tmp_path], entry_dirs=[tmp_path])
    return Context(project.trace(project.entry_module(script)), None)


SEED = "import keras\n\nkeras.utils.set_random_seed(0)\n"


@pytest.mark.parametrize(
    ("head", "on_torch"),
    [
        pytest.param('import os\nos.environ["KERAS_BACKEND"] = "torch"\n', True, id="environ-torch"),
        pytest.param('import os\nos.environ.setdefault("KERAS_BACKEND", "torch")\n', True, id="setdefault-torch"),
        pytest.param('import os\nos.environ.update(KERAS_BACKEND="torch")\n', True, id="update-torch"),
        pytest.param('import os\nBACKEND = "torch"\nos.environ["KERAS_BACKEND"] = BACKEND\n', True, id="constant-torch"),
        pytest.param('import os\nos.environ["KERAS_BACKEND"] = "jax"\n', False, id="environ-jax"),
        pytest.param(
            'import os\nos.environ["KERAS_BACKEND"] = "torch"\nos.environ["KERAS_BACKEND"] = "jax"\n', False, id="torch-then-jax"
        ),
        pytest.param('import os\nos.environ["KERAS_BACKEND"] = os.environ.get("B", "torch")\n', False, id="computed"),
        # os.putenv leaves os.environ, where keras reads the variable, as it was.
        pytest.param('import os\nos.putenv("KERAS_BACKEND", "torch")\n', False, id="putenv-torch"),
        pytest.param("", False, id="unset"),  # keras' default, keras.json or the launcher decide
    ],
)
def test_keras_runs_torch_only_where_the_script_sets_its_backend_first(tmp_path, head, on_torch):
    ctx = _context(tmp_path, head + SEED)
    assert ctx.backends_on_torch == (frozenset({"keras"}) if on_torch else frozenset())
    assert ctx.uses_torch is on_torch
    assert ctx.seeded_libs == ({"random", "numpy", "torch"} if on_torch else {"random", "numpy"})


def test_the_backend_is_read_at_the_first_import(tmp_path):
    ctx = _context(tmp_path, 'import os\nimport keras\nos.environ["KERAS_BACKEND"] = "torch"\nimport keras\n' + SEED)
    assert ctx.backends_on_torch == frozenset()


def test_torch_called_by_the_script_itself_still_runs_torch(tmp_path):
    ctx = _context(tmp_path, 'import os\nos.environ["KERAS_BACKEND"] = "jax"\nimport torch\n' + SEED + "x = torch.zeros(2)\n")
    assert ctx.uses_torch
    assert ctx.seeded_libs == {"random", "numpy"}  # keras on jax seeds no torch


def test_torch_imported_and_never_called_runs_nothing(tmp_path):
    ctx = _context(tmp_path, 'import os\nos.environ["KERAS_BACKEND"] = "jax"\nimport torch\n' + SEED)
    assert not ctx.uses_torch


def test_a_call_into_the_projects_own_torch_runs_torch(tmp_path):
    # Linting torch's own source: `torch` is a project package there, and calling it is still running torch.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("def zeros(n):\n    return [0] * n\n")
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("def helper():\n    return 1\n")
    assert _context(tmp_path, "import random\nimport torch\nrandom.seed(0)\nx = torch.zeros(2)\n").uses_torch
    assert not _context(tmp_path, "import random\nimport utils\nrandom.seed(0)\nx = utils.helper()\n").uses_torch
