"""An unknown flag is refused with the usage line of the command it was given to, exit 2."""

from __future__ import annotations

import pytest

from opscan.cli import COMMANDS, main
from tests.util import HAS_TORCH, needs_torch


def _run(capsys, argv):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    return stopped.value.code, capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_flag_shows_the_commands_own_usage(capsys, command):
    required = ["-o", "out.jsonl"] if command == "record" else []  # else argparse names the missing -o first
    code, err = _run(capsys, [command, *required, "--no-such-flag"])
    assert code == 2
    assert err.startswith(f"usage: opscan {command} ")
    assert err.rstrip().endswith("opscan: error: unrecognized arguments: --no-such-flag")


def test_an_unknown_flag_before_any_command_shows_the_top_level_usage(capsys):
    code, err = _run(capsys, ["--no-such-flag"])
    assert code == 2 and err.startswith("usage: opscan [-h] [--version] COMMAND ...")


@pytest.mark.parametrize(
    ("command", "flags", "expected"),
    [
        ("scan", ["--steps", "3"], {"steps": 3}),
        ("scan", ["--max-steps", "3"], {"steps": 3}),
        ("record", ["--max-steps", "3", "-o", "r.jsonl"], {"steps": 3, "record_path": "r.jsonl"}),
        ("record", ["--output-file", "r.jsonl"], {"record_path": "r.jsonl"}),
        ("record", ["--output", "r.jsonl"], {"record_path": "r.jsonl"}),
        ("diff", ["--max-steps", "3"], {"steps": 3}),
        ("scan", ["--output-file", "s.json"], {"output_file": "s.json"}),
    ],
)
def test_the_shared_flags_take_every_commands_spelling(command, flags, expected):
    """-o/--output-file and --steps/--max-steps mean the same in every command that takes them."""
    from opscan.cli import build_parser

    args, unknown = build_parser(command).parse_known_args([command, *flags, "t.py:build"])
    assert unknown == [] and {key: getattr(args, key) for key in expected} == expected


@pytest.mark.parametrize("command", ["scan", "bench", "record", "diff"])
@pytest.mark.parametrize("value", ["2,x", "2x", "2,,3"])
def test_a_shape_with_an_empty_part_is_a_usage_error_in_every_command(capsys, command, value):
    """The commands share one --input-shape parser; '2,x' was taken as (2,) and failed later inside the model."""
    required = ["-o", "out.jsonl"] if command == "record" else []
    code, err = _run(capsys, [command, *required, "torchvision:resnet18", "--input-shape", value])
    assert code == 2
    assert err.rstrip().endswith(f"error: argument --input-shape: {value!r} is not a shape like 2,3,224,224")


@pytest.mark.parametrize("command", ["scan", "bench", "record", "diff"])
@pytest.mark.parametrize("value", ["2,3,32,32", "2x3x32x32"])
def test_both_shape_spellings_are_taken_by_every_command(command, value):
    from opscan.cli import build_parser

    required = ["-o", "out.jsonl"] if command == "record" else []
    args, unknown = build_parser(command).parse_known_args([command, *required, "torchvision:resnet18", "--input-shape", value])
    assert unknown == [] and args.input_shape == (2, 3, 32, 32)


@pytest.mark.parametrize("command", ["scan", "bench", "record", "diff"])
@pytest.mark.parametrize("target", ["m.py:build", "--run"])
def test_a_shape_for_a_target_that_builds_its_own_inputs_is_refused_up_front_by_every_command(capsys, tmp_path, command, target):
    """scan said so late, as an error inside the report on stdout, after loading torch; the others on stderr, before anything ran."""
    (tmp_path / "m.py").write_text("import torch\nfrom torch import nn\ndef build():\n    return nn.Linear(8, 4), torch.randn(4, 8)\n")
    required = ["-o", str(tmp_path / "out.jsonl")] if command == "record" else []
    spelled = ["--run", str(tmp_path / "m.py")] if target == "--run" else [str(tmp_path / target)]
    capsys.readouterr()
    code = main([command, *required, "--input-shape", "2,3", *spelled])
    out, err = capsys.readouterr()
    named = spelled[-1]
    assert (code, out) == (2, "")
    assert err == f"opscan: error: --input-shape applies to torchvision:, timm: and hf: targets only; {named} builds its own inputs\n"


