"""Torch version numbers and the range specifiers the rules data uses (">=2.1,<2.13"). Base layer."""

from __future__ import annotations


class VersionError(ValueError):
    """A version or range specifier that does not parse."""


# The patterns below are compiled on first use (re caches them), not at import, and only
# for text that is not plain: on a cold lint run, compiling them cost more than the
# rules they serve. Plain text (ASCII digits and dots) is read with str methods, and
# gives what the pattern would (the tests compare the two). `re` itself is imported
# only where a pattern is needed: importing it cost a cold lint ~1.5 ms.
_CLAUSE = r"^\s*(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+)*)\s*$"
_VERSION = r"\s*(\d+(?:\.\d+)*)"


def _plain_release(text: str) -> bool:
    """'2', '2.14', '2.11.0': ASCII digits in dot-separated parts, nothing else."""
    return all(part.isdigit() and part.isascii() for part in text.split("."))


def parse_version(text: str) -> tuple[int, ...]:
    """'2.11.0+cu130' -> (2, 11, 0). Only the numeric release part counts."""
    raw = str(text)
    if _plain_release(raw):
        release = raw
    else:
        import re

        m = re.match(_VERSION, raw)
        if not m:
            raise ValueError(f"not a version: {text!r}")
        release = m.group(1)
    parts = tuple(int(p) for p in release.split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts


def _operator(clause: str, operators: tuple[str, ...]) -> str | None:
    """The first of `operators` that starts `clause` (their order is the pattern's alternation's)."""
    return next((op for op in operators if clause.startswith(op)), None)


def _range_clause(clause: str) -> tuple[str, str] | None:
    """A stripped clause of a rules range, '>=2.1', as (operator, version text); None if it does not parse."""
    op = _operator(clause, (">=", "<=", "==", "!=", ">", "<"))
    if op is not None and _plain_release(clause[len(op) :].lstrip()):
        return op, clause[len(op) :].lstrip()
    import re

    m = re.match(_CLAUSE, clause)
    return (m.group(1), m.group(2)) if m else None


# (version, spec) -> the answer: lint asks the same few questions for every call an op rule names.
_IN_RANGE: dict[tuple, bool] = {}


def version_in_range(version: str | tuple[int, ...], spec: str) -> bool:
    """True if `version` satisfies every comma-separated clause of `spec` (e.g. ">=2.1,<2.13")."""
    key = (version, spec)
    found = _IN_RANGE.get(key)
    if found is None:
        found = _IN_RANGE[key] = _in_range(version, spec)
    return found


def _in_range(version: str | tuple[int, ...], spec: str) -> bool:
    v = parse_version(version) if isinstance(version, str) else version
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        parsed = _range_clause(clause)
        if parsed is None:
            raise VersionError(f"bad version clause {clause!r} in {spec!r}")
        op, text = parsed
        bound = parse_version(text)
        ok = {
            ">=": v >= bound,
            "<=": v <= bound,
            ">": v > bound,
            "<": v < bound,
            "==": v[: len(text.split("."))] == bound[: len(text.split("."))],
            "!=": v[: len(text.split("."))] != bound[: len(text.split("."))],
        }[op]
        if not ok:
            return False
    return True


# ---------------------------------------------------------------- PEP 440 specifiers and the targeted range
#
# Lint's install is small (no `packaging`), so the part of PEP 440 a torch pin
# uses is here: clauses `~= == != <= >= < > ===` joined by commas, `==X.*` and
# `!=X.*` prefix matches, pre/post/dev and local labels (`2.11.0+cu130`), which
# are read as their release (the rules' ranges are per release). A bare version
# ("2.11", what `--torch-version` takes) means that release: any patch of it.

# Compiled on first use, and only for a clause that is not plain (see _spec_clause).
_SPEC_CLAUSE = (
    r"^\s*(?P<op>~=|===|==|!=|<=|>=|<|>)?\s*"
    r"(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)(?P<star>\.\*)?"
    r"(?P<label>(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview|post|rev|r|dev)[-_.]?\d*)*(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?)"
    r"\s*$"
)


def _strip(release: tuple[int, ...]) -> tuple[int, ...]:
    """Without trailing zeros: PEP 440 compares releases padded with zeros, and stripped tuples compare so too."""
    end = len(release)
    while end > 1 and release[end - 1] == 0:
        end -= 1
    return release[:end]


class Clause:
    """One specifier clause: `op` applied to `release` (`wildcard`: `==2.11.*`)."""

    __slots__ = ("op", "release", "wildcard", "text")

    def __init__(self, op: str, release: tuple[int, ...], wildcard: bool, text: str):
        self.op = op
        self.release = release
        self.wildcard = wildcard
        self.text = text

    def __repr__(self) -> str:
        return f"Clause({self.text!r})"

    def admits(self, version: tuple[int, ...]) -> bool:
        op, bound = self.op, self.release
        if self.wildcard or op == "~=":
            prefix = bound if self.wildcard else bound[:-1]
            padded = version + (0,) * (len(prefix) - len(version))
            same = padded[: len(prefix)] == prefix
            if op == "~=":
                return same and _strip(version) >= _strip(bound)
            return same if op == "==" else not same
        v, b = _strip(version), _strip(bound)
        return {"==": v == b, "===": v == b, "!=": v != b, "<=": v <= b, ">=": v >= b, "<": v < b, ">": v > b}[op]


class Specifier:
    """A version specifier: every clause must hold. An empty one admits every version."""

    __slots__ = ("text", "clauses")

    def __init__(self, text: str, clauses: tuple[Clause, ...]):
        self.text = text
        self.clauses = clauses

    def __repr__(self) -> str:
        return f"Specifier({self.text!r})"

    def admits(self, version: tuple[int, ...]) -> bool:
        return all(c.admits(version) for c in self.clauses)

    def admits_release(self, release: tuple[int, int]) -> bool:
        """Whether some patch of the release `release` (major, minor), X.Y.0, X.Y.1, ..., is admitted.

        A clause's truth over the patch number p changes only next to the patch
        numbers the clauses name within this release, so p = 0, 1, each named
        patch and its neighbours, and one past them all decide it.
        """
        patches = {0, 1, 1 << 30}
        for c in self.clauses:
            if c.release[:2] == release and len(c.release) >= 3:
                q = c.release[2]
                patches.update((q, q + 1, max(q - 1, 0)))
        return any(self.admits((*release, p)) for p in patches)


class _SpecClause:
    """What _SPEC_CLAUSE's groups give for one clause (`label` "" where there is none)."""

    __slots__ = ("op", "epoch", "release", "star", "label")

    def __init__(self, op: str | None, epoch: str | None, release: str, star: bool, label: str):
        self.op = op
        self.epoch = epoch
        self.release = release
        self.star = star
        self.label = label


# _SPEC_CLAUSE's operators, in the order its alternation tries them.
_SPEC_OPERATORS = ("~=", "===", "==", "!=", "<=", ">=", "<", ">")


def _spec_clause(part: str) -> _SpecClause | None:
    """A stripped specifier clause read as _SPEC_CLAUSE reads it; None where it does not match.

    A plain clause (an optional operator, then ASCII digits and dots, maybe `.*`:
    '>=2.4', '==2.14.1', '2.11', '==2.11.*') is read with str methods. Compiling
    the pattern (case-insensitive, with its labels) cost a cold lint ~1.5 ms, and
    a requirement rarely needs it: anything else (a label, an epoch) goes to it.
    """
    op = _operator(part, _SPEC_OPERATORS)
    rest = part[len(op) :].lstrip() if op is not None else part
    star = rest.endswith(".*")
    release = rest[:-2] if star else rest
    if _plain_release(release):
        return _SpecClause(op, None, release, star, "")
    import re

    m = re.match(_SPEC_CLAUSE, part, re.I)
    if not m:
        return None
    return _SpecClause(m["op"], m["epoch"], m["release"], bool(m["star"]), m["label"])


def parse_specifier(text: str, *, bare: bool = True) -> Specifier:
    """'>=2.4,<2.7', '==2.11.*', '~=2.4', or (with `bare`) a version alone, '2.11': that release.

    Raises VersionError for anything else. A clause of an epoch other than 0
    is refused: no torch release has one.
    """
    raw = str(text).strip()
    parts = [p.strip() for p in raw.split(",")]
    if raw == "" or any(not p for p in parts):
        raise VersionError(f"empty clause in {text!r}" if raw else "an empty version")
    clauses: list[Clause] = []
    for part in parts:
        m = _spec_clause(part)
        if m is None:
            raise VersionError(f"bad version clause {part!r} in {text!r}")
        op, star = m.op, m.star
        if m.epoch and int(m.epoch) != 0:
            raise VersionError(f"version epochs are not supported: {part!r}")
        release = tuple(int(x) for x in m.release.split("."))
        if op is None:
            if not bare or len(parts) > 1:
                raise VersionError(f"clause {part!r} has no operator (such as >= or ==) in {text!r}")
            op, star = "==", True  # "2.11": any 2.11.x; "2.11.0": that version
            if len(release) >= 3:
                star = False
        if star and op not in ("==", "!="):
            raise VersionError(f"a wildcard (.*) works only with == and !=: {part!r}")
        if star and m.label:
            raise VersionError(f"a wildcard (.*) cannot follow a label: {part!r}")
        if op == "~=" and len(release) < 2:
            raise VersionError(f"~= needs a version with at least two parts: {part!r}")
        clauses.append(Clause(op, release, star, part))
    return Specifier(raw, tuple(clauses))


def release_key(release: str) -> tuple[int, int]:
    """'2.11' -> (2, 11)."""
    major, _, minor = release.partition(".")
    return int(major), int(minor or 0)


class TorchRange:
    """The torch releases lint targets: a subset of the releases the rules know, and where it came from.

    `releases` are minor releases ("2.4", "2.5", ...), oldest first, out of
    `known` (every release the rules know); `where` says what set them (a flag,
    a config key, a requirement file, the installed torch, or the default);
    `spec` is the specifier read there; `warning` is set where the specifier
    named no release the rules know and was mapped to the nearest one.
    """

    __slots__ = ("releases", "known", "where", "spec", "warning")

    def __init__(self, releases: tuple[str, ...], known: tuple[str, ...], where: str, spec: str = "", warning: str = ""):
        self.releases = tuple(releases)
        self.known = tuple(known)
        self.where = where
        self.spec = spec
        self.warning = warning

    def __repr__(self) -> str:
        return f"TorchRange({self.releases!r}, where={self.where!r}, spec={self.spec!r})"

    def _key(self) -> tuple:
        return (self.releases, self.known, self.where, self.spec, self.warning)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self):  # slotted, no __dict__: pickled (to worker processes) by its fields
        return (TorchRange, self._key())

    @classmethod
    def every(cls, known: tuple[str, ...], where: str = "every release the rules know") -> TorchRange:
        return cls(known, known, where)

    @classmethod
    def from_spec(cls, spec: str | Specifier, known: tuple[str, ...], where: str, *, label: str = "") -> TorchRange:
        """The known releases a specifier admits. Raises VersionError for a bad specifier.

        A specifier that admits no known release is mapped to the newest one
        (if it admits a later release) or the oldest (an earlier one), else to
        every known release, and `warning` says so. `label` names the value at the start of
        that warning (default: "torch SPEC (from WHERE)").
        """
        parsed = spec if isinstance(spec, Specifier) else parse_specifier(spec)
        releases = tuple(r for r in known if parsed.admits_release(release_key(r)))
        if releases:
            return cls(releases, known, where, parsed.text)
        keys = [release_key(r) for r in known]
        newest, oldest = keys[-1], keys[0]
        probes = [(major, minor) for major in range(0, newest[0] + 10) for minor in range(0, 60)]
        what = label or f"torch {parsed.text} (from {where})"
        span = f"{known[0]} to {known[-1]}"
        if any(parsed.admits_release(p) for p in probes if p > newest):
            return cls((known[-1],), known, where, parsed.text, f"{what} is newer than any release the rules know ({span}); checking against {known[-1]}")
        if any(parsed.admits_release(p) for p in probes if p < oldest):
            return cls((known[0],), known, where, parsed.text, f"{what} is older than any release the rules know ({span}); checking against {known[0]}")
        return cls(known, known, where, parsed.text, f"{what} matches no torch release; checking against every release the rules know ({span})")

    def union(self, other: TorchRange, where: str, spec: str) -> TorchRange:
        chosen = set(self.releases) | set(other.releases)
        warning = "; ".join(w for w in (self.warning, other.warning) if w)
        return TorchRange(tuple(r for r in self.known if r in chosen), self.known, where, spec, warning)

    @property
    def newest(self) -> str:
        return self.releases[-1]

    @property
    def is_every(self) -> bool:
        return self.releases == self.known

    def subset(self, rule_range: str) -> tuple[str, ...]:
        """The targeted releases in a rules-data range (">=1.8,<2.10"), each read as its X.Y.0."""
        return tuple(r for r in self.releases if version_in_range(r, rule_range))

    def describe(self, subset: tuple[str, ...]) -> str:
        """The releases of `subset` as a message names them, relative to this range.

        "< 2.10" (the oldest targeted ones), ">= 2.4" (the newest ones),
        "2.4 to 2.9", "2.9", or a list of runs; "" when the subset is the whole
        range, where a message needs no qualifier. Runs follow the known
        releases, and "<" or ">=" is used only where its bound is targeted too:
        with 1.12, 1.13 and 2.12 targeted, "< 2.12" would take in 2.10 and 2.11,
        which are not, so that subset is "1.12 to 1.13".
        """
        subset = tuple(subset)
        if subset == self.releases:
            return ""
        if len(subset) <= 1:
            return subset[0] if subset else "none"
        runs = _runs(subset, self.known)
        if len(runs) == 1:
            first, last = runs[0][0], runs[0][-1]
            after = self.known.index(last) + 1
            if first == self.releases[0] and after < len(self.known) and self.known[after] in self.releases:
                return f"< {self.known[after]}"
            before = self.known.index(first) - 1
            if last == self.releases[-1] and before >= 0 and self.known[before] in self.releases:
                return f">= {first}"
        return _names(runs)

    def __str__(self) -> str:
        """'2.14', '2.4 to 2.6', or runs of releases: '1.8 to 2.4 and 2.6 to 2.14'."""
        return _names(_runs(self.releases, self.known))


def _runs(subset: tuple[str, ...], order: tuple[str, ...]) -> list[list[str]]:
    """`subset` cut into runs of releases that follow each other in `order`."""
    index = {r: i for i, r in enumerate(order)}
    runs: list[list[str]] = []
    for r in subset:
        if runs and index[runs[-1][-1]] == index[r] - 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return runs


def _names(runs: list[list[str]]) -> str:
    names = [run[0] if len(run) == 1 else f"{run[0]} to {run[-1]}" for run in runs]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
