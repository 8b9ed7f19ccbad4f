"""Synthetic records for the compare tests: a dict per line, as docs/record-format.md says.

`RecordWriter` writes the lines; `TinyRun` trains a two-layer model in pure
Python (float32 values, fingerprints that hash them), so a nudge at one op
propagates to every op that reads its output, as in a real run. A `Variant`
says what to change in a run: a kernel that rounds differently at one op,
an extra random draw, a reordered batch, an inserted or moved op, another
environment.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from array import array
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SCHEME = "test-blake2b-f32"

ENV = {
    "torch": "2.14.1+cu130",
    "cuda": "13.0",
    "cudnn": 91900,
    "gpu": "NVIDIA H200",
    "driver": "580.159.04",
    "python": "3.12.3",
    "deterministic": False,
    "cudnn_benchmark": False,
    "allow_tf32_matmul": False,
}


def fsum_plain(values) -> float:
    """Float addition left to right, as the builtin sum() did before Python 3.12.

    3.12's sum() compensates float rounding (gh-100425), so its last digits differ from 3.10's
    and 3.11's; the golden records in tests/fixtures/compare/ must be the same on every Python.
    """
    total = 0.0
    for value in values:
        total += value
    return total


def f32(values) -> tuple[float, ...]:
    return tuple(array("f", values))


def fingerprint(values) -> str:
    return hashlib.blake2b(array("f", values).tobytes(), digest_size=8).hexdigest()


def sample(values) -> str:
    data = array("f", values)
    return base64.b64encode(data.tobytes() if struct.pack("=f", 1.0) == struct.pack("<f", 1.0) else _swapped(data)).decode()


def _swapped(data: array) -> bytes:
    copy = array("f", data)
    copy.byteswap()
    return copy.tobytes()


@dataclass(frozen=True)
class T:
    """A tensor: row-major float32 values and a shape."""

    shape: tuple[int, ...]
    v: tuple[float, ...]

    @property
    def fp(self) -> str:
        return fingerprint(self.v)

    @property
    def norm(self) -> float:
        return math.sqrt(fsum_plain(x * x for x in self.v))


def tensor(shape, values) -> T:
    return T(tuple(shape), f32(values))


class RecordWriter:
    """The lines of one record, as dicts; `write` puts them in a file (optionally cut short)."""

    def __init__(self, **header: Any):
        self.lines: list[dict] = []
        self.i = 0
        base = {
            "type": "header",
            "format": "opscan-record",
            "version": 1,
            "target": "models/tiny.py:build",
            "argv": [],
            "kind": "callable",
            "seed": 0,
            "steps": 2,
            "device": "cuda",
            "created": "2026-12-01T14:00:00Z",
            "fingerprint": SCHEME,
            "env": dict(ENV),
        }
        env = header.pop("env", {})
        base.update(header)
        base["env"].update(env)
        self.lines.append(base)

    def op(self, step: int, name: str, *, phase: str, module: str | None, module_class: str | None, file: str, line: int,
           ins: list, outs: list[T], rng: dict | None = None) -> None:  # fmt: skip
        entries, shapes = [], []
        for value in ins:
            if isinstance(value, tuple):  # ("p", name, tensor): a parameter input
                _, pname, t = value
                entries.append(f"p:{pname}@{t.fp}")
                shapes.append(list(t.shape))
            else:
                entries.append(value.fp)
                shapes.append(list(value.shape))
        floating = [t for t in outs if t.v]
        d = {
            "type": "op",
            "step": step,
            "i": self.i,
            "op": name,
            "phase": phase,
            "module": module,
            "module_class": module_class,
            "file": file,
            "line": line,
            "shapes": shapes,
            "dtypes": ["float32"] * len(shapes),
            "in": entries,
            "out": [t.fp for t in outs],
            "norm": floating[0].norm if floating else None,
        }
        if rng is not None:
            d["rng"] = rng
        self.lines.append(d)
        self.i += 1

    def step(self, step: int, ops: int, params: dict[str, T], loss: float | None) -> None:
        self.lines.append(
            {
                "type": "step",
                "step": step,
                "ops": ops,
                "params": {name: {"fp": t.fp, "norm": t.norm, "sample": sample(t.v)} for name, t in params.items()},
                "loss": loss,
            }
        )

    def end(self, steps: int, seconds: float = 1.5) -> None:
        self.lines.append({"type": "end", "steps": steps, "ops": self.i, "stopped": False, "seconds": seconds})

    def text(self) -> str:
        return "".join(json.dumps(d) + "\n" for d in self.lines)

    def write(self, path: Path, *, drop_end: bool = False, cut_last: int = 0) -> None:
        """Write the record; `drop_end` leaves off the end line, `cut_last` keeps that many lines and halves the last."""
        lines = [json.dumps(d) for d in self.lines]
        if drop_end and self.lines[-1]["type"] == "end":
            lines.pop()
        if cut_last:
            lines = lines[:cut_last]
            lines[-1] = lines[-1][: len(lines[-1]) // 2]
            Path(path).write_text("\n".join(lines))
            return
        Path(path).write_text("".join(line + "\n" for line in lines))


# ---------------------------------------------------------------- the tiny model


def mm(a: T, b: T) -> T:
    n, k = a.shape
    k2, m = b.shape
    assert k == k2
    return tensor((n, m), [fsum_plain(a.v[i * k + j] * b.v[j * m + c] for j in range(k)) for i in range(n) for c in range(m)])


def transpose(a: T) -> T:
    n, k = a.shape
    return tensor((k, n), [a.v[i * k + j] for j in range(k) for i in range(n)])


def nudge(t: T, ulps: int = 4096) -> T:
    """The same tensor with its first element moved by some units in the last place: another reduction order, made large enough to survive the update."""
    first = t.v[0]
    bits = struct.unpack("<i", struct.pack("<f", first))[0] + ulps
    return T(t.shape, (struct.unpack("<f", struct.pack("<i", bits))[0], *t.v[1:]))


def _uniform(seed: int, offset: int, n: int) -> list[float]:
    out = []
    for k in range(n):
        h = hashlib.blake2b(f"{seed}:{offset + k}".encode(), digest_size=4).digest()
        out.append(int.from_bytes(h, "little") / 2**32)
    return out


@dataclass(frozen=True)
class Variant:
    """What is different about one run. Steps are 0-based; `nudge` is (step, phase, op, module) of an op that rounds differently."""

    env: dict = field(default_factory=dict)
    header: dict = field(default_factory=dict)
    nudge: tuple[int, str, str, str] | None = None
    extra_draw: int | None = None  # at this step, torch.rand(4) before the dropout
    swap_batch: int | None = None  # this step and the next get each other's batch: another data order
    clone_after_relu: bool = False  # h = h.clone() after the activation: an extra op, the same numbers
    scale_after_relu: bool = False  # h = h * 2: an extra op that changes the numbers
    w2t_first: bool = False  # fc2's transpose computed before fc1 runs: a moved op
    init_shift: bool = False  # fc1.weight starts a little off: another initialisation
    dropout: bool = False
    gen_seed: int = 0  # the generator's seed: another one in each run when the run is not seeded
    lr: float = 0.05


FILE = "models/tiny.py"
TRAIN = "train.py"


class TinyRun:
    """Train x -> fc1 -> relu [-> dropout] -> fc2 -> mse, SGD, for `steps` steps, and record every op."""

    def __init__(self, variant: Variant = Variant(), steps: int = 2):
        self.var = variant
        self.steps = steps
        header = {"steps": steps, **variant.header}
        if variant.env:
            header["env"] = variant.env
        self.rec = RecordWriter(**header)
        self.params = {
            "fc1.weight": tensor((4, 3), [0.3, -0.2, 0.5, 0.1, 0.4, -0.3, -0.5, 0.2, 0.25, 0.15, -0.1, 0.35]),
            "fc2.weight": tensor((1, 4), [0.6, -0.4, 0.3, 0.5]),
        }
        if variant.init_shift:
            w = self.params["fc1.weight"]
            self.params["fc1.weight"] = tensor(w.shape, [w.v[0] + 0.01, *w.v[1:]])
        self.offset = 0  # the generator's Philox offset

    # one op: run fn, maybe nudge its first output, record it
    def _op(self, step, name, ins, outs, *, phase, module, cls, file=FILE, line, rng=None):
        if self.var.nudge == (step, phase, name, module):
            outs = [nudge(outs[0]), *outs[1:]]
        self.rec.op(step, name, phase=phase, module=module, module_class=cls, file=file, line=line, ins=ins, outs=outs, rng=rng)
        self._count += 1
        return outs

    def _draw(self, n: int) -> tuple[dict, list[float]]:
        seed = self.var.gen_seed
        rng = {"device": "cuda:0", "seed": seed, "offset": self.offset}
        values = _uniform(seed, self.offset, n)
        self.offset += (n + 3) // 4 * 4
        return rng, values

    def batch(self, step: int) -> tuple[T, T]:
        if self.var.swap_batch == step:
            step += 1
        elif self.var.swap_batch == step - 1:
            step -= 1
        rows = [[0.5 + 0.1 * step, -1.0, 2.0], [1.5, 0.25 * step, -0.5]]
        target = [[1.0], [-0.5 + 0.1 * step]]
        return tensor((2, 3), [v for r in rows for v in r]), tensor((2, 1), [v for r in target for v in r])

    def run(self) -> RecordWriter:
        for step in range(self.steps):
            self._count = 0
            loss = self._step(step)
            self.rec.step(step, self._count, dict(self.params), loss)
        self.rec.end(self.steps)
        return self.rec

    def _step(self, step: int) -> float:
        W1, W2 = self.params["fc1.weight"], self.params["fc2.weight"]
        xb, tb = self.batch(step)
        fwd = {"phase": "forward"}
        (x,) = self._op(step, "aten._to_copy.default", [xb], [xb], module=None, cls=None, file=TRAIN, line=30, **fwd)
        (t,) = self._op(step, "aten._to_copy.default", [tb], [tb], module=None, cls=None, file=TRAIN, line=31, **fwd)
        if self.var.w2t_first:
            (w2t,) = self._op(step, "aten.t.default", [("p", "fc2.weight", W2)], [transpose(W2)], module="fc2", cls="Linear", line=10, **fwd)
        (w1t,) = self._op(step, "aten.t.default", [("p", "fc1.weight", W1)], [transpose(W1)], module="fc1", cls="Linear", line=11, **fwd)
        (h,) = self._op(step, "aten.mm.default", [x, w1t], [mm(x, w1t)], module="fc1", cls="Linear", line=11, **fwd)
        (a,) = self._op(step, "aten.relu.default", [h], [tensor(h.shape, [max(v, 0.0) for v in h.v])], module="act", cls="ReLU", line=12, **fwd)
        if self.var.clone_after_relu:
            (a,) = self._op(step, "aten.clone.default", [a], [a], module="act", cls="ReLU", line=13, **fwd)
        if self.var.scale_after_relu:
            (a,) = self._op(step, "aten.mul.Tensor", [a], [tensor(a.shape, [2 * v for v in a.v])], module="act", cls="ReLU", line=13, **fwd)
        if self.var.extra_draw == step:
            rng, values = self._draw(4)
            self._op(step, "aten.rand.default", [], [tensor((4,), values)], module=None, cls=None, line=20, rng=rng, **fwd)
        mask = None
        if self.var.dropout:
            rng, values = self._draw(len(a.v))
            mask = tensor(a.shape, [2.0 if u >= 0.5 else 0.0 for u in values])
            kept = tensor(a.shape, [v * m for v, m in zip(a.v, mask.v)])
            a, _ = self._op(step, "aten.native_dropout.default", [a], [kept, mask], module="drop", cls="Dropout", line=13, rng=rng, **fwd)
        if not self.var.w2t_first:
            (w2t,) = self._op(step, "aten.t.default", [("p", "fc2.weight", W2)], [transpose(W2)], module="fc2", cls="Linear", line=14, **fwd)
        (y,) = self._op(step, "aten.mm.default", [a, w2t], [mm(a, w2t)], module="fc2", cls="Linear", line=14, **fwd)
        diff = [p - q for p, q in zip(y.v, t.v)]
        loss_value = fsum_plain(d * d for d in diff) / len(diff)
        (loss,) = self._op(step, "aten.mse_loss.default", [y, t], [tensor((), [loss_value])], module=None, cls=None, file=TRAIN, line=32, **fwd)

        bwd = {"phase": "backward"}
        (g,) = self._op(step, "aten.ones_like.default", [loss], [tensor((), [1.0])], module=None, cls=None, file=TRAIN, line=33, **bwd)
        (gy,) = self._op(step, "aten.mse_loss_backward.default", [g, y, t], [tensor(y.shape, [2 * d / len(diff) for d in diff])],
                         module=None, cls=None, file=TRAIN, line=32, **bwd)  # fmt: skip
        (gyt,) = self._op(step, "aten.t.default", [gy], [transpose(gy)], module="fc2", cls="Linear", line=14, **bwd)
        (gw2,) = self._op(step, "aten.mm.default", [gyt, a], [mm(gyt, a)], module="fc2", cls="Linear", line=14, **bwd)
        (ga,) = self._op(step, "aten.mm.default", [gy, ("p", "fc2.weight", W2)], [mm(gy, W2)], module="fc2", cls="Linear", line=14, **bwd)
        if mask is not None:
            (ga,) = self._op(step, "aten.native_dropout_backward.default", [ga, mask], [tensor(ga.shape, [v * m for v, m in zip(ga.v, mask.v)])],
                             module="drop", cls="Dropout", line=13, **bwd)  # fmt: skip
        gh = tensor(h.shape, [v if hv > 0 else 0.0 for v, hv in zip(ga.v, h.v)])
        (gh,) = self._op(step, "aten.threshold_backward.default", [ga, h], [gh], module="act", cls="ReLU", line=12, **bwd)
        (ght,) = self._op(step, "aten.t.default", [gh], [transpose(gh)], module="fc1", cls="Linear", line=11, **bwd)
        (gw1,) = self._op(step, "aten.mm.default", [ght, x], [mm(ght, x)], module="fc1", cls="Linear", line=11, **bwd)

        lr = self.var.lr
        new1 = tensor(W1.shape, [w - lr * d for w, d in zip(W1.v, gw1.v)])
        new2 = tensor(W2.shape, [w - lr * d for w, d in zip(W2.v, gw2.v)])
        self._op(step, "aten._foreach_add_.List", [("p", "fc1.weight", W1), ("p", "fc2.weight", W2), gw1, gw2], [new1, new2],
                 phase="optimizer", module=None, cls=None, file=TRAIN, line=35)  # fmt: skip
        self.params = {"fc1.weight": new1, "fc2.weight": new2}
        return loss.v[0]


def run(variant: Variant = Variant(), steps: int = 2) -> RecordWriter:
    return TinyRun(variant, steps).run()


def variant(**changes) -> Variant:
    return replace(Variant(), **changes)
