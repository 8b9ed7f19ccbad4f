"""Plain text read with str methods, where a pattern used to read it: each reading must be the pattern's.

opscan.versions reads plain versions and clauses so, opscan.codes a rule's
docstring (every rule parses its own at import) and a selector, opscan.rules
the releases, opscan.lint.target requirement names and file names; the facts
pass asks its noqa patterns only about lines that name "noqa".

The patterns are compiled only for text that is not plain (it cost a cold lint
more than the rules it serves); here every reading is compared with what the
pattern itself gives, on text built from the characters that matter to it.
"""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from opscan import codes, rules, versions
from opscan.lint import facts, target

# Digits (ASCII, and others \d matches), dots, operators, whitespace (ASCII and not),
# the letters of labels in both cases (and ones re.I folds onto them), and the rest.
ALPHABET = "0123456789" "٣०" ".*!+-_" "<>=~!" " \t\n\u00a0\u2003" "aAbBcCrRpPeEvVdDsStTlLhH" "\u017f\u212a" "x,#"
texts = st.text(alphabet=ALPHABET, max_size=14)
plainish = st.builds(
    lambda op, space, parts, star, tail: f"{op}{space}{'.'.join(parts)}{star}{tail}",
    st.sampled_from(["", "~=", "===", "==", "!=", "<=", ">=", "<", ">", "=", "~", "=<"]),
    st.sampled_from(["", " ", "  ", "\t", "\u00a0"]),
    st.lists(st.text(alphabet="0123456789", max_size=3), min_size=1, max_size=4),
    st.sampled_from(["", ".*", "*", ".*.*"]),
    st.sampled_from(["", " ", "rc1", "+cu130", ".post1", "a0", "\u017f"]),
)


