"""The op rule database in rules/*.toml: it loads, it is well formed, and the version logic holds.

Needs no torch. What each op claims about torch is checked against real
alerts by tests/gpu/test_rule_reproducers.py (CUDA, and put_/max_unpool on CPU).
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opscan import rules
from opscan.lint.model import UNKNOWN
from opscan.rules import (
    NEWEST_TORCH,
    Api,
    RulesError,
    load,
    load_file,
    parse_version,
    version_in_range,
)

DB = load()
OPS = DB.ops
IDS = [op.id for op in OPS]
ALL_APIS = [(op, api) for op in OPS for api in op.apis]
API_IDS = [f"{op.id}:{api.name}" for op, api in ALL_APIS]
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ---------------------------------------------------------------- the data loads and is complete


def test_database_is_not_empty_and_ids_are_unique():
    assert len(OPS) >= 30
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_op_is_complete(op):
    assert re.fullmatch(r"[a-z][a-z0-9_]*", op.id), "ids are stable snake_case"
    assert op.title and op.title != op.id
    assert op.apis, "at least one user-facing route"
    assert op.aten and all(re.fullmatch(r"(aten|torchvision)\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+", a) for a in op.aten)
    assert op.callers and all(c.strip() == c and c for c in op.callers)
    assert op.phase in ("forward", "backward")
    assert set(op.devices) <= {"cpu", "cuda"} and op.devices
    assert op.torch, "every op names the torch range in which it raises"
    assert op.remedy.strip() and op.remedy.rstrip().endswith(".")
    assert op.reproducer.strip()
    assert op.provenance.strip()


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_snippets_are_valid_python(op):
    ast.parse(textwrap.dedent(op.reproducer))
    if op.remedy_code.strip():
        ast.parse(textwrap.dedent(op.remedy_code))
    if op.remedy_reproducer.strip():
        ast.parse(op.remedy_reproducer)


def _undefined_names(source: str) -> set[str]:
    """Names a snippet reads that it neither imports, assigns, defines nor gets in scope (torch, nn, F, device)."""
    tree = ast.parse(source)
    imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assigned |= {e.id for n in ast.walk(tree) if isinstance(n, ast.Tuple) for e in n.elts if isinstance(e, ast.Name)}
    assigned |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assigned |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) for a in n.args.args}
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - {"torch", "nn", "F", "device"} - imported - assigned - set(dir(builtins))


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_reproducer_uses_only_the_documented_names(op):
    """Reproducers (and remedy reproducers) run with torch, nn, F and device in scope; anything else they must import."""
    for source in filter(None, (op.reproducer, op.remedy_reproducer)):
        assert not _undefined_names(source), f"undefined names in {source!r}: {_undefined_names(source)}"
        loaded = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
        assert "device" in loaded, "the snippet must build its tensors on `device`"


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_report_fields(op):
    assert op.dtypes and len(set(op.dtypes)) == len(op.dtypes) and set(op.dtypes) <= set(rules.DTYPES)
    assert op.dtypes[0] == "float32", "the first dtype is the reproducer's own, which the GPU tests check"


def test_most_remedies_are_runnable():
    """The families whose remedy is an equivalent op carry a remedy_reproducer; the rest are the documented few."""
    without = {op.id for op in OPS if not op.remedy_reproducer.strip()}
    assert without == {
        "torchvision_roi_align_backward", "torchvision_roi_pool_backward",
        "torchvision_ps_roi_align_backward", "torchvision_ps_roi_pool_backward",
    }


@pytest.mark.parametrize("op", [op for op in OPS if "cuda" in op.devices], ids=lambda op: op.id)
def test_some_version_raises(op):
    versions = [f"{major}.{minor}" for major, minor in [(1, m) for m in range(8, 14)] + [(2, m) for m in range(16)]]
    assert any(op.raises_on(v, "cuda") for v in versions), "a range nothing satisfies is dead data"


def test_callers_and_aten_lookups():
    assert DB.by_caller("adaptive_avg_pool2d_backward_cuda").id == "adaptive_avg_pool2d_backward"
    assert DB.by_caller("upsample_bicubic2d_backward_out_cuda").id == "upsample_bicubic2d_backward"
    assert DB.by_caller("median CUDA with indices output").id == "median_dim"
    assert DB.by_caller("no such caller") is None
    assert DB.by_aten("aten._adaptive_avg_pool2d_backward.default").id == "adaptive_avg_pool2d_backward"
    assert DB.by_aten("aten.reflection_pad3d_backward.grad_input").id == "reflection_pad3d_backward"
    # a packet without its overload still finds the op, and unrelated ops do not match
    assert DB.by_aten("aten.grid_sampler_3d_backward").id == "grid_sampler_backward"
    assert DB.by_aten("aten::histc").id == "histc"
    assert DB.by_aten("aten.add.Tensor") is None


def test_every_caller_maps_back_to_an_op_that_lists_it():
    for op in OPS:
        for caller in op.callers:
            assert caller in DB.by_caller(caller).callers
        for name in op.aten:
            assert name in DB.by_aten(name).aten


# Strings two rules share, on purpose: the alert alone cannot tell them apart (put_ vs put_ with
# accumulate=True; the two max_pool3d ranges; weighted vs unweighted bincount; scatter_reduce modes).
SHARED = {
    ("max_pool3d_backward", "max_pool3d_with_indices_backward"),
    ("bincount_weights", "bincount_unweighted"),
    ("put", "put_accumulate"),
    ("scatter_reduce_prod", "scatter_reduce_other"),
}


def _versions():
    return [f"1.{m}" for m in range(8, 14)] + [f"2.{m}" for m in range(15)]


def test_for_alert_maps_every_caller_and_overload_back_to_its_rule():
    """The one lookup scan, report and prediction share: each rule's own strings find that rule."""
    seen_shared = set()
    for rule in OPS:
        for caller in rule.callers:
            assert DB.for_alert(caller).id in {rule.id} | {a if b == rule.id else b for a, b in SHARED if rule.id in (a, b)}
        for name in rule.aten:
            assert DB.for_alert("", name).id in {rule.id} | {a if b == rule.id else b for a, b in SHARED if rule.id in (a, b)}
        for version in _versions():
            for device in rule.devices:
                if not rule.raises_on(version, device):
                    continue
                for key in [(c, "") for c in rule.callers] + [("", a) for a in rule.aten]:
                    found = DB.for_alert(*key, torch_version=version, device=device)
                    if found.id != rule.id:
                        pair = tuple(sorted((found.id, rule.id)))
                        assert any(tuple(sorted(p)) == pair for p in SHARED), (key, version, device, found.id, rule.id)
                        seen_shared.add(pair)
    assert seen_shared == {tuple(sorted(p)) for p in SHARED}  # the list above holds no stale pair


