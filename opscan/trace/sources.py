"""Which code a record ran: a digest of each of the project's Python files the run had loaded.

`opscan compare` reads two records' `sources` to tell what a structural
difference means. Equal sources: the same code took another path (a set's
order, an unseeded draw, the time). A file whose digest differs: the code
changed. Without this, compare could only guess, and it guessed "the code
differs" for two runs of one unchanged script.

The project is the folder of the target's file (the script, or FILE.py of
FILE.py:CALLABLE) and the working directory; a file of Python's own (under
its prefixes: the standard library, a virtual environment inside the
project) or of an installed package (`site-packages`, `dist-packages`) is not
the project's, nor is opscan's. Keys are paths
relative to the target's folder, so that two records of one script made from
different working directories still name a file alike.
"""

from __future__ import annotations

import os
import sys

from opscan._hash import digest

__all__ = ["in_installed_package", "module_file", "project_files", "project_sources", "target_file"]

_INSTALLED = ("site-packages", "dist-packages")
_OPSCAN = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # opscan's own package: never the user's code
MAX_FILES = 2000  # a project folder that holds a whole library checkout: digest the first this many, in name order


def target_file(spec: str, kind: str) -> str | None:
    """The file a target names: the script of --run, FILE.py of FILE.py:CALLABLE; None for a module or a model zoo name."""
    from opscan.trace.spec import names_a_file

    if kind == "script":
        return spec
    if kind == "callable":
        where = spec.rpartition(":")[0]
        return where if names_a_file(where) else None
    return None


def module_file(spec: str, kind: str, modules=None) -> str | None:
    """The real path of the file MODULE of a MODULE:CALLABLE target was imported from (`modules`: sys.modules);
    None for any other target, or a module not loaded or loaded from no file."""
    from opscan.trace.spec import names_a_file

    where = spec.rpartition(":")[0]
    if kind != "callable" or names_a_file(where):
        return None
    name = getattr((sys.modules if modules is None else modules).get(where), "__file__", None)
    return os.path.realpath(name) if isinstance(name, str) else None


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f + os.sep) for f in folders)


def in_installed_package(path: str) -> bool:
    """Whether a file lies in an installed package's folder (site-packages, dist-packages)."""
    return any(part in _INSTALLED for part in path.split(os.sep))


def _not_project(folders: tuple[str, ...]) -> tuple[str, ...]:
    """Folders inside the project's whose files are Python's or opscan's: a virtual environment in the project, a
    conda install in the home folder a script runs from. A prefix that holds the project (a system Python's /usr
    over /usr/src/app) does not count: its modules outside the project are not in it anyway."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix) if p}
    return (_OPSCAN, *sorted(p for p in prefixes if not any(_under(f, (p,)) for f in folders)))


def project_files(target: str | None, cwd: str, modules=None) -> list[str]:
    """The real paths of the target's file and of every loaded module file of the project, sorted.

    `target` and `cwd` are real paths taken before the run (a script may chdir).
    `modules` defaults to sys.modules. What the record's `sources` digest, and what
    `-o` must not replace once the run has loaded it (a module the script imports).
    """
    modules = sys.modules if modules is None else modules
    base = os.path.dirname(target) if target else cwd
    folders = tuple(dict.fromkeys((base, cwd)))
    files = {target} if target else set()
    outside = _not_project(folders)
    for module in list(modules.values()):
        name = getattr(module, "__file__", None)
        if not isinstance(name, str) or not name.endswith(".py") or in_installed_package(name):
            continue  # the installed test first, on the name as loaded: realpath is most of this loop's time
        path = os.path.realpath(name)
        if _under(path, folders) and not _under(path, outside) and not in_installed_package(path):
            files.add(path)
    return sorted(files)


def project_sources(target: str | None, cwd: str, modules=None) -> dict[str, str]:
    """{path relative to the target's folder: digest} for the target's file and every loaded module file of the project.

    As project_files. A file that cannot be read is left out: its absence makes
    compare claim neither "same code" nor "changed" for it.
    """
    base = os.path.dirname(target) if target else cwd
    out = {}
    for path in project_files(target, cwd, modules)[:MAX_FILES]:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        out[os.path.relpath(path, base).replace(os.sep, "/")] = digest(data)
    return dict(sorted(out.items()))
