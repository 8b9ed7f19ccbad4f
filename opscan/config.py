"""`[tool.opscan]` in pyproject.toml, found by walking up from the paths given, merged with flags.

Common keys, in `[tool.opscan]`:
  torch-version                   the torch release, or a specifier (">=2.4,<2.7"), lint targets (report takes --torch-version only)
                                  (default: from the project's requirements, else the installed torch)

Per-command sections, as ruff has `[tool.ruff.lint]`:
  [tool.opscan.lint]
    select, ignore, extend-select   rule codes or prefixes ("DET", "DET00", "ALL")
    per-file-ignores                {glob = [codes]}
    exclude, extend-exclude         globs of paths not to discover
    torch-version                   overrides the common key for lint
    roots                           folders, besides the root, in which project imports resolve (default: ["src"]; without
                                    a config file, also each linted file's project root and its "src")
  [tool.opscan.scan]
    device, max-steps, input-shape  defaults for the flags of the same names (record reads them too)
  [tool.opscan.bench]
    device, input-shape, rounds, warmup   defaults for the flags of the same names

Lint's keys may also stand directly in `[tool.opscan]` (the first spelling);
where a key is in both, `[tool.opscan.lint]` wins. Flags win over both.
"""

from __future__ import annotations

import errno
import os
from stat import S_ISREG

from opscan._path import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up; annotations are strings here
    from collections.abc import Iterable

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".mypy_cache", ".nox", ".pants.d", ".pytype",
    ".ruff_cache", ".opscan_cache", ".svn", ".tox", ".venv", "__pypackages__", "_build", "buck-out", "build",
    "dist", "node_modules", "site-packages", "venv",
)  # fmt: skip

COMMON_KEYS = {"torch-version"}
LINT_KEYS = {"select", "ignore", "extend-select", "per-file-ignores", "exclude", "extend-exclude", "torch-version", "roots"}
SECTION_KEYS = {
    "lint": LINT_KEYS,
    "scan": {"device", "max-steps", "input-shape"},
    "bench": {"device", "input-shape", "rounds", "warmup"},
}
KNOWN_KEYS = LINT_KEYS  # lint's keys as they are spelled directly in [tool.opscan]


class ScanSettings:
    """`[tool.opscan.scan]`: defaults for scan's flags; None where the file says nothing."""

    __slots__ = ("device", "max_steps", "input_shape", "device_from")

    def __init__(self, device: str | None = None, max_steps: int | None = None, input_shape: tuple[int, ...] | None = None):
        self.device = device
        self.max_steps = max_steps
        self.input_shape = input_shape
        self.device_from: str | None = None  # "FILE: [tool.opscan.scan] device", for a message about a bad value


class BenchSettings:
    """`[tool.opscan.bench]`: defaults for bench's flags; None where the file says nothing."""

    __slots__ = ("device", "input_shape", "rounds", "warmup", "device_from")

    def __init__(self, device: str | None = None, input_shape: tuple[int, ...] | None = None, rounds: int | None = None, warmup: int | None = None):
        self.device = device
        self.input_shape = input_shape
        self.rounds = rounds
        self.warmup = warmup
        self.device_from: str | None = None  # "FILE: [tool.opscan.bench] device", for a message about a bad value


# The most elements an --input-shape may make (8 GiB of float32): a dimension past int64 overflowed inside
# torch.randn, blamed on the target, and a product past memory failed there as an allocation error.
SHAPE_MAX_ELEMENTS = 2**31


def shape_problem(dims: list[int] | tuple[int, ...]) -> str | None:
    """Why a zoo target's input could not be made with this shape, or None: every dimension positive, the product bounded."""
    if not dims or any(d <= 0 for d in dims):
        return "every dimension must be a positive integer"
    product = 1
    for d in dims:
        product *= d
        if product > SHAPE_MAX_ELEMENTS:  # stops before a product of many huge parts is computed
            return f"that is more than {SHAPE_MAX_ELEMENTS} (2**31) elements, 8 GiB of float32, the most an input shape may hold"
    return None


class ConfigError(ValueError):
    """Bad configuration or flags: exit 2 with this message."""


