"""Walk two aligned runs step by step: where their numbers part, and why.

The fingerprints are of values, so an op whose inputs are bitwise equal in
both runs must give equal outputs; one that does not is a root cause (a
nondeterministic kernel, or a shifted random stream when its generator
state differs). The first op whose outputs differ with *different* inputs,
before any root cause, means a value came in from outside the ops compared:
the batch (data), the parameters before the first step (initialisation), or
the output of an op that only one run has (structure). Every later op that
reads a differing value differs too; that is propagation, never a cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opscan.compare import codes
from opscan.compare.align import Alignment, align
from opscan.compare.params import param_diff
from opscan.compare.reader import Header, Op, Step

# Ops whose output is uninitialised memory: it differs run to run and means nothing.
UNINITIALISED = ("aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided")

ONLY_A, ONLY_B, MOVED = "only in a", "only in b", "moved"

# For a structural difference between two records of the same code: what makes one script take another path.
PATH_HELP = (
    "Make every run take the same path: iterate over sorted(...) rather than over a set (or start Python with "
    "PYTHONHASHSEED=0), seed Python's random and NumPy as well as torch, and branch on nothing that changes from run to run."
)
PATH_CODE = "random.seed(0)\nfor name in sorted(names):  # not a set's order, which the hash seed changes\n    x = layers[name](x)"


def _packet(name: str) -> str:
    """`aten.empty.memory_format` -> `aten.empty`."""
    parts = name.split(".")
    return ".".join(parts[:2])


def _differ(xs: tuple, ys: tuple) -> bool:
    """Do two fingerprint lists differ? Positions not fingerprinted on either side are not evidence."""
    if xs == ys:
        return False
    if len(xs) != len(ys):
        return True
    return any(x != y for x, y in zip(xs, ys) if x is not None and y is not None)


def norm_gap(a: Op | None, b: Op | None) -> tuple[float | None, float | None]:
    """|norm a - norm b| and that relative to the larger norm (a lower bound of the outputs' distance)."""
    if a is None or b is None or a.norm is None or b.norm is None:
        return None, None
    gap = abs(a.norm - b.norm)
    scale = max(abs(a.norm), abs(b.norm))
    return gap, (gap / scale if scale else 0.0)


def _size_text(a: Op, b: Op) -> str:
    gap, rel = norm_gap(a, b)
    if gap is None:
        return ""
    if gap != gap:
        return f"; its output norm is {a.norm:.6g} in a and {b.norm:.6g} in b"
    if gap == 0:
        return "; its output norms agree, its bits do not"
    return f"; its output norms differ by {gap:.3g} (relative {rel:.3g})"


def _where(op: Op, step: int) -> str:
    return f"step {step}, {op.phase}, {op.module_label}"


def _at(op: Op) -> str:
    return f" at {op.where}" if op.where else ""


@dataclass(slots=True)
class Cause:
    """One root cause: its code, where it is (`at`, the op shown), and what to say about it.

    `a` and `b` are the op in each run (one of them None for an op only one
    run has). `steps` lists every step the same op was a root cause at.
    """

    code: str
    step: int
    at: Op
    a: Op | None
    b: Op | None
    message: str
    help: str = ""
    help_code: str = ""
    severity: str = "error"
    steps: list[int] = field(default_factory=list)

    @property
    def key(self) -> tuple:
        return (self.code, self.at.op, self.at.module, self.at.file, self.at.line)


@dataclass(slots=True)
class StructDiff:
    """An op that one run has and the other does not (or runs elsewhere: moved), first seen at `step`.

    The same difference in later steps (the same code runs every step) is
    counted in `steps`, not listed again.
    """

    step: int
    change: str
    a: Op | None
    b: Op | None
    position: int  # where in a's order it falls, to tell before from after
    steps: int = 1

    @property
    def op(self) -> Op:
        return self.a if self.a is not None else self.b

    @property
    def key(self) -> tuple:
        return (
            self.change,
            self.a.key if self.a else None,
            self.b.key if self.b else None,
            self.a.where if self.a else None,
            self.b.where if self.b else None,
        )


@dataclass(frozen=True, slots=True)
class SpreadRow:
    step: int
    first_op: str | None
    first_module: str | None
    ops_differ: int
    structural: int
    params_differ: int
    max_param_diff: float | None
    loss_a: float | None
    loss_b: float | None


@dataclass(slots=True)
class Comparison:
    """What the walk found: the causes (the first one first), the structural differences, the spread."""

    causes: list[Cause]
    primary: Cause | None
    structure: list[StructDiff]
    structure_dropped: int
    structure_steps: int
    spread: list[SpreadRow]
    steps: int
    ops: int
    param_names_differ: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    params_shared: int = 0  # where the names differ: how many both runs have

    @property
    def identical(self) -> bool:
        return self.primary is None and not self.structure


class Walker:
    """Feed it the steps of both runs in order (`add`), then take `result()`.

    `env_diffs` names the environment fields that differ (numbers may part
    at the first op because of them); `header_a` gives the flags the help
    text mentions (determinism, cudnn.benchmark). `same_code`: the caller
    recorded both runs from the same code (opscan diff), or their source
    digests match (`same_code_why` says which), so a structural difference is
    the same code taking another path, not a change to it.
    """

    MAX_CAUSES = 50  # distinct root causes kept; more are counted
    MAX_STRUCTURE = 200  # structural differences kept

    def __init__(
        self, header_a: Header, env_diffs: list[str], header_b: Header | None = None, *, same_code: bool = False,
        same_code_why: str = "opscan diff recorded it twice",
    ):  # fmt: skip
        self.env = header_a.env
        self.env_b = (header_b or header_a).env
        self.same_code = same_code
        self.same_code_why = same_code_why  # how we know the code is the same, for the message
        self.seeds = (header_a.seed, (header_b or header_a).seed)  # what opscan seeded each run with (None: nothing)
        self.on_cpu = header_a.device == "cpu" and (header_b or header_a).device == "cpu"
        self.env_diffs = env_diffs
        self.causes: dict[tuple, Cause] = {}
        self.dropped_causes = 0
        self.primary: Cause | None = None
        self.first_numeric: tuple[int, int] | None = None  # (step, position in a) of the first differing op
        self.structure: list[StructDiff] = []  # distinct differences, in order of first appearance
        self._seen_structure: dict[tuple, StructDiff] = {}
        self.structure_count = 0  # every difference, every step
        self.structure_dropped = 0  # distinct ones past MAX_STRUCTURE
        self.structure_steps = 0
        self.spread: list[SpreadRow] = []
        self.ops = 0
        self.first_step: int | None = None
        self._draws: list[tuple[int, str, int, Op]] = []  # random ops only one run has: (step, side, index, op)
        self._cache: tuple[list, list, Alignment] | None = None
        self._prev: tuple[list[Op], list[Op]] = ([], [])
        self._param_names: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self._params_shared = 0
        # Outputs that look equal in both runs but may hold their values in another order (the
        # fingerprints are blind to order): those of a random op whose generator state differs
        # (`randperm` gives the same values whatever the seed), and what ops make of them without
        # a visible difference. By fingerprint: (step, index in a, index in b, the op in a, in b).
        self._reordered: dict[str, tuple[int, int, int, Op, Op]] = {}

    # ------------------------------------------------------------ one step

    def add(self, sa: Step, sb: Step) -> None:
        if self.first_step is None:
            self.first_step = sa.step
        ops_a, ops_b = sa.ops, sb.ops
        self.ops += len(ops_a)
        al = self._align(ops_a, ops_b)
        if not al.identical:
            self.structure_steps += 1
            self._note_structure(sa.step, ops_a, ops_b, al)
        first: Op | None = None
        differ = 0
        for x, y in al.pairs:
            oa, ob = ops_a[x], ops_b[y]
            if oa.outs == ob.outs or not _differ(oa.outs, ob.outs) or _packet(oa.op) in UNINITIALISED:
                self._note_reordered(sa.step, x, y, oa, ob)
                continue
            differ += 1
            if first is None:
                first = oa
            if not _differ(oa.ins, ob.ins):
                draw = self._reordered_input_of(oa)
                if draw is not None:
                    self._add(self._reordered_input(sa.step, oa, draw))
                else:
                    self._add(self._equal_inputs(sa.step, x, y, ops_a, ops_b))
            elif self.primary is None:
                self._add(self._entering(sa.step, x, y, ops_a, ops_b, al))
            if self.first_numeric is None:
                self.first_numeric = (sa.step, x)
        pd = param_diff(sa.params, sb.params)
        if (pd.only_a or pd.only_b) and not any(self._param_names):
            self._param_names = (pd.only_a, pd.only_b)
            self._params_shared = pd.shared
        self.spread.append(
            SpreadRow(
                step=sa.step,
                first_op=first.op if first else None,
                first_module=first.module if first else None,
                ops_differ=differ,
                structural=al.changes,
                params_differ=pd.differ,
                max_param_diff=pd.max_diff,
                loss_a=sa.loss,
                loss_b=sb.loss,
            )
        )
        if self.primary is None:
            self._prev = (ops_a, ops_b)

    def _align(self, ops_a: list[Op], ops_b: list[Op]) -> Alignment:
        keys_a = [op.key for op in ops_a]
        keys_b = [op.key for op in ops_b]
        cached = self._cache
        if cached is not None and cached[0] == keys_a and cached[1] == keys_b:
            return cached[2]
        al = align(keys_a, keys_b)
        self._cache = (keys_a, keys_b, al)
        return al

    def _note_structure(self, step: int, ops_a: list[Op], ops_b: list[Op], al: Alignment) -> None:
        # Where an op only b runs falls in a's order: before the a op of the next pair.
        next_a = {}
        following = len(ops_a)
        by_b = sorted(al.pairs, key=lambda p: p[1])
        j = len(by_b) - 1
        for y in range(len(ops_b) - 1, -1, -1):
            while j >= 0 and by_b[j][1] > y:
                following = by_b[j][0]
                j -= 1
            next_a[y] = following
        diffs = [StructDiff(step, ONLY_A, ops_a[x], None, x) for x in al.only_a]
        diffs += [StructDiff(step, ONLY_B, None, ops_b[y], next_a[y]) for y in al.only_b]
        diffs += [StructDiff(step, MOVED, ops_a[x], ops_b[y], x) for x, y in al.pairs if x in al.moved]
        diffs.sort(key=lambda d: d.position)
        self.structure_count += len(diffs)
        for d in diffs:
            seen = self._seen_structure.get(d.key)
            if seen is not None:
                seen.steps += 1
            elif len(self.structure) < self.MAX_STRUCTURE:
                self._seen_structure[d.key] = d
                self.structure.append(d)
            else:
                self.structure_dropped += 1
        for x in al.only_a:
            if ops_a[x].rng is not None:
                self._draws.append((step, "a", x, ops_a[x]))
        for y in al.only_b:
            if ops_b[y].rng is not None:
                self._draws.append((step, "b", y, ops_b[y]))

    def _add(self, cause: Cause) -> None:
        # Different seeds give other random numbers: a draw, the initial parameters, and a batch made from the
        # generator (a random input, a shuffle) all part. The first of them is the seed's doing, wherever it is.
        drawn = cause.code == codes.RANDOM or (cause.code == codes.DATA and self.primary is None)
        if drawn and "seed" in self.env_diffs and (cause.step == self.first_step or self.primary is None):
            start = "so the runs part from the start" if cause.step == self.first_step else f"and the runs part at step {cause.step}"
            cause.code = codes.ENVIRONMENT
            cause.message = f"The records were made with different seeds (see env_diff), {start}. {cause.message}"
            cause.help = "Compare two runs made with the same seed."
            cause.help_code = ""
        if self.primary is None:
            self.primary = cause
        known = self.causes.get(cause.key)
        if known is not None:
            if cause.step not in known.steps:
                known.steps.append(cause.step)
            return
        if len(self.causes) >= self.MAX_CAUSES:
            self.dropped_causes += 1
            return
        cause.steps = [cause.step]
        self.causes[cause.key] = cause

    # ------------------------------------------------------------ outputs equal but for order

    def _note_reordered(self, step: int, x: int, y: int, a: Op, b: Op) -> None:
        """Outputs that look equal: note them if they may be the same values in another order."""
        if a.rng is not None and b.rng is not None and a.rng != b.rng:
            draw = (step, x, y, a, b)
        else:
            draw = self._reordered_input_of(a)
            if draw is None:
                return
        for fp in a.outs:
            if fp is not None and fp not in self._reordered:
                self._reordered[fp] = draw

    def _reordered_input_of(self, op: Op) -> tuple[int, int, int, Op, Op] | None:
        """The draw behind the first input of `op` that may be reordered, if any."""
        return next((self._reordered[fp] for fp in op.ins if fp in self._reordered), None)

    def _reordered_input(self, step: int, op: Op, draw: tuple[int, int, int, Op, Op]) -> Cause:
        """`op` reads what looks equal, but came from a random op whose generator state differs."""
        draw_step, x, y, a, b = draw
        seen = (
            f"its outputs hold the same values in both runs, perhaps in another order, which the fingerprints "
            f"cannot see, and `{op.op}` ({_where(op, step)}{_at(op)}), which reads them, gives different outputs "
            f"from inputs that look equal"
        )
        if _seeds_differ(a, b):
            return self._unseeded(draw_step, a, b, seen)
        return Cause(
            codes.RANDOM,
            draw_step,
            a,
            a,
            b,
            f"`{a.op}` drew from a different generator state ({_where(a, draw_step)}): random stream shift; "
            f"{seen}. {self._rng_story(draw_step, x, y, a, b)}",
            help="Make both runs draw the same random numbers in the same order: remove or move the extra draw, "
            "or give it its own torch.Generator so that it leaves the global stream alone.",
            help_code="gen = torch.Generator().manual_seed(0)\nperm = torch.randperm(n, generator=gen)",
        )

    # ------------------------------------------------------------ same inputs, different outputs

    def _equal_inputs(self, step: int, x: int, y: int, ops_a: list[Op], ops_b: list[Op]) -> Cause:
        a, b = ops_a[x], ops_b[y]
        where = _where(a, step)
        shapes = next(
            ((p, q) for p, q in zip(_out_shapes(ops_a, x), _out_shapes(ops_b, y)) if p is not None and q is not None and p != q),
            None,
        )
        if shapes is not None:  # a view or a reduction called with another size or dim: no kernel gives another shape
            return Cause(
                codes.STRUCTURE,
                step,
                a,
                a,
                b,
                f"`{a.op}` ({where}) gives outputs of another shape from inputs whose fingerprints match "
                f"({_shape_text(shapes[0])} in a, {_shape_text(shapes[1])} in b): it is called with other arguments "
                f"(a size, a dim), so {self._apart()} here, not the kernel",
                help="The two records are of different code. If the change should keep the maths, look at what sets this op's arguments.",
            )
        if _seeds_differ(a, b):  # seeded apart: not one stream moved along
            return self._unseeded(step, a, b, "its inputs are equal, its outputs differ")
        if a.rng != b.rng:
            return Cause(
                codes.RANDOM,
                step,
                a,
                a,
                b,
                f"`{a.op}` drew from a different generator state ({where}): random stream shift; "
                f"its inputs are equal, its outputs differ. {self._rng_story(step, x, y, a, b)}",
                help="Make both runs draw the same random numbers in the same order: remove or move the extra draw, "
                "or give it its own torch.Generator so that it leaves the global stream alone.",
                help_code="gen = torch.Generator(device=x.device).manual_seed(0)\nnoise = torch.rand(x.shape, generator=gen, device=x.device)",
            )
        if self.env_diffs and step == self.first_step and a.phase == "forward":
            return Cause(
                codes.ENVIRONMENT,
                step,
                a,
                a,
                b,
                f"The environments differ ({', '.join(self.env_diffs)}) and the numbers part from the start: "
                f"`{a.op}` gave different outputs from inputs whose fingerprints match ({where}){_size_text(a, b)}",
                help="Compare runs from the same environment: make the fields in env_diff equal "
                "(the same torch, CUDA, cuDNN and driver, the same flags) and compare again.",
            )
        if self.on_cpu:
            # CPU kernels give the same bits for the same inputs (with the same thread count), and fingerprints
            # are blind to order: the same values in another order, a batch shuffled apart, look equal.
            return Cause(
                codes.DATA,
                step,
                a,
                a,
                b,
                f"`{a.op}` gave different outputs from inputs whose fingerprints match ({where}){_size_text(a, b)}. "
                "Both runs are on the CPU, whose kernels give the same bits for the same inputs, so its inputs most "
                "likely hold the same values in another order, which fingerprints do not see: a batch shuffled or "
                "sampled by an unseeded generator, or a set's order",
                help="Seed what orders the data: Python's random and NumPy as well as torch, and the DataLoader's "
                "generator; iterate over sorted(...) rather than over a set.",
                help_code="random.seed(0)\nnp.random.seed(0)\n"
                "loader = DataLoader(dataset, shuffle=True, generator=torch.Generator().manual_seed(0))",
            )
        help_text, help_code = self._kernel_help(a)
        also = f"; the environments differ too ({', '.join(self.env_diffs)})" if self.env_diffs else ""
        return Cause(
            codes.KERNEL,
            step,
            a,
            a,
            b,
            f"`{a.op}` gave different outputs from inputs whose fingerprints match ({where}): kernel nondeterminism{_size_text(a, b)}{also}",
            help=help_text,
            help_code=help_code,
        )

    def _kernel_help(self, a: Op) -> tuple[str, str]:
        rule = _rule_for(a.op)
        if rule is not None:
            remedy = rule.remedy_for(a.shapes, op=a.op, module_label=a.module or "")
            return f"{rule.title} has no deterministic implementation: {remedy.text}", remedy.code
        hints = []
        if self.env.get("cudnn_benchmark") is True and "convolution" in a.op:
            hints.append("cudnn.benchmark was on, so the autotuner may pick another algorithm in each run: set torch.backends.cudnn.benchmark = False.")
        if self.env.get("deterministic") is True:
            hints.append(
                "Determinism was on, and this op is not known to be nondeterministic: check that both runs used the same torch, "
                "CUDA and GPU, and that nothing writes to its inputs from another stream or thread."
            )
            return " ".join(hints), ""
        hints.append(
            "Turn determinism on: torch.use_deterministic_algorithms(True), with CUBLAS_WORKSPACE_CONFIG=:4096:8 and "
            "cudnn.benchmark off. An op with no deterministic implementation then raises; `opscan scan` lists them all."
        )
        code = (
            'os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")\n'
            "torch.use_deterministic_algorithms(True)\n"
            "torch.backends.cudnn.benchmark = False"
        )
        return " ".join(hints), code

    def _unseeded(self, step: int, a: Op, b: Op, seen: str) -> Cause:
        """A random op whose generator was seeded with another value in each run: no draw explains it, the seeding does."""
        seed_a, seed_b = self.seeds
        if seed_a != seed_b:  # --seed differs: _add lays it at the environment and says so
            why = ""
        elif seed_a is None:
            why = (
                ": the run is not seeded (no --seed, and nothing seeds the generator before this draw), "
                "so torch seeds it anew in each process"
            )
        else:
            why = (
                f": both runs were seeded with {seed_a}, and then something seeds the generator again with another "
                "value in each run (torch.seed(), a seed from the clock or the process id)"
            )
        return Cause(
            codes.RANDOM,
            step,
            a,
            a,
            b,
            f"`{a.op}` drew from a generator seeded differently in each run ({_where(a, step)}): {seen}. "
            f"The generator seeds differ (a: {a.rng.seed}, b: {b.rng.seed}){why}",
            help="Seed the run once at its start, before the model is built and before anything draws: "
            "torch.manual_seed(0), and random.seed(0) and numpy.random.seed(0) where the code uses them; "
            "or record both runs with the same --seed.",
            help_code="torch.manual_seed(0)",
        )

    def _rng_story(self, step: int, x: int, y: int, a: Op, b: Op) -> str:
        ra, rb = a.rng, b.rng
        if ra is None or rb is None:
            told = f"only {'a' if rb is None else 'b'} records the generator state of this op."
        elif isinstance(ra.offset, int) and isinstance(rb.offset, int) and ra.offset != rb.offset:
            gap = rb.offset - ra.offset
            told = f"The Philox offset is {abs(gap)} {'ahead' if gap > 0 else 'behind'} in b (a: {ra.offset}, b: {rb.offset})."
        else:
            told = f"The generator states differ (a: {ra.describe()}, b: {rb.describe()})."
        device = (ra or rb).device
        before = [
            (side, s, op)
            for s, side, index, op in self._draws
            if (s < step or index < (x if side == "a" else y)) and (device is None or op.rng is None or op.rng.device == device)
        ]
        if not before:
            return told + (
                " No recorded op explains it: something outside the recorded ops drew from the generator "
                "(a DataLoader iterator, an augmentation, code that was not traced)."
            )
        lines = []
        for side in ("a", "b"):
            mine = [(s, op) for who, s, op in before if who == side]
            if not mine:
                continue
            shown = ", ".join(f"`{op.op}`{_at(op)} (step {s})" for s, op in mine[:3])
            more = f" and {len(mine) - 3} more" if len(mine) > 3 else ""
            times = "once" if len(mine) == 1 else f"{len(mine)} times"
            lines.append(f"{side} draws {times} where the other run does not, before it: {shown}{more}.")
        return told + " " + " ".join(lines)

    # ------------------------------------------------------------ different inputs, before any cause

    def _entering(self, step: int, x: int, y: int, ops_a: list[Op], ops_b: list[Op], al: Alignment) -> Cause:
        """The first op that differs reads a differing input: where did that input come from?"""
        a, b = ops_a[x], ops_b[y]
        where = _where(a, step)
        only_a, only_b = set(al.only_a), set(al.only_b)
        prev_a, prev_b = self._prev
        positions = [j for j, (p, q) in enumerate(zip(a.ins, b.ins)) if p is not None and q is not None and p != q]
        if len(a.ins) != len(b.ins) and not positions:
            positions = [min(len(a.ins), len(b.ins))]
        for j in positions:
            fa = a.ins[j] if j < len(a.ins) else None
            fb = b.ins[j] if j < len(b.ins) else None
            kind_a, producer_a = _origin(fa, x, ops_a, only_a, prev_a)
            kind_b, producer_b = _origin(fb, y, ops_b, only_b, prev_b)
            if "unaligned" in (kind_a, kind_b):
                side, producer = ("b", ops_b[producer_b]) if kind_b == "unaligned" else ("a", ops_a[producer_a])
                return Cause(
                    codes.STRUCTURE,
                    step,
                    producer,
                    producer if side == "a" else None,
                    producer if side == "b" else None,
                    f"The numbers part because of a structural difference: `{a.op}` ({where}) reads the output of "
                    f"`{producer.op}` ({producer.module_label}{_at(producer)}), an op that only {side} runs",
                    help="The change to the code changes the numbers from here on. If it should not, look at that op; "
                    "otherwise compare two records of the same code.",
                )
        j = positions[0]
        fa, fb = a.ins[j] if j < len(a.ins) else None, b.ins[j] if j < len(b.ins) else None
        kind_a, _ = _origin(fa, x, ops_a, only_a, prev_a)
        kind_b, _ = _origin(fb, y, ops_b, only_b, prev_b)
        if "param" in (kind_a, kind_b):
            name = (fa if kind_a == "param" else fb)[2:].split("@", 1)[0]
            if step == self.first_step:
                return Cause(
                    codes.RANDOM,
                    step,
                    a,
                    a,
                    b,
                    f"The parameters differ before the first step: `{a.op}` ({where}) reads `{name}`, which differs. "
                    "The models were initialised from different random streams: another seed, an extra or missing draw "
                    "before the model was built, or layers created in another order",
                    help="Seed before building the model, draw nothing else before it, and create the layers in the same order "
                    "in both versions (each layer draws its initial weights when it is created).",
                    help_code="torch.manual_seed(0)\nmodel = build_model()",
                )
            return Cause(
                codes.DATA,
                step,
                a,
                a,
                b,
                f"A parameter differs though every recorded op before it matched: `{a.op}` ({where}) reads `{name}`. "
                "Something outside the recorded ops wrote to it (a checkpoint load, an EMA or hook, a second optimizer)",
                help="Find what writes to that parameter outside the training step, and make it write the same in both runs.",
            )
        if kind_a == "fresh" and kind_b == "fresh":
            return Cause(
                codes.DATA,
                step,
                a,
                a,
                b,
                f"The data entering the model differs: `{a.op}` ({where}) reads input {j}, which no recorded op produced, "
                "and it differs between the runs (a different batch: data order, augmentation, a sampler or worker seed)",
                help="Seed the data pipeline: give the DataLoader a seeded generator and a worker_init_fn, and seed every "
                "augmentation the workers use.",
                help_code="loader = DataLoader(dataset, shuffle=True, generator=torch.Generator().manual_seed(0),\n"
                "                    worker_init_fn=seed_worker)",
            )
        return Cause(
            codes.STRUCTURE,
            step,
            a,
            a,
            b,
            f"The numbers part because {self._apart()}: `{a.op}` ({where}) reads input {j} from another "
            "tensor than in the other run, though every op before it matched",
            help="The two records are of different code. If the change should keep the maths, look at what this op reads.",
        )

    # ------------------------------------------------------------ the end

    def result(self) -> Comparison:
        causes = list(self.causes.values())
        primary = self.primary
        structure = self.structure
        if structure:
            first = structure[0]
            if primary is not None and primary.code == codes.STRUCTURE:
                if primary.at is not first.op:
                    primary.message += (
                        f"; the op sequences differ in {self.structure_count} places, the first at step {first.step}: "
                        f"{_struct_text(first)}"
                    )
            elif not self._explained_draws(causes):
                cause = self._structure_cause(first, primary)
                causes.append(cause)
                if primary is None:
                    primary = cause
        if self.same_code:
            for cause in causes:
                if cause.code == codes.STRUCTURE:
                    cause.message += f". {self._path_story()}"
                    cause.help, cause.help_code = PATH_HELP, PATH_CODE
        if primary is not None and primary in causes:
            causes.remove(primary)
            causes.insert(0, primary)
        return Comparison(
            causes=causes,
            primary=primary,
            structure=structure,
            structure_dropped=self.structure_dropped,
            structure_steps=self.structure_steps,
            spread=self.spread,
            steps=len(self.spread),
            ops=self.ops,
            param_names_differ=self._param_names,
            params_shared=self._params_shared,
        )

    def _apart(self) -> str:
        """What a structural difference means: with the same code (opscan diff), another path; else a change to it."""
        return "the runs took other paths" if self.same_code else "the code differs"

    def _path_story(self) -> str:
        """Why the same code ran other ops: the hash seed (as the headers tell it), or a branch on something that changes."""
        missing = object()
        seed_a, seed_b = self.env.get("pythonhashseed", missing), self.env_b.get("pythonhashseed", missing)
        order = "a set of strings iterates in another order in each process (and so does a dict filled from one)"
        if seed_a is missing or seed_b is missing:
            hashed = f"where PYTHONHASHSEED was not set, {order}; "
        elif seed_a is None and seed_b is None:
            hashed = f"PYTHONHASHSEED is unset in both runs, so {order}; "
        elif seed_a != seed_b:
            hashed = f"PYTHONHASHSEED differs (a: {seed_a}, b: {seed_b}), so {order}; "
        else:
            hashed = ""  # fixed and equal: sets iterate alike
        return (
            f"Both records are of the same code ({self.same_code_why}), so something outside it chose the path: "
            f"{hashed}{'or ' if hashed else ''}the code branches on something that changes from run to run "
            "(Python's random unseeded, the time, other input)"
        )

    def _explained_draws(self, causes: list[Cause]) -> bool:
        """Every structural difference is a random draw that a DET201 finding names already."""
        if not any(c.code == codes.RANDOM and c.a is not None and c.a.rng is not None for c in causes):
            return False
        return not self.structure_dropped and all(d.change != MOVED and d.op.rng is not None for d in self.structure)

    def _structure_cause(self, first: StructDiff, primary: Cause | None) -> Cause:
        if self.first_numeric is None:
            numbers = "structure only, same numbers"
            severity = "warning"
        elif self.first_numeric < (first.step, first.position):
            numbers = f"the numbers part before it, at step {self.first_numeric[0]} ({primary.code if primary else 'see above'})"
            severity = "warning"
        else:
            numbers = f"the numbers part after it, at step {self.first_numeric[0]}, for another reason ({primary.code if primary else 'see above'})"
            severity = "warning"
        count = self.structure_count
        places = "1 place" if count == 1 else f"{count} places"
        steps = "1 step" if self.structure_steps == 1 else f"{self.structure_steps} steps"
        return Cause(
            codes.STRUCTURE,
            first.step,
            first.op,
            first.a,
            first.b,
            f"The op sequences differ in {places} over {steps} (aligned); the first at step {first.step}: "
            f"{_struct_text(first)}; {numbers}",
            help=(
                "The changed code computes the same numbers: the refactor kept the maths."
                if self.first_numeric is None
                else "The records are of different code; the structural differences are listed in the structure table."
            ),
            severity=severity,
            steps=[first.step],
        )


def _out_shapes(ops: list[Op], index: int) -> list[tuple | None]:
    """The shape of each output of ops[index], as the first later op of the step that reads it records it (None: no reader)."""
    outs = ops[index].outs
    wanted = {fp: k for k, fp in reversed(list(enumerate(outs))) if fp is not None}
    shapes: list[tuple | None] = [None] * len(outs)
    for later in ops[index + 1 :]:
        if not wanted:
            break
        for fp, shape in zip(later.ins, later.shapes):
            k = wanted.pop(fp, None)
            if k is not None:
                shapes[k] = shape
    return shapes


def _shape_text(shape: tuple) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _seeds_differ(a: Op, b: Op) -> bool:
    """Were the two draws' generators seeded with other values (not moved along one stream)?"""
    ra, rb = a.rng, b.rng
    return ra is not None and rb is not None and ra.seed is not None and rb.seed is not None and ra.seed != rb.seed


def _struct_text(d: StructDiff) -> str:
    op = d.op
    if d.change == MOVED:
        return f"`{op.op}` ({op.module_label}) runs in another place in b ({d.a.where or '?'} in a, {d.b.where or '?'} in b)"
    side, other = ("b", "a") if d.change == ONLY_B else ("a", "b")
    return f"{side} runs `{op.op}` ({op.phase}, {op.module_label}{_at(op)}), which {other} does not"


def _origin(fp: str | None, index: int, ops: list[Op], unaligned: set[int], previous: list[Op]) -> tuple[str, int | None]:
    """Where an input came from: "param", "unaligned" (an op only this run has), "produced" (an earlier op) or "fresh"."""
    if fp is None:
        return "unknown", None
    if fp.startswith("p:"):
        return "param", None
    for j in range(index - 1, -1, -1):
        if fp in ops[j].outs:
            return ("unaligned" if j in unaligned else "produced"), j
    for op in previous:
        if fp in op.outs:
            return "produced", None
    return "fresh", None


_RULES = []


def _rule_for(op: str):
    """The rules-data entry for an op with no deterministic implementation, or None."""
    from opscan import rules

    if not _RULES:
        try:
            _RULES.append(rules.load())
        except rules.RulesError:
            _RULES.append(None)
    db = _RULES[0]
    return db.for_alert("", op) if db is not None else None