def test_torchvision_ops_find_their_own_rule():
    torchvision = [rule for rule in OPS if rule.id.startswith("torchvision_")]
    assert torchvision
    for rule in torchvision:
        for name in rule.aten:
            namespace, _, rest = name.partition(".")
            forward = rest.split(".")[0].lstrip("_").removesuffix("_backward")
            for spelling in (name, f"{namespace}::{rest}", f"{namespace}.{forward}.default", f"{namespace}::{forward}"):
                assert DB.for_alert("x", spelling).id == rule.id, spelling
    # The new user's case: ps_roi_pool is not roi_align.
    assert DB.for_alert("x", "torchvision.ps_roi_pool.default").id == "torchvision_ps_roi_pool_backward"
    assert DB.for_alert("x", "aten.ps_roi_pool.default") is None  # another namespace's op of that name


def test_remedy_for_uses_the_shapes_only_where_the_rule_says():
    pool = DB.for_alert("adaptive_avg_pool2d_backward_cuda")
    same = pool.remedy_for([[2, 8, 7, 7], [2, 8, 7, 7]], op="aten._adaptive_avg_pool2d_backward.default", module_label="head.pool")
    assert (same.code, same.source) == ("nn.Identity()", "shape") and "(head.pool)" in same.text
    odd = pool.remedy_for([[2, 8, 3, 3], [2, 8, 7, 7]], op="aten._adaptive_avg_pool2d_backward.default")
    assert odd.source == "rule:adaptive_avg_pool2d_backward" and odd.text == pool.remedy.strip()
    histc = DB.for_alert("_histc_cuda")
    assert histc.remedy_for([[2, 8, 7, 7], [2, 8, 7, 7]]).source == "rule:histc"


