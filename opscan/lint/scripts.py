"""The commands a project's packaging metadata declares: its console and GUI scripts, lint's entries too.

pip writes a script for each entry of the `console_scripts` and `gui_scripts`
groups (https://packaging.python.org/en/latest/specifications/entry-points/):
`mytrain = "mypkg.train:main"` runs `from mypkg.train import main; main()`.
Read from `[project.scripts]` and `[project.gui-scripts]` in pyproject.toml,
`[options.entry_points]` in setup.cfg and a literal `entry_points={...}` of
`setup(...)` in setup.py (read with `ast`, never run). A value that is not
`module:attr[.attr...]` with an optional `[extras]` (no colon, two colons, a
part that is no identifier) names no callable pip could write a script for,
and is passed over. A file that cannot be read is passed over too: the torch
requirement's reader (opscan.lint.target) warns about it where it matters.

`linked_scripts` gives each linted file the scripts of the project around it
(TorchTargets.project_root) whose module is that file, under the project's
root or its `src`: the linker runs such a file's top level then the function
(Project.trace), as `if __name__ == "__main__": main()` would.
"""

from __future__ import annotations

import os

from opscan._path import Path
from opscan._plain import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up; annotations are strings here
    from opscan.lint.target import TorchTargets

# The entry-point groups pip writes scripts for, with their tables in pyproject.toml's [project]; each
# reader gives (name, value, kind) with kind as ConsoleScript's.
GROUPS = {"console_scripts": "console", "gui_scripts": "GUI"}
_TABLES = {"scripts": "console", "gui-scripts": "GUI"}


class ConsoleScript(Frozen):
    """`name = "module:attr"` of a project's scripts: running `name` imports `module` and calls `attr`."""

    _fields = ("name", "module", "attr", "kind")
    __slots__ = _fields

    def __init__(self, name: str, module: str, attr: str, kind: str = "console"):
        self.name = name
        self.module = module  # dotted: "mypkg.train"
        self.attr = attr  # in the module, dotted: "main", "Cli.run"
        self.kind = kind  # for messages: "console", or "GUI" (gui_scripts, gui-scripts)


def parse_value(name: object, value: object, kind: str = "console") -> ConsoleScript | None:
    """A script's `module:attr [extras]`, as the entry-points spec reads it; None for anything else."""
    if not isinstance(name, str) or not name.strip() or not isinstance(value, str):
        return None
    value = value.strip()
    if value.endswith("]"):  # `[extras]`: which extras to install, nothing for the run
        value = value.partition("[")[0].rstrip()
    module, colon, attr = value.partition(":")
    module, attr = module.strip(), attr.strip()
    if not colon or not _dotted(module) or not _dotted(attr):
        return None
    return ConsoleScript(name.strip(), module, attr, kind)


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def declared(root: str, read: set[str]) -> tuple[ConsoleScript, ...]:
    """The scripts the packaging files in the folder `root` declare, in order; each file's path joins `read`."""
    out: list[ConsoleScript] = []
    for name, reader in (("pyproject.toml", _pyproject), ("setup.cfg", _setup_cfg), ("setup.py", _setup_py)):
        file = os.path.join(root, name)
        read.add(file)  # present or not: one made later may declare a script (opscan.lint.runcache)
        try:
            with open(file, "rb") as fh:
                raw = fh.read()
        except (OSError, ValueError):
            continue
        if b"scripts" not in raw.lower():  # every table and group of them says so: most files are not parsed
            continue
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            continue
        out += [s for s in (parse_value(*entry) for entry in reader(text, file)) if s is not None]
    return tuple(out)


def _pyproject(text: str, file: str) -> list[tuple[object, object, str]]:
    from opscan import _toml

    try:
        data = _toml.parse(text)
    except _toml.TOMLError:
        return []
    project = data.get("project")
    if not isinstance(project, dict):
        return []
    out: list[tuple[object, object, str]] = []
    for table, kind in _TABLES.items():
        entries = project.get(table)
        if isinstance(entries, dict):
            out += [(name, value, kind) for name, value in entries.items()]
    return out


def _setup_cfg(text: str, file: str) -> list[tuple[object, object, str]]:
    import configparser

    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text, source=file)
    except configparser.Error:
        return []
    out: list[tuple[object, object, str]] = []
    for group, kind in GROUPS.items():
        if parser.has_option("options.entry_points", group):
            out += _lines(parser.get("options.entry_points", group), kind)
    return out


def _setup_py(text: str, file: str) -> list[tuple[object, object, str]]:
    from opscan.lint.target import parse_setup_py, setup_keywords

    tree = parse_setup_py(text, file)
    if isinstance(tree, str):
        return []
    out: list[tuple[object, object, str]] = []
    for _, value in setup_keywords(tree, ("entry_points",)):
        if not isinstance(value, dict):
            continue
        for group, kind in GROUPS.items():
            items = value.get(group)
            for item in [items] if isinstance(items, str) else items if isinstance(items, (list, tuple)) else ():
                if isinstance(item, str):
                    out += _lines(item, kind)
    return out


def _lines(value: str, kind: str) -> list[tuple[str, str, str]]:
    """`name = value` lines (setup.cfg's dangling list, setup.py's strings), comments and blank lines dropped."""
    from opscan.lint.target import cfg_list

    out = []
    for line in cfg_list(value):
        name, eq, rest = line.partition("=")
        if eq:
            out.append((name, rest, kind))
    return out


def linked_scripts(targets: TorchTargets, files: list[Path]) -> dict[str, tuple[ConsoleScript, ...]]:
    """By linted file (resolved, as Project names modules): the scripts of its project whose module it is.

    The project is the one around the file (TorchTargets.project_root); its module is looked for under
    that project's root and its `src`, as `mypkg/train.py` or `mypkg/train/__init__.py`. A script whose
    module lies elsewhere (another project's, an installed package's) is no entry here."""
    by_folder: dict[str, list[Path]] = {}
    for path in files:  # asked once a folder: a tree's files are many to a folder (torch's, 2,352 in 324)
        by_folder.setdefault(os.path.dirname(path), []).append(path)
    by_root: dict[str, dict[str, tuple[ConsoleScript, ...]]] = {}
    out: dict[str, tuple[ConsoleScript, ...]] = {}
    for held in by_folder.values():
        root = targets.project_root(held[0])
        if root is None:
            continue
        modules = by_root.get(root)
        if modules is None:
            modules = by_root[root] = _modules_of(root, declared(root, targets.read))
        for path in held if modules else ():
            real = os.path.realpath(path)
            if real in modules:
                out[real] = modules[real]
    return out


def _modules_of(root: str, scripts: tuple[ConsoleScript, ...]) -> dict[str, tuple[ConsoleScript, ...]]:
    """The files (resolved) that could be each script's module, under `root` or its `src`."""
    out: dict[str, list[ConsoleScript]] = {}
    for script in scripts:
        parts = script.module.split(".")
        for base in (root, os.path.join(root, "src")):
            for tail in (f"{os.path.join(*parts)}.py", os.path.join(*parts, "__init__.py")):
                out.setdefault(os.path.realpath(os.path.join(base, tail)), []).append(script)
    return {path: tuple(found) for path, found in out.items()}
