"""The linker keeps each walk of a body for every entry whose state it holds in (project._Record).

Two claims: sharing those records changes no entry's trace (compared with a
project made afresh for each entry, which shares nothing), and the cost of
linting a package whose every module imports the package grows with the
package, not with its square (torch's own source took 894 s before).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from opscan.lint import project as project_mod
from opscan.lint.engine import _FactsLoader
from opscan.lint.model import Call, Seed
from opscan.lint.relevance import CallFilter


def _package(root: Path, n: int, seed: int) -> list[Path]:
    """A package like torch: `pkg/__init__.py` imports every module; each module imports the package,
    calls helpers of others (some recursive, some with imports inside), seeds or sets the environment."""
    rng = random.Random(seed)
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    names = [f"m{i}" for i in range(n)]
    init = ["import os", "import torch"] + [f"from pkg import {m}" for m in names] + ["m0.helper(0)"]
    (pkg / "__init__.py").write_text("\n".join(init) + "\n")
    for i, m in enumerate(names):
        other, third = rng.choice(names), rng.choice(names)
        body = [
            "import random",
            "import torch",
            "import pkg" if rng.random() < 0.7 else f"from pkg import {other}",
            "",
            "",
            "def helper(k):",
            f"    from pkg import {other}" if rng.random() < 0.3 else "    pass",
            f"    {other}.helper(k)" if rng.random() < 0.5 else "    random.random()",
            f"    pkg.{third}.helper(k)" if rng.random() < 0.3 else "    x = 1",
            "    torch.manual_seed(k)" if rng.random() < 0.2 else "    y = 2",
            "",
            "",
            "def again(k):",
            "    helper(k)",
            "    again(k)",  # recursion: cut when it comes round
            "",
            "",
            'os_value = __import__("os").environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")' if i % 7 == 0 else "",
            "torch.use_deterministic_algorithms(True)" if i % 11 == 0 else "",
            "again(1)" if rng.random() < 0.4 else "",
            'if __name__ == "__main__":',
            "    torch.manual_seed(0)",
        ]
        (pkg / f"{m}.py").write_text("\n".join(body) + "\n")
    (root / "train.py").write_text("import torch\nimport pkg\n\ntorch.manual_seed(0)\npkg.m1.helper(3)\n")
    return sorted(root.rglob("*.py"))


def _trace_text(project, path: Path) -> str:
    trace = project.trace(project.entry_module(path))
    return "\n".join(
        [repr(e) for e in trace.events] + ["--"] + sorted(repr(e) for e in trace.reachable_calls) + [str(trace.truncated)]
    )


def _new_project(root: Path, files: list[Path]):
    return project_mod.Project(_FactsLoader(None, None, CallFilter.for_lint()), [root], entry_dirs=[f.parent for f in files])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shared_records_change_no_trace(tmp_path, seed, monkeypatch):
    files = _package(tmp_path, 25, seed)
    shared = _new_project(tmp_path, files)
    for path in files:
        assert _trace_text(shared, path) == _trace_text(_new_project(tmp_path, files), path), path


def test_shared_records_change_no_trace_where_depth_cuts(tmp_path, monkeypatch):
    """The depth limit cuts some walks: a record made deep down holds only where it cuts the same."""
    monkeypatch.setattr(project_mod, "MAX_DEPTH", 5)
    files = _package(tmp_path, 25, 4)
    shared = _new_project(tmp_path, files)
    for path in files:
        assert _trace_text(shared, path) == _trace_text(_new_project(tmp_path, files), path), path


def _cyclic_package(root: Path, n: int, seed: int) -> list[Path]:
    """Modules whose functions call one another's round in cycles, so that walks leave functions
    entered (project._Walker.enter) in the states other entries meet them in."""
    rng = random.Random(seed)
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    names = [f"m{i}" for i in range(n)]
    (pkg / "__init__.py").write_text("\n".join(["import torch"] + [f"from pkg import {m}" for m in names]) + "\n")
    for m in names:
        calls = [f"    {rng.choice(names)}.{rng.choice('abc')}(k)" for _ in range(3)]
        body = ["import random", "import torch", "import pkg", f"from pkg import {', '.join(sorted(set(names) - {m}))}", ""]
        body += ["def a(k):", calls[0], "    b(k)", "    random.random()", ""]
        body += ["def b(k):", calls[1], "    torch.manual_seed(k)" if rng.random() < 0.3 else "    x = 1", "    c(k)", ""]
        body += ["def c(k):", calls[2], "    a(k)" if rng.random() < 0.5 else "    random.shuffle([])", ""]
        body += [f"{rng.choice('abc')}(0)" if rng.random() < 0.3 else "", 'if __name__ == "__main__":', "    a(1)"]
        (pkg / f"{m}.py").write_text("\n".join(body) + "\n")
    return sorted(root.rglob("*.py"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shared_records_change_no_trace_in_cycles(tmp_path, seed):
    files = _cyclic_package(tmp_path, 12, seed)
    shared = _new_project(tmp_path, files)
    for path in files:
        assert _trace_text(shared, path) == _trace_text(_new_project(tmp_path, files), path), path
    assert any(rec.blocks for records in shared._records.values() for rec in records)  # what is tested here


def _task_package(root: Path, n: int, seed: int) -> list[Path]:
    """Task classes run through classmethods, as espnet2's: each subclasses another, overrides some of
    the methods that `cls.name()` and `super().name()` reach, and some call back round (recursion)."""
    rng = random.Random(seed)
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    methods = ["main", "work", "build", "seed"]
    for i in range(n):
        base = f"pkg.t{rng.randrange(i)}" if i else None
        lines = ["import torch", f"import {base}" if base else "", ""]
        lines.append(f"class T{i}({base}.T{base[5:]}):" if base else f"class T{i}:")
        for name in methods:
            if i and rng.random() < 0.5:
                continue  # inherited
            calls = [f"        cls.{rng.choice(methods)}()" for _ in range(2)]
            if i and rng.random() < 0.5:
                calls.append(f"        super().{name}()")
            effect = "        torch.manual_seed(0)" if rng.random() < 0.3 else "        torch.nn.Linear(2, 2).cuda()"
            lines += ["    @classmethod", f"    def {name}(cls):", *calls, effect, ""]
        lines.append("    pass")
        lines += ['if __name__ == "__main__":', f"    T{i}.main()"]
        (pkg / f"t{i}.py").write_text("\n".join(lines) + "\n")
    return sorted(root.rglob("*.py"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shared_records_change_no_trace_through_classmethods(tmp_path, seed):
    """A classmethod is walked apart for each class it is called on (its `cls.name()` calls differ): the
    records keyed so are shared only where that class is the same."""
    files = _task_package(tmp_path, 10, seed)
    shared = _new_project(tmp_path, files)
    for path in files:
        assert _trace_text(shared, path) == _trace_text(_new_project(tmp_path, files), path), path
    assert any(len(memo) > 4 for memo in shared._records if memo[0] == project_mod._ENTER)  # what is tested here


def _walks(tmp_path: Path, n: int, monkeypatch) -> int:
    files = _package(tmp_path / str(n), n, 5)
    count = [0]
    real = project_mod._Walker.walk

    def counting(self, prog):
        count[0] += 1
        return real(self, prog)

    monkeypatch.setattr(project_mod._Walker, "walk", counting)
    project = _new_project(tmp_path / str(n), files)
    for path in files:
        project.trace(project.entry_module(path))
    monkeypatch.setattr(project_mod._Walker, "walk", real)
    return count[0]


def test_bodies_walked_grow_with_the_package_not_its_square(tmp_path, monkeypatch):
    small, large = _walks(tmp_path, 40, monkeypatch), _walks(tmp_path, 160, monkeypatch)
    # Each entry walks what its own import changes (the chain of modules above it), not the package.
    assert large < 4 * small * 1.6, (small, large)


def _seeds(trace) -> list[tuple[str, int, int]]:
    """(file name, line, frames on the way) of each torch.manual_seed the entry's run reaches, in order."""
    return [(Path(e.path).name, e.loc.line, len(e.via)) for e in trace.events if e.api == "torch.manual_seed" and e.what.__class__ is Call]


