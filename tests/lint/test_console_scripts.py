"""The console scripts a project's packaging declares (opscan.lint.scripts): the values read, and files that cannot be."""

from __future__ import annotations

import pytest

from opscan.lint.scripts import ConsoleScript, declared, parse_value


@pytest.mark.parametrize(
    ("value", "module", "attr"),
    [
        ("mypkg.train:main", "mypkg.train", "main"),
        ("  mypkg.train :  main  ", "mypkg.train", "main"),  # spaces around the colon are read and dropped
        ("mypkg.app:App.run [gui, cuda]", "mypkg.app", "App.run"),  # extras say what to install
        ("mypkg.app:App.run[gui]", "mypkg.app", "App.run"),
        ("train:main", "train", "main"),
    ],
)
def test_a_script_value_names_a_module_and_an_attribute(value, module, attr):
    assert parse_value(" mytrain ", value) == ConsoleScript("mytrain", module, attr)


@pytest.mark.parametrize(
    "value",
    ["mypkg.train", "mypkg.train:main:extra", "mypkg.train:", ":main", "mypkg.train:main()", "my-pkg.train:main", "mypkg..train:main", "1pkg:main", "", 3, None],
)
def test_a_value_pip_writes_no_script_for_is_passed_over(value):
    assert parse_value("mytrain", value) is None


def test_a_script_without_a_name_is_passed_over():
    assert parse_value("  ", "mypkg.train:main") is None  # setup.cfg's `= mypkg.train:main`


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", '[project.scripts]\nmytrain = "mypkg.train:main\n'),  # an unclosed string
        ("pyproject.toml", "[project]\nscripts = 3\ngui-scripts = ['a:b']\n"),  # tables of the wrong type
        ("pyproject.toml", b"[project.scripts]\nmytrain = '\xff'\n"),  # not UTF-8
        ("setup.cfg", "[options.entry_points\nconsole_scripts = mytrain = mypkg.train:main\n"),
        ("setup.cfg", "[options.entry_points]\nconsole_scripts =\n    mytrain\n"),  # a line without `=`
        ("setup.py", "from setuptools import setup\nsetup(entry_points={'console_scripts': ['mytrain=mypkg.train:main']\n"),
        ("setup.py", "setup(entry_points={'console_scripts': [make_scripts()]})\n"),  # no literal
        ("setup.py", "setup(entry_points=ENTRY_POINTS)\n"),  # a name bound nowhere
    ],
)
def test_a_packaging_file_lint_cannot_read_declares_nothing(tmp_path, name, text):
    (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    read: set[str] = set()
    assert declared(str(tmp_path), read) == ()
    assert str(tmp_path / name) in read  # the run cache still depends on it


def test_each_packaging_file_declares_in_order(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project.scripts]\nmytrain = "mypkg.train:main"\n\n[project.gui-scripts]\nviewer = "mypkg.view:App.show"\n'
    )
    (tmp_path / "setup.cfg").write_text(
        "[options.entry_points]\nconsole_scripts =\n    # the tools\n    evaluate = mypkg.evaluate:main\ngui_scripts = board = mypkg.board:main\n"
        "other_group =\n    plugin = mypkg.plugin:hook\n"
    )
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n\nsetup(entry_points={'console_scripts': 'export = mypkg.export:main\\nsweep=mypkg.sweep:run', 'pytest11': ['x = mypkg.x']})\n"
    )
    found = declared(str(tmp_path), set())
    assert [(s.name, s.module, s.attr, s.kind) for s in found] == [
        ("mytrain", "mypkg.train", "main", "console"),
        ("viewer", "mypkg.view", "App.show", "GUI"),
        ("evaluate", "mypkg.evaluate", "main", "console"),
        ("board", "mypkg.board", "main", "GUI"),
        ("export", "mypkg.export", "main", "console"),
        ("sweep", "mypkg.sweep", "run", "console"),
    ]