def resolve(path: Path) -> Path:
    """`path.resolve()`, or the absolute path where that fails (a symlink loop raises on Python <= 3.12)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(path))


class _DefaultSelect(list):
    """The selection nobody chose: every rule but the opt-in ones (DET010, like ruff's RUF100)."""


class Config:
    """The settings lint runs with: defaults, then `[tool.opscan]`, then flags."""

    def __init__(self, *, root: Path | None = None, source: Path | None = None):
        self.select: list[str] = _DefaultSelect(["ALL"])
        self.extend_select: list[str] = []
        self.ignore: list[str] = []
        self.per_file_ignores: dict[str, list[str]] = {}
        self.exclude: list[str] = list(DEFAULT_EXCLUDE)
        self.extend_exclude: list[str] = []
        self.torch_version: str | None = None
        self.torch_version_from: str | None = None  # what set torch_version: "--torch-version", or the file and table
        self.roots: list[Path] = []
        self.roots_configured = False  # `roots` given: it replaces the default ["src"]
        self.scan = ScanSettings()
        self.bench = BenchSettings()
        self.root = Path.cwd() if root is None else root  # folder of the pyproject.toml, or the working directory
        self.source = source  # the pyproject.toml read, if any
        self.warnings: list[str] = []  # values that load but look wrong ("warning: ..." lines)

    def __repr__(self) -> str:
        return f"Config(root={self.root!r}, source={self.source!r})"

    def import_roots(self, projects: Iterable[str] = ()) -> list[Path]:
        """Where project imports resolve, as ruff's `src`: the root, then `roots` (default: the root's `src`).

        Without a config file, then each of `projects` (the roots of the linted files' projects,
        TorchTargets.project_root) and its `src`, so that a project linted from another folder
        resolves what it does when linted from its own. Ruff's default `src` is the "project
        root" and its `src`, the project root being the folder of the config file in use, the
        working directory without one (https://docs.astral.sh/ruff/settings/#src): the
        working directory stays first, so that what resolved there still resolves to the same
        file. A config file's roots are its own: `projects` add nothing to them.
        """
        extra = self.roots if self.roots_configured else [self.root / "src"]
        found = [self.root, *extra]
        if self.source is None:
            for project in projects:
                real = resolve(Path(project))  # as the working directory is: linted from its own folder, a project is one root
                found += [real, real / "src"]
        return list(dict.fromkeys(found))

    def enabled_codes(self, universe: list[str], opt_in: frozenset[str] = frozenset()) -> set[str]:
        """The codes selected; `opt_in` codes only when a selection names them (the default leaves them out)."""
        from opscan.codes import expand_selectors

        extended = expand_selectors(self.extend_select, universe)
        chosen = expand_selectors(self.select, universe) | extended
        if isinstance(self.select, _DefaultSelect):
            chosen -= opt_in - extended
        return chosen - expand_selectors(self.ignore, universe)

    def validate(self, universe: list[str]) -> None:
        from opscan.codes import UnknownCodeError, expand_selectors

        try:
            self.enabled_codes(universe)
            for pattern, codes in self.per_file_ignores.items():
                expand_selectors(codes, universe)
        except UnknownCodeError as exc:
            where = f" in {self.source}" if self.source else ""
            raise ConfigError(f"{exc}{where}") from None
        if self.torch_version is not None:
            from opscan.versions import VersionError, parse_specifier

            try:
                parse_specifier(self.torch_version)
            except VersionError as exc:
                where = self.torch_version_from or (f"{self.source}: torch-version" if self.source else "torch-version")
                raise ConfigError(
                    f"{where} {self.torch_version!r} is not a torch version or specifier like \"2.14\" or \">=2.4,<2.7\" ({exc})"
                ) from None

    def relpath(self, path: Path, resolved: str | None = None) -> str:
        """`path` relative to the root, both resolved; `resolved`: the path already resolved (discovery has it)."""
        cached = self.__dict__.get("_resolved_root")  # asked once per file and per finding
        if cached is None or cached[0] != self.root:
            real = resolve(self.root)
            text = str(real)
            cached = self.__dict__["_resolved_root"] = (self.root, real, text if text.endswith(os.sep) else text + os.sep)
        if resolved is not None and os.sep == "/":  # normalised absolute paths: a prefix test is relative_to's answer
            if resolved.startswith(cached[2]):
                return resolved[len(cached[2]) :]
            return "." if resolved == str(cached[1]) else path.as_posix()
        try:
            return (Path(resolved) if resolved is not None else resolve(path)).relative_to(cached[1]).as_posix()
        except ValueError:
            return path.as_posix()

    def is_excluded(self, path: Path, resolved: str | None = None) -> bool:
        """A pattern matches the path relative to the root (or a folder above it), or, without a `/`, any one part."""
        names, prefixes, parts, whole, part = self._exclude_matchers()
        rel = self.relpath(path, resolved)
        if rel in names or rel.startswith(prefixes) or (parts and not parts.isdisjoint(rel.split("/"))):
            return True
        return bool(whole and whole(rel)) or bool(part and any(part(p) for p in rel.split("/")))

    def _exclude_matchers(self):
        # Asked for every file and folder discovered. A pattern with no glob character (each of the
        # defaults) matches as fnmatch would, by equality: the path itself, a folder above it (`p/*`),
        # or one part. The globs are compiled once, into one regex each, and only where there are
        # any: fnmatch imports re, ~6 ms of a run's start (discovery runs before the work is shared).
        patterns = tuple(p.rstrip("/") for p in self.exclude + self.extend_exclude)
        cached = self.__dict__.get("_exclude_regexes")
        if cached is None or cached[0] != patterns:
            plain = [p for p in patterns if not ("*" in p or "?" in p or "[" in p)]
            globs = [p for p in patterns if "*" in p or "?" in p or "[" in p]
            whole = part = None
            if globs:
                import fnmatch
                import re

                wholes = [fnmatch.translate(p) for p in globs] + [fnmatch.translate(p + "/*") for p in globs]
                parts = [fnmatch.translate(p) for p in globs if "/" not in p]
                whole = re.compile("|".join(wholes)).match
                part = re.compile("|".join(parts)).match if parts else None
            cached = self.__dict__["_exclude_regexes"] = (
                patterns,
                frozenset(plain),
                tuple(p + "/" for p in plain),
                frozenset(p for p in plain if "/" not in p),
                whole,
                part,
            )
        return cached[1:]

    def ignored_for(self, path: Path) -> list[str]:
        if not self.per_file_ignores:  # asked once per file with a finding: most configs have none, so no path to resolve
            return []
        import fnmatch  # imports re: only for a config that has per-file-ignores

        rel = self.relpath(path)
        out: list[str] = []
        for pattern, codes in self.per_file_ignores.items():
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern):
                out.extend(codes)
        return out


