"""opscan._path.Path spells, splits, orders and tests paths as pathlib.PosixPath does."""

import os
import pathlib

import pytest

from opscan._path import Path

SAMPLES = [
    "", ".", "/", "//", "///", "a", "a/", "./a", "a/./b", "a//b", "/a/b/", "//a/b", "///a", "..", "../a", "a/..",
    ".a", "a.", "a.b.c", ".bashrc", "x/.tar.gz", "a-b", "a/b", "/a-b", "-a", ".foo", "ab.py", "/x/__init__.py",
    "a/b.", "...", "a/..b", "a b/c d.py",
]  # fmt: skip


def _facts(p):
    return (str(p), p.as_posix(), os.fspath(p), p.parts, p.name, p.suffix, p.stem, str(p.parent), [str(q) for q in p.parents], p.is_absolute())


@pytest.mark.parametrize("text", SAMPLES)
def test_one_path_reads_as_pathlib_reads_it(text):
    assert _facts(Path(text)) == _facts(pathlib.PurePosixPath(text))
    mine = theirs = "ValueError"
    try:
        theirs = str(pathlib.PurePosixPath(text).with_suffix(""))
    except ValueError:
        pass
    try:
        mine = str(Path(text).with_suffix(""))
    except ValueError:
        pass
    assert mine == theirs


def test_joining_relating_and_ordering_as_pathlib():
    for a in SAMPLES:
        for b in SAMPLES:
            pa, pb = pathlib.PurePosixPath(a), pathlib.PurePosixPath(b)
            assert str(Path(a) / b) == str(pa / pb) == str(Path(a, b)) == str(a / Path(b))
            assert (Path(a) < Path(b), Path(a) <= Path(b), Path(a) == Path(b)) == (pa < pb, pa <= pb, pa == pb)
            try:
                theirs = str(pa.relative_to(pb))
            except ValueError:
                theirs = "ValueError"
            try:
                mine = str(Path(a).relative_to(b))
            except ValueError:
                mine = "ValueError"
            assert mine == theirs, (a, b)
    assert [str(p) for p in sorted(map(Path, SAMPLES))] == [str(p) for p in sorted(map(pathlib.PurePosixPath, SAMPLES))]
    assert len({Path("a//b"), Path("a/b"), Path("./a/b/")}) == 1


def test_on_the_filesystem_as_pathlib(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("x = 1\r\n", encoding="utf-8")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "link").symlink_to(tmp_path / "pkg")
    monkeypatch.chdir(tmp_path)
    for text in [".", "pkg", "pkg/m.py", "nope", "nope/x", "link/m.py", "link", str(tmp_path / "pkg" / ".." / "pkg")]:
        a, b = pathlib.Path(text), Path(text)
        assert (a.is_file(), a.is_dir(), a.exists()) == (b.is_file(), b.is_dir(), b.exists())
        assert str(a.resolve()) == str(b.resolve()) and str(a.absolute()) == str(b.absolute())
        if a.is_dir():
            assert sorted(map(str, a.iterdir())) == sorted(map(str, b.iterdir()))
    assert Path("pkg/m.py").read_text(encoding="utf-8") == pathlib.Path("pkg/m.py").read_text(encoding="utf-8")
    assert Path("pkg/m.py").read_bytes() == b"x = 1\r\n"
    assert str(Path.cwd()) == str(pathlib.Path.cwd())
    try:
        theirs = str(pathlib.Path("loop").resolve())
    except RuntimeError:
        theirs = "RuntimeError"
    try:
        mine = str(Path("loop").resolve())
    except RuntimeError:
        mine = "RuntimeError"
    assert mine == theirs
    with pytest.raises(FileNotFoundError):
        Path("nope").resolve(strict=True)


def test_the_project_resolves_paths_as_pathlib(tmp_path, monkeypatch):
    # Project._real resolves a file's folder once and then the file with one lstat: it must agree
    # with a whole resolve, through links to files, folders, chains, dangling links and `..`.
    from opscan.lint.project import Project

    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for name in ("m.py", "sub/n.py"):
        (tmp_path / "pkg" / name).write_text("x = 1\n")
    (tmp_path / "to_pkg").symlink_to(tmp_path / "pkg")
    (tmp_path / "pkg" / "file_link.py").symlink_to(tmp_path / "pkg" / "sub" / "n.py")
    (tmp_path / "pkg" / "chain.py").symlink_to("file_link.py")
    (tmp_path / "pkg" / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "pkg" / "up.py").symlink_to("../to_pkg/m.py")
    monkeypatch.chdir(tmp_path / "pkg" / "sub")
    texts = [
        "n.py", "../m.py", "../../to_pkg/m.py", "../../to_pkg/sub/n.py", "../file_link.py", "../chain.py",
        "../dangling.py", "../up.py", "nope.py", "../nope/x.py", str(tmp_path / "to_pkg" / "chain.py"),
        str(tmp_path / "to_pkg" / ".." / "pkg" / "m.py"),
    ]  # fmt: skip
    project = Project(lambda *a, **k: None, [tmp_path])
    for text in texts * 2:  # the second time from what it kept
        assert project._real(Path(text)) == str(pathlib.Path(text).resolve()), text


def test_discovery_resolves_and_excludes_as_a_whole_resolve_does(tmp_path, monkeypatch):
    # discover() resolves each walked folder once and each entry by one lstat, and matches the
    # exclusions against that: the files, their order and what is excluded must be as if every
    # path were resolved whole, through linked files, linked folders, dangling links and loops.
    from opscan.config import Config
    from opscan.lint import engine

    root = tmp_path / "proj"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "gen").mkdir()
    (root / "elsewhere").mkdir()
    for name in ("pkg/m.py", "pkg/sub/n.py", "gen/g.py", "elsewhere/e.py", "top.py"):
        (root / name).write_text("x = 1\n")
    (root / "pkg" / "to_gen.py").symlink_to(root / "gen" / "g.py")  # a link into an excluded folder
    (root / "pkg" / "dup.py").symlink_to("m.py")  # the same file twice: listed once
    (root / "pkg" / "out.py").symlink_to(tmp_path / "outside.py")
    (tmp_path / "outside.py").write_text("y = 2\n")  # outside the root
    (root / "pkg" / "dangling.py").symlink_to(root / "nowhere.py")
    (root / "pkg" / "loop.py").symlink_to(root / "pkg" / "loop.py")
    (root / "linked_pkg").symlink_to(root / "pkg")  # a linked folder: not walked (followlinks=False)
    monkeypatch.chdir(root)
    cfg = Config(root=root)
    cfg.extend_exclude = ["gen", "pkg/sub"]
    fast = engine.discover(["."], cfg)
    calls = []
    real_is_excluded = Config.is_excluded

    def whole(self, path, resolved=None):  # the path resolved whole, as before
        calls.append(resolved)
        return real_is_excluded(self, path)

    monkeypatch.setattr(Config, "is_excluded", whole)
    monkeypatch.setattr(engine, "resolved_in", lambda folder, name: None)
    slow = engine.discover(["."], cfg)
    assert fast == slow
    files, notices = fast
    # dup.py is m.py (sorted first, it stands for both); to_gen.py resolves into the excluded gen/.
    assert [f.as_posix() for f in files] == ["top.py", "elsewhere/e.py", "pkg/dup.py", "pkg/out.py"]
    assert notices == ["warning: skipped pkg/dangling.py: No such file or directory", "warning: skipped pkg/loop.py: symlink loop"]
    assert calls and all(c is None for c in calls)  # the second run did resolve whole
