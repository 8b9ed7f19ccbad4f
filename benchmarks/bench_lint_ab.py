"""Cold `opscan lint` of two source trees side by side, against the parse floor, rounds alternating.

    python benchmarks/bench_lint_ab.py --before /tmp/before                  # a tree to compare against (git archive REV)
    python benchmarks/bench_lint_ab.py --before /tmp/before --inputs one,scripts,torch --rounds 40,15,3

Each round runs, in turn, `benchmarks/parse_floor.py INPUT` and
`benchmarks/walk_floor.py INPUT` (the parse floor plus a do-nothing visit of
every node) and `benchmarks/facts_floor.py INPUT` (opscan's own per-file pass
alone, from the `after` tree: no linking, rules or output), then for each tree
`python -c "from opscan import cli; ..." lint --no-cache --exit-zero INPUT`
with PYTHONPATH naming that tree (`after` is this checkout): the tree's
console entry `cli.entry()` where it has one (what the `opscan` command runs,
without the `import re` of pip's script template), else `sys.exit(cli.main())`. Inputs: `one` is
benchmarks/data/train_1000.py, `scripts` benchmarks/data/scripts (200 files),
`torch` the copy of torch's source that bench_torch_tree.py makes
(benchmarks/data/torch-tree, linted as `torch` from its root). `.pyc` files are
written (a warm-up run of each command first), as an installed opscan has them.

Reported per input: median and fastest wall time, median CPU (user + system of
the process and its workers, from the children's rusage), and each tree's
ratio to the floor of the same rounds. Before timing, each tree's output is
captured once and compared: the trees must print the same bytes. Not part of
the test suite.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data")
INPUTS = {
    "one": (DATA, "train_1000.py"),
    "scripts": (DATA, "scripts"),
    "torch": (os.path.join(DATA, "torch-tree"), "torch"),
}
LINT = [
    "-c",
    "import sys; from opscan import cli; cli.entry() if hasattr(cli, 'entry') else sys.exit(cli.main())",
    "lint", "--no-cache", "--exit-zero",
]


def _timed(cmd: list[str], cwd: str, env: dict) -> tuple[float, float]:
    """(wall s, CPU s of the child and its workers) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a source tree of opscan to compare against")
    parser.add_argument("--after", default=ROOT, help="the tree measured (default: this checkout)")
    parser.add_argument("--inputs", default="one,scripts", help="comma-separated: one, scripts, torch")
    parser.add_argument("--rounds", default="40,15,3", help="rounds per input, in the order of --inputs")
    args = parser.parse_args(argv)
    names = args.inputs.split(",")
    rounds = [int(r) for r in args.rounds.split(",")]
    rounds += [rounds[-1]] * (len(names) - len(rounds))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH") and not k.startswith("OPSCAN_")}
    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    for name, n in zip(names, rounds):
        if name not in INPUTS:
            print(f"unknown input {name!r}; choose from {', '.join(INPUTS)}", file=sys.stderr)
            return 2
        cwd, target = INPUTS[name]
        if not os.path.exists(os.path.join(cwd, target)):
            print(f"{name}: {os.path.join(cwd, target)} is missing (torch: run benchmarks/bench_torch_tree.py once)", file=sys.stderr)
            return 2
        cmds = {
            "floor": ([sys.executable, os.path.join(HERE, "parse_floor.py"), target], env),
            "walk floor": ([sys.executable, os.path.join(HERE, "walk_floor.py"), target], env),
            # opscan's per-file pass alone (this checkout's): facts of every file, no linking or rules.
            "facts only": ([sys.executable, os.path.join(HERE, "facts_floor.py"), target], dict(env, PYTHONPATH=os.path.abspath(args.after))),
        }
        for label, tree in trees.items():
            cmds[label] = ([sys.executable, *LINT, target], dict(env, PYTHONPATH=tree))
        outputs = {}
        for label, (cmd, e) in cmds.items():  # warm-up (writes .pyc) and the output check
            proc = subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, check=False)
            outputs[label] = (proc.returncode, proc.stdout, proc.stderr)
        same = outputs["before"] == outputs["after"]
        wall: dict[str, list[float]] = {k: [] for k in cmds}
        cpu: dict[str, list[float]] = {k: [] for k in cmds}
        load = os.getloadavg()[0]
        for _ in range(n):
            for label, (cmd, e) in cmds.items():
                w, c = _timed(cmd, cwd, e)
                wall[label].append(w)
                cpu[label].append(c)
        floor_wall, floor_cpu = statistics.median(wall["floor"]), statistics.median(cpu["floor"])
        print(f"\n{name}: {n} rounds, load {load:.1f} -> {os.getloadavg()[0]:.1f}; before and after print the same bytes: {same}")
        print("| run | median | fastest | CPU | / floor | CPU / floor |\n|---|---|---|---|---|---|")
        for label in cmds:
            m, lo, c = statistics.median(wall[label]), min(wall[label]), statistics.median(cpu[label])
            print(f"| {label} | {m * 1e3:.1f} ms | {lo * 1e3:.1f} ms | {c * 1e3:.0f} ms | {m / floor_wall:.2f}x | {c / floor_cpu:.2f}x |")
        if not same:
            print("warning: the trees' outputs differ", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