def test_newest_target():
    newest = {op.id for op in DB.for_target(NEWEST_TORCH, "cuda")}
    # what torch 2.14 still raises on CUDA
    assert {"upsample_bicubic2d_backward", "adaptive_avg_pool2d_backward", "reflection_pad1d_backward", "put", "median_dim"} <= newest
    # what it no longer raises
    assert not newest & {"upsample_bilinear2d_backward", "upsample_trilinear3d_backward", "kthvalue", "cumsum", "reflection_pad2d_backward", "replication_pad1d_backward"}
    assert {op.id for op in DB.for_target(NEWEST_TORCH, "cpu")} == {"put", "max_unpool2d_forward", "max_unpool3d_forward"}


# ---------------------------------------------------------------- api entries are well formed


@pytest.mark.parametrize(("op", "api"), ALL_APIS, ids=API_IDS)
def test_api_is_well_formed(op, api):
    assert api.kind in ("function", "layer", "method")
    if api.kind == "method":
        assert IDENT.match(api.name), "methods are bare names like put_"
    else:
        assert re.fullmatch(r"(torch|torchvision)(\.[A-Za-z_][A-Za-z0-9_]*)+", api.name)
    if api.kind == "layer":
        assert api.name.split(".")[-1][0].isupper(), "a layer is an nn.Module constructor"
    assert len(set(api.args)) == len(api.args)
    assert all(IDENT.match(a) for a in api.args + api.keywords)
    assert not set(api.args) & set(api.keywords)
    if api.kind == "function" and api.name.startswith(("torch.nn.functional.", "torchvision.ops.")) and api.args:
        assert api.args[0] in ("input", "log_probs"), "functionals take the tensor first"
    if api.kind in ("layer", "method"):
        assert "input" not in api.args and "self" not in api.args


@pytest.mark.parametrize(("op", "api"), ALL_APIS, ids=API_IDS)
def test_when_reads_known_parameters(op, api):
    known = set(api.args) | set(api.keywords) | set(api.defaults)
    for alternative in api.when:
        assert alternative
        for arg, pred in alternative.items():
            (key, operand), = pred.items()
            assert key in rules.PREDICATES
            if key == "runtime":
                assert isinstance(operand, str) and operand, "say what is decided at run time"
                continue
            assert arg in known, f"{api.name}: `when` reads {arg!r}, which is not in args, keywords or defaults"
            if key in ("in", "not_in", "len_in"):
                assert isinstance(operand, list)
    assert set(api.defaults) <= set(api.args) | set(api.keywords)


def _api(op_id: str, name: str) -> Api:
    return next(api for api in next(op for op in OPS if op.id == op_id).apis if api.name == name)


INTERP = "torch.nn.functional.interpolate"