def test_an_entry_imported_under_its_own_name_runs_again_as_a_module(tmp_path):
    """`python pkg/m.py`, whose `import pkg` imports `pkg.m`: Python runs m.py twice, as that module
    (without its `__main__` block) inside the import, then on as `__main__`; so does the linker."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg import m\n")
    (pkg / "m.py").write_text(
        'import torch\nimport pkg\nimport pkg.m\n\ntorch.manual_seed(1)\n\nif __name__ == "__main__":\n    torch.manual_seed(2)\n'
    )
    files = sorted(tmp_path.rglob("*.py"))
    project = _new_project(tmp_path, files)
    trace = project.trace(project.entry_module(pkg / "m.py"))
    # Inside `import pkg` (m.py:2, then __init__.py:1); `import pkg.m` finds it loaded; then the script.
    assert _seeds(trace) == [("m.py", 5, 2), ("m.py", 5, 0), ("m.py", 8, 0)]


def test_an_entry_without_a_main_block_runs_the_program_of_its_import(tmp_path):
    """A script's top level with no `if __name__ == "__main__":` block does what its import does: the
    two runs share one program (compiled once), and each still gives its events; with such a block,
    the script's run has a program of its own."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg import a, b\n")
    (pkg / "a.py").write_text("import torch\nimport pkg\n\ntorch.manual_seed(1)\n")
    (pkg / "b.py").write_text('import torch\nimport pkg\n\ntorch.manual_seed(2)\n\nif __name__ == "__main__":\n    torch.manual_seed(3)\n')
    files = sorted(tmp_path.rglob("*.py"))
    project = _new_project(tmp_path, files)
    traces = {f.name: project.trace(project.entry_module(f)) for f in files}
    bodies = sorted((Path(memo[1]).name, str(memo[0])) for memo in project._programs if memo[0] in ("main", project_mod._LOAD))
    load = str(project_mod._LOAD)
    assert bodies == [("__init__.py", load), ("a.py", load), ("b.py", load), ("b.py", "main")]
    # Inside `import pkg` (the script's line 2, then __init__.py:1), then on as `__main__`.
    assert _seeds(traces["a.py"]) == [("a.py", 4, 2), ("b.py", 4, 2), ("a.py", 4, 0)]
    assert _seeds(traces["b.py"]) == [("a.py", 4, 2), ("b.py", 4, 2), ("b.py", 4, 0), ("b.py", 7, 0)]