def _version_by_pattern(text: str):
    m = re.match(versions._VERSION, str(text))
    if not m:
        return ValueError
    parts = tuple(int(p) for p in m.group(1).split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts


def _version(text: str):
    try:
        return versions.parse_version(text)
    except ValueError:
        return ValueError


CODES = ("DET000", "DET001", "DET010", "DET011")


@given(st.text(alphabet="DETdetX0123456789٣\u017f\u212a ,", max_size=8))
@example("DET0")
@example("DET0001")
@example("D")
@example("0")
def test_selector_is_the_patterns(raw):
    # What expand_selectors gives (a set, or the error) against what it gave with the pattern.
    sel = raw.strip().upper()
    matched = {c for c in CODES if c.startswith(sel)}
    by_pattern = bool(matched) and bool(re.fullmatch(r"[A-Z]+\d{0,3}", sel))
    if sel and sel != "ALL":
        assert (bool(matched) and codes._selector(sel)) == by_pattern


@given(st.text(alphabet="#nNoOqQaA: \tDET0,x\u017f\u212a\u0131\u0130opscan", max_size=24))
@example("# noqa")
@example("# NOQA: DET001")
@example("# opscan: noqa")
@example("x = 1  # NoQa:DET001,DET002")
def test_noqa_lines_are_read_as_the_patterns_read_them(line):
    expected_line, expected_file = {}, False
    if "#" in line:
        m = re.match(facts._FILE_NOQA, line, re.I)
        if m:
            expected_file = None if not m.group("codes") else frozenset(c.upper() for c in re.split(r"[\s,]+", m.group("codes").strip()) if c)
        else:
            m = re.search(facts.NOQA_DIRECTIVE, line, re.I)
            if m:
                expected_line = {1: None if not m.group("codes") else frozenset(c.upper() for c in re.split(r"[\s,]+", m.group("codes").strip()) if c)}
    assert facts.scan_noqa([line]) == (expected_line, expected_file)


@given(st.one_of(texts, plainish))
@example("2.14")
@example("2.11.0")
@example("٣.4")
@example(" 2.4")
@example("2.")
def test_parse_version_is_the_patterns(text):
    assert _version(text) == _version_by_pattern(text)


def _range_by_pattern(clause: str):
    m = re.match(versions._CLAUSE, clause)
    return (m.group(1), m.group(2)) if m else None


@given(st.one_of(texts, plainish).map(str.strip))
@example(">=2.1")
@example("> =2")
@example("<=2")
@example("== 2.4")
@example(">=٣")
def test_range_clause_is_the_patterns(clause):
    assert versions._range_clause(clause) == _range_by_pattern(clause)


def _spec_by_pattern(part: str):
    m = re.match(versions._SPEC_CLAUSE, part, re.I)
    return (m["op"], m["epoch"], m["release"], bool(m["star"]), m["label"]) if m else None


def _spec(part: str):
    found = versions._spec_clause(part)
    return (found.op, found.epoch, found.release, found.star, found.label) if found is not None else None


@given(st.one_of(texts, plainish).map(str.strip))
@example("2.11")
@example("==2.11.*")
@example("===2.4")
@example("== 2.4")
@example("~=2.4")
@example("1!2.4")
@example("2.4rc1")
@example("2.4.*.*")
@example("==.*")
@example("2.4\u017f")
def test_spec_clause_is_the_patterns(part):
    assert _spec(part) == _spec_by_pattern(part)



heads = st.one_of(
    st.text(alphabet="ADETZ019٣ az-:\n\t_.x", max_size=20),
    st.builds(
        lambda code, sep, name, colon, summary: f"{code}{sep}{name}{colon}{summary}",
        st.sampled_from(["DET001", "DET01", "D001", "det001", "DE1T001", "DET٣01", "DETX001", "001", ""]),
        st.sampled_from([" ", "  ", "", "\t"]),
        st.sampled_from(["unseeded-rng", "a", "A", "", "a b", "a:b", "a_b", "x-1"]),
        st.sampled_from([": ", ":", ":  ", " : ", ": : "]),
        st.sampled_from(["summary", "", " ", "a\nb", "x: y"]),
    ),
)


@given(heads)
@example("DET001 unseeded-rng: a summary")
def test_rule_doc_head_is_the_patterns(line):
    m = re.match(codes._HEAD, line)
    assert codes._head(line) == ((m["code"], m["name"], m["summary"]) if m else None)


@given(st.text(alphabet="#\n ab", max_size=30))
@example("## A\nbody\n## B\n")
@example("intro\n## A")
def test_rule_doc_sections_are_the_splits(rest):
    doc = f"DET001 name: summary\n{rest}"
    expected = []
    for block in re.split(r"^## ", doc.strip().partition("\n")[2], flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        expected.append((title.strip(), body.strip()))
    assert codes.parse_doc(doc).sections == tuple(expected)


@given(st.one_of(texts, plainish))
@example("2.14")
@example("2.14\n")
@example("٣.4")
@example("2.14.1")
def test_release_is_the_patterns(text):
    assert rules._is_release(text) == bool(re.match(rules._RELEASE, text))


# ---------------------------------------------------------------- requirements (opscan.lint.target)

requirement_texts = st.text(alphabet="torchTa9._- \t\u00a0[]=<>;@#\\\n\u017f\u212a٣İı", max_size=16)


@given(requirement_texts)
@example("torch==2.14.1")
@example("  torch_-")
@example("-torch")
@example("t")
def test_requirement_name_is_the_patterns(text):
    m = re.match(target._REQ_NAME, text)
    assert target._requirement_name(text) == ((m.group(1), m.end()) if m else None)


@given(requirement_texts)
@example("Torch_.-x")
def test_normalize_name_is_the_patterns(name):
    assert target.normalize_name(name) == re.sub(r"[-_.]+", "-", name).lower()


@given(st.builds(lambda tail: "requirements" + tail, st.text(alphabet="tTxXiInN.\n\u0131\u017f\u212a-_a", max_size=8)))
@example("requirements.txt")
@example("requirements.txt\n")
@example("requirements.\u0131n")
@example("REQUIREMENTS-dev.IN")
def test_requirements_file_name_is_the_patterns(name):
    assert target._requirements_name(name) == bool(re.match(target._REQUIREMENTS, name))


@given(st.text(alphabet="torch=2.4 \t\u00a0-ha:x", max_size=24))
@example("torch==2.4 --hash=sha256:x")
@example("pre-commit>=3")
@example("torch \u00a0-x")
def test_options_are_cut_as_the_pattern_cuts(line):
    assert target._without_options(line) == re.split(r"\s+--?[a-z]", line, maxsplit=1)[0]


@given(st.text(alphabet="# \t\u00a0\u2003torch=2#", max_size=20))
@example("# a comment")
@example("torch==2.4  # pinned")
@example("torch#x # y")
@example(" #x")
def test_comments_are_cut_as_the_pattern_cuts(line):
    assert target._without_comment(line) == re.sub(r"(^|\s)#.*$", "", line)