@pytest.mark.parametrize(
    ("op_id", "name", "bound", "expected"),
    [
        ("upsample_bicubic2d_backward", INTERP, {"mode": "bicubic"}, True),
        ("upsample_bicubic2d_backward", INTERP, {"mode": "bicubic", "antialias": True}, False),
        ("upsample_bicubic2d_aa_backward", INTERP, {"mode": "bicubic", "antialias": True}, True),
        ("upsample_bicubic2d_backward", INTERP, {}, False),
        ("upsample_bicubic2d_backward", INTERP, {"mode": UNKNOWN}, None),
        ("upsample_linear1d_backward", INTERP, {"mode": "linear"}, True),
        ("adaptive_avg_pool2d_backward", "torch.nn.AdaptiveAvgPool2d", {"output_size": 7}, True),
        ("adaptive_avg_pool2d_backward", "torch.nn.AdaptiveAvgPool2d", {"output_size": (7, 7)}, True),
        ("adaptive_avg_pool2d_backward", "torch.nn.AdaptiveAvgPool2d", {"output_size": 1}, False),
        ("adaptive_avg_pool2d_backward", "torch.nn.AdaptiveAvgPool2d", {"output_size": (1, 1)}, False),
        ("adaptive_avg_pool2d_backward", "torch.nn.AdaptiveAvgPool2d", {"output_size": (1, UNKNOWN)}, None),
        ("adaptive_avg_pool2d_backward", "torch.nn.AdaptiveAvgPool2d", {"output_size": UNKNOWN}, None),
        ("adaptive_avg_pool3d_backward", "torch.nn.AdaptiveAvgPool3d", {"output_size": (1, 1, 1)}, False),
        ("embedding_bag_max_backward", "torch.nn.EmbeddingBag", {"num_embeddings": 10, "mode": "max"}, True),
        ("embedding_bag_max_backward", "torch.nn.EmbeddingBag", {"num_embeddings": 10}, False),
        ("embedding_bag_max_backward", "torch.nn.EmbeddingBag.from_pretrained", {"mode": "max"}, False),
        ("embedding_bag_max_backward", "torch.nn.EmbeddingBag.from_pretrained", {"mode": "max", "freeze": False}, True),
        ("bincount_weights", "torch.bincount", {"input": UNKNOWN, "weights": UNKNOWN}, True),
        ("bincount_weights", "torch.bincount", {"input": UNKNOWN}, False),
        ("bincount_weights", "torch.bincount", {"input": UNKNOWN, "weights": None}, False),
        ("median_dim", "torch.median", {"input": UNKNOWN, "dim": 1}, True),
        ("median_dim", "torch.median", {"input": UNKNOWN}, False),
        ("median_dim", "median", {}, False),
        ("median_dim", "median", {"dim": 0}, True),
        ("put", "put_", {"index": UNKNOWN, "source": UNKNOWN}, True),
        ("put", "put_", {"accumulate": True}, False),
        ("put_accumulate", "put_", {"accumulate": True}, True),
        ("put_accumulate", "put_", {"accumulate": UNKNOWN}, None),
        ("scatter_reduce_prod", "scatter_reduce", {"reduce": "prod"}, True),
        ("scatter_reduce_prod", "scatter_reduce", {"reduce": "amax"}, False),
        ("scatter_multiply", "scatter_", {"reduce": "multiply"}, True),
        ("scatter_multiply", "scatter_", {}, False),
        ("reflection_pad1d_backward", "torch.nn.functional.pad", {"pad": (1, 1), "mode": "reflect"}, True),
        ("reflection_pad1d_backward", "torch.nn.functional.pad", {"pad": (1, 1, 1, 1), "mode": "reflect"}, False),
        ("reflection_pad3d_backward", "torch.nn.functional.pad", {"pad": [1] * 6, "mode": "reflect"}, True),
        ("reflection_pad1d_backward", "torch.nn.functional.pad", {"pad": UNKNOWN, "mode": "reflect"}, None),
        ("reflection_pad1d_backward", "torch.nn.functional.pad", {"pad": (1, 1)}, False),
        ("max_pool3d_backward", "torch.nn.MaxPool3d", {"kernel_size": 2}, True),
        ("max_pool3d_backward", "torch.nn.MaxPool3d", {"kernel_size": 2, "return_indices": True}, False),
        ("max_pool3d_with_indices_backward", "torch.nn.MaxPool3d", {"kernel_size": 2, "return_indices": True}, True),
        ("grid_sampler_backward", "torch.nn.functional.grid_sample", {}, True),
        ("grid_sampler_backward", "torch.nn.functional.grid_sample", {"align_corners": True}, False),
        ("grid_sampler_backward", "torch.nn.functional.grid_sample", {"align_corners": True, "mode": "nearest"}, True),
        ("grid_sampler_backward", "torch.nn.functional.grid_sample", {"align_corners": UNKNOWN}, None),
        ("nll_loss2d_forward", "torch.nn.CrossEntropyLoss", {}, None),
        ("nll_loss2d_forward", "torch.nn.CrossEntropyLoss", {"reduction": "none"}, False),
        ("cumsum", "torch.cumsum", {"input": UNKNOWN, "dim": 0}, None),
        ("histc", "torch.histc", {"input": UNKNOWN}, True),
    ],
)
def test_when_semantics(op_id, name, bound, expected):
    assert _api(op_id, name).matches(bound) is expected


# ---------------------------------------------------------------- the loader rejects bad data


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ('id = "x"\ntitle = "x"\ncallers = ["c"]\nremedy = "r."\ntorch = ">=2"\nphase = "sideways"\n', "phase"),
        ('id = "x"\ncallers = ["c"]\ntorch = ">=2"\n', "missing key 'remedy'"),
        ('id = "x"\nremedy = "r."\ntorch = "~=2.1"\n', "bad version clause"),
        ('id = "x"\nremedy = "r."\ndevices = ["tpu"]\n', "devices"),
        ('id = "x"\nremedy = "r."\n[[op.api]]\nname = "f"\nkind = "macro"\n', "unknown kind"),
        ('id = "x"\nremedy = "r."\n[[op.api]]\nname = "f"\nwhen = [{ mode = { like = "a" } }]\n', "predicate"),
        ('id = "x"\nremedy = "r."\n[[op.api]]\nname = "f"\nwhen = [{ mode = { in = "a" } }]\n', "takes a list"),
        ('id = "x"\nremedy = "r."\n[[op.api]]\nkind = "layer"\n', "without a name"),
        ('id = "x"\nremedy = "r."\ndtypes = ["int64"]\n', "dtypes must be"),
        ('id = "x"\nremedy = "r."\ndtypes = []\n', "dtypes must be"),
        ('id = "x"\nremedy = "r."\ndtypes = ["float16", "float16"]\n', "dtypes must be"),
        ('id = "x"\nremedy = "r."\nremedy_reproducer = 3\n', "remedy_reproducer must be"),
    ],
)
def test_loader_rejects_bad_data(tmp_path: Path, snippet, message):
    path = tmp_path / "bad.toml"
    path.write_text("[[op]]\n" + snippet, encoding="utf-8")
    with pytest.raises(RulesError, match=re.escape(message)):
        load_file(path)


