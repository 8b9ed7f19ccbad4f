"""Made-up measurements for the report tests, and the fixtures' marked lines."""

from __future__ import annotations

from pathlib import Path

from opscan.bench.attribution import OpKey, OpTime
from opscan.bench.results import BLOCKED, Measurement, Profile, VariantRun
from opscan.bench.variants import Variant, variants_for

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "bench"
WIGGLE = (0.0, 0.01, -0.01, 0.02, -0.02)  # a step-to-step spread of about ±1 %


def line_of(mark: str, name: str = "models.py") -> int:
    """The line of `# MARK mark` in a bench fixture."""
    for number, line in enumerate((FIXTURES / name).read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# MARK {mark}"):
            return number
    raise LookupError(mark)


def samples(ms: float, rounds: int = 25, shift: int = 0) -> list[float]:
    """`rounds` steps around `ms`; another `shift` wiggles in other rounds, as two variants' steps do."""
    return [ms * (1 + WIGGLE[(r + shift) % len(WIGGLE)]) for r in range(rounds)]


CONV_BWD = OpKey("backward", "aten::convolution_backward", "torchvision/models/resnet.py:92")
CONV_FWD = OpKey("forward", "aten::conv2d", "torchvision/models/resnet.py:92")
ADD = OpKey("forward", "aten::add_", "torchvision/models/resnet.py:102")


def profiles(precision: str, added: dict[OpKey, tuple[float, float]]) -> dict[str, Profile]:
    """Profiles of one precision where op k takes base ms (bench), base + a/2 (default) and base + a (det)."""
    out = {}
    for mode, share in (("benchmark", 0.0), ("default", 0.5), ("deterministic", 1.0)):
        v = Variant(precision, mode)
        ops = {}
        for key, (base, a) in added.items():
            kernel = "sm90_xmma_dgrad" if mode == "benchmark" or key != CONV_BWD else "cudnn::dgrad_engine<float>(int)"
            ops[key] = OpTime(base + share * a, {kernel: base + share * a})
        out[v.id] = Profile(v, 3, ops)
    return out


def measurement(ms: dict[str, tuple[float, float, float]], *, blocked=(), profiled=None, rounds: int = 25) -> Measurement:
    """`ms`: precision -> (bench, default, det) medians; `blocked`: precisions whose det variant raised."""
    runs = []
    for i, v in enumerate(variants_for(list(ms))):
        median = ms[v.precision][("benchmark", "default", "deterministic").index(v.mode)]
        if v.deterministic and v.precision in blocked:
            runs.append(VariantRun(v, status=BLOCKED, detail="aten.put_.default"))
        else:
            runs.append(VariantRun(v, samples(median, rounds, shift=i), [3 * 2**30] * rounds))
    return Measurement(runs, profiled or {})