@pytest.mark.parametrize("command", ["scan", "bench", "record", "diff"])
@pytest.mark.parametrize("value", ["99999999999999999999,3,8,8", "65536,32769", "2," + "9" * 5000])
def test_a_shape_too_large_to_make_is_a_usage_error_in_every_command(capsys, command, value):
    """A dimension past int64 reached torch.randn and was blamed on the target ('torchvision:resnet18 raised: TypeError ... Overflow')."""
    required = ["-o", "out.jsonl"] if command == "record" else []
    code, err = _run(capsys, [command, *required, "torchvision:resnet18", "--input-shape", value])
    assert code == 2 and "Traceback" not in err
    assert err.rstrip().endswith(
        f"error: argument --input-shape: {value!r} is too large: that is more than 2147483648 (2**31) elements, "
        "8 GiB of float32, the most an input shape may hold"
    )


def test_the_largest_shape_allowed_and_the_same_bound_in_the_config(tmp_path):
    from opscan import config
    from opscan.cli import build_parser

    args, _ = build_parser("scan").parse_known_args(["scan", "torchvision:resnet18", "--input-shape", "65536,32768"])
    assert args.input_shape == (65536, 32768)  # 2**31 elements: parsed, not made here
    (tmp_path / "pyproject.toml").write_text("[tool.opscan.scan]\ninput-shape = [99999999999999999, 3, 8, 8]\n")
    with pytest.raises(config.ConfigError, match=r"\[tool.opscan.scan\] input-shape \[99999999999999999, 3, 8, 8\] is too large: that is more than"):
        config.load([str(tmp_path)])


# ---------------------------------------------------------------- a path of the wrong kind says what it is


def _main(capsys, argv):
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["lint", "scan", "record", "diff", "bench"])
@pytest.mark.parametrize("kind", ["directory", "device"])
def test_a_config_that_is_a_directory_or_a_device_says_so_not_not_found(capsys, tmp_path, command, kind):
    config = str(tmp_path) if kind == "directory" else "/dev/zero"
    (tmp_path / "m.py").write_text("x = 1\n")
    required = ["-o", str(tmp_path / "r.jsonl")] if command == "record" else []
    target = str(tmp_path / ("m.py" if command == "lint" else "m.py:build"))
    code, out, err = _main(capsys, [command, *required, "--config", config, target])
    assert (code, out) == (2, "")
    assert err == f"opscan: error: config file {config} is a {kind}, not a TOML file\n"
    code, _, err = _main(capsys, [command, *required, "--config", str(tmp_path / "nope.toml"), target])
    assert code == 2 and err == f"opscan: error: config file {tmp_path / 'nope.toml'} not found\n"


@pytest.mark.parametrize("command", ["record", "diff", "bench"])
@pytest.mark.parametrize(("spelled", "name"), [("--run", "adir.py"), ("callable", "adir.py"), ("callable", "adir"), ("--run", ".")])
def test_a_target_file_that_is_a_directory_says_so_not_no_such_file(capsys, tmp_path, command, spelled, name):
    """A FILE:CALLABLE whose FILE has a folder in it but no .py, and --run ., were not checked before the run (the runner
    reads them as files all the same): bench said only that it needs a GPU, and diff recorded a run to be told."""
    folder = tmp_path / name if name != "." else "."
    if name != ".":
        folder.mkdir()
    required = ["-o", str(tmp_path / "r.jsonl")] if command == "record" else []
    target = ["--run", str(folder)] if spelled == "--run" else [f"{folder}:build"]
    code, out, err = _main(capsys, [command, *required, *target])
    what = "a Python script" if spelled == "--run" else "a Python file"
    message = f"{folder} is a directory, not {what}"
    if command != "record":  # an error in the report, as in scan's; record's -o is a record, not a report
        assert (code, err) == (2, "") and out.startswith(f"error: {message}\n")
    else:
        assert (code, out, err) == (2, "", f"opscan: error: {message}\n")