def test_loader_rejects_duplicate_ids_and_broken_toml(tmp_path: Path):
    op = '[[op]]\nid = "x"\nremedy = "r."\n'
    (tmp_path / "a.toml").write_text(op, encoding="utf-8")
    (tmp_path / "b.toml").write_text(op, encoding="utf-8")
    with pytest.raises(RulesError, match="duplicate op id"):
        load(str(tmp_path))
    (tmp_path / "b.toml").write_text("[[op]\n", encoding="utf-8")
    with pytest.raises(RulesError, match="b.toml"):
        load(str(tmp_path))


# ---------------------------------------------------------------- version ranges


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ("2.11.0+cu130", ">=2.1", True),
        ("2.11.0+cu130", ">=1.8,<2.10", False),
        ("2.9.1", ">=1.8,<2.10", True),
        ("2.10", ">=1.8,<2.10", False),
        ("2.10.0a0+git1234", "<2.10", False),  # a pre-release counts as its release
        ("2.1", "==2.1", True),
        ("2.1.2", "==2.1", True),
        ("2.10.0", "==2.1", False),
        ("2.10.0", "!=2.1", True),
        ("1.13.1", ">1.13", True),
        ("1.13.0", ">1.13", False),
        ("2.0", "<=2", True),
        ("2.14", "", True),
        ("2.14", " >=2.1 , <2.15 ", True),
    ],
)
def test_version_in_range(version, spec, expected):
    assert version_in_range(version, spec) is expected


def test_parse_version():
    assert parse_version("2.11.0+cu130") == (2, 11, 0)
    assert parse_version("2.14") == (2, 14, 0)
    assert parse_version("2") == (2, 0, 0)
    assert parse_version(" 2.5.1.post3") == (2, 5, 1)
    with pytest.raises(ValueError):
        parse_version("latest")


def test_bad_clause_is_a_rules_error():
    with pytest.raises(RulesError):
        version_in_range("2.1", ">=2.1,latest")


versions = st.tuples(st.integers(0, 3), st.integers(0, 20), st.integers(0, 12))
suffixes = st.sampled_from(["", "+cu130", "+cpu", "a0+git0f1e2d", ".dev20260101", "rc1", ".post2"])


def _text(v, suffix=""):
    return ".".join(map(str, v)) + suffix


@given(v=versions, suffix=suffixes, lo=versions, hi=versions)
def test_half_open_range_matches_tuple_order(v, suffix, lo, hi):
    spec = f">={_text(lo)},<{_text(hi)}"
    assert version_in_range(_text(v, suffix), spec) == (lo <= v < hi)


@given(v=versions, suffix=suffixes, bound=versions)
def test_complementary_clauses(v, suffix, bound):
    text, b = _text(v, suffix), _text(bound)
    assert version_in_range(text, f">={b}") != version_in_range(text, f"<{b}")
    assert version_in_range(text, f"<={b}") != version_in_range(text, f">{b}")
    assert version_in_range(text, f"=={b}") != version_in_range(text, f"!={b}")


@given(v=versions, major=st.integers(0, 3), minor=st.integers(0, 20))
def test_short_equality_is_a_prefix_match(v, major, minor):
    assert version_in_range(_text(v), f"=={major}.{minor}") == (v[:2] == (major, minor))


@given(v=versions, suffix=suffixes)
def test_every_op_range_accepts_any_version_string(v, suffix):
    for op in OPS:
        assert isinstance(op.raises_on(_text(v, suffix), "cuda"), bool)


# ---------------------------------------------------------------- the parsed snapshot


