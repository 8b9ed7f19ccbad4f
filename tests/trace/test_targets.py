"""Loading targets: files, modules, model zoos; and every way a target can be wrong, each a clear message."""

from __future__ import annotations

import importlib.util
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.trace.helpers import FIXTURES, scan
from tests.util import needs_torch

CPU = ("--device", "cpu")


@needs_torch
def test_module_callable_gives_the_same_findings_as_the_file(capsys):
    by_file = json.loads(scan(capsys, "put_model.py:build", *CPU, "--output-format", "json")[1])["findings"]
    rc, out, _err = scan(capsys, "put_model:build", *CPU, "--output-format", "json")
    by_module = json.loads(out)["findings"]
    assert rc == 1
    strip = lambda fs: sorted((f["op"], f["phase"], f["file"], f["line"], f["module"]) for f in fs)
    assert strip(by_module) == strip(by_file)
    assert {f["target"] for f in by_module} == {"put_model:build"}


@needs_torch
def test_dotted_callable_with_tuple_inputs_and_loss(capsys):
    rc, out, err = scan(capsys, "targets_misc.py:Factory.build", *CPU)
    assert rc == 0, err
    assert out.splitlines()[-1] == "All checks passed!"


@needs_torch
def test_keyword_inputs_and_dict_outputs(capsys):
    rc, _out, err = scan(capsys, "targets_misc.py:keyword_inputs", *CPU)
    assert rc == 0, err


@needs_torch
def test_several_targets_each_name_their_findings(capsys):
    rc, out, _err = scan(capsys, "unpool_model.py:build", "put_model.py:build", *CPU, "--output-format", "json")
    doc = json.loads(out)
    assert rc == 1
    assert sorted({f["target"] for f in doc["findings"]}) == ["put_model.py:build", "unpool_model.py:build"]
    assert doc["env"]["targets"] == 2


@pytest.mark.parametrize(
    "target, message",
    [
        pytest.param("missing.py:build", "missing.py: no such file", marks=needs_torch),
        pytest.param("targets_misc.py:nothing_here", "has no attribute 'nothing_here'", marks=needs_torch),
        pytest.param("targets_misc.py:not_callable", "is not callable", marks=needs_torch),
        pytest.param("targets_misc.py:returns_int", "returned int; expected (model, inputs) or (model, inputs, loss_fn)", marks=needs_torch),
        pytest.param("targets_misc.py:returns_no_module", "returned int as the model; expected an nn.Module", marks=needs_torch),
        pytest.param("targets_misc.py:vector_loss", "the loss function must return a one-element tensor", marks=needs_torch),
        pytest.param("no_such_module_xyz:build", "cannot import 'no_such_module_xyz'", marks=needs_torch),
        ("put_model.py", "is not a target"),
        # importlib raised TypeError ("the 'package' argument is required"), shown with its traceback.
        (".:build", "'.:build': '.' is not a module name; use FILE.py:CALLABLE for a file, or a dotted module name"),
        ("..:build", "'..:build': '..' is not a module name; use FILE.py:CALLABLE"),
        ("a-b:build", "'a-b' is not a module name"),
        pytest.param("torchvision:not_a_model", "torchvision has no model 'not_a_model'", marks=needs_torch),
        pytest.param("torchvision:fasterrcnn_resnet50_fpn", "detection models need targets", marks=needs_torch),
        ("torchvision:", "name a model after 'torchvision:'"),
    ],
)
def test_bad_targets_are_clear_errors(capsys, target, message):
    # A malformed target is refused on stderr before anything runs; one that fails to load is an
    # error in the report (stdout, as text), said once, and the summary does not claim a clean run.
    rc, out, err = scan(capsys, target, *CPU)
    assert rc == 2
    assert message in out + err
    assert (out + err).count(message) == 1
    assert "Traceback" not in out + err
    assert "All checks passed" not in out


@needs_torch
@pytest.mark.parametrize("zoo, package", [("timm", "timm"), ("hf", "transformers")])
def test_missing_zoo_package_is_a_clear_error(capsys, zoo, package):
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    rc, out, err = scan(capsys, f"{zoo}:resnet18", *CPU)
    assert rc == 2
    assert f"{package} is not installed" in out and "Traceback" not in out + err


@needs_torch
def test_user_code_raising_while_building_shows_its_traceback(capsys):
    rc, out, err = scan(capsys, "targets_misc.py:raises", *CPU)
    assert rc == 2
    assert "ValueError: cannot build this model" in out
    assert 'targets_misc.py", line 24, in raises' in out
    assert "opscan/trace" not in out.replace("\\", "/")  # only the user's frames
    assert out.count("ValueError: cannot build this model") == 2  # the message, and the traceback's last line


