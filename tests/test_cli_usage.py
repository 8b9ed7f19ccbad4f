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
