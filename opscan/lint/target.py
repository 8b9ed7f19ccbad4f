"""The torch releases each linted file targets, and where that came from.

First found wins:

1. `--torch-version`, or `torch-version` in `[tool.opscan]`: a version ("2.11")
   or a specifier (">=2.4,<2.7");
2. the project's declared torch requirement, found walking up from the
   file's folder. In each folder, a lock file (`uv.lock`, `poetry.lock`,
   `pylock.toml`, `pylock.*.toml`) gives the versions it locks; else the
   declarations there, together: `pyproject.toml` (`[project]` dependencies
   and optional dependencies, `[dependency-groups]`, Poetry's
   `[tool.poetry]` dependencies and groups), `requirements*.txt` and
   `requirements/*.txt` (following `-r` and `-c`), `setup.cfg`
   (`install_requires`, `extras_require`), a literal `install_requires` /
   `extras_require` in `setup.py` (read with `ast`, never run; a name bound
   once, a subscript of one and a `+` of lists are followed),
   `environment.yml` (conda's `pytorch` and the `pip:` list), and, where
   those declare nothing, an sdist's `PKG-INFO` (`Requires-Dist`). The walk ends
   at the first folder with a torch requirement, or after the repository's
   root (a folder with `.git` or `.hg`); a `setup.py`, `setup.cfg` or
   `pyproject.toml` that declares no torch (a nested build script's, a
   tool's) does not end it;
3. the installed torch, from the metadata (`torch-*.dist-info`) of the first
   torch on `sys.path`, as `importlib.metadata.version("torch")` finds it,
   read without importing torch (nor importlib.metadata, which costs lint
   more start-up than its whole run on a file);
4. every release the rules know (rules/torch.toml).

Several requirements found together (markers, extras, alternative
requirement files) target the union of what they admit: a rule that holds
for some targeted release fires. Files that cannot be read, or a requirement
(or installed metadata) whose version cannot be read, give a warning, never
an error, for torch and the other packages alike.
Only the standard library is used: lint's install stays small.

The versions of another package a project may use are read the same way,
through the same code (`_Reader` for one package, `_Walk` for the walk,
`installed`), by PackageVersions (`TorchTargets.package`), steps 2 and 3
without the flag, else any version: the rules ask it when a fix in a
framework's idiom needs a release of that framework (frameworks.Idiom.since,
accelerate's `set_seed(deterministic=True)` from 0.29.0). Its files join
`read` and `listed`, so the run cache depends on them too.
"""

from __future__ import annotations

import os
import sys

from opscan._path import Path
from opscan.versions import Specifier, TorchRange, VersionError, parse_specifier, release_key

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up; annotations are strings here
    from typing import Any

LOCK_FILES = ("uv.lock", "poetry.lock", "pylock.toml")
# Patterns are compiled on first use (re caches them), not at import: lint imports this on every run.
# Where plain text (a name, a line) cannot match one, or str methods read it exactly as the pattern
# would, the pattern is not asked at all: each compile costs a cold lint ~0.1 ms, and the walk up
# for the torch requirement reads a project's pyproject.toml and requirements files on every run.
# `re` itself is imported only where a pattern is asked (importing it cost ~1.5 ms).
_PYLOCK = r"^pylock\.[^./\\]+\.toml$"
_REQUIREMENTS = r"(?i)^requirements.*\.(txt|in)$"
CONDA_NAMES = frozenset({"pytorch", "pytorch-gpu", "pytorch-cpu", "torch"})
ENV_IGNORE_INSTALLED = "OPSCAN_IGNORE_INSTALLED_TORCH"
# The names in a folder that can change what it declares, lowercased (a superset: see TorchTargets.listed).
DECLARING_NAMES = ("uv.lock", "poetry.lock", "pylock.", "pyproject.toml", "requirements", "setup.", "environment.", "pkg-info", ".git", ".hg")
# The files that make a folder a project's root, for the import roots of a run without a config (TorchTargets.project_root).
PROJECT_FILES = frozenset({"pyproject.toml", "setup.py", "setup.cfg"})
MAX_INCLUDE_DEPTH = 16


def normalize_name(name: str) -> str:
    """PEP 503: 'Torch', 'torch_' ... compare equal."""
    # re.sub(r"[-_.]+", "-", name): each separator a `-`, each run of them one.
    name = name.replace("_", "-").replace(".", "-")
    while "--" in name:
        name = name.replace("--", "-")
    return name.lower()


# ---------------------------------------------------------------- PEP 508 requirements


class Requirement:
    """A parsed requirement: normalized `name`, `spec` (the version specifier, "" for none), `url`, `marker`."""

    __slots__ = ("name", "spec", "url", "marker")

    def __init__(self, name: str, spec: str = "", url: str = "", marker: str = ""):
        self.name = name
        self.spec = spec
        self.url = url
        self.marker = marker

    def __repr__(self) -> str:
        return f"Requirement({self.name!r}, spec={self.spec!r}, url={self.url!r}, marker={self.marker!r})"


_REQ_NAME = r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_NAME_CHARS = _ALNUM | frozenset("._-")


def _requirement_name(text: str) -> tuple[str, int] | None:
    """What re.match(_REQ_NAME, text) reads, with str methods: (the name, where it ends), or None."""
    start = len(text) - len(text.lstrip())  # `\s*`: str.isspace's whitespace, as re's
    if start == len(text) or text[start] not in _ALNUM:
        return None
    end = start + 1
    while end < len(text) and text[end] in _NAME_CHARS:
        end += 1
    while text[end - 1] not in _ALNUM:  # the name ends on a letter or digit (the pattern backtracks so)
        end -= 1
    return text[start:end], end


def parse_requirement(text: str) -> Requirement | None:
    """`torch[extra]>=2.4,<2.7; python_version > "3.9"`, `torch (==2.4)`, `torch @ https://...`; None if not one."""
    found = _requirement_name(text)
    if found is None:
        return None
    name = normalize_name(found[0])
    rest = text[found[1] :].lstrip()
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            return None
        rest = rest[close + 1 :].lstrip()
    if rest.startswith("@"):
        import re

        url = rest[1:].strip()
        marker = ""
        cut = re.search(r"\s+;", url)  # after a URL the marker needs a space before `;` (PEP 508)
        if cut:
            url, marker = url[: cut.start()], url[cut.end() :]
        return Requirement(name, "", url.strip(), marker.strip())
    spec, _, marker = rest.partition(";")
    spec = spec.strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1].strip()
    if spec and spec[0] not in "<>=!~":
        return None  # `torch 2.4`: not a requirement
    return Requirement(name, spec, "", marker.strip())


