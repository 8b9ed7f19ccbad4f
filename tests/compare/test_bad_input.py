"""Bad input gets a clear message and exit 2, never a traceback; the reader is fuzzed with hypothesis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opscan.compare import compare_records
from opscan.compare.reader import Record, RecordError, read_all
from opscan.output import FORMATS, render
from tests.compare.records import RecordWriter, run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("good") / "a.jsonl"
    run(steps=2).write(path)
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _write(path: Path, lines: list[str], newline: bool = True) -> Path:
    path.write_text("\n".join(lines) + ("\n" if newline else ""))
    return path


def _errors(a, b) -> list[str]:
    report = compare_records(str(a), str(b))
    for fmt in FORMATS:  # every format renders a report that stopped
        render(report, fmt)
    return [e.message for e in report.errors]


def test_missing_file(good, tmp_path):
    (message,) = _errors(good, tmp_path / "nope.jsonl")
    assert message == f"{tmp_path / 'nope.jsonl'}: no such file"


def test_directory(good, tmp_path):
    (message,) = _errors(good, tmp_path)
    assert message == f"{tmp_path} is a directory, not a record"


def test_empty(good, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    (message,) = _errors(good, empty)
    assert message.endswith("is empty, not a record")


def test_unreadable(good, tmp_path, monkeypatch):
    import builtins

    real_open = builtins.open

    def refusing(path, *args, **kwargs):
        if str(path).endswith("secret.jsonl"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    (tmp_path / "secret.jsonl").write_text("{}")
    monkeypatch.setattr(builtins, "open", refusing)  # root reads anything: refuse by hand
    (message,) = _errors(good, tmp_path / "secret.jsonl")
    assert message == f"cannot read {tmp_path / 'secret.jsonl'}: permission denied"


def test_binary_garbage(good, tmp_path):
    garbage = tmp_path / "model.pt"
    garbage.write_bytes(bytes(range(256)) * 64)
    (message,) = _errors(good, garbage)
    assert "is not an opscan record" in message


def test_long_binary_first_line(good, tmp_path):
    garbage = tmp_path / "weights.bin"
    garbage.write_bytes(b"\x01" * (2 << 20))
    (message,) = _errors(good, garbage)
    assert "is not an opscan record" in message


@pytest.mark.parametrize(
    "first, why",
    [
        ('{"hello": "world"}', 'has no "format": "opscan-record"'),
        ("[1, 2, 3]", 'has no "format": "opscan-record"'),
        ("not json at all", "its first line is not JSON"),
        ('{"type": "op", "format": "opscan-record"}', "the first line is not the header"),
        ('{"type": "header", "format": "opscan-record", "version": 2, "fingerprint": "x"}', "format version 2; this opscan reads version 1"),
        ('{"type": "header", "format": "opscan-record", "version": "1", "fingerprint": "x"}', "format version '1'"),
        ('{"type": "header", "format": "opscan-record", "version": 1}', 'does not name its "fingerprint" scheme'),
        ('{"type": "header", "format": "opscan-record", "version": 1, "fingerprint": "x", "env": {"a": [1]}}', '"env" is not an object of plain values'),
        ('{"type": "header", "format": "opscan-record", "version": 1, "fingerprint": "x", "sources": ["a.py"]}', '"sources" is not an object of file digests'),
        ('{"type": "header", "format": "opscan-record", "version": 1, "fingerprint": "x", "sources": {"a.py": 1}}', '"sources" is not an object of file digests'),
    ],
)
def test_foreign_or_mismatched_header(good, tmp_path, first, why):
    path = _write(tmp_path / "b.jsonl", [first, '{"type": "end"}'])
    (message,) = _errors(good, path)
    assert why in message, message


def test_different_fingerprint_schemes(good, tmp_path):
    other = tmp_path / "b.jsonl"
    run(steps=2).write(other)
    text = other.read_text().replace('"fingerprint": "test-blake2b-f32"', '"fingerprint": "sha256"', 1)
    other.write_text(text)
    (message,) = _errors(good, other)
    assert message == (
        f"the records use different fingerprint schemes ({good}: test-blake2b-f32, {other}: sha256), "
        "so they cannot be compared bit for bit; record both with the same --fingerprint"
    )


@pytest.mark.parametrize(
    "mutate, why",
    [
        (lambda d: d.update({"in": "9a0c"}), "not a valid op line: 'in' is not a list"),
        (lambda d: d.update({"out": [1, 2]}), "'out' holds int, not fingerprints"),
        (lambda d: d.update({"op": None}), "'op' is not a string"),
        (lambda d: d.update({"shapes": [[1, [2]]]}), "'shapes' holds something other than lists of integers"),
        (lambda d: d.update({"module": 3}), "'module' is not a string"),
        (lambda d: d.update({"rng": [0]}), "'rng' is not an object"),
        (lambda d: d.pop("type"), 'a line without "type"'),
        (lambda d: d.update({"type": "header"}), "a second header"),
    ],
)
def test_damaged_op_line(good, tmp_path, mutate, why):
    lines = _lines(good)
    d = json.loads(lines[3])
    mutate(d)
    lines[3] = json.dumps(d)
    (message,) = _errors(good, _write(tmp_path / "b.jsonl", lines))
    assert message.startswith(f"{tmp_path / 'b.jsonl'}:4: ") and why in message and message.endswith("the record is damaged")


def test_a_bad_line_in_the_middle_is_damage_not_truncation(good, tmp_path):
    lines = _lines(good)
    lines[5] = lines[5][:20]
    (message,) = _errors(good, _write(tmp_path / "b.jsonl", lines))
    assert message == f"{tmp_path / 'b.jsonl'}:6: not a JSON line; the record is damaged"


def test_steps_out_of_order(good, tmp_path):
    lines = _lines(good)
    steps = [i for i, line in enumerate(lines) if '"type": "step"' in line]
    d = json.loads(lines[steps[1]])
    d["step"] = 0
    lines[steps[1]] = json.dumps(d)
    (message,) = _errors(good, _write(tmp_path / "b.jsonl", lines))
    assert "step 0 follows step 0" in message


@pytest.mark.parametrize(
    "mutate, why",
    [
        (lambda d: d.update({"params": None}), "'params' is not an object"),
        (lambda d: d.pop("params"), "no 'params'"),
        (lambda d: d.update({"params": []}), "'params' is not an object"),
        (lambda d: d.update({"params": {"fc1.weight": None}}), "parameter 'fc1.weight' is not an object"),
    ],
)
def test_damaged_step_line(good, tmp_path, mutate, why):
    # A null "params" used to read as "no parameters": compare said the runs match bit for bit.
    lines = _lines(good)
    index = next(i for i, line in enumerate(lines) if '"type": "step"' in line)
    d = json.loads(lines[index])
    mutate(d)
    lines[index] = json.dumps(d)
    (message,) = _errors(good, _write(tmp_path / "b.jsonl", lines))
    assert message == f"{tmp_path / 'b.jsonl'}:{index + 1}: not a valid step line: {why}; the record is damaged"


def test_last_line_cut_is_dropped_with_a_notice(good, tmp_path):
    lines = _lines(good)[:-1]  # no end line
    lines[-1] = lines[-1][:-7]  # and the last step line half written
    report = compare_records(str(good), str(_write(tmp_path / "b.jsonl", lines, newline=False)))
    assert any("is cut short; dropped it" in n for n in report.notices)
    (error,) = report.errors
    assert "was cut short after step 0 (no `end` line)" in error.message
    assert "the 17 ops of the unfinished step after it are not compared" in error.message
    assert report.exit_code() == 2
    assert [r[0] for r in report.table("spread").rows] == [0]


def test_cut_before_the_first_step(good, tmp_path):
    lines = _lines(good)[:4]
    report = compare_records(str(good), str(_write(tmp_path / "b.jsonl", lines)))
    messages = [e.message for e in report.errors]
    assert any("was cut short before its first step finished" in m for m in messages)
    assert report.exit_code() == 2


def test_only_a_header(good, tmp_path):
    path = _write(tmp_path / "b.jsonl", _lines(good)[:1])
    report = compare_records(str(path), str(path))
    assert report.exit_code() == 2


def test_unknown_line_types_and_fields_are_ignored(good, tmp_path):
    lines = _lines(good)
    d = json.loads(lines[2])
    d["future_field"] = {"x": 1}
    lines[2] = json.dumps(d)
    lines.insert(3, json.dumps({"type": "memory", "bytes": 123}))
    report = compare_records(str(good), str(_write(tmp_path / "b.jsonl", lines)))
    assert report.exit_code() == 0, report.errors


def test_a_bare_parameter_reference_takes_the_previous_steps_fingerprint(tmp_path):
    """`p:NAME` without a fingerprint (the record format's older example) is read as the parameter after the last step."""
    good = tmp_path / "a.jsonl"
    run(steps=2).write(good)
    bare = [json.dumps(_strip_param_fps(json.loads(line))) for line in _lines(good)]
    path = _write(tmp_path / "b.jsonl", bare)
    steps = read_all(str(path)).steps
    ins = [fp for op in steps[1].ops for fp in op.ins if fp and fp.startswith("p:")]
    assert ins and all("@" in fp for fp in ins)
    originals = read_all(str(good)).steps
    assert [op.ins for op in steps[1].ops] == [op.ins for op in originals[1].ops]
    assert all("@" not in fp for op in steps[0].ops for fp in op.ins if fp and fp.startswith("p:"))


def _strip_param_fps(d: dict) -> dict:
    if d.get("type") == "op":
        d["in"] = [fp.split("@")[0] if fp and fp.startswith("p:") else fp for fp in d["in"]]
    return d


def test_record_error_names_the_file(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("garbage\n")
    with pytest.raises(RecordError, match="x.jsonl is not an opscan record"):
        Record(str(path))


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: tmp,  # a directory
        lambda tmp: tmp / "missing.jsonl",
        lambda tmp: (tmp / "g.bin").write_bytes(b"\x00\xff" * 100) and tmp / "g.bin",
        lambda tmp: (tmp / "e.jsonl").write_bytes(b"") or tmp / "e.jsonl",
    ],
)
def test_command_line_exit_2_without_traceback(good, tmp_path, make):
    bad = make(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for fmt in ("text", "json"):
        proc = subprocess.run(
            [sys.executable, "-m", "opscan", "compare", str(good), str(bad), "--output-format", fmt],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr + proc.stdout
        assert "error:" in (proc.stdout if fmt == "text" else proc.stderr)


def test_compare_never_imports_torch(good, tmp_path):
    out = str(tmp_path / "report.txt")
    code = (
        "import sys; from opscan.cli import main; "
        f"rc = main(['compare', {str(good)!r}, {str(good)!r}, '-o', {out!r}]); "
        "assert 'torch' not in sys.modules, 'compare imported torch'; sys.exit(rc)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- fuzzing

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(st.binary(max_size=2000))
def test_fuzz_bytes_never_raise(good, tmp_path, data):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)
    report = compare_records(str(good), str(path))
    assert report.exit_code() == 2
    render(report, "text")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(
    line=st.integers(min_value=0, max_value=40),
    key=st.sampled_from(["type", "op", "in", "out", "shapes", "rng", "step", "params", "loss", "norm", "module", "file", "line", "i", "env", "version"]),
    value=JSON_VALUES,
    cut=st.one_of(st.none(), st.integers(min_value=0, max_value=5000)),
)
def test_fuzz_mutated_records_never_raise(good, tmp_path, line, key, value, cut):
    lines = _lines(good)
    index = line % len(lines)
    d = json.loads(lines[index])
    d[key] = value
    lines[index] = json.dumps(d)
    text = "\n".join(lines) + "\n"
    if cut is not None:
        text = text[: len(text) - cut]
    path = tmp_path / "mutated.jsonl"
    path.write_text(text)
    report = compare_records(str(good), str(path))
    assert report.exit_code() in (0, 1, 2)
    for fmt in ("text", "json", "sarif"):
        out = render(report, fmt)
        if fmt != "text":
            json.loads(out, parse_constant=_no_constant)  # strict JSON: no NaN or Infinity tokens


def _no_constant(name):
    raise AssertionError(f"the report's JSON holds {name}")


def test_writer_helper_round_trips(tmp_path):
    w = RecordWriter()
    w.end(0)
    w.write(tmp_path / "r.jsonl")
    record = read_all(str(tmp_path / "r.jsonl"))
    assert record.steps == [] and not record.cut_short


def test_numbers_too_large_for_a_float(good, tmp_path):
    lines = _lines(good)
    for index in (3, next(i for i, line in enumerate(lines) if '"type": "step"' in line)):
        d = json.loads(lines[index])
        d["norm" if d["type"] == "op" else "loss"] = 10**400
        lines[index] = json.dumps(d)
    report = compare_records(str(good), str(_write(tmp_path / "b.jsonl", lines)))
    assert report.exit_code() in (0, 1)
    json.loads(render(report, "json"), parse_constant=_no_constant)


def test_a_record_compared_with_itself_says_so(good, tmp_path):
    report = compare_records(str(good), str(good))
    assert not report.errors and not report.findings
    assert report.notices[0] == f"warning: {good} and {good} are the same file; a record always matches itself"
    copy = tmp_path / "b.jsonl"
    copy.write_bytes(good.read_bytes())  # an equal copy is a real second record: no warning
    assert not any("same file" in n for n in compare_records(str(good), str(copy)).notices)


def test_one_step_is_counted_in_the_singular(tmp_path):
    path = tmp_path / "one.jsonl"
    run(steps=1).write(path)
    notices = compare_records(str(path), str(path)).notices
    assert notices[-1].startswith("the runs match bit for bit: 1 step, ") and " 1 steps" not in notices[-1]