def pyproject_folders(paths: list[str]) -> list[Path]:
    """Where find_pyproject looks, nearest first: the paths' common folder and each one above it."""
    starts = [resolve(Path(p)) for p in paths] or [Path.cwd()]
    try:
        common = Path(os.path.commonpath([str(p) for p in starts]))
    except ValueError:
        common = Path.cwd()
    try:
        named_file = common.is_file() or not common.exists()
    except OSError:  # a name too long to exist (ENAMETOOLONG, which is_file() raises before Python 3.13), no search permission
        named_file = True
    if named_file:
        common = common.parent
    return [common, *common.parents]


# Nothing there, as is_file() reads them; and a name too long for any file to have (a path under one named on the command line).
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG)


def find_pyproject(paths: list[str]) -> Path | None:
    """The nearest pyproject.toml with a [tool.opscan] table, walking up from the paths' common folder."""
    for folder in pyproject_folders(paths):
        candidate = folder / "pyproject.toml"
        # os.stat, not is_file(): from Python 3.13 is_file() answers False where the folder may not be
        # looked into (no search permission), and that folder's config is unknowable, not absent.
        try:
            present = S_ISREG(candidate.stat().st_mode)
        except ValueError:  # an embedded null byte
            present = False
        except OSError as exc:
            if exc.errno not in _ABSENT:
                raise ConfigError(f"cannot read {candidate}: {exc.strerror or exc}") from None
            present = False
        if present:
            if not _may_configure_opscan(candidate):
                continue
            data = _read_toml(candidate)
            if "opscan" in data.get("tool", {}):
                return candidate
    return None


def _may_configure_opscan(path: Path) -> bool:
    """False only for a file that cannot hold [tool.opscan]: it never spells the name.

    Most projects' pyproject.toml configures other tools only; this spares parsing
    it (and importing tomllib) on every run. A TOML key can also be written with
    unicode escapes, so a file with any escape is parsed regardless.
    """
    try:
        raw = path.read_bytes()
    except OSError:
        return True  # let _read_toml report it
    return b"opscan" in raw or b"\\u" in raw or b"\\U" in raw


def _read_toml(path: Path) -> dict:
    from opscan import _toml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    try:
        return _toml.parse(text)  # plain files without tomllib's start-up
    except _toml.TOMLError as exc:
        raise ConfigError(f"invalid TOML in {path}: {exc}") from None


def _str_list(value, key: str, source: Path, section: str) -> list[str]:
    # A lone string is refused, as ruff refuses `select = "E"`: it is a list that lost its brackets.
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: {section} {key} must be a list of strings")
    return value


