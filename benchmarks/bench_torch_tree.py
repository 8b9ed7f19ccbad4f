"""Time `opscan lint` on torch's own Python source against the parse floor of the same files.

    python benchmarks/bench_torch_tree.py                 # copy the installed torch's .py files, print the table
    python benchmarks/bench_torch_tree.py --source DIR    # a torch source tree (a `torch/` folder) elsewhere
    python benchmarks/bench_torch_tree.py --write         # also replace its section of BENCHMARKS.md

The tree is the `.py` files of the torch package this Python finds (found
without importing it), copied to benchmarks/data/torch-tree/torch (gitignored):
a tree in which every file imports `torch`, whose import runs most of the
tree, so following imports is as costly as it gets. opscan lints it as a
project (`opscan lint torch`, from the copy's root).

Whole processes, side by side, rounds alternating:
- parse floor: benchmarks/parse_floor.py on the tree (fork per core, ast.parse each file);
- cold: `opscan lint --no-cache`;
- cold, filling the cache: `opscan lint` with an empty cache;
- warm: `opscan lint` again over the unchanged tree (the run cache replays the last output);
- warm, facts cache only: the same with OPSCAN_RUN_CACHE=0 (every file linted, none parsed).

Wall time (median) and CPU time (user + system of the process and its
workers) are both reported: on a shared machine wall time carries other
people's load. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "torch-tree"
SECTION = "## opscan lint: torch's own source"


def copy_tree(source: Path | None) -> tuple[Path, int, int]:
    """The tree's root (holding `torch/`), its file count and line count."""
    if source is None:
        spec = importlib.util.find_spec("torch")  # finds the package without running it
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("torch is not installed in this Python; pass --source DIR")
        source = Path(next(iter(spec.submodule_search_locations)))
    source = source / "torch" if (source / "torch").is_dir() else source
    target = DATA / "torch"
    if target.exists():
        shutil.rmtree(target)
    files = lines = 0
    for path in sorted(source.rglob("*.py")):
        rel = path.relative_to(source)
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        files += 1
        lines += path.read_bytes().count(b"\n")
    (DATA / "pyproject.toml").write_text("[tool.opscan]\n")  # not the repository's configuration
    past = time.time() - 60  # an untouched tree: the run cache trusts only mtimes older than two seconds
    for path in [*DATA.rglob("*"), DATA]:
        os.utime(path, (past, past))
    return DATA, files, lines


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process tree, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="a torch source tree (default: the installed torch's files)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--write", action="store_true", help=f"replace the {SECTION!r} section of BENCHMARKS.md")
    args = parser.parse_args(argv)

    tree, n_files, n_lines = copy_tree(args.source)
    python = sys.executable
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_")}
    base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    base_env["PYTHONPATH"] = str(ROOT)
    lint = [python, "-m", "opscan", "lint", "--exit-zero", "torch"]
    floor = [python, str(ROOT / "benchmarks" / "parse_floor.py"), "torch"]
    caches = Path(tempfile.mkdtemp(prefix="opscan-torch-tree-"))
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in ("floor", "cold", "cold+cache", "warm", "warm facts")}
    findings = cache_bytes = None
    timed(floor, tree, base_env)  # page cache, .pyc files
    for r in range(args.rounds):
        cache = caches / f"round{r}"
        env = dict(base_env, OPSCAN_CACHE_DIR=str(cache))
        order = ["floor", "cold", "cold+cache"]
        order = order[r % 3 :] + order[: r % 3]
        for name in order:
            if name == "floor":
                wall, cpu, _ = timed(floor, tree, base_env)
            elif name == "cold":
                wall, cpu, out = timed([*lint[:4], "--no-cache", *lint[4:]], tree, base_env)
                findings = out.count(": DET")
            else:
                wall, cpu, _ = timed(lint, tree, env)  # the cache starts empty
                cache_bytes = folder_size(cache)
            runs[name].append((wall, cpu))
        time.sleep(2.5)  # the run cache trusts nothing changed in the last two seconds: the cache folder just was
        timed(lint, tree, env)  # records the run (the one that filled the cache could not: its folder was new)
        runs["warm"].append(timed(lint, tree, env)[:2])
        runs["warm facts"].append(timed(lint, tree, dict(env, OPSCAN_RUN_CACHE="0"))[:2])
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1][0]:.2f} s" for k, v in runs.items()), file=sys.stderr)
    shutil.rmtree(caches, ignore_errors=True)

    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in runs.items()}
    text = render(med, len(runs["floor"]), n_files, n_lines, findings, cache_bytes)
    print(text)
    if args.write:
        write_section(ROOT / "BENCHMARKS.md", text)
        print("updated BENCHMARKS.md", file=sys.stderr)
    return 0


def render(med, rounds, n_files, n_lines, findings, cache_bytes) -> str:
    from bench_lint import cpu_name  # same folder

    floor_wall, floor_cpu = med["floor"]
    rows = [
        ("parse floor (`benchmarks/parse_floor.py`)", "floor"),
        ("cold, `--no-cache`", "cold"),
        ("cold, filling an empty cache", "cold+cache"),
        ("warm, unchanged tree (run cache replays)", "warm"),
        ("warm, facts cache only (`OPSCAN_RUN_CACHE=0`)", "warm facts"),
    ]
    lines = [
        SECTION,
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/bench_torch_tree.py` on {cpu_name()}, "
        f"{os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}. "
        f"The tree: the `.py` files of the installed torch package, as shipped ({n_files:,} files, {n_lines:,} lines), "
        "linted as `opscan lint torch` from the copy's root; every file is an entry, and every one imports torch. "
        f"Medians of {rounds} rounds, run side by side (wall time, and CPU time of the process and its workers).",
        "",
        "| run | wall | / parse floor | CPU | / parse floor (CPU) |",
        "|---|---|---|---|---|",
    ]
    for label, key in rows:
        wall, cpu = med[key]
        lines.append(f"| {label} | {wall:.2f} s | {wall / floor_wall:.2f}x | {cpu:.2f} s | {cpu / floor_cpu:.2f}x |")
    lines += [
        "",
        f"Findings: {findings}. Cache after a cold run: {cache_bytes / 1e6:.1f} MB "
        f"(the source itself: {n_lines:,} lines). Goals (issue 9): cold at most 2x the parse floor, warm at most 0.5x.",
        "",
    ]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    from bench_lint import write_section as write  # same folder: one way to replace a section

    import bench_lint

    saved, bench_lint.SECTION = bench_lint.SECTION, SECTION
    try:
        write(path, section)
    finally:
        bench_lint.SECTION = saved


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
