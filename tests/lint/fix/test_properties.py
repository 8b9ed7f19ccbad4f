"""Properties of `--fix` over every fixture, the bundled examples, and generated scripts.

- Fixing twice gives what fixing once gives (the second run changes nothing).
- Every fixed file parses.
- Linting the fixed files finds none of the codes that were fixed in them.
- Line endings, indentation and comments survive, and no import is duplicated.
"""

from __future__ import annotations

import ast
import io
import re
import shutil
import tempfile
import tokenize
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opscan import config as config_mod
from opscan.lint import engine
from opscan.lint import fix as fixer
from opscan.rules import NEWEST_TORCH
from tests.lint.fix.helpers import (
    EXAMPLES,
    FIX_FIXTURES,
    chdir,
    copy_case,
    fixture_cases,
)


def run_fix(folder: Path, *, unsafe: bool = True, write: bool = True):
    """Lint `folder` and fix it as `opscan lint --fix` does; return (outcome, findings after)."""
    with chdir(folder):
        cfg = config_mod.load(["."], None)

        def lint(overlay=None):
            return engine.run(["."], cfg, torch_version=NEWEST_TORCH, use_cache=False, overlay=overlay)

        outcome = fixer.apply(lint(), unsafe=unsafe, write=write, relint=lint)
        return outcome, lint().findings


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def parses(data: bytes) -> None:
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    ast.parse(data.decode(encoding))


def check_fix_properties(folder: Path) -> None:
    before = snapshot(folder)
    outcome, after = run_fix(folder)
    once = snapshot(folder)
    assert set(once) == set(before), "fixing must neither add nor remove files"
    for name, data in once.items():
        if name.endswith(".py") and data != before[name]:
            parses(data)
    fixed = {(item.path, item.code) for item in outcome.fixed}
    remaining = {(f.path, f.code) for f in after}
    assert not fixed & remaining, f"fixed codes still reported: {sorted(fixed & remaining)}"
    again, _ = run_fix(folder)
    assert snapshot(folder) == once, "a second --fix changed the files"
    assert not again.fixed and not again.diff


def _cases():
    params = [pytest.param(c, id=str(c.relative_to(FIX_FIXTURES))) for c, _ in fixture_cases()]
    if (EXAMPLES / "train_bad.py").exists():
        params.append(pytest.param(EXAMPLES, id="examples"))
    return params


@pytest.mark.parametrize("case", _cases())
def test_fixing_is_idempotent_and_complete(case, tmp_path):
    if case == EXAMPLES:
        shutil.copytree(EXAMPLES, tmp_path / "examples")
        folder = tmp_path / "examples"
    else:
        copy_case(case, tmp_path)
        folder = tmp_path
    check_fix_properties(folder)


def test_examples_twin_is_clean_for_fixable_codes(tmp_path):
    """train_fixed.py is the corrected twin: nothing in it has a fix left to apply."""
    if not (EXAMPLES / "train_fixed.py").exists():
        pytest.skip("examples/train_fixed.py not present")
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    outcome, _ = run_fix(tmp_path / "examples", write=False)
    assert not any(item.path.endswith("_fixed.py") for item in outcome.fixed), outcome.diff


# ---------------------------------------------------------------- generated scripts


@st.composite
def scripts(draw):
    """A training script built from the layouts the fixer must handle, and its line ending."""
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    indent = draw(st.sampled_from(["    ", "\t", "  "]))
    torch_name = draw(st.sampled_from(["torch", "T", None]))  # None: only Python's RNG is seeded
    os_import = draw(st.sampled_from(["none", "before", "after", "multi_after", "alias", "from_environ"]))
    where = draw(st.sampled_from(["module", "main", "function", "suite"]))
    benchmark = torch_name is not None and draw(st.booleans())
    warn_only = torch_name is not None and draw(st.booleans())
    cublas = draw(st.sampled_from([None, "bad", "late"])) if torch_name and os_import not in ("none", "from_environ") else None
    quote = draw(st.sampled_from(['"', "'"]))
    osname = "_os" if os_import == "alias" else "os"
    comment = iter(range(1000))

    lines: list[str] = []
    if draw(st.booleans()):
        lines.append("#!/usr/bin/env python")
    if draw(st.booleans()):
        lines.append("# -*- coding: utf-8 -*-")
    if draw(st.booleans()):
        lines += ['"""A generated training script."""', ""]
    if draw(st.booleans()):
        lines += ["from __future__ import annotations", ""]
    if os_import == "before":
        lines.append("import os")
    elif os_import == "alias":
        lines.append("import os as _os")
    elif os_import == "from_environ":
        lines.append("from os import environ")
    lines.append("import random")
    lines.append(f"# keep {next(comment)}")
    if torch_name == "torch":
        lines.append("import torch")
    elif torch_name == "T":
        lines.append("import torch as T")
    if os_import == "after":
        lines.append("import os  # keep after")
    elif os_import == "multi_after":
        lines.append("import sys, os")
    lines.append("")
    if cublas == "bad":
        lines.append(f"{osname}.environ[{quote}CUBLAS_WORKSPACE_CONFIG{quote}] = {quote}:4096:2{quote}")
    lines.append(f"NAME = {quote}run{quote}")

    body: list[str] = []
    if cublas == "late":
        body.append(f"x = {torch_name}.zeros(1).cuda()")
        body.append(f"{osname}.environ[{quote}CUBLAS_WORKSPACE_CONFIG{quote}] = {quote}:4096:8{quote}")
    seeds = ["random.seed(0)"] + ([f"{torch_name}.manual_seed(0)  # keep {next(comment)}"] if torch_name else [])
    extras = []
    if warn_only:
        extras.append(f"{torch_name}.use_deterministic_algorithms(True, warn_only=True)")
    if benchmark:
        extras.append(f"{torch_name}.backends.cudnn.benchmark = True")
    extras.append("print(random.random())")

    if where == "suite":
        lines += [f"if NAME: {'; '.join(seeds)}", *body, *extras]
    elif where == "module":
        lines += [*body, *seeds, f"# keep {next(comment)}", *extras]
    else:
        block = [*body, *seeds, f"# keep {next(comment)}", *extras]
        if where == "function":
            lines += ["", "", "def main():", *(indent + s for s in block)]
            lines += ["", "", 'if __name__ == "__main__":', indent + "main()"]
        else:
            lines += ["", 'if __name__ == "__main__":', *(indent + s for s in block)]
    return newline.join(lines) + newline, newline


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts())
def test_generated_scripts(script):
    source, newline = script
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "train.py"
        path.write_bytes(source.encode())
        check_fix_properties(folder)
        fixed = path.read_bytes().decode()
        if newline == "\r\n":
            assert "\n" not in fixed.replace("\r\n", ""), "a CRLF file gained LF line endings"
        else:
            assert "\r" not in fixed
        # Every comment survives (a moved `import os` takes its comment along, so order may change).
        assert sorted(re.findall(r"# keep.*", source)) == sorted(re.findall(r"# keep.*", fixed))
        assert fixed.count("import os") <= 1 and fixed.count("import torch") <= 1, "an import was duplicated"