def test_snapshot_is_current():
    """opscan/_rules_snapshot.py must match rules/*.toml (python scripts/gen_rules_snapshot.py)."""
    assert rules.SNAPSHOT.read_text(encoding="utf-8") == rules.snapshot_text()


def test_index_is_current():
    """opscan/_rules_index.py must match rules/*.toml (python scripts/gen_rules_snapshot.py)."""
    assert rules.INDEX.read_text(encoding="utf-8") == rules.index_text()


def test_index_is_what_the_database_gives(monkeypatch):
    """The generated index is used, and says what the database built from the TOML itself says."""
    monkeypatch.setattr(rules, "load", lambda *a: (_ for _ in ()).throw(AssertionError("rules loaded")))
    generated = rules.index.__wrapped__()
    monkeypatch.undo()
    assert generated == rules.RulesIndex.of(load.__wrapped__(str(rules.rules_dir())))
    assert generated.env_range("CUBLAS_WORKSPACE_CONFIG") == load().env_check("CUBLAS_WORKSPACE_CONFIG").torch
    assert generated.env_range("NOT_CHECKED") is None


def test_index_of_malformed_data_is_refused(tmp_path: Path):
    """index_text validates as load() does: no index is written for data that does not load."""
    import shutil

    copy = tmp_path / "rules"
    shutil.copytree(rules.rules_dir(), copy)
    first = sorted(copy.glob("*.toml"))[0]
    first.write_text(first.read_text() + '\n[[op]]\nid = "x"\nphase = "up"\nremedy = "r"\n')  # a phase load() refuses
    with pytest.raises(RulesError):
        rules.index_text(str(copy))


def test_snapshot_gives_the_database_the_files_give(tmp_path: Path):
    import shutil

    copy = tmp_path / "rules"
    shutil.copytree(rules.rules_dir(), copy)
    assert load.__wrapped__() == load.__wrapped__(str(copy))  # the snapshot, then the TOML itself


def test_snapshot_is_used(monkeypatch):
    """With the rules files as they are, load() reads the generated module and parses no TOML."""
    monkeypatch.setattr(rules, "_parse_toml", lambda *a: (_ for _ in ()).throw(AssertionError("TOML parsed")))
    assert load.__wrapped__() == load()


def test_stale_snapshot_is_not_used(tmp_path: Path, monkeypatch):
    """After a rules file is edited, lint reads the file, not the snapshot made before."""
    import shutil

    copy = tmp_path / "rules"
    shutil.copytree(rules.rules_dir(), copy)
    snapshot: dict = {}
    exec(rules.snapshot_text(str(copy)), snapshot)  # what importing the generated module gives
    monkeypatch.setattr(rules, "_snapshot", lambda: (snapshot["DIGEST"], snapshot["FILES"]))
    monkeypatch.setattr(rules, "rules_dir", lambda: copy)
    fresh = load.__wrapped__()
    assert any(op.id == OPS[0].id for op in fresh.ops)
    first = sorted(copy.glob("*.toml"))[0]
    text = first.read_text()
    first.write_text(text.replace('title = "', 'title = "EDITED ', 1))
    edited = load.__wrapped__()
    assert any(op.title.startswith("EDITED ") for op in edited.ops)
    monkeypatch.setattr(rules, "_parse_toml", lambda *a: (_ for _ in ()).throw(AssertionError("TOML parsed")))
    first.write_text(text)
    assert load.__wrapped__() == fresh  # back in step with the snapshot: no TOML parsing at all


def test_stale_index_is_not_used(tmp_path: Path, monkeypatch):
    """After a rules file is edited, lint's index is the edited database's, not the generated one."""
    import shutil

    copy = tmp_path / "rules"
    shutil.copytree(rules.rules_dir(), copy)
    monkeypatch.setattr(rules, "rules_dir", lambda: copy)
    monkeypatch.setattr(rules, "load", lambda *a: load.__wrapped__(*a))  # no cached database of the old files
    assert rules.index.__wrapped__() == rules.RulesIndex.of(load())  # in step: the generated index
    torch_toml = copy / "torch.toml"
    torch_toml.write_text(torch_toml.read_text().replace('"2.14",\n]', '"2.14", "2.15",\n]', 1))
    edited = rules.index.__wrapped__()
    assert edited.releases[-1] == "2.15"
    assert edited == rules.RulesIndex.of(load.__wrapped__(str(copy)))
