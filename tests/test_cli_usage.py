"""An unknown flag is refused with the usage line of the command it was given to, exit 2."""

from __future__ import annotations

import pytest

from opscan.cli import COMMANDS, main


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