_WHEEL = r"(?i)/(?P<name>[A-Za-z0-9_.]+)-(?P<version>\d[^-/]*)-[^/]*\.whl(?:[#?].*)?$"


def url_version(url: str, name: str = "torch") -> str | None:
    """The version a wheel URL of the package `name` names (`.../torch-2.4.1%2Bcu121-cp311-...whl`), else None."""
    import re

    m = re.search(_WHEEL, url.replace("%2B", "+").replace("%2b", "+"))
    if m and normalize_name(m.group("name")) == name:
        return m.group("version")
    return None


# ---------------------------------------------------------------- declarations


class Declaration:
    """One requirement read from a file: `text` as written, in `file` (`what`: the table or key), and
    the versions it admits (`range`: a TorchRange for torch, a Versions for another package)."""

    __slots__ = ("file", "what", "text", "range")

    def __init__(self, file: Path, what: str, text: str, range: TorchRange | Versions):
        self.file = file
        self.what = what
        self.text = text
        self.range = range


class Versions:
    """The versions of a package other than torch that a project may use, and where that came from.

    `specs` are alternatives, each a Specifier: several requirements found
    together (markers, extras, alternative requirement files) admit the union
    of what they admit, as for torch. None where any version may be used: a
    requirement without a version, one lint cannot read, or nothing that
    declares the package or has it installed.
    """

    __slots__ = ("specs", "where")

    def __init__(self, specs: tuple[Specifier, ...] | None, where: str = ""):
        self.specs = specs
        self.where = where

    def __repr__(self) -> str:
        return f"Versions({[s.text for s in self.specs] if self.specs is not None else None!r}, where={self.where!r})"

    def __str__(self) -> str:
        """As -v and --show-settings name it: '>=0.29', '==0.28.0 or >=0.30', 'any version'."""
        return " or ".join(s.text for s in self.specs) if self.specs is not None else "any version"

    def _key(self) -> tuple:
        return (tuple(s.text for s in self.specs) if self.specs is not None else None, self.where)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:  # summed up per range for -v, across worker processes too
        return hash(self._key())

    def union(self, other: Versions, where: str) -> Versions:
        if self.specs is None or other.specs is None:
            return Versions(None, where)
        return Versions(self.specs + other.specs, where)

    def at_least(self, version: str) -> bool:
        """Whether every version admitted is `version` (plain: "0.29.0") or later.

        Each alternative must have a lower bound at `version` or above: `>=`,
        `~=`, `==` (`==0.29.*` from 0.29), `===`, or `>` a version at or above it
        (`>0.28` admits 0.28.1). An upper bound or `!=` never raises one, and
        a label counts as its release (`>=0.29.0rc1` as `>=0.29.0`), as for torch.
        """
        if self.specs is None:
            return False
        wanted = tuple(int(part) for part in version.split("."))
        return all(_at_least(_lowest(spec), wanted) for spec in self.specs)

    def may_be(self, releases: tuple[str, ...]) -> bool:
        """Whether some version admitted is a patch of one of `releases` (minor releases: "1.5"); True for any version."""
        if self.specs is None:
            return True
        keys = [release_key(r) for r in releases]
        return any(spec.admits_release(key) for spec in self.specs for key in keys)


def _lowest(spec: Specifier) -> tuple[int, ...] | None:
    """The highest lower bound of a specifier's clauses, None where none has one."""
    low = None
    for clause in spec.clauses:
        if clause.op in (">=", ">", "==", "===", "~=") and (low is None or _at_least(clause.release, low)):
            low = clause.release
    return low


def _at_least(release: tuple[int, ...] | None, bound: tuple[int, ...]) -> bool:
    """release >= bound, as PEP 440 compares releases (padded with zeros); False for None."""
    if release is None:
        return False
    size = max(len(release), len(bound))
    return release + (0,) * (size - len(release)) >= bound + (0,) * (size - len(bound))


