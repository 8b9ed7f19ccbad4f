"""The floor for any linter built on CPython's `ast`: a process that only parses.

    python benchmarks/parse_floor.py PATH

Starts the interpreter, imports `ast`, reads every .py file under PATH and
parses each with `ast.parse`, nothing else. A folder is shared among forked
processes, one per core, the parent taking a share, as `opscan lint` shares
it. bench_lint.py times this process beside opscan and ruff.
"""

import ast
import os
import sys


def parse_all(paths, then=None):
    """Parse each file; `then(tree)` after each, if given (walk_floor.py's visit)."""
    for path in paths:
        with open(path, "rb") as fh:
            try:
                tree = ast.parse(fh.read())
            except (SyntaxError, ValueError):  # a file this Python cannot parse (newer syntax): lint reports it, and goes on
                continue
        if then is not None:
            then(tree)


def main(target, work=parse_all):
    """work(paths) over the input, a folder's files shared among forked processes, one per core."""
    if os.path.isfile(target):
        work([target])
        return
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(target) for f in files if f.endswith(".py"))
    workers = min(len(os.sched_getaffinity(0)), len(paths) // 2 or 1)
    children = []
    for i in range(1, workers):
        pid = os.fork()
        if pid == 0:
            try:
                work(paths[i::workers])
            finally:
                os._exit(0)
        children.append(pid)
    work(paths[0::workers])
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main(sys.argv[1])