@needs_torch
def test_a_module_name_importlib_cannot_take_is_refused_by_the_loader_too():
    """load_target, as the Python API calls it, says what parse_target says rather than importlib's TypeError."""
    from opscan.trace.spec import TargetError
    from opscan.trace.targets import load_target

    with pytest.raises(TargetError, match=r"'\.' is not a module name"):
        load_target(".:build")


def _scan_source(capsys, tmp_path, name: str, source: str) -> tuple[int, str, str]:
    """Scan NAME.py:build, NAME.py holding `source`, on the CPU."""
    (tmp_path / f"{name}.py").write_text(source)
    return scan(capsys, f"{name}.py:build", *CPU, cwd=tmp_path)


@needs_torch
def test_a_target_that_does_not_parse_shows_the_syntax_error_alone(capsys, tmp_path):
    rc, out, err = _scan_source(capsys, tmp_path, "syn", "import torch\ndef build(:\n    pass\n")
    assert rc == 2
    assert "error: importing syn.py raised: SyntaxError: invalid syntax (syn.py, line 2)" in out
    assert 'syn.py", line 2' in out and "def build(:" in out
    # No stack at all: the import machinery's and opscan's frames are not the user's.
    assert "Traceback" not in out and "<frozen" not in out and "opscan/trace" not in out.replace("\\", "/")


@needs_torch
def test_user_code_calling_sys_exit_is_an_error_not_opscans_exit_code(capsys):
    # A script's sys.exit(3) was already "exited with status 3" and exit 2; a callable's ended opscan
    # itself with status 3 and no word (the scan, and the other targets, lost with it).
    rc, out, err = scan(capsys, "targets_misc.py:exits", "targets_misc.py:Factory.build", *CPU, "--output-format", "json")
    assert rc == 2
    doc = json.loads(out)
    (problem,) = doc["errors"]
    assert problem["target"] == "targets_misc.py:exits"
    assert problem["message"] == "targets_misc.py:exits exited with status 3 (sys.exit) instead of returning"
    assert 'targets_misc.py", line 65, in exits' in problem["detail"]
    assert "opscan/trace" not in problem["detail"].replace("\\", "/")  # only the user's frames
    assert doc["env"]["targets"] == 2  # the other target was still scanned


@needs_torch
def test_model_raising_in_forward_shows_its_traceback_and_keeps_the_report(capsys):
    rc, out, err = scan(capsys, "targets_misc.py:forward_raises", *CPU, "--output-format", "json")
    assert rc == 2
    assert 'targets_misc.py", line 29, in forward' in err
    assert "AttributeError" in err
    assert "opscan/trace" not in err.replace("\\", "/")
    doc = json.loads(out)
    assert doc["errors"] and doc["errors"][0]["target"] == "targets_misc.py:forward_raises"


@needs_torch
def test_nothing_to_backpropagate_is_a_notice(capsys):
    rc, out, _err = scan(capsys, "targets_misc.py:frozen_output", *CPU)
    assert rc == 0
    assert "backward was not run" in out


@needs_torch
def test_torchvision_target_runs_in_train_mode(capsys):
    rc, out, err = scan(capsys, "torchvision:resnet18", "--input-shape", "2,3,32,32", *CPU, "--output-format", "json")
    assert rc == 0, err
    assert json.loads(out)["findings"] == []


@pytest.mark.parametrize("argv, message", [
    (["put_model.py:build", "--input-shape", "2,a"], "is not a shape like 2,3,224,224"),
    (["put_model.py:build", "--input-shape", "2,0"], "is not a shape like 2,3,224,224"),
    (["torchvision:resnet18", "--input-shape", "2,x"], "'2,x' is not a shape like 2,3,224,224"),
    (["torchvision:resnet18", "--input-shape", "2x"], "'2x' is not a shape like 2,3,224,224"),
    (["--max-steps", "0", "--run", "x.py"], "is not a positive integer"),
])  # fmt: skip
def test_bad_flag_values_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        scan(capsys, *argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    pytest.param(["put_model.py:build", "--device", "tpu9"], "is not a device", marks=needs_torch),
    ([], "give a TARGET or --run SCRIPT"),
])  # fmt: skip
def test_bad_requests_are_clear_errors(capsys, argv, message):
    rc, out, err = scan(capsys, *argv)
    assert rc == 2 and out == ""
    assert message in err and "Traceback" not in err