def test_a_super_call_that_leads_nowhere_is_an_event_only_where_its_method_name_counts(tmp_path):
    """`super().__init__()` of a library's class names nothing lint follows: no event, as when the call
    filter dropped every such call; `super().put_(...)` keeps its event, for the op rules that match
    `.put_` on any receiver."""
    (tmp_path / "train.py").write_text(
        "import torch\n\nclass Buf(torch.Tensor):\n    def __init__(self):\n        super().__init__()\n"
        "        super().put_(None, None)\n\nBuf()\n"
    )
    files = [tmp_path / "train.py"]
    project = _new_project(tmp_path, files)
    trace = project.trace(project.entry_module(files[0]))
    assert [(e.loc.line, e.what.method) for e in trace.events if e.what.__class__ is Call] == [(6, "put_")]


def _reading_project(roots: list[Path], files: list[Path]) -> tuple[project_mod.Project, list[tuple[str, str]]]:
    """A project whose loader notes each (file name, package) it reads."""
    reads: list[tuple[str, str]] = []
    loader = _FactsLoader(None, None, CallFilter.for_lint())

    def counting(path, package, keep_all=False, provided=frozenset()):
        reads.append((Path(path).name, package))
        return loader(path, package, keep_all, provided)

    counting.calls = loader.calls
    return project_mod.Project(counting, roots, entry_dirs=[f.parent for f in files]), reads


