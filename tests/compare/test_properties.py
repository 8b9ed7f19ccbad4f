"""Properties of compare and its alignment, over generated runs and sequences."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opscan.compare import compare_records
from opscan.compare.align import align
from tests.compare.records import RecordWriter, run, variant

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

VARIANTS = st.builds(
    variant,
    dropout=st.booleans(),
    clone_after_relu=st.booleans(),
    w2t_first=st.booleans(),
    extra_draw=st.none() | st.integers(0, 2),
    swap_batch=st.none() | st.integers(0, 1),
    nudge=st.none() | st.sampled_from([(0, "backward", "aten.mm.default", "fc1"), (1, "forward", "aten.relu.default", "act")]),
    lr=st.sampled_from([0.05, 0.5, 1.0]),
)


@SETTINGS
@given(v=VARIANTS, steps=st.integers(1, 3))
def test_a_record_compared_with_itself_never_diverges(tmp_path, v, steps):
    path = tmp_path / "a.jsonl"
    run(v, steps=steps).write(path)
    report = compare_records(str(path), str(path))
    assert report.findings == [] and report.errors == []
    assert report.table("first_divergence").rows == []
    assert report.exit_code() == 0
    assert set(report.table("spread").column("max_param_diff")) == {0.0}


def _insert_ops(writer: RecordWriter, positions: list[int]) -> tuple[list[dict], set[str]]:
    """Copy the record's lines with a no-op inserted before each given op index; renumber `i`; return the lines and the new ops' modules."""
    ops = [d for d in writer.lines if d["type"] == "op"]
    chosen = {p % len(ops) for p in positions}
    out, modules, i = [], set(), 0
    for d in writer.lines:
        d = json.loads(json.dumps(d))
        if d["type"] == "op":
            index = ops.index(next(o for o in ops if o["i"] == d["i"]))
            if index in chosen:
                module = f"inserted.{index}"
                modules.add(module)
                source = d["in"][0] if d["in"] else d["out"][0]
                out.append({**d, "i": i, "op": "aten.clone.default", "module": module, "in": [source], "out": [source],
                            "shapes": d["shapes"][:1], "rng": None})  # fmt: skip
                i += 1
            d["i"] = i
            i += 1
        out.append(d)
    return out, modules


@SETTINGS
@given(v=VARIANTS, steps=st.integers(1, 2), positions=st.lists(st.integers(0, 200), min_size=1, max_size=6))
def test_inserted_ops_are_aligned_and_reported_exactly(tmp_path, v, steps, positions):
    writer = run(v, steps=steps)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    writer.write(a)
    lines, modules = _insert_ops(writer, positions)
    Path(b).write_text("".join(json.dumps(d) + "\n" for d in lines))
    report = compare_records(str(a), str(b))
    rows = report.table("structure").rows
    assert len(rows) == len(modules)
    assert {r[2] for r in rows} == {"only in b"}
    assert {r[4] for r in rows} == modules
    assert set(report.table("spread").column("ops_differ")) == {0}
    (finding,) = report.findings
    assert finding.code == "DET203" and finding.message.endswith("structure only, same numbers")
    assert report.table("first_divergence").rows[0][6] == "structure"


def _lcs(a, b) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


SEQ = st.lists(st.integers(0, 5), max_size=25)


@settings(max_examples=400, deadline=None)
@given(SEQ, SEQ)
def test_alignment_is_a_longest_common_subsequence_plus_moves(a, b):
    al = align(a, b)
    straight = [(x, y) for x, y in al.pairs if x not in al.moved]
    assert all(a[x] == b[y] for x, y in al.pairs)
    assert all(p[0] < q[0] and p[1] < q[1] for p, q in zip(straight, straight[1:]))
    assert len(straight) == _lcs(a, b)
    assert len(al.pairs) + len(al.only_a) == len(a)
    assert len(al.pairs) + len(al.only_b) == len(b)
    assert not ({a[x] for x in al.only_a} & {b[y] for y in al.only_b})  # a leftover key on both sides would be a move


@settings(max_examples=100, deadline=None)
@given(SEQ, st.lists(st.tuples(st.integers(0, 30), st.integers(100, 120)), max_size=5))
def test_inserting_k_elements_costs_exactly_k(a, inserts):
    b = list(a)
    for position, value in sorted(inserts, reverse=True):
        b.insert(min(position, len(b)), value)
    al = align(a, b)
    assert al.only_a == [] and not al.moved
    assert sorted(b[y] for y in al.only_b) == sorted(v for _, v in inserts)


def test_past_the_edit_limit_it_still_aligns():
    a = list(range(1000))
    b = list(range(1000, 2000)) + list(range(0, 1000, 2))
    al = align(a, b, max_edits=16)
    assert all(a[x] == b[y] for x, y in al.pairs)
    assert len(al.pairs) == 500
