"""What a rule sees: one entry trace, summarised once, and a way to make findings."""

from __future__ import annotations

from functools import cached_property

from opscan.codes import RuleInfo
from opscan.findings import Finding, Fix
from opscan.lint.model import CUBLAS, UNKNOWN, VALID_CUBLAS, Loc  # noqa: F401  (the rules import them from here)
from opscan.lint.model import Call, Determinism, EnvRead, EnvWrite, Seed
from opscan.lint.project import EntryTrace, TraceEvent


class Context:
    """One entry trace and the target torch version; rules add to `findings`."""

    def __init__(self, trace: EntryTrace, torch_version: str):
        self.trace = trace
        self.torch_version = torch_version
        self.findings: list[Finding] = []

    # -- summaries of the trace -------------------------------------------------

    def of(self, what: type) -> list[TraceEvent]:
        """The events, in execution order, of one class of effect (or Call)."""
        return [e for e in (self.trace.events if what is Call else self.trace.effects) if e.what.__class__ is what]

    @cached_property
    def seeds(self) -> list[TraceEvent]:
        return self.of(Seed)

    @cached_property
    def seeded_libs(self) -> set[str]:
        return {lib for e in self.seeds for lib in e.what.libs}

    @cached_property
    def enables(self) -> list[TraceEvent]:
        """Calls that turn determinism on, or may (a computed mode counts: the user can opt in)."""
        return [e for e in self.of(Determinism) if e.what.mode is True or e.what.mode is UNKNOWN]

    @cached_property
    def strictly_enabled(self) -> bool:
        return any(e.what.warn_only is False for e in self.enables)

    @cached_property
    def disables(self) -> list[TraceEvent]:
        return [e for e in self.of(Determinism) if e.what.mode is False]

    @cached_property
    def cublas_sets(self) -> list[TraceEvent]:
        return [e for e in self.of(EnvWrite) if e.what.var == CUBLAS]

    @cached_property
    def cublas_handled(self) -> bool:
        """The code sets the variable, or reads it (and so handles it itself)."""
        return bool(self.cublas_sets) or any(e.what.var == CUBLAS for e in self.of(EnvRead))

    @property
    def seeds_or_enables(self) -> bool:
        return bool(self.seeds or self.enables)

    # -- findings ---------------------------------------------------------------

    def report(self, rule: RuleInfo, path: str, loc: Loc, message: str, fix: Fix | None = None, **properties) -> None:
        self.findings.append(
            Finding(
                code=rule.code,
                message=message,
                path=path,
                line=loc.line,
                col=loc.col,
                end_line=loc.end_line,
                end_col=loc.end_col,
                severity=rule.severity,
                fix=fix,
                properties=properties,
            )
        )


def via_text(event: TraceEvent) -> str:
    """' via `pkg.helper`' when the event happened inside a project helper."""
    return f" via `{event.helper}`" if event.helper else ""


def api_name(event: TraceEvent) -> str:
    return f"`{event.api}`" if event.api else "this call"


def how(event: TraceEvent) -> str:
    """'with `torch.manual_seed`', or 'via `utils.seed.set_seed` (`torch.manual_seed`)' for a project helper."""
    if event.helper:
        return f"via `{event.helper}` ({api_name(event)})"
    return f"with {api_name(event)}"
