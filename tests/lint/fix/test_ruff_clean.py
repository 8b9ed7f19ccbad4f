"""The fixes keep a file that ruff's import rules accept acceptable: `ruff check --select E402,I`.

For every golden fix case (tests/fixtures/fix/), when its input passes
`ruff check --select E402,I`, its fixed output (the `.out.py` files, which
test_golden.py checks are what `--fix` writes) must pass too. The DET002 fix
puts `os.environ.setdefault(...)` between imports, which E402 allows for
`os.environ`; isort (I001) then wants `import os` in sorted place and a blank
line after the import block, and an added `import torch` in its section.
Generated import blocks (any ruff-sorted mix of `from __future__`, the standard
library, third-party, first-party and relative imports) check the same.

Skipped where ruff is not installed (requirements-test.txt installs it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.lint.fix.helpers import FIX_FIXTURES, fix, fixture_cases


def _ruff() -> list[str] | None:
    if find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    return [found] if found else None


RUFF = _ruff()


def _lay_out(case: Path, dest: Path, suffix: str) -> None:
    """The case's files under their real names, taking NAME`suffix` (".in.py" or ".out.py") as NAME.py."""
    sources = sorted(p for p in case.rglob("*") if p.is_file()) if case.is_dir() else [case.with_name(case.name.replace(".in.py", suffix))]
    root = case if case.is_dir() else case.parent
    for src in sources:
        name = src.name
        if name.endswith((".in.py", ".out.py")):
            if not name.endswith(suffix):
                continue
            name = name[: -len(suffix)] + ".py"
        target = dest / src.relative_to(root).parent / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)


def _clean(folder: Path) -> tuple[bool, str]:
    run = subprocess.run(
        [*RUFF, "check", "--no-cache", "--isolated", "--select", "E402,I", "--output-format", "concise", "."],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    return run.returncode == 0, run.stdout + run.stderr


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
@pytest.mark.parametrize("case", [pytest.param(c, id=str(c.relative_to(FIX_FIXTURES))) for c, _ in fixture_cases()])
def test_fix_keeps_ruff_import_rules_clean(case, tmp_path):
    before, after = tmp_path / "in", tmp_path / "out"
    _lay_out(case, before, ".in.py")
    _lay_out(case, after, ".out.py")
    clean, _ = _clean(before)
    if not clean:
        pytest.skip("the input itself does not pass ruff's E402/I rules")
    clean, report = _clean(after)
    assert clean, f"the fix made a ruff-clean file fail `ruff check --select E402,I`:\n{report}"


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
def test_most_inputs_are_checked(tmp_path):
    # The test above skips a case whose input already fails; it must not skip most of them.
    clean = 0
    for i, (case, _) in enumerate(fixture_cases()):
        _lay_out(case, tmp_path / str(i), ".in.py")
        clean += _clean(tmp_path / str(i))[0]
    assert clean >= 25


# ---------------------------------------------------------------- generated import blocks

_STDLIB = ["argparse", "json", "os", "random", "sys", "os.path"]
_THIRD_PARTY = ["numpy", "yaml", "zarr", "scipy", "tqdm", "accelerate"]
_BODIES = {
    # DET001: transformers seeds, nothing enables determinism; the fix adds `import torch`.
    "function": '\n\ndef main(seed):\n    from transformers import set_seed\n\n    set_seed(seed)\n\n\nif __name__ == "__main__":\n    main(0)\n',
    "main": '\nif __name__ == "__main__":\n    from transformers import set_seed\n\n    set_seed(0)\n',
    # DET002 (torch before 2.10): the fix sets the variable at the top, adding `import os`.
    "module": "\nTORCH.manual_seed(0)\nTORCH.use_deterministic_algorithms(True)\nmodel = TORCH.nn.Linear(2, 2).cuda()\n",
}


@st.composite
def import_blocks(draw):
    """A script's header and imports in any order (ruff then sorts them), and a body the fix edits."""
    lines = []
    if draw(st.booleans()):
        lines.append('"""A generated script."""\n')
    if draw(st.booleans()):
        lines.append("from __future__ import annotations\n")
    names = draw(st.lists(st.sampled_from(_STDLIB + _THIRD_PARTY + ["utils", ".data"]), unique=True, max_size=5))
    torch = draw(st.sampled_from([None, "torch", "T"]))
    for name in names:
        if name.startswith("."):
            lines.append(f"from . import {name[1:]}")
        elif draw(st.booleans()):
            lines.append(f"import {name}")
        else:
            lines.append(f"from {name} import x")
    if torch:
        lines.append("import torch" if torch == "torch" else "import torch as T")
    body = draw(st.sampled_from(sorted(_BODIES) if torch else ["function", "main"]))
    pin = "torch==2.1.2" if body == "module" else draw(st.sampled_from(["torch==2.1.2", "torch>=2.10"]))
    return "\n".join(lines) + "\n" + _BODIES[body].replace("TORCH", torch or ""), pin


def _sort_imports(folder: Path) -> None:
    subprocess.run([*RUFF, "check", "--no-cache", "--isolated", "--select", "I", "--fix", "-q", "."], cwd=folder, capture_output=True)


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(import_blocks())
def test_fix_keeps_generated_import_blocks_clean(tmp_path_factory, script):
    """Any ruff-clean layout of imports stays clean: `import torch` joins or starts the third-party
    section, in sorted place, with the blank lines isort wants around it."""
    source, pin = script
    folder = tmp_path_factory.mktemp("gen")
    (folder / "requirements.txt").write_text(pin + "\n")
    (folder / "utils.py").write_text("x = 1\n")
    (folder / "data.py").write_text("x = 1\n")
    train = folder / "train.py"
    train.write_text(source)
    _sort_imports(folder)
    clean, _ = _clean(folder)
    assume(clean)  # e.g. `import os.path` beside `import os`: ruff's fix alone does not settle every layout
    before = train.read_text()
    run = fix(folder)
    assert "Traceback" not in run.err, run.err
    assert train.read_text() != before, "the fix changed nothing"
    clean, report = _clean(folder)
    assert clean, f"the fix made this ruff-clean file fail:\n{before}\n--- fixed:\n{train.read_text()}\n{report}"