@pytest.mark.parametrize("package_first", [True, False])
def test_a_file_reached_under_two_names_is_read_as_its_package_s_module(tmp_path, package_first):
    """A script's folder shadows its package's modules: `import util` in pkg/run.py finds pkg/util.py,
    which the package imports as `pkg.util`. Without a relative import the facts are the same, read
    once. With one (rel.py's `from .util import seed`), Python raises under the top-level name `rel`;
    lint reads it, leniently, from the package the roots give the file, in whichever order it is met."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg import util, rel\n")
    (pkg / "util.py").write_text("import torch\n\ndef seed():\n    torch.manual_seed(3)\n")
    (pkg / "rel.py").write_text("from .util import seed\n")
    imports = "import pkg\nimport util\nimport rel\n" if package_first else "import rel\nimport util\nimport pkg\n"
    (pkg / "run.py").write_text(imports + "\nutil.seed()\npkg.util.seed()\nrel.seed()\n")
    files = sorted(tmp_path.rglob("*.py"))
    project, reads = _reading_project([tmp_path], files)
    trace = project.trace(project.entry_module(pkg / "run.py"))
    # util.py is reached as `util` (from the script's folder) and as `pkg.util`: read once.
    assert {m.name for (path, _), m in project._modules.items() if path.endswith("util.py")} == {"util", "pkg.util"}
    assert len([r for r in reads if r[0] == "util.py"]) == 1
    # rel.py, as `rel` and as `pkg.rel`: read once, from its package, and both read `.util` as `pkg.util`.
    assert [r for r in reads if r[0] == "rel.py"] == [("rel.py", "pkg")]
    rel = {m.name: m.facts for (path, _), m in project._modules.items() if path.endswith("rel.py")}
    assert rel.keys() == {"rel", "pkg.rel"}
    assert rel["rel"] is rel["pkg.rel"] and rel["rel"].aliases["seed"] == "pkg.util.seed"
    assert len(_seeds(trace)) == 3


def test_a_relative_import_outside_the_roots_is_read_from_the_script_s_folder(tmp_path):
    """With no root above the package, the file has no package to read from: `.util` is `util`, beside the script."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "util.py").write_text("import torch\n\ndef seed():\n    torch.manual_seed(3)\n")
    (pkg / "rel.py").write_text("from .util import seed\n")
    (pkg / "run.py").write_text("import rel\n\nrel.seed()\n")
    files = sorted(tmp_path.rglob("*.py"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    project, reads = _reading_project([elsewhere], files)
    trace = project.trace(project.entry_module(pkg / "run.py"))
    assert [r for r in reads if r[0] == "rel.py"] == [("rel.py", "")]
    (facts,) = [m.facts for (path, _), m in project._modules.items() if path.endswith("rel.py")]
    assert facts.aliases["seed"] == "util.seed"
    assert _seeds(trace) == [("util.py", 4, 1)]


def _first_calls_from_events(trace, skip_workers: bool, also=None) -> list[str]:
    seen, out = set(), []
    for e in trace.events:
        kind = e.what.__class__
        key = (kind is Call, e.path, e.loc)
        if kind in (Call, also) and not (skip_workers and e.worker) and key not in seen:
            seen.add(key)
            out.append(repr(e))
    return out


@pytest.mark.parametrize("also", [None, Seed])
@pytest.mark.parametrize("max_events", [50_000, 300, 100, 40, 15, 7])
@pytest.mark.parametrize("seed", [1, 2])
def test_first_calls_are_the_first_place_of_each_call_among_the_events(tmp_path, monkeypatch, seed, max_events, also):
    """EntryTrace.first_calls passes over records met again; it must give what `events` gives, cut where it is."""
    monkeypatch.setattr(project_mod, "MAX_EVENTS", max_events)
    files = _package(tmp_path, 25, seed)
    (tmp_path / "loader.py").write_text(
        "import random\nimport torch\nimport pkg\nfrom torch.utils.data import DataLoader, Dataset\n\n\n"
        "class Data(Dataset):\n    def __getitem__(self, i):\n        pkg.m2.helper(i)\n        return random.random()\n\n\n"
        "torch.manual_seed(0)\nrandom.random()\nfor batch in DataLoader(Data(), num_workers=2):\n    pkg.m2.helper(1)\n"
    )
    files.append(tmp_path / "loader.py")
    project = _new_project(tmp_path, files)
    workers = seeds = 0
    for path in files:
        for skip in (False, True):
            walked = [repr(e) for e in project.trace(project.entry_module(path)).first_calls(skip, also)]
            built = project.trace(project.entry_module(path))
            assert walked == _first_calls_from_events(built, skip, also), (path, skip)
            assert [repr(e) for e in built.first_calls(skip, also)] == walked  # from the events, once built
            seeds += sum(e.what.__class__ is Seed for e in built.events)
            workers += sum(e.worker for e in built.events)
    assert workers or max_events < 50  # the DataLoader's dataset ran in workers (before any cut)
    assert seeds or max_events < 50  # the effects asked for with `also` are there to be given (before any cut)


# ---------------------------------------------------------------- recursion


def _dense(folder: Path, k: int) -> Path:
    """k functions that each call all k (themselves too), then draw from `random`: one cycle, k*k edges."""
    lines = ["import random", "import torch", ""]
    for i in range(k):
        lines += [f"def walk{i}(node):"]
        for j in range(k):
            lines += [f"    if node.kind == {j}:", f"        walk{j}(node.child)"]
        lines += ["    return random.random()", ""]
    lines += ["torch.manual_seed(0)", "walk0(object())"]
    path = folder / f"dense{k}.py"
    path.write_text("\n".join(lines) + "\n")
    return path


def _chain(folder: Path, n: int) -> Path:
    """f_i calls f_{i+1}, draws from `np.random`, then calls f_{7i mod n}: a chain with edges back."""
    lines = ["import torch", "import numpy as np", ""]
    for i in range(n):
        call_next = f"f{i + 1}(x - 1)" if i < n - 1 else "x"
        lines += [f"def f{i}(x):", f"    if x > {i}:", f"        return {call_next}", "    y = np.random.rand()"]
        lines += [f"    return f{(i * 7) % n}(x) if x < 0 else x", ""]
    # An argument lint cannot read: with a literal (3 > 0) f0's guard would be decided, and the draw after
    # its early return left out, as Python would (f0 never draws where called with 3).
    lines += ["torch.manual_seed(0)", 'f0(int("3"))']
    path = folder / f"chain{n}.py"
    path.write_text("\n".join(lines) + "\n")
    return path


def _draws(path: Path, short: str) -> list[str]:
    """The DET009 line `opscan lint` prints for each `short(` call in the file (one per function)."""
    lib, seed = ("Python", "random.seed(...)") if short.startswith("random.") else ("NumPy", "np.random.seed(...)")
    message = f"`{short}` draws from the global {lib} RNG, which this script never seeds; call `{seed}` or use a seeded generator"
    return [
        f"{path.name}:{number}:{line.index(short) + 1}: DET009 {message}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if f"{short}(" in line
    ]


def _linted(path: Path, monkeypatch, most_walks: int) -> tuple[list[str], list[str], int]:
    """The DET009 lines and the notices of linting `path`, and the bodies the linker walked; it fails
    as soon as it walks more than `most_walks` (before the fix the count grew exponentially)."""
    from tests.lint.helpers import lint_report

    count = [0]
    real = project_mod._Walker.walk

    def counting(self, prog):
        count[0] += 1
        assert count[0] <= most_walks, f"more than {most_walks} bodies walked"
        return real(self, prog)

    monkeypatch.setattr(project_mod._Walker, "walk", counting)
    try:
        report = lint_report(path)
    finally:
        monkeypatch.setattr(project_mod._Walker, "walk", real)
    found = [f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}" for f in report.sorted_findings() if f.code == "DET009"]
    return found, report.notices, count[0]


@pytest.mark.parametrize("k", [8, 10, 12])
def test_every_function_of_a_dense_cycle_is_walked_and_reported(tmp_path, monkeypatch, k):
    """Each walk_i draws: k findings. A cycle was walked once per path through it, the paths
    blew MAX_EVENTS, and walk0's own draw (after its calls) was silently left out."""
    path = _dense(tmp_path, k)
    found, notices, _ = _linted(path, monkeypatch, 4 * k)
    assert found == _draws(path, "random.random") and len(found) == k
    assert notices == []  # no safety net met


def test_every_function_of_a_chain_with_edges_back_is_reported(tmp_path, monkeypatch):
    path = _chain(tmp_path, 100)
    found, notices, _ = _linted(path, monkeypatch, 400)
    assert found == _draws(path, "np.random.rand") and len(found) == 100
    # f0 -> f1 -> ... -> f99 nests 100 calls deep: cut at MAX_DEPTH, and said so. (The edges back reach
    # the functions past the cut from higher up.)
    assert notices == [
        f"warning: the run of chain100.py nests calls and imports more than {project_mod.MAX_DEPTH} deep: "
        "lint did not follow them further, so findings there may be missing"
    ]


@pytest.mark.parametrize("make, small, large", [(_dense, 10, 20), (_chain, 20, 40)])
def test_recursion_is_walked_once_per_function_not_per_path(tmp_path, monkeypatch, make, small, large):
    """The bodies walked, and the events of the trace, grow with the functions (the calls), not the paths."""

    def cost(n: int) -> tuple[int, int]:
        folder = tmp_path / str(n)
        folder.mkdir()
        path = make(folder, n)
        _, _, walks = _linted(path, monkeypatch, 20 * n)
        project = _new_project(folder, [path])
        root = project.trace(project.entry_module(path))._root
        return walks, root.count

    (walks_small, events_small), (walks_large, events_large) = cost(small), cost(large)
    assert walks_large <= 2 * walks_small * 1.2, (walks_small, walks_large)
    assert events_large <= 2 * events_small * 1.2, (events_small, events_large)


def test_a_run_past_a_safety_net_says_so_naming_the_files(tmp_path, monkeypatch):
    """Calls and imports nested deeper than MAX_DEPTH are not followed, events past MAX_EVENTS not
    checked: a warning (on stderr, from the CLI) names the entries, never a silent cut."""
    from tests.lint.helpers import lint_report

    monkeypatch.setattr(project_mod, "MAX_EVENTS", 10)
    monkeypatch.setattr(project_mod, "MAX_DEPTH", 8)
    for n in (4, 6, 12, 14, 16, 20):
        _chain(tmp_path, n)
    assert lint_report(tmp_path).notices == [
        "warning: the runs of chain12.py, chain14.py, chain16.py and 1 more nest calls and imports more than 8 deep: "
        "lint did not follow them further, so findings there may be missing",
        "warning: the runs of chain12.py, chain14.py, chain16.py and 1 more go on past 10 calls and effects: "
        "lint did not check the rest, so findings there may be missing",
    ]
    assert lint_report(tmp_path / "chain6.py").notices == []
