"""Align two runs' ops of one step, so that changed code still lines up with the rest.

Ops are matched on their key (op, module, input shapes, arguments where
recorded), never on the file and line, which a refactor moves. The common
prefix and suffix are matched first (one pass; for two runs of the same code
that is the whole step); the middle gets a shortest edit script (Myers'
O((N+M)D) algorithm), which for a few inserted or reordered ops is near
linear. Past `MAX_EDITS` edits (two different models) it falls back to
difflib's matcher, which is fast on sequences that share little. Ops left
over on both sides with the same key are paired as moved: reordered code
that computes the same thing is compared number for number.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Hashable, Sequence

MAX_EDITS = 256


@dataclass(slots=True)
class Alignment:
    """Which op of a matches which op of b (indices into each step's op list).

    `pairs` holds every compared pair in a's order, the moved ones too;
    `moved` the a indices of the pairs whose op runs elsewhere in b;
    `only_a` and `only_b` the ops that have no counterpart.
    """

    pairs: list[tuple[int, int]]
    moved: set[int] = field(default_factory=set)
    only_a: list[int] = field(default_factory=list)
    only_b: list[int] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not (self.moved or self.only_a or self.only_b)

    @property
    def changes(self) -> int:
        return len(self.moved) + len(self.only_a) + len(self.only_b)


def align(keys_a: Sequence[Hashable], keys_b: Sequence[Hashable], max_edits: int = MAX_EDITS) -> Alignment:
    """Align two key sequences: matched pairs, moves, and what is left on each side."""
    n, m = len(keys_a), len(keys_b)
    if keys_a == keys_b:
        return Alignment([(i, i) for i in range(n)])
    ids: dict[Hashable, int] = {}
    a = [ids.setdefault(k, len(ids)) for k in keys_a]
    b = [ids.setdefault(k, len(ids)) for k in keys_b]
    start = 0
    while start < n and start < m and a[start] == b[start]:
        start += 1
    end = 0
    while end < n - start and end < m - start and a[n - 1 - end] == b[m - 1 - end]:
        end += 1
    middle = _myers(a[start : n - end], b[start : m - end], max_edits)
    if middle is None:
        middle = _difflib(a[start : n - end], b[start : m - end])
    pairs = [(i, i) for i in range(start)]
    pairs += [(x + start, y + start) for x, y in middle]
    pairs += [(n - end + i, m - end + i) for i in range(end)]
    matched_a = {x for x, _ in pairs}
    matched_b = {y for _, y in pairs}
    left_a = [x for x in range(n) if x not in matched_a]
    left_b = [y for y in range(m) if y not in matched_b]
    return _pair_moves(a, b, pairs, left_a, left_b)


def _pair_moves(a: list[int], b: list[int], pairs, left_a: list[int], left_b: list[int]) -> Alignment:
    """Pair the leftover ops of a and b that share a key, in order: those ran, but elsewhere."""
    waiting: dict[int, deque[int]] = defaultdict(deque)
    for y in left_b:
        waiting[b[y]].append(y)
    moved: set[int] = set()
    only_a = []
    paired_b = set()
    for x in left_a:
        queue = waiting.get(a[x])
        if queue:
            y = queue.popleft()
            pairs.append((x, y))
            moved.add(x)
            paired_b.add(y)
        else:
            only_a.append(x)
    pairs.sort()
    return Alignment(pairs, moved, only_a, [y for y in left_b if y not in paired_b])


def _myers(a: list[int], b: list[int], max_edits: int) -> list[tuple[int, int]] | None:
    """The matched (x, y) pairs of a shortest edit script, or None when it takes more than max_edits edits."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return []
    limit = min(max_edits, n + m)
    offset = limit + 1
    v = [0] * (2 * limit + 3)
    trace = []
    for d in range(limit + 1):
        trace.append(v[offset - d - 1 : offset + d + 2])  # the diagonals round d reads: -d-1 .. d+1
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]
            else:
                x = v[offset + k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[offset + k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m)
    return None


def _backtrack(trace: list[list[int]], n: int, m: int) -> list[tuple[int, int]]:
    matches = []
    x, y = n, m
    for d in range(len(trace) - 1, -1, -1):
        saved = trace[d]  # index j holds diagonal j - d - 1

        def at(k: int) -> int:
            return saved[k + d + 1]

        k = x - y
        if k == -d or (k != d and at(k - 1) < at(k + 1)):
            prev_k = k + 1
        else:
            prev_k = k - 1
        prev_x = at(prev_k)
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x -= 1
            y -= 1
            matches.append((x, y))
        x, y = prev_x, prev_y
    matches.reverse()
    return matches


def _difflib(a: list[int], b: list[int]) -> list[tuple[int, int]]:
    from difflib import SequenceMatcher

    out = []
    for block in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        out.extend((block.a + i, block.b + i) for i in range(block.size))
    return out
