"""From a Measurement to the Report: the variants table, the cost split, the ops that pay, and the verdict.

Pure Python, so the tables, the verdict and every output format are tested
with made-up timings. Units: ms per step; `%` of the same precision's
fastest step (cudnn.benchmark on, nondeterministic); `pp` percentage points
of that step, which add up: cost = autotuner + determinism.
"""

from __future__ import annotations

from opscan.bench import stats
from opscan.bench.attribution import EXPLAINED, OpDelta, compare, explaining
from opscan.bench.results import BLOCKED, Measurement
from opscan.bench.variants import PRECISIONS, Variant
from opscan.findings import Chart, Column, Report, Table

MIB = 2**20


def _r(value, digits: int):
    return None if value is None else round(value, digits)


def _samples(m: Measurement, variant: Variant) -> list[float]:
    run = m.run(variant)
    return run.samples if run is not None else []


def precisions_of(m: Measurement) -> list[str]:
    seen = {r.variant.precision for r in m.runs}
    return [p for p in PRECISIONS if p in seen]


def variants_table(m: Measurement) -> Table:
    table = Table(
        "variants",
        "Step time per variant",
        [
            Column("variant"),
            Column("benchmark", "cudnn.benchmark"),
            Column("deterministic"),
            Column("steps", align="right"),
            Column("median_ms", "median ms", "right"),
            Column("spread_pct", "± %", "right"),
            Column("cost_pct", "cost %", "right"),
            Column("cost_spread_pp", "± pp", "right"),
            Column("peak_mib", "peak MiB", "right"),
            Column("status"),
        ],
        chart=Chart("bar", "variant", "median_ms"),
        note=(
            f"Median of each variant's timed steps ({m.timer}), variants interleaved step by step with the order rotating; "
            "± is half the interquartile range. cost % is over the same precision's bench variant; "
            "its ± is half the IQR of the per-round costs. peak MiB: most memory allocated during one step."
        ),
    )
    for run in m.runs:
        v = run.variant
        summary = stats.summarize(run.samples)
        base = _samples(m, Variant(v.precision, "benchmark"))
        c = stats.cost(base, run.samples) if summary else None
        status = f"{run.status}: {run.detail}" if run.detail else run.status
        table.add(
            v.id,
            v.benchmark,
            v.deterministic,
            len(run.samples),
            _r(summary.median if summary else None, 3),
            _r(summary.spread_pct if summary else None, 2),
            _r(c.value if c else None, 2),
            _r(c.spread if c else None, 2),
            _r(run.peak_bytes / MIB if run.peak_bytes is not None else None, 1),
            status,
        )
    return table


def _split(m: Measurement, precision: str) -> stats.Split:
    return stats.split(*(_samples(m, Variant(precision, mode)) for mode in ("benchmark", "default", "deterministic")))


def deltas_for(m: Measurement, precision: str) -> list[OpDelta] | None:
    """The per-op comparison of one precision's fastest and deterministic profiles, or None if either is missing."""
    bench = m.profiles.get(Variant(precision, "benchmark").id)
    det = m.profiles.get(Variant(precision, "deterministic").id)
    if bench is None or det is None:
        return None
    default = m.profiles.get(Variant(precision, "default").id)
    return compare(bench.ops, det.ops, default.ops if default is not None else None)


def _median(samples):
    return stats.median(samples) if samples else None


def _explained(m: Measurement, precision: str, deltas) -> tuple[list[OpDelta], float | None]:
    """The ops that explain most of the measured cost, and the points they add up to."""
    bench = _median(_samples(m, Variant(precision, "benchmark")))
    det = _median(_samples(m, Variant(precision, "deterministic")))
    if not deltas or bench is None or det is None or bench <= 0:
        return [], None
    chosen = explaining(deltas, det - bench)
    return chosen, 100 * sum(d.added_ms for d in chosen) / bench if chosen else None


def _ops_phrase(chosen, pp, total_pp) -> str:
    if not chosen:
        return ""
    n = len(chosen)
    if pp < EXPLAINED * total_pp:  # no few ops explain it: kernel time is not all of step time
        return f"the {n} op{'s' if n != 1 else ''} that slowed most account{'s' if n == 1 else ''} for only {pp:.1f} points of it"
    return f"{n} op{'s' if n != 1 else ''} account{'s' if n == 1 else ''} for {pp:.1f} points of it"


def cost_table(m: Measurement) -> Table:
    table = Table(
        "cost",
        "What determinism costs, against the fastest step (cudnn.benchmark on)",
        [
            Column("precision"),
            Column("cost_pct", "cost %", "right"),
            Column("cost_spread_pp", "±", "right"),
            Column("autotuner_pp", "giving up cudnn.benchmark, pp", "right"),
            Column("autotuner_spread_pp", "±", "right"),
            Column("determinism_pp", "deterministic algorithms, pp", "right"),
            Column("determinism_spread_pp", "±", "right"),
            Column("explained_by", "explained by"),
        ],
        note="pp: points of the fastest step; the two parts add up to the cost. ± is half the IQR of the per-round values.",
    )
    for precision in precisions_of(m):
        s = _split(m, precision)
        chosen, pp = _explained(m, precision, deltas_for(m, precision))
        table.add(
            precision,
            *(_r(getattr(part, attr), 2) if part else None for part in (s.total, s.autotuner, s.determinism) for attr in ("value", "spread")),
            f"{len(chosen)} op{'s' if len(chosen) != 1 else ''}: {pp:.1f} pp" if chosen else "",
        )
    return table


