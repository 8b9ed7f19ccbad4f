"""What counts as seeding: each core seeding API with a seed seeds; with no argument or a literal None it does not.

`random.seed()` and `np.random.seed(None)` reseed from the OS's entropy, `random.Random()`,
`np.random.RandomState(None)` and `np.random.default_rng()` draw fresh entropy, and
`torch.manual_seed(None)` (and the CUDA and Generator forms) raise: none of them makes a run
repeatable, so none is the "seeds" DET001 speaks of (opscan.lint.apis).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.lint.helpers import lint_report

# (the call as written after `import random, numpy as np, torch`, the name DET001 gives it)
APIS = [
    ("random.seed({})", "random.seed"),
    ("np.random.seed({})", "numpy.random.seed"),
    ("torch.manual_seed({})", "torch.manual_seed"),
    ("torch.random.manual_seed({})", "torch.random.manual_seed"),
    ("torch.cuda.manual_seed({})", "torch.cuda.manual_seed"),
    ("torch.cuda.manual_seed_all({})", "torch.cuda.manual_seed_all"),
    ("torch.Generator().manual_seed({})", "torch.Generator.manual_seed"),
    ("rng = random.Random({})", "random.Random"),
    ("rng = np.random.RandomState({})", "numpy.random.RandomState"),
    ("rng = np.random.default_rng({})", "numpy.random.default_rng"),
]
UNSEEDED = ["", "None"]
# The keyword each takes its seed by: `random.seed(a=None)` is as unseeded as `random.seed(None)`.
KEYWORDS = {
    "random.seed": "a",
    "random.Random": "x",
}


def _script(tmp_path: Path, call: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(f"""\
        import random

        import numpy as np
        import torch

        {call}
        model = torch.nn.Linear(4, 4)
    """))
    return path


def _det001(tmp_path: Path, call: str) -> list[str]:
    report = lint_report(_script(tmp_path, call))
    return [f"{f.line}:{f.col} {f.message}" for f in report.sorted_findings() if f.code == "DET001"]


@pytest.mark.parametrize("argument", UNSEEDED, ids=["no-argument", "none"])
@pytest.mark.parametrize(("template", "name"), APIS, ids=[name for _, name in APIS])
def test_no_seed_is_not_seeding(tmp_path, template, name, argument):
    assert _det001(tmp_path, template.format(argument)) == []


@pytest.mark.parametrize(("name", "keyword"), sorted(KEYWORDS.items()))
def test_none_by_keyword_is_not_seeding(tmp_path, name, keyword):
    template = next(t for t, n in APIS if n == name)
    assert _det001(tmp_path, template.format(f"{keyword}=None")) == []


@pytest.mark.parametrize(("template", "name"), APIS, ids=[name for _, name in APIS])
def test_an_int_seeds(tmp_path, template, name):
    col = 7 if template.startswith("rng = ") else 1
    assert _det001(tmp_path, template.format("0")) == [
        f"6:{col} Seeds with `{name}` but never enables determinism; call `torch.use_deterministic_algorithms(True)` after seeding"
    ]