@needs_torch
def test_cuda_device_without_a_gpu_is_an_error(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    rc, _out, err = scan(capsys, "put_model.py:build", "--device", "cuda")
    assert rc == 2 and "no CUDA GPU is available" in err


@needs_torch
def test_auto_device_without_a_gpu_says_so(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    rc, out, err = scan(capsys, "put_model.py:build")
    assert rc == 1
    assert "no CUDA GPU: scanned on the CPU" in out  # in the report itself, so a shared report carries it
    rc, out, err = scan(capsys, "put_model.py:build", "--output-format", "html")
    assert "no CUDA GPU: scanned on the CPU" in out and "no CUDA GPU: scanned on the CPU" in err


@needs_torch
def test_a_builder_that_needs_an_argument_is_one_clear_error(capsys, tmp_path):
    """It was "raised: TypeError: build() missing 1 required positional argument", the TypeError line said twice."""
    rc, out, err = _scan_source(capsys, tmp_path, "m", "import torch\n\ndef build(n):\n    return torch.nn.Linear(2, 2), torch.ones(1, 2)\n")
    assert rc == 2 and "TypeError" not in out + err
    assert "error: m.py:build(n) takes arguments; a target callable is called with none" in out


@needs_torch
def test_a_scan_that_scanned_nothing_says_nothing_of_a_partial_scan(capsys):
    """`scan nonexist.py:build` said "scanned on the CPU ... partial scan" beside "no such file"."""
    rc, out, err = scan(capsys, "zz_absent_model.py:build", *CPU)
    assert rc == 2 and "no such file" in out
    assert "partial scan" not in out + err
    rc, out, err = scan(capsys, "zz_absent_model.py:build", "put_model.py:build", *CPU)  # one of two scanned: it is said
    assert rc == 2 and "partial scan" in out


dims = st.lists(st.integers(min_value=1, max_value=4096), min_size=1, max_size=6)


@settings(max_examples=50, deadline=None)
@given(shape=dims, sep=st.sampled_from([",", "x"]))
def test_a_shape_reads_back_with_either_separator(shape, sep):
    """Within 2**31 elements; past them, 'too large' (a dimension past int64 reached torch.randn)."""
    import argparse
    import math

    from opscan.commands.scan import shape as parse

    text = sep.join(map(str, shape))
    if math.prod(shape) <= 2**31:
        assert parse(text) == tuple(shape)
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=r"is too large: that is more than 2147483648 \(2\*\*31\) elements"):
            parse(text)


@settings(max_examples=50, deadline=None)
@given(shape=dims, sep=st.sampled_from([",", "x"]), at=st.integers(min_value=0, max_value=6), junk=st.sampled_from(["", " ", "x", ",", "+1", "1_0", "0", "-1", "a"]))
def test_a_shape_with_an_empty_or_bad_part_is_refused(shape, sep, at, junk):
    """'2,x' was read as 2,, and then as (2,): a part is never dropped, whatever stands around it."""
    import argparse

    from opscan.commands.scan import shape as parse

    parts = [str(d) for d in shape]
    parts.insert(min(at, len(parts)), junk)
    with pytest.raises(argparse.ArgumentTypeError, match="is not a shape like 2,3,224,224"):
        parse(sep.join(parts))


names = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stem=names, attr=names, kind=st.sampled_from(["file", "module", "bare"]))
def test_any_unknown_target_is_a_clear_error(capsys, stem, attr, kind):
    stem = "zz_absent_" + stem  # never an importable module or an existing file
    target = {"file": f"{stem}.py:{attr}", "module": f"{stem}:{attr}", "bare": stem}[kind]
    rc, out, err = scan(capsys, target, *CPU)
    assert rc == 2
    assert (out + err).count("error:") == 1 and "Traceback" not in out + err


@needs_torch
def test_what_the_users_code_prints_goes_to_stderr(capsys):
    rc, out, err = scan(capsys, "targets_misc.py:chatty", *CPU, "--output-format", "json")
    assert rc == 0
    json.loads(out)
    assert "CHATTY building the model" in err and "CHATTY loss" in err and "CHATTY" not in out


@needs_torch
def test_torchvision_targets_download_nothing(capsys, monkeypatch):
    import torch.hub

    def no_network(*args, **kwargs):
        raise AssertionError("a torchvision target tried to download weights")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", no_network)
    # A segmentation model: weights=None alone would still fetch its pretrained backbone.
    rc, _out, err = scan(capsys, "torchvision:lraspp_mobilenet_v3_large", "--input-shape", "2,3,64,64", *CPU)
    assert rc == 0, err


@needs_torch
def test_a_bad_device_from_the_config_names_the_file(capsys, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.opscan.scan]\ndevice = 'tpu9'\n")
    (tmp_path / "m.py").write_text((FIXTURES / "targets_misc.py").read_text())
    rc, _, err = scan(capsys, "m.py:Factory.build", cwd=tmp_path)
    assert rc == 2
    assert err.strip() == (
        f"opscan: error: {tmp_path / 'pyproject.toml'}: [tool.opscan.scan] device: 'tpu9' is not a device; use cuda, cuda:N, cpu or auto"
    )
    rc, _, err = scan(capsys, "m.py:Factory.build", "--device", "tpu8", cwd=tmp_path)  # a flag's value is the flag's
    assert rc == 2 and err.strip() == "opscan: error: 'tpu8' is not a device; use cuda, cuda:N, cpu or auto"