class _Reader:
    """Reads the requirements of one package (`name`, normalized; torch here, see _VersionsReader for
    the others) from one folder's files; warnings collect in `warnings`, the paths of the files read
    or looked for in `read`."""

    name = "torch"
    conda_names = CONDA_NAMES
    every = "targeting every release the rules know"  # what a version lint cannot read leaves

    def __init__(self, known: tuple[str, ...], warnings: list[str], read: set[str]):
        self.known = known
        self.warnings = warnings
        self.read = read
        self.parts = tuple(self.name.split("-"))  # each spelling of the name holds these (`pytorch_lightning`)

    def _mentions(self, raw: bytes) -> bool:
        """Whether a file can name the package: it spells the name (in any case), or has escapes a TOML key could hide it in."""
        low = raw.lower()
        return all(part.encode() in low for part in self.parts) or b"\\u" in raw or b"\\U" in raw

    def _names(self, text: str) -> bool:
        """Whether text can name the package (in any case, with any separators)."""
        low = text.lower()
        return all(part in low for part in self.parts)

    def _warn(self, message: str) -> None:
        text = f"warning: {message}"
        if text not in self.warnings:
            self.warnings.append(text)

    def _range(self, file: Path, what: str, text: str, spec: str, *, kind: str = "pip") -> Any:
        """What a requirement's version `spec` admits; any version where it names none, or where lint
        cannot read it (with a warning), for torch and the other packages alike."""
        where = _where(file, what, text)
        try:
            specs = [_as_pep440(alt, kind) for alt in _alternatives(spec, kind)]
            if specs and all(specs):  # else `torch`, `torch = "*"`: any version
                return self._admitted(specs, spec, where, where)
        except VersionError as exc:
            self._warn(f"{_shown(file)}: cannot read the {self.name} version in {text.strip()!r} ({exc}); {self.every}")
        return self._any(where)

    def installed(self, version: str, meta: str) -> Any:
        """What the installed package's metadata (`version`, in the folder `meta`) admits; any version,
        with a warning, where lint cannot read it."""
        where = f"installed {self.name} {version} ({_shown(meta)})"
        try:
            return self._admitted([version], version, where, f"the {where}")
        except VersionError:
            self._warn(f"the installed {self.name}'s version {version!r} ({_shown(meta)}) is not one lint can read; {self.every}")
            return self._any(where)

    def _admitted(self, specs: list[str], spec: str, where: str, label: str) -> TorchRange:
        """The known releases some of `specs` (alternatives, read from `spec`) admits. Raises VersionError."""
        ranges = [TorchRange.from_spec(alt, self.known, where, label=label) for alt in specs]
        out = ranges[0]
        for more in ranges[1:]:
            out = out.union(more, where, spec)
        if out.warning:  # none of them is a release the rules know
            self._warn(out.warning)
        return out

    def _any(self, where: str) -> TorchRange:
        return TorchRange.every(self.known, where)

    def pip_line(self, file: Path, what: str, text: str) -> Declaration | None:
        req = parse_requirement(text)
        if req is None or req.name != self.name:
            return None
        spec = req.spec
        if req.url:
            spec = url_version(req.url, self.name) or ""
            if not spec:
                self._warn(f"{_shown(file)}: {self.name} comes from {req.url!r}, whose version lint cannot read; {self.every}")
        r = self._range(file, what, text, spec, kind="bare" if req.url else "pip")
        return Declaration(file, what, text.strip(), r)

    # -- pyproject.toml ------------------------------------------------------

    def pyproject(self, file: Path) -> list[Declaration]:
        data = self._toml(file)
        if data is None:
            return []
        out: list[Declaration] = []
        project = data.get("project")
        if isinstance(project, dict):
            out += self._pip_list(file, "[project] dependencies", project.get("dependencies"))
            optional = project.get("optional-dependencies")
            if isinstance(optional, dict):
                for extra, items in optional.items():
                    out += self._pip_list(file, f"[project.optional-dependencies] {extra}", items)
        groups = data.get("dependency-groups")
        if isinstance(groups, dict):
            for group, items in groups.items():
                out += self._pip_list(file, f"[dependency-groups] {group}", items)
        poetry = data.get("tool", {}).get("poetry") if isinstance(data.get("tool"), dict) else None
        if isinstance(poetry, dict):
            tables = [("[tool.poetry.dependencies]", poetry.get("dependencies")), ("[tool.poetry.dev-dependencies]", poetry.get("dev-dependencies"))]
            group_tables = poetry.get("group")
            if isinstance(group_tables, dict):
                for group, table in group_tables.items():
                    if isinstance(table, dict):
                        tables.append((f"[tool.poetry.group.{group}.dependencies]", table.get("dependencies")))
            for what, table in tables:
                if isinstance(table, dict):
                    for name, value in table.items():
                        if isinstance(name, str) and normalize_name(name) == self.name:
                            out += self._poetry(file, what, value)
        return out

    def _pip_list(self, file: Path, what: str, items) -> list[Declaration]:
        if not isinstance(items, list):
            return []
        found = (self.pip_line(file, what, item) for item in items if isinstance(item, str))
        return [d for d in found if d is not None]

    def _poetry(self, file: Path, what: str, value) -> list[Declaration]:
        """`torch = "^2.4"`, `{ version = "^2.4", source = "..." }`, or a list of such tables (for torch)."""
        out = []
        for item in value if isinstance(value, list) else [value]:
            spec = item.get("version", "*") if isinstance(item, dict) else item
            if not isinstance(spec, str):
                continue
            if isinstance(item, dict) and "version" not in item:
                if any(k in item for k in ("git", "path", "url")):
                    self._warn(f"{_shown(file)}: {self.name} comes from {item!r}, whose version lint cannot read; {self.every}")
            text = f"{self.name} = {spec!r}"
            out.append(Declaration(file, what, text, self._range(file, what, text, "" if spec.strip() == "*" else spec, kind="poetry")))
        return out

    def _toml(self, file: Path) -> dict | None:
        raw = self._bytes(file)
        if raw is None or not self._mentions(raw):
            return None
        from opscan import _toml

        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._warn(f"{_shown(file)}: not read for the {self.name} requirement: {exc}")
            return None
        try:
            return _toml.parse(text)  # plain files without tomllib's start-up
        except _toml.TOMLError as exc:
            self._warn(f"{_shown(file)}: not read for the {self.name} requirement: {exc}")
            return None

    def _bytes(self, file: Path) -> bytes | None:
        self.read.add(str(file))
        try:
            return file.read_bytes()
        except OSError as exc:
            self._warn(f"{_shown(file)}: not read for the {self.name} requirement: {exc.strerror or exc}")
            return None

    def _text(self, file: Path) -> str | None:
        raw = self._bytes(file)
        if raw is None:
            return None
        try:
            if not raw.startswith(b"\xef\xbb\xbf"):
                try:  # what utf-8-sig gives without a BOM, without looking that codec up (an import)
                    return raw.decode("utf-8")
                except UnicodeDecodeError:
                    pass  # utf-8-sig says what is wrong, in its own words
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self._warn(f"{_shown(file)}: not read for the {self.name} requirement: {exc}")
            return None

    # -- requirements files ----------------------------------------------------

    def requirements(self, file: Path, seen: set[str] | None = None, depth: int = 0) -> list[Declaration]:
        """A pip requirements file, following `-r` / `-c` includes (relative to the including file)."""
        seen = set() if seen is None else seen
        key = os.path.abspath(file)
        if key in seen:
            return []
        seen.add(key)
        text = self._text(file)
        if text is None:
            return []
        out: list[Declaration] = []
        for line in _logical_lines(text):
            if line.startswith("-"):  # an include, or an option line: -e, --index-url, --hash...
                import re

                include = re.match(r"^(?:-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+|(?=\S))(\S+)", line)
                if not include:
                    continue
                target = file.parent / os.path.expandvars(include.group(1))
                if depth >= MAX_INCLUDE_DEPTH:
                    continue
                self.read.add(str(target))
                if not target.is_file():
                    self._warn(f"{_shown(file)}: included file {include.group(1)} not found")
                    continue
                out += self.requirements(target, seen, depth + 1)
                continue
            line = _without_options(line)
            found = self.pip_line(file, "", line)
            if found is not None:
                out.append(found)
        return out

    # -- setup.cfg, setup.py -----------------------------------------------------

    def setup_cfg(self, file: Path) -> list[Declaration]:
        text = self._text(file)
        if text is None or not self._names(text):
            return []
        import configparser

        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text, source=str(file))
        except configparser.Error as exc:
            self._warn(f"{_shown(file)}: not read for the {self.name} requirement: {str(exc).splitlines()[0]}")
            return []
        out: list[Declaration] = []
        if parser.has_option("options", "install_requires"):
            out += self._pip_list(file, "[options] install_requires", cfg_list(parser.get("options", "install_requires")))
        if parser.has_section("options.extras_require"):
            for extra, value in parser.items("options.extras_require"):
                out += self._pip_list(file, f"[options.extras_require] {extra}", cfg_list(value))
        return out

    def setup_py(self, file: Path) -> list[Declaration]:
        text = self._text(file)
        if text is None or not self._names(text):
            return []
        tree = parse_setup_py(text, file)
        if isinstance(tree, str):
            self._warn(f"{_shown(file)}: not read for the {self.name} requirement: {tree}")
            return []
        out: list[Declaration] = []
        for arg, value in setup_keywords(tree, ("install_requires", "extras_require")):
            if arg == "install_requires":
                out += self._pip_list(file, "setup(install_requires=...)", list(value) if isinstance(value, (list, tuple)) else None)
            elif isinstance(value, dict):
                for extra, items in value.items():
                    items = [items] if isinstance(items, str) else items
                    out += self._pip_list(file, f"setup(extras_require={{{extra!r}: ...}})", list(items) if isinstance(items, (list, tuple)) else None)
        return out

    def pkg_info(self, file: Path) -> list[Declaration]:
        """An sdist's PKG-INFO: its `Requires-Dist:` headers, the requirements setup.py computed when the
        sdist was built (the core metadata specification, packaging.python.org/specifications/core-metadata)."""
        text = self._text(file)
        if text is None or not self._names(text):
            return []
        out = []
        for line in text.splitlines():
            if not line.strip():
                break  # the headers end at the first empty line; the description follows
            key, sep, value = line.partition(":")
            if sep and key.strip().lower() == "requires-dist":
                found = self.pip_line(file, "Requires-Dist", value.strip())
                if found is not None:
                    out.append(found)
        return out

    # -- environment.yml -----------------------------------------------------------

    def environment_yml(self, file: Path) -> list[Declaration]:
        text = self._text(file)
        if text is None or not self._names(text):
            return []
        out: list[Declaration] = []
        for kind, item in conda_dependencies(text):
            if kind == "pip":
                import re

                include = re.match(r"^(?:-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+)(\S+)", item)
                if include:
                    target = file.parent / include.group(1)
                    self.read.add(str(target))
                    if target.is_file():
                        out += self.requirements(target)
                    else:
                        self._warn(f"{_shown(file)}: included file {include.group(1)} not found")
                    continue
                found = self.pip_line(file, "pip", item)
                if found is not None:
                    out.append(found)
                continue
            name, spec = conda_spec(item)
            if name in self.conda_names:
                out.append(Declaration(file, "dependencies", item, self._range(file, "dependencies", item, spec, kind="conda")))
        return out

    # -- lock files ------------------------------------------------------------------

    def lock(self, file: Path) -> list[Declaration]:
        raw = self._bytes(file)
        if raw is None or not self._mentions(raw):
            return []
        versions = _locked_versions(raw, self.name)
        if versions is None:  # not the layout the tools write: read it as TOML
            data = self._toml(file)
            if data is None:
                return []
            packages = data.get("package", data.get("packages", []))
            versions = [
                p["version"]
                for p in (packages if isinstance(packages, list) else [])
                if isinstance(p, dict) and isinstance(p.get("name"), str) and normalize_name(p["name"]) == self.name and isinstance(p.get("version"), str)
            ]
        out = []
        for version in dict.fromkeys(versions):
            text = f"{self.name} {version}"
            out.append(Declaration(file, "", text, self._range(file, "", text, version, kind="bare")))
        return out