@pytest.mark.parametrize("command", ["scan", "record", "diff", "bench"])
@pytest.mark.parametrize("spelled", ["--run", "callable"])
def test_a_target_file_name_too_long_for_the_file_system_says_so_not_a_traceback(capsys, tmp_path, command, spelled):
    """A name over 255 bytes raised OSError (ENAMETOOLONG) out of the search for pyproject.toml, in every command."""
    name = str(tmp_path / ("a" * 300 + ".py"))
    if command == "scan" and not HAS_TORCH:
        pytest.skip("scan needs torch to reach the target")
    required = ["-o", str(tmp_path / "r.jsonl")] if command == "record" else ["--device", "cpu"] if command == "scan" else []
    target = ["--run", name] if spelled == "--run" else [f"{name}:build"]
    code, out, err = _main(capsys, [command, *required, *target])
    message = f"cannot read {name}: File name too long"
    if command != "record":
        assert code == 2 and f"error: {message}\n" in out and "Traceback" not in err
    else:
        assert (code, out, err) == (2, "", f"opscan: error: {message}\n")


@needs_torch
def test_scan_of_a_directory_says_so_not_no_such_file(capsys, tmp_path):
    folder = tmp_path / "adir.py"
    folder.mkdir()
    code, out, _ = _main(capsys, ["scan", "--device", "cpu", "--run", str(folder)])
    assert code == 2 and f"error: {folder} is a directory, not a Python script" in out
    code, out, _ = _main(capsys, ["scan", "--device", "cpu", f"{folder}:build"])
    assert code == 2 and f"error: {folder} is a directory, not a Python file" in out and "partial scan" not in out


@pytest.mark.parametrize("argv", [["-", "b.jsonl"], ["a.jsonl", "-"], ["--ranks", "a.jsonl", "-"]])
def test_compare_says_it_does_not_read_standard_input(capsys, argv):
    """'-' was "-: no such file", as if a file of that name were missing."""
    code, out, err = _main(capsys, ["compare", *argv])
    assert (code, out) == (2, "")
    assert err == (
        "opscan: error: '-' is not a record: compare reads its records from files, not from standard input "
        "(/dev/stdin reads a pipe; ./- names a file called -)\n"
    )


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - {"rule", "record"}))
def test_every_command_that_reports_findings_takes_exit_zero(command):
    """As lint and ruff do; `rule` reports none and `record` writes a record, so neither takes it."""
    from opscan.cli import build_parser

    args, unknown = build_parser(command).parse_known_args([command, "--exit-zero", "t.py:build"])
    assert "--exit-zero" not in unknown and args.exit_zero is True


def test_exit_zero_turns_findings_into_0_and_leaves_errors_at_2(capsys, tmp_path):
    from pathlib import Path

    pair = Path(__file__).parent / "fixtures" / "compare" / "kernel_nondeterminism"
    a, b = str(pair / "a.jsonl"), str(pair / "b.jsonl")
    assert main(["compare", a, b]) == 1
    plain = capsys.readouterr().out
    assert main(["compare", "--exit-zero", a, b]) == 0
    assert capsys.readouterr().out == plain  # the same report
    assert main(["compare", "--exit-zero", a, str(tmp_path / "missing.jsonl")]) == 2
    code, err = _run(capsys, ["rule", "--exit-zero", "DET001"])
    assert code == 2 and "unrecognized arguments: --exit-zero" in err


GONE = "opscan: error: the working directory no longer exists (it was removed); cd to a folder that does and run opscan again\n"


@pytest.mark.parametrize(
    "argv",
    [["lint", "t.py"], ["lint"], ["scan", "m.py:build"], ["record", "-o", "r.jsonl", "--run", "t.py"], ["diff", "--run", "t.py"],
     ["compare", "a.jsonl", "b.jsonl"], ["report"], ["bench", "m.py:build"], ["--", "scan", "m.py:build"], ["rule", "DET001"]],
    ids=" ".join,
)  # fmt: skip
def test_a_working_directory_removed_under_the_shell_is_one_line(tmp_path, argv):
    """os.getcwd() raised FileNotFoundError wherever a command first asked (lint's config): a traceback, exit 1."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.util import subprocess_env

    env = subprocess_env()
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    gone = tmp_path / "gone"
    gone.mkdir()
    # The shell enters the folder and removes it, then runs opscan there.
    shell = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    proc = subprocess.run(
        ["sh", "-c", shell, "sh", str(gone), sys.executable, "-m", "opscan", *argv], env=env, capture_output=True, text=True, timeout=120
    )
    if argv[0] == "rule":  # reads no path: it still works
        assert proc.returncode == 0 and proc.stdout.startswith("# seed-without-determinism (DET001)")
        return
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, GONE, "")