def ops_table(m: Measurement, top: int = 10) -> Table:
    unit = "GPU kernel time" if m.device_time else "CPU time"
    steps = sorted({p.steps for p in m.profiles.values()})
    table = Table(
        "ops",
        f"Where the cost goes: the ops whose time changed most, fastest against deterministic (top {top} per precision)",
        [
            Column("precision"),
            Column("phase"),
            Column("op"),
            Column("where"),
            Column("bench_ms", "fastest ms", "right"),
            Column("det_ms", "deterministic ms", "right"),
            Column("added_ms", "added ms", "right"),
            Column("autotuner_ms", "autotuner ms", "right"),
            Column("determinism_ms", "determinism ms", "right"),
            Column("step_pct", "% of step", "right"),
            Column("share_pct", "share %", "right"),
            Column("kernels", "top kernel (fastest → deterministic)"),
        ],
        note=(
            f"{unit} per step from torch.profiler ({', '.join(map(str, steps)) or 0} steps per variant); "
            "where is the line that made the call (for backward, the forward line); "
            "% of step = added / the fastest step's median; share = added / the difference of the measured medians."
        ),
    )
    for precision in precisions_of(m):
        deltas = deltas_for(m, precision)
        if not deltas:
            continue
        bench = _median(_samples(m, Variant(precision, "benchmark")))
        det = _median(_samples(m, Variant(precision, "deterministic")))
        measured = det - bench if bench is not None and det is not None else None
        for d in deltas[:top]:
            if d.same_kernels:
                kernels = f"{d.det_kernel} (same kernels)" if d.det_kernel else ""
            else:
                kernels = f"{d.bench_kernel or '-'} → {d.det_kernel or '-'}"
            table.add(
                precision,
                d.key.phase,
                d.key.op,
                d.key.where,
                _r(d.bench_ms, 3),
                _r(d.det_ms, 3),
                _r(d.added_ms, 3),
                _r(d.autotuner_ms, 3),
                _r(d.determinism_ms, 3),
                _r(100 * d.added_ms / bench, 2) if bench else None,
                _r(100 * d.added_ms / measured, 1) if measured and measured > 0 else None,
                kernels,
            )
    return table


def samples_table(m: Measurement) -> Table:
    table = Table(
        "samples",
        "Every timed step",
        [Column("variant"), Column("round", align="right"), Column("ms", align="right"), Column("peak_mib", "peak MiB", "right")],
    )
    for run in m.runs:
        for i, ms in enumerate(run.samples):
            peak = run.peaks[i] / MIB if i < len(run.peaks) else None
            table.add(run.variant.id, i, round(ms, 4), _r(peak, 1))
    return table


def verdict(m: Measurement) -> str:
    """One line: what determinism costs here, per precision, and how many ops account for it."""
    costs, others = [], []
    for precision in precisions_of(m):
        det = m.run(Variant(precision, "deterministic"))
        total = _split(m, precision).total
        if det is not None and det.status == BLOCKED:
            others.append(f"in {precision} it cannot be measured: deterministic mode raises at {det.detail or 'an op'} (see the findings)")
        elif total is None:
            others.append(f"{precision} was not measured")
        elif abs(total.value) <= total.spread:
            costs.append(f"nothing measurable in {precision} ({total.value:+.1f}% ±{total.spread:.1f})")
        else:
            here = "" if costs else "here "
            chosen, pp = _explained(m, precision, deltas_for(m, precision))
            phrase = f" ({_ops_phrase(chosen, pp, total.value)})" if chosen else ""
            costs.append(f"{total.value:+.1f}% (±{total.spread:.1f}) {here}in {precision}{phrase}")
    clauses = (["determinism costs " + " and ".join(costs)] if costs else []) + others
    return "verdict: " + ("; ".join(clauses) if clauses else "nothing was measured")


def build(m: Measurement, *, env=None, findings=(), errors=(), notices=(), rules=(), top: int = 10, samples: bool = False) -> Report:
    """The bench Report: env, findings (ops that block deterministic mode), tables, and the verdict as its summary line."""
    tables = [variants_table(m), cost_table(m)]
    if m.profiles:
        tables.append(ops_table(m, top))
    if samples:
        tables.append(samples_table(m))
    return Report(
        "bench",
        list(findings),
        tables=tables,
        env=dict(env or {}),
        errors=list(errors),
        notices=list(notices),
        rules=tuple(rules),
        summary=verdict(m),
    )