class _VersionsReader(_Reader):
    """Reads the requirements of a package other than torch (`name`, normalized) as _Reader reads
    torch's, each as the Versions it admits: the rules know no list of that package's releases."""

    every = "taking it to admit any version"

    def __init__(self, name: str, warnings: list[str], read: set[str]):
        self.name = name
        self.conda_names = frozenset({name})
        super().__init__((), warnings, read)

    def _admitted(self, specs: list[str], spec: str, where: str, label: str) -> Versions:
        return Versions(tuple(parse_specifier(alt) for alt in specs), where)

    def _any(self, where: str) -> Versions:
        return Versions(None, where)


def _locked_versions(raw: bytes, name: str = "torch") -> list[str] | None:
    """The versions of the package `name` (normalized) a uv.lock / poetry.lock / pylock.toml locks, read
    from the layout those tools write.

    Each package is an array-of-tables entry (`[[package]]`, `[[packages]]`)
    whose keys start with `name = "..."` and `version = "..."` lines. Parsing
    a large lock file as TOML costs lint tenths of a second; this reads only the
    package's entries. None when the file does not name it in that layout.
    """
    text = "\n" + raw.decode("utf-8", "replace")
    versions: list[str] = []
    found_name = False
    # Lock files write names normalized. A literal newline, not `^` in multiline mode: ten times faster.
    import re

    for m in re.finditer(r'\nname[ \t]*=[ \t]*"' + re.escape(name) + r'"[ \t]*(?=\r?\n|$)', text):
        header = text.rfind("\n[", 0, m.start())
        header_line = text[header + 1 : text.find("\n", header + 1)].strip() if header >= 0 else ""
        if header_line not in ("[[package]]", "[[packages]]"):
            continue
        found_name = True
        end = text.find("\n[", m.end())
        block = text[m.end() : end if end >= 0 else len(text)]
        v = re.search(r'(?m)^version\s*=\s*"([^"\\]*)"[ \t\r]*$', block)
        if v:
            versions.append(v.group(1))
    return versions if found_name else None