def load(paths: list[str], config_file: str | None = None) -> Config:
    """Read the configuration that applies to these paths."""
    source = Path(config_file) if config_file else find_pyproject(paths)
    if source is None:
        return Config()
    if not source.is_file():
        from opscan._read import file_problem

        problem = file_problem(str(source), "a TOML file")  # a directory or /dev/zero was "not found"
        raise ConfigError(f"config file {source} not found" if problem is None or problem.endswith(": no such file") else f"config file {problem}")
    table = _read_toml(source).get("tool", {}).get("opscan", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [tool.opscan] must be a table")
    sections = {}
    for name in SECTION_KEYS:
        section = table.get(name, {})
        if not isinstance(section, dict):
            raise ConfigError(f"{source}: [tool.opscan.{name}] must be a table")
        unknown = set(section) - SECTION_KEYS[name]
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) in [tool.opscan.{name}]: {', '.join(sorted(unknown))}")
        sections[name] = section
    top = {k: v for k, v in table.items() if k not in SECTION_KEYS}
    unknown = set(top) - KNOWN_KEYS - COMMON_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) in [tool.opscan]: {', '.join(sorted(unknown))}")
    table = top | sections["lint"]  # [tool.opscan.lint] wins over the same key spelled at the top

    def section_of(key: str) -> str:  # where the key was written, for its messages
        return "[tool.opscan.lint]" if key in sections["lint"] else "[tool.opscan]"
    cfg = Config(root=source.parent.resolve(), source=source)
    cfg.scan = _scan_settings(sections["scan"], source)
    cfg.bench = _bench_settings(sections["bench"], source)
    for name, settings in (("scan", cfg.scan), ("bench", cfg.bench)):
        if settings.device is not None:  # only the runner, with torch, can tell a device from a typo
            settings.device_from = f"{source}: [tool.opscan.{name}] device"
    if "select" in table:
        cfg.select = _str_list(table["select"], "select", source, section_of("select"))
    if "extend-select" in table:
        cfg.extend_select = _str_list(table["extend-select"], "extend-select", source, section_of("extend-select"))
    if "ignore" in table:
        cfg.ignore = _str_list(table["ignore"], "ignore", source, section_of("ignore"))
    if "exclude" in table:
        cfg.exclude = _str_list(table["exclude"], "exclude", source, section_of("exclude"))
    if "extend-exclude" in table:
        cfg.extend_exclude = _str_list(table["extend-exclude"], "extend-exclude", source, section_of("extend-exclude"))
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        section = section_of("per-file-ignores")
        if not isinstance(pfi, dict):
            raise ConfigError(f"{source}: {section} per-file-ignores must be a table of glob = [codes]")
        cfg.per_file_ignores = {k: _str_list(v, f"per-file-ignores.{k}", source, section) for k, v in pfi.items()}
    if "torch-version" in table:
        section = section_of("torch-version")
        if not isinstance(table["torch-version"], str):
            raise ConfigError(f"{source}: {section} torch-version must be a string like \"2.14\" or \">=2.4,<2.7\"")
        cfg.torch_version = table["torch-version"]
        cfg.torch_version_from = f"{source}: {section} torch-version"
    if "roots" in table:
        cfg.roots = []
        cfg.roots_configured = True
        section = section_of("roots")
        for r in _str_list(table["roots"], "roots", source, section):
            try:
                cfg.roots.append((cfg.root / r).resolve(strict=True))
            except FileNotFoundError:
                cfg.roots.append((cfg.root / r).resolve())  # a root that does not exist yet finds nothing
                cfg.warnings.append(f"warning: {source}: {section} roots entry {r!r} does not exist ({cfg.roots[-1]}); no import resolves there")
                continue
            except (OSError, RuntimeError) as exc:
                raise ConfigError(f"{source}: {section} roots entry {r!r} cannot be used: {getattr(exc, 'strerror', None) or exc}") from None
            if not cfg.roots[-1].is_dir():
                cfg.warnings.append(f"warning: {source}: {section} roots entry {r!r} is not a folder; no import resolves there")
    return cfg


def _device(table: dict, section: str, source: Path) -> str | None:
    if "device" not in table:
        return None
    if not isinstance(table["device"], str):
        raise ConfigError(f"{source}: [tool.opscan.{section}] device must be a string like \"cuda\"")
    return table["device"]


def _positive(table: dict, key: str, section: str, source: Path) -> int | None:
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{source}: [tool.opscan.{section}] {key} must be a positive integer")
    return value


def _shape(table: dict, section: str, source: Path) -> tuple[int, ...] | None:
    if "input-shape" not in table:
        return None
    value = table["input-shape"]
    if not isinstance(value, list) or not value or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in value):
        raise ConfigError(f"{source}: [tool.opscan.{section}] input-shape must be a list of positive integers")
    problem = shape_problem(value)
    if problem:
        raise ConfigError(f"{source}: [tool.opscan.{section}] input-shape {value} is too large: {problem}")
    return tuple(value)


def _scan_settings(table: dict, source: Path) -> ScanSettings:
    return ScanSettings(_device(table, "scan", source), _positive(table, "max-steps", "scan", source), _shape(table, "scan", source))


def _bench_settings(table: dict, source: Path) -> BenchSettings:
    return BenchSettings(
        _device(table, "bench", source),
        _shape(table, "bench", source),
        _positive(table, "rounds", "bench", source),
        _positive(table, "warmup", "bench", source),
    )