def _without_options(line: str) -> str:
    """A requirement line without its per-requirement options (`--hash=...`)."""
    if not any(line[i - 1].isspace() for i in range(1, len(line)) if line[i] == "-"):
        return line  # no `-` after whitespace: nothing the pattern would cut
    import re

    return re.split(r"\s+--?[a-z]", line, maxsplit=1)[0]


def _without_comment(line: str) -> str:
    """re.sub(r"(^|\\s)#.*$", "", line) for one line: cut at the first `#` that starts it or follows whitespace."""
    if line.startswith("#"):
        return ""
    at = line.find("#")
    while at > 0:
        if line[at - 1].isspace():  # `\s` is str.isspace's whitespace; the cut takes that character too
            return line[: at - 1]
        at = line.find("#", at + 1)
    return line


def _logical_lines(text: str):
    """A requirements file's lines: comments dropped, `\\` continuations joined, blank ones skipped."""
    pending = ""
    for raw in text.splitlines():
        line = _without_comment(raw)
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            yield line
    if pending.strip():
        yield pending.strip()


def cfg_list(value: str) -> list[str]:
    """setup.cfg's dangling list: one requirement a line (comments dropped)."""
    import re

    return [line for line in (re.sub(r"(^|\s)#.*$", "", raw).strip() for raw in value.splitlines()) if line]


def parse_setup_py(text: str, file: Path | str):
    """A setup.py's tree (read with `ast`, never run), or why it cannot be read."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=str(file))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return str(getattr(exc, "msg", None) or exc)


def setup_keywords(tree, wanted: tuple[str, ...]) -> list[tuple[str, Any]]:
    """The keywords among `wanted` passed to each `setup(...)` call in a setup.py's tree, with their literal
    values (None for a value that is no literal), in order. A module-level name bound once to a literal
    counts as it: `REQUIRES = [...]; setup(install_requires=REQUIRES)`, as does a subscript of one
    (`requirements["install"]`) and a `+` of two lists."""
    import ast

    bound: dict[str, list] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            bound.setdefault(stmt.targets[0].id, []).append(stmt.value)

    def value_of(node, depth: int = 0):
        # Names bound once, subscripts and `+` of what those give: espnet's `requirements = {"install":
        # [...], ...}; install_requires = requirements["install"]`, and `base + ["torch"]`.
        if depth > 8:
            return None
        if isinstance(node, ast.Name) and len(bound.get(node.id, ())) == 1:
            return value_of(bound[node.id][0], depth + 1)
        if isinstance(node, ast.Subscript):
            container, key = value_of(node.value, depth + 1), value_of(node.slice, depth + 1)
            try:
                return container[key] if isinstance(container, (dict, list, tuple)) and key is not None else None
            except (KeyError, IndexError, TypeError):
                return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = value_of(node.left, depth + 1), value_of(node.right, depth + 1)
            both_lists = isinstance(left, (list, tuple)) and isinstance(right, (list, tuple))
            return [*left, *right] if both_lists else None
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None

    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name != "setup":
            continue
        out += [(kw.arg, value_of(kw.value)) for kw in node.keywords if kw.arg in wanted]
    return out


def conda_dependencies(text: str) -> list[tuple[str, str]]:
    """The items of `environment.yml`'s top-level `dependencies:` list, as ("conda", spec) or ("pip", requirement).

    A line reader for the layout conda writes and people write by hand: block
    lists (`  - pytorch=2.4`), a nested `- pip:` list, flow lists (`[a, b]`),
    quotes and comments. It needs no YAML library.
    """
    out: list[tuple[str, str]] = []
    in_deps = False
    item_indent = None
    pip_indent = None  # the indent of the `- pip:` item while its sub-list is read
    import re

    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        if indent == 0 and not body.startswith("-"):
            key, _, rest = body.partition(":")
            in_deps = key.strip().strip("'\"") == "dependencies"
            item_indent = pip_indent = None
            if in_deps and rest.strip().startswith("["):
                out += [("conda", _unquote(x)) for x in rest.strip()[1:].rstrip("]").split(",") if x.strip()]
                in_deps = False
            continue
        if not in_deps or not body.startswith("-"):
            continue
        item = body[1:].strip()
        if pip_indent is not None and indent > pip_indent:
            if item:
                out.append(("pip", _unquote(item)))
            continue
        pip_indent = None
        if item_indent is None:
            item_indent = indent
        m = re.match(r"^['\"]?pip['\"]?\s*:\s*(.*)$", item)
        if m:
            pip_indent = indent
            rest = m.group(1).strip()
            if rest.startswith("["):
                out += [("pip", _unquote(x)) for x in rest[1:].rstrip("]").split(",") if x.strip()]
                pip_indent = None
            continue
        if item:
            out.append(("conda", _unquote(item)))
    return out


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].strip()
    return text


def conda_spec(item: str) -> tuple[str, str]:
    """A conda match spec, `channel::pytorch=2.4=build`, `pytorch>=2.4,<2.7`, `pytorch 2.4.*`,
    `pytorch[version='>=2.4']` -> (name, version spec in conda's syntax, "" for none)."""
    item = item.split("::", 1)[-1].strip()
    import re

    m = re.match(r"^([A-Za-z0-9_.-]+)\s*(.*)$", item)
    if not m:
        return "", ""
    name, rest = m.group(1).lower(), m.group(2).strip()
    if rest.startswith("["):
        v = re.search(r"version\s*=\s*['\"]?([^'\",\]]+(?:,[^'\"\]]+)*)['\"]?", rest)
        return name, v.group(1).strip() if v else ""
    if rest.startswith("=") and not rest.startswith("=="):
        rest = rest[1:].split("=", 1)[0]  # `=2.4` (fuzzy) or `=2.4.0=build`
        return name, rest.strip() and f"={rest.strip()}"
    rest = rest.split()[0] if rest and rest[0] not in "<>=!~" and " " in rest else rest  # `pytorch 2.4.* build`
    return name, rest.strip()


def _alternatives(spec: str, kind: str) -> list[str]:
    """A constraint with alternatives (`^2.4 || ^3.0`, conda's `2.4|2.5`) as its alternatives."""
    if kind == "poetry":
        return [s for s in (p.strip() for p in spec.split("||")) if s]
    if kind == "conda":
        return [s for s in (p.strip() for p in spec.split("|")) if s]
    return [spec]


def _as_pep440(spec: str, kind: str) -> str:
    """A Poetry or conda constraint as a PEP 440 specifier; a pip one as it is."""
    spec = spec.strip()
    if kind in ("bare", "pip"):
        return spec
    import re

    clauses = [c for c in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", spec) if c]
    out = []
    for clause in clauses:
        m = re.match(r"^(\^|~=|~|==|=|!=|<=|>=|<|>)?\s*(\S+)$", clause)
        if not m:
            raise VersionError(f"bad version clause {clause!r} in {spec!r}")
        op, version = m.group(1) or "", m.group(2)
        if version == "*":
            continue
        if version.endswith("*") and not version.endswith(".*"):  # conda's `2.4*`
            version = version[:-1].rstrip(".") + ".*"
        parts = version.split(".")
        numeric = [p for p in parts if p.isdigit()]
        if op == "^":
            if not numeric:
                raise VersionError(f"bad version clause {clause!r} in {spec!r}")
            nums = [int(p) for p in numeric]
            first = next((i for i, n in enumerate(nums) if n != 0), len(nums) - 1)
            upper = nums[: first + 1]
            upper[-1] += 1
            out += [f">={version}", "<" + ".".join(map(str, upper))]
        elif op == "~" and kind == "poetry":
            nums = [int(p) for p in numeric] or [0]
            upper = nums[:2] if len(nums) >= 2 else nums[:1]
            upper[-1] += 1
            out += [f">={version}", "<" + ".".join(map(str, upper))]
        elif op in ("", "=") and kind == "conda":  # conda's `=2.4` and `pytorch 2.4` are fuzzy: any 2.4.x
            out.append(f"=={version}" if version.endswith(".*") else f"=={version}.*")
        elif op == "":
            out.append(f"=={version}")
        else:
            out.append(f"{op}{version}")
    return ",".join(out) if out else ""


def _where(file: Path, what: str, text: str) -> str:
    return f"{_shown(file)}{' ' + what if what else ''}: {text.strip()}"


def _shown(path: Path | str) -> str:
    """A path as lint prints it: relative to the working directory when below it."""
    rel = os.path.relpath(path)
    return Path(path).as_posix() if rel.startswith("..") else Path(rel).as_posix()


# ---------------------------------------------------------------- the installed torch (or another package)


def installed_env(name: str) -> str:
    """The variable that, set to 1, keeps lint from reading the installed `name`: OPSCAN_IGNORE_INSTALLED_TORCH, ..."""
    return "OPSCAN_IGNORE_INSTALLED_" + name.upper().replace("-", "_")


def installed_torch(path: list[str] | None = None, listed: set | None = None, read: set[str] | None = None) -> tuple[str, str] | None:
    """(version, metadata folder) of the torch `importlib.metadata.version("torch")` would report, or None (see installed)."""
    return installed("torch", path, listed, read)


def installed(name: str, path: list[str] | None = None, listed: set | None = None, read: set[str] | None = None) -> tuple[str, str] | None:
    """(version, metadata folder) of the package `importlib.metadata.version(name)` would report, or None.

    `name` is normalized (PEP 503). The same search as importlib.metadata's
    path finder: each `sys.path` folder in order, the first
    `NAME-*.dist-info` or `NAME*.egg-info` in it (its name normalized as PEP
    503 does), its `Version:` header. `listed`, if given, gets the folders
    listed (with the prefix of the names that matter, see TorchTargets.listed),
    `read` the metadata files read.
    """
    prefix = (name.partition("-")[0],)  # `pytorch_lightning-2.5.0.dist-info`, `pytorch-lightning...`: any spelling
    for entry in sys.path if path is None else path:
        folder = entry or "."
        if listed is not None:
            listed.add((os.path.abspath(folder), prefix))
        try:
            names = os.listdir(folder)
        except (OSError, ValueError):  # a zip file, a folder that is gone
            continue
        for entry_name in names:
            low = entry_name.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            project = low.rpartition(".")[0].partition("-")[0]
            if normalize_name(project) != name:  # re.sub(r"[-_.]+", "_", project) != name, as importlib.metadata asks
                continue
            meta = os.path.join(folder, entry_name)
            if os.path.isdir(meta):
                meta = os.path.join(meta, "METADATA" if low.endswith(".dist-info") else "PKG-INFO")
            if read is not None:
                read.add(os.path.abspath(meta))
            version = _metadata_version(meta)
            if version:
                return version, os.path.join(folder, entry_name)
    return None


def _metadata_version(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(64 * 1024)
    except OSError:
        return None
    for line in head.decode("utf-8", "replace").splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        if line.lower().startswith("version:"):
            return line.split(":", 1)[1].strip() or None
    return None


# ---------------------------------------------------------------- per file


class _Walk:
    """The requirements of one package declared for the files of a folder, found walking up from it
    (module docstring, 2.), resolved once per folder, through `_reader`; TorchTargets' for torch,
    PackageVersions' for another package. `read` and `listed` are as TorchTargets says."""

    def __init__(self, reader: _Reader, read: set[str], listed: set[tuple[str, tuple[str, ...]]], stop_at: Path | None):
        self.read = read
        self.listed = listed
        self.stop_at = Path(os.path.abspath(stop_at)) if stop_at is not None else None
        self._reader = reader
        self._folders: dict[str, tuple[Any, str] | None] = {}  # folder -> (versions, the folder they were declared in)
        # Folder -> (it holds one of PROJECT_FILES, it ends the walk): what its listing told, kept for project_root.
        self._marks: dict[str, tuple[bool, bool]] = {}
        self._fallback: Any = None
        self.used: dict[tuple[Any, str], set[str]] = {}  # (versions, project folder or "") -> the files given them

    def _note(self, path: Path | str, found: tuple[Any, str]) -> Any:
        """`found`'s versions, noted as given to the file `path` (for summary)."""
        key = (found[0], found[1])
        files = self.used.get(key)
        if files is None:
            files = self.used[key] = set()
        files.add(str(path))
        return found[0]

    def summary(self) -> list[tuple[Any, str, int]]:
        """(versions, the folder that declared them or "", how many files) for every range given so far."""
        return [(r, folder, len(files)) for (r, folder), files in self.used.items()]

    def fallback(self) -> Any:
        """Where the project declares nothing: the installed package's version (unless `installed` is
        False), else what `_undeclared` gives."""
        if self._fallback is None:
            found = installed(self._reader.name, listed=self.listed, read=self.read) if self.installed else None
            self._fallback = self._reader.installed(*found) if found is not None else self._undeclared()
        return self._fallback

    def _undeclared(self) -> Any:
        raise NotImplementedError

    def _union(self, declarations: list[Declaration]) -> Any:
        raise NotImplementedError

    def _folder(self, folder: str) -> tuple[Any, str] | None:
        """The declared versions for files in `folder`, walking up, and the folder that declared them; None where the project declares none."""
        chain: list[str] = []
        found = None
        current = folder
        while True:
            if current in self._folders:
                found = self._folders[current]
                break
            chain.append(current)
            declared, boundary = self._declared_in(current)
            if declared is not None:
                found = (declared, current)
                break
            parent = os.path.dirname(current)
            if boundary or parent == current or (self.stop_at is not None and current == str(self.stop_at)):
                found = None
                break
            current = parent
        for seen in chain:
            self._folders[seen] = found
        return found

    def _declared_in(self, folder: str) -> tuple[Any, bool]:
        """The union of the package's requirements declared by one folder's files, and whether it ends the walk."""
        self.listed.add((folder, DECLARING_NAMES))
        try:
            names = os.listdir(folder)
        except (OSError, ValueError):
            return None, False
        present = set(names)
        base = Path(folder)
        # What each name is (a file, a folder) matters too; .git and .hg only by their presence.
        self.read.update(str(base / n) for n in names if n.lower().startswith(DECLARING_NAMES[:-2]))
        reader = self._reader
        declarations: list[Declaration] = []
        for name in [*LOCK_FILES, *sorted(n for n in names if n.startswith("pylock.") and _pylock_name(n))]:
            if name in present and os.path.isfile(base / name):
                declarations += reader.lock(base / name)
        if not declarations:
            if "pyproject.toml" in present:
                declarations += reader.pyproject(base / "pyproject.toml")
            requirement_files = sorted(n for n in names if n[:12].lower() == "requirements" and _requirements_name(n) and os.path.isfile(base / n))
            if "requirements" in present and os.path.isdir(base / "requirements"):
                self.read.add(str(base / "requirements"))
                try:
                    requirement_files += sorted(
                        f"requirements/{n}" for n in os.listdir(base / "requirements") if n.endswith((".txt", ".in")) and os.path.isfile(base / "requirements" / n)
                    )
                except OSError:
                    pass
            seen: set[str] = set()
            for name in requirement_files:
                declarations += reader.requirements(base / name, seen)
            if "setup.cfg" in present:
                declarations += reader.setup_cfg(base / "setup.cfg")
            if "setup.py" in present:
                declarations += reader.setup_py(base / "setup.py")
            for name in ("environment.yml", "environment.yaml"):
                if name in present:
                    declarations += reader.environment_yml(base / name)
            if not declarations and "PKG-INFO" in present:
                # An unpacked sdist whose setup.py computes its requirements: what that gave when it was built.
                declarations += reader.pkg_info(base / "PKG-INFO")
        # Only a repository's root ends the walk. A project file here that declares nothing of the
        # package (a Cython build script's setup.py, a tool's own pyproject.toml inside a project)
        # does not: the project around it may declare it, as a nested requirements.txt never stopped it.
        boundary = bool(present & {".git", ".hg"})
        self._marks[folder] = (not present.isdisjoint(PROJECT_FILES), boundary)  # for TorchTargets.project_root
        if not declarations:
            return None, boundary
        return self._union(declarations), boundary


class TorchTargets(_Walk):
    """The torch range each linted file targets (see the module docstring), resolved once per folder.

    `configured` is `--torch-version` or `torch-version` from the config,
    `configured_from` says which; `installed` False skips the installed torch
    (as does OPSCAN_IGNORE_INSTALLED_TORCH=1); `stop_at` ends the walk up
    after that folder. `warnings` collects, once each, what could not be read;
    `read` gets every file read or looked for, `listed` every folder whose
    listing was read, as (folder, prefixes): only the names that start with
    one of the prefixes (lowercased) matter (opscan.lint.runcache).
    `package(name)` gives the versions of another package, read the same way.
    """

    def __init__(
        self,
        known: tuple[str, ...],
        configured: str | None = None,
        configured_from: str = "--torch-version",
        *,
        installed: bool = True,
        stop_at: Path | None = None,
    ):
        self.known = tuple(known)
        self.warnings: list[str] = []
        read: set[str] = set()
        super().__init__(_Reader(self.known, self.warnings, read), read, set(), stop_at)
        self.installed = installed and os.environ.get(ENV_IGNORE_INSTALLED, "") in ("", "0")
        self._installed_others = installed  # for package(): each has its own variable
        self._packages: dict[str, PackageVersions] = {}
        self._projects: dict[str, str | None] = {}  # folder -> the root of its project, or None (project_root)
        self.projects: dict[str, None] = {}  # the project roots given to files so far, as an ordered set
        self.fixed: TorchRange | None = None  # the configured range, which every file gets
        if configured is not None:
            self.fixed = TorchRange.from_spec(configured, self.known, configured_from, label=f"torch {configured} (from {configured_from})")
            if self.fixed.warning:
                self.warnings.append(f"warning: {self.fixed.warning}")

    def for_file(self, path: Path | str) -> TorchRange:
        return self._note(path, self._lookup(path))

    def _lookup(self, path: Path | str) -> tuple[TorchRange, str]:
        if self.fixed is not None:
            return self.fixed, ""
        folder = os.path.dirname(os.path.abspath(path))
        found = self._folder(folder)
        return found if found is not None else (self.fallback(), "")

    def project_root(self, path: Path | str) -> str | None:
        """The root of the project that holds the file `path`: the nearest folder up from the file's
        with a pyproject.toml, setup.py or setup.cfg, looked for as far as the walk for the torch
        requirement may go (the repository's root, `stop_at`); None outside any project.

        Read from the listings that walk took (lint asks after for_file), each folder listed once
        for both and its answer kept for every folder on the way: the files of a folder cost one
        lookup. The project roots found so far are in `projects`, in the order first found.
        """
        folder = os.path.dirname(os.path.abspath(path))
        projects = self._projects
        if folder in projects:
            return projects[folder]
        chain = []
        found = None
        current = folder
        while True:
            if current in projects:
                found = projects[current]
                break
            chain.append(current)
            marks = self._marks.get(current)
            if marks is None:  # a folder the torch walk did not list (a configured torch, or past its end)
                self.listed.add((current, DECLARING_NAMES))  # the run cache: a pyproject.toml added here moves the root
                try:
                    present = set(os.listdir(current))
                except (OSError, ValueError):
                    present = set()
                marks = self._marks[current] = (not present.isdisjoint(PROJECT_FILES), bool(present & {".git", ".hg"}))  # as _declared_in's
            if marks[0]:
                found = current
                break
            parent = os.path.dirname(current)
            if marks[1] or parent == current or (self.stop_at is not None and current == str(self.stop_at)):
                found = None
                break
            current = parent
        for seen in chain:
            projects[seen] = found
        if found is not None:
            self.projects.setdefault(found, None)
        return found

    def _undeclared(self) -> TorchRange:
        return TorchRange.every(self.known)  # nothing declared, none installed

    def _union(self, declarations: list[Declaration]) -> TorchRange:
        return _union(declarations)

    def package(self, name: str) -> PackageVersions:
        """The versions of the package `name` (normalized) that each file's project may use, read as
        torch's are (nothing configures them) when first asked, into the same `read` and `listed`."""
        found = self._packages.get(name)
        if found is None:
            found = self._packages[name] = PackageVersions(
                name, installed=self._installed_others, stop_at=self.stop_at, read=self.read, listed=self.listed, warnings=self.warnings
            )
        return found

    def packages(self) -> dict[str, PackageVersions]:
        """The packages asked about so far, by name, in name order."""
        return dict(sorted(self._packages.items()))

    def packages_used(self) -> tuple[dict[str, dict[tuple[Versions, str], set[str]]], list[str]]:
        """What `package()` gave which files, and the warnings, to send from a worker process to adopt_packages."""
        return {name: found.used for name, found in self._packages.items()}, self.warnings

    def adopt_packages(self, state: tuple[dict[str, dict[tuple[Versions, str], set[str]]], list[str]]) -> None:
        """Take in what `package()` gave in a worker process, and what it could not read (packages_used)."""
        used, warnings = state
        for name, given in used.items():
            mine = self.package(name).used
            for key, files in given.items():
                mine.setdefault(key, set()).update(files)
        self.warnings += [w for w in warnings if w not in self.warnings]


class PackageVersions(_Walk):
    """The versions of one package other than torch (`name`, normalized) each linted file's project may use.

    Found as torch's are: the project's requirement files and lock files,
    walking up from the file's folder (module docstring, 2.), else the
    installed package's metadata (unless `installed` is False or
    OPSCAN_IGNORE_INSTALLED_<NAME>=1, e.g. OPSCAN_IGNORE_INSTALLED_ACCELERATE),
    else any version. A rule asks only for a file whose run calls the
    package's helper, so most runs read nothing more. What cannot be read
    admits any version, with a warning in `warnings`, worded as torch's are;
    TorchTargets.package shares its own list, which lint shows.
    """

    def __init__(
        self,
        name: str,
        *,
        installed: bool = True,
        stop_at: Path | None = None,
        read: set[str] | None = None,
        listed: set[tuple[str, tuple[str, ...]]] | None = None,
        warnings: list[str] | None = None,
    ):
        self.name = name
        self.warnings: list[str] = [] if warnings is None else warnings
        read = set() if read is None else read
        super().__init__(_VersionsReader(name, self.warnings, read), read, set() if listed is None else listed, stop_at)
        self.installed = installed and os.environ.get(installed_env(name), "") in ("", "0")

    def declared_for(self, path: Path | str) -> bool:
        """Whether the project of the file `path` declares the package (a requirement or lock file names it)."""
        return self._folder(os.path.dirname(os.path.abspath(path))) is not None

    def for_file(self, path: Path | str) -> Versions:
        found = self._folder(os.path.dirname(os.path.abspath(path)))
        return self._note(path, found if found is not None else (self.fallback(), ""))

    def _union(self, declarations: list[Declaration]) -> Versions:
        wheres = [d.range.where for d in declarations]
        where = "; ".join(wheres[:3]) + (f"; and {len(wheres) - 3} more" if len(wheres) > 3 else "")
        out = declarations[0].range
        for d in declarations[1:]:
            out = out.union(d.range, where)
        return out

    def _undeclared(self) -> Versions:
        return Versions(None, f"no {self.name} declared or installed")


def _union(declarations: list[Declaration]) -> TorchRange:
    wheres = [d.range.where for d in declarations]
    where = "; ".join(wheres[:3]) + (f"; and {len(wheres) - 3} more" if len(wheres) > 3 else "")
    spec = " or ".join(d.range.spec or "any" for d in declarations)
    out = declarations[0].range
    for d in declarations[1:]:
        out = out.union(d.range, where, spec)
    return TorchRange(out.releases, out.known, where, spec, out.warning) if len(declarations) > 1 else out


def _pylock_name(name: str) -> bool:
    import re

    return bool(re.match(_PYLOCK, name))


def _requirements_name(name: str) -> bool:
    """Whether _REQUIREMENTS matches a name that starts with "requirements" in any case."""
    if name.isascii() and "\n" not in name:  # re.I folds some non-ASCII letters onto ASCII ones, `$` allows a final newline
        return name.lower().endswith((".txt", ".in"))
    import re

    return bool(re.match(_REQUIREMENTS, name))
