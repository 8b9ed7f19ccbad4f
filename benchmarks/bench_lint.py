"""Time the whole `opscan lint` process against ruff (the speed limit) and TorchFix.

    python benchmarks/bench_lint.py                  # print the table
    python benchmarks/bench_lint.py --write          # also replace the "## opscan lint" section of BENCHMARKS.md

Inputs are generated into benchmarks/data/ (gitignored): one ~1,000-line
training script, and a folder of 200 training scripts that share a helper
package. Every tool runs as a fresh process with no cache (`opscan lint
--no-cache`, `ruff check --no-cache --isolated`, `torchfix`), output to
/dev/null. Runs alternate between the tools, round after round, so drift in
the machine's speed hits them alike; the figures are medians. A warm-cache
rerun of opscan over the unchanged input is timed too (the run cache replays
the last output), and one with the facts cache only (OPSCAN_RUN_CACHE=0), beside
a bare `python -I -c pass`.

The tools are looked up beside this Python (a venv's bin/) and then on PATH.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
SECTION = "## opscan lint"
IMPORTS = "import opscan.cli, opscan.config, opscan.output, opscan.commands.lint, opscan.lint.engine"

# ---------------------------------------------------------------- inputs

HEADER = '''"""Train an image classifier: {title}."""

import argparse
import json
import math
import os
import random
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torch.utils.checkpoint import checkpoint
'''

SEED_FN = '''

def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
'''

BLOCK = '''

class Block{i}(nn.Module):
    """A residual block with {c} channels."""

    def __init__(self, channels={c}, dropout={p}):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.drop = nn.Dropout(dropout)
        self.pool = nn.{pool}

    def forward(self, x):
        identity = x
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.drop(out)
        out = self.bn2(self.conv2(out))
        out = F.interpolate(out, size=identity.shape[-2:], mode="{mode}")
        return F.relu(out + identity)


def augment_{i}(batch, strength={p}):
    noise = torch.randn_like(batch) * strength
    if random.random() < 0.5:
        batch = torch.flip(batch, dims=[-1])
    scale = float(np.random.uniform(0.9, 1.1))
    batch = batch * scale + noise
    return torch.clamp(torch.log(1 + batch.abs()), max=10.0)


def stats_{i}(values):
    total = 0.0
    count = 0
    for v in values:
        total += float(v)
        count += 1
    mean = total / max(count, 1)
    var = sum((float(v) - mean) ** 2 for v in values) / max(count - 1, 1)
    return {{"mean": mean, "std": math.sqrt(var), "n": count}}
'''

DATASET = '''

class SyntheticDataset(Dataset):
    def __init__(self, n, size, classes):
        self.n = n
        self.size = size
        self.classes = classes

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        image = torch.rand(3, self.size, self.size, generator=g)
        label = int(torch.randint(self.classes, (1,), generator=g))
        return image, label
'''

MODEL = '''

class Net(nn.Module):
    def __init__(self, classes=10, width={c}):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.blocks = nn.Sequential({blocks})
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = checkpoint(self.blocks, x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)
'''

TRAIN = '''

def evaluate(model, loader, device):
    model.eval()
    correct = 0
    seen = 0
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            correct += (logits.argmax(1) == labels).sum().item()
            seen += labels.numel()
    return correct / max(seen, 1)


def save_checkpoint(model, optimizer, epoch, path):
    state = {{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}}
    torch.save(state, path)


def load_checkpoint(model, optimizer, path):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["epoch"]


def train_one_epoch(model, loader, optimizer, device, epoch):
    model.train()
    losses = []
    start = time.time()
    for step, (images, labels) in enumerate(loader):
        images, labels = images.to(device), labels.to(device)
        images = augment_0(images)
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(json.dumps({{"epoch": epoch, "step": step, "loss": losses[-1], "time": time.time() - start}}))
    return stats_0(losses)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default={epochs})
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default={seed})
    parser.add_argument("--out", type=Path, default=Path("runs"))
    parser.add_argument("--resume", type=Path)
    return parser.parse_args()


def main():
    args = parse_args()
    set_seed(args.seed)
    {cudnn}
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, args.epochs)
    train = DataLoader(SyntheticDataset(1024, 32, 10), batch_size=args.batch_size, shuffle=True, num_workers=2)
    test = DataLoader(SyntheticDataset(256, 32, 10), batch_size=args.batch_size)
    start_epoch = load_checkpoint(model, optimizer, args.resume) if args.resume else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for epoch in range(start_epoch, args.epochs):
        stats = train_one_epoch(model, train, optimizer, device, epoch)
        accuracy = evaluate(model, test, device)
        scheduler.step()
        print(json.dumps({{"epoch": epoch, "accuracy": accuracy, **stats}}))
        save_checkpoint(model, optimizer, epoch, args.out / f"epoch{{epoch}}.pt")


if __name__ == "__main__":
    main()
'''

POOLS = ("AdaptiveAvgPool2d(7)", "MaxPool2d(2)", "AvgPool2d(2)", "Identity()", "ReflectionPad2d(1)")
MODES = ("bilinear", "nearest", "bicubic", "nearest")
CUDNN = (
    "torch.backends.cudnn.benchmark = True",
    "torch.backends.cudnn.deterministic = True",
    'os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:2"',
    "torch.use_deterministic_algorithms(True)",
    "pass",
)


def training_script(rng: random.Random, blocks: int, title: str) -> str:
    width = rng.choice((32, 64, 128))
    parts = [HEADER.format(title=title), SEED_FN, DATASET]
    for i in range(blocks):
        parts.append(BLOCK.format(i=i, c=width, p=rng.choice((0.0, 0.1, 0.2)), pool=rng.choice(POOLS), mode=rng.choice(MODES)))
    chain = ", ".join(f"Block{i}()" for i in range(blocks))
    parts.append(MODEL.format(c=width, blocks=chain))
    parts.append(TRAIN.format(epochs=rng.randint(5, 90), seed=rng.randint(0, 9999), cudnn=rng.choice(CUDNN)))
    return "".join(parts)


def generate(data: Path) -> tuple[Path, Path]:
    """Write the inputs (deterministically) and return (single file, folder)."""
    data.mkdir(parents=True, exist_ok=True)
    # An empty [tool.opscan] table here stops opscan from picking up the repository's
    # own config (which excludes benchmarks/data); ruff runs --isolated.
    (data / "pyproject.toml").write_text("[tool.opscan]\n")
    rng = random.Random(1234)
    single = data / "train_1000.py"
    blocks = 1
    while True:  # grow the block count until the file is about 1,000 lines
        text = training_script(random.Random(1234), blocks, "single-file benchmark")
        if text.count("\n") >= 1000:
            break
        blocks += 1
    single.write_text(text)
    folder = data / "scripts"
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "common").mkdir(parents=True)
    (folder / "common" / "__init__.py").write_text("")
    (folder / "common" / "seeding.py").write_text(
        "import os\nimport random\n\nimport numpy as np\nimport torch\n\n\n"
        "def seed_all(seed):\n    random.seed(seed)\n    np.random.seed(seed)\n    torch.manual_seed(seed)\n\n\n"
        "def make_deterministic():\n"
        '    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")\n'
        "    torch.use_deterministic_algorithms(True)\n"
    )
    for n in range(200):
        text = training_script(rng, rng.randint(1, 2), f"experiment {n}")
        if n % 3 == 0:  # a third of them seed through the shared helper
            text = text.replace("    set_seed(args.seed)\n", "    seed_all(args.seed)\n    make_deterministic()\n")
            text = text.replace("from torch.utils.checkpoint import checkpoint\n", "from torch.utils.checkpoint import checkpoint\n\nfrom common.seeding import make_deterministic, seed_all\n")
        (folder / f"train_{n:03d}.py").write_text(text)
    return single, folder


# ---------------------------------------------------------------- timing


def tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def run_once(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def count_findings(cmd: list[str], cwd: Path, env: dict[str, str]) -> int:
    """Diagnostics printed as `path:line:col: CODE ...`."""
    import re

    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return len(re.findall(r"^\S+:\d+:\d+: [A-Z]+\d+ ", proc.stdout + proc.stderr, flags=re.M))


def measure(commands: dict[str, list[str]], repeats: dict[str, int], cwd: Path, env: dict[str, str]) -> dict[str, list[float]]:
    """Alternate the commands round by round; a tool with fewer repeats drops out of later rounds."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for name in names:  # one untimed warm-up of the fast tools: page cache, .pyc files
        if repeats[name] == max(repeats.values()):
            run_once(commands[name], cwd, env)
    for r in range(max(repeats.values())):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            if len(times[name]) < repeats[name]:
                times[name].append(run_once(commands[name], cwd, env))
    return times


def _parse_time(sources: list[bytes]) -> float:
    import ast

    start = time.perf_counter()
    for source in sources:
        ast.parse(source)
    return time.perf_counter() - start


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed runs of opscan and ruff per input (default 15)")
    parser.add_argument("--torchfix-repeats", type=int, default=5, help="timed runs of TorchFix on the single file (default 5; half as many on the folder)")
    parser.add_argument("--write", action="store_true", help="replace the '## opscan lint' section of BENCHMARKS.md")
    args = parser.parse_args(argv)

    single, folder = generate(DATA)
    n_lines = single.read_text().count("\n")
    n_scripts = len(list(folder.glob("train_*.py")))
    folder_lines = sum(p.read_text().count("\n") for p in folder.rglob("*.py"))

    opscan, ruff, torchfix = tool("opscan"), tool("ruff"), tool("torchfix")
    missing = [n for n, t in (("opscan", opscan), ("ruff", ruff), ("torchfix", torchfix)) if t is None]
    if missing:
        raise SystemExit(f"not found: {', '.join(missing)} (install them in this Python's environment)")

    cache_dir = Path(tempfile.mkdtemp(prefix="opscan-bench-cache-"))
    env = dict(os.environ, OPSCAN_CACHE_DIR=str(cache_dir))
    # As after `pip install`: modules load from .pyc files (the warm-up run writes them).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    rows = []
    for label, target, repeats, tf_repeats in (
        (f"one {n_lines}-line script", single, args.repeats, args.torchfix_repeats),
        # TorchFix takes minutes per run on the folder: fewer runs of it there.
        (f"{n_scripts} scripts ({folder_lines} lines)", folder, max(5, args.repeats // 2), max(1, args.torchfix_repeats // 2)),
    ):
        rel = str(target.relative_to(DATA))
        commands = {
            "opscan": [opscan, "lint", "--no-cache", "--exit-zero", rel],
            "ruff": [ruff, "check", "--no-cache", "--isolated", "--exit-zero", rel],
            "torchfix": [torchfix, rel],
        }
        python = str(Path(opscan).parent / "python") if (Path(opscan).parent / "python").exists() else sys.executable
        # The floor for any stdlib-ast linter: a process that only parses the input, on as many cores.
        commands["parse floor"] = [python, str(ROOT / "benchmarks" / "parse_floor.py"), rel]
        reps = {"opscan": repeats, "ruff": repeats, "torchfix": min(tf_repeats, repeats), "parse floor": repeats}
        commands["python -I"] = [python, "-I", "-c", "pass"]  # the interpreter alone (issue 9's warm-cache yardstick)
        reps["python -I"] = repeats
        if target == single:  # the interpreter with site, then with opscan's lint modules imported
            commands["python start-up"] = [python, "-c", "pass"]
            commands["opscan imports"] = [python, "-c", IMPORTS]
            reps["python start-up"] = reps["opscan imports"] = repeats
        times = measure(commands, reps, DATA, env)
        # Warm cache: fill it, then time reruns over the unchanged input, alternating with the bare
        # interpreter. The input was written seconds ago; the run cache trusts mtimes older than two.
        warm_cmd = [opscan, "lint", "--exit-zero", rel]
        shutil.rmtree(cache_dir, ignore_errors=True)
        run_once(warm_cmd, DATA, env)
        time.sleep(2.5)
        run_once(warm_cmd, DATA, env)
        facts_env = dict(env, OPSCAN_RUN_CACHE="0")
        # The same rerun without the console script, whose `import re` (pip writes it) costs more than the replay.
        entry_cmd = [python, "-c", "from opscan.cli import entry; entry()", "lint", "--exit-zero", rel]
        warm, warm_entry, warm_facts, bare = [], [], [], []
        for _ in range(repeats):
            warm.append(run_once(warm_cmd, DATA, env))
            warm_entry.append(run_once(entry_cmd, DATA, env))
            warm_facts.append(run_once(warm_cmd, DATA, facts_env))
            bare.append(run_once(commands["python -I"], DATA, env))
        med = {name: statistics.median(t) for name, t in times.items()}
        med["opscan (warm cache)"] = statistics.median(warm)
        med["opscan (warm, python -c entry)"] = statistics.median(warm_entry)
        med["opscan (warm, facts cache only)"] = statistics.median(warm_facts)
        med["python -I (beside warm)"] = statistics.median(bare)
        findings = {
            "opscan": count_findings(commands["opscan"], DATA, env),
            "ruff": count_findings(commands["ruff"][:-1] + ["--output-format", "concise", rel], DATA, env),
            "torchfix": count_findings(commands["torchfix"], DATA, env),
        }
        # What CPython's parser costs on this input inside one warm process, for comparison.
        sources = [p.read_bytes() for p in ([target] if target.is_file() else sorted(target.rglob("*.py")))]
        med["ast.parse"] = min(_parse_time(sources) for _ in range(3))
        counts = {**{k: len(v) for k, v in times.items()}, "opscan (warm cache)": len(warm), "opscan (warm, facts cache only)": len(warm)}
        rows.append((label, med, counts, findings))
        print(f"{label}: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in med.items()), file=sys.stderr)
    shutil.rmtree(cache_dir, ignore_errors=True)

    text = render(rows)
    print(text)
    if args.write:
        write_section(ROOT / "BENCHMARKS.md", text)
        print("updated BENCHMARKS.md", file=sys.stderr)
    return 0


def _versions() -> str:
    def version(cmd):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
            return out.splitlines()[0] if out else "?"
        except (OSError, subprocess.SubprocessError):
            return "?"

    return (
        f"{version([tool('opscan'), '--version'])}, {version([tool('ruff'), '--version'])}, "
        f"torchfix {version([tool('torchfix'), '--version'])}, Python {platform.python_version()}"
    )


def render(rows) -> str:
    today = datetime.date.today().isoformat()
    lines = [
        SECTION,
        "",
        f"Measured {today} by `python benchmarks/bench_lint.py` on {cpu_name()}, {os.cpu_count()} cores, "
        f"{platform.system()} {platform.release()}; {_versions()}.",
        "",
        "Whole processes, cold, no cache: `opscan lint --no-cache`, `ruff check --no-cache --isolated` "
        "(default rules), `torchfix` (default rules). Runs alternate between the tools; figures are medians "
        "of the runs counted in brackets. The warm rows rerun `opscan lint` (cache on) over the unchanged input, "
        "alternating with a bare `python -I -c pass`: with the run cache, which replays the last output "
        "after checking every file and folder it depended on, and with the facts cache only (`OPSCAN_RUN_CACHE=0`).",
        "",
        "| input | opscan | parse floor | opscan / parse floor | opscan warm cache | python -I | warm / python -I | warm, `python -c` entry / python -I | warm, facts cache only | ruff | opscan / ruff | TorchFix | TorchFix / opscan | findings (opscan, ruff, TorchFix) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    floor = next(med for _, med, _, _ in rows if "python start-up" in med)
    for label, med, counts, findings in rows:
        lines.append(
            f"| {label} | {med['opscan'] * 1000:.0f} ms ({counts['opscan']}) | {med['parse floor'] * 1000:.0f} ms ({counts['parse floor']}) "
            f"| {med['opscan'] / med['parse floor']:.2f}x "
            f"| {med['opscan (warm cache)'] * 1000:.0f} ms ({counts['opscan (warm cache)']}) | {med['python -I (beside warm)'] * 1000:.0f} ms "
            f"| {med['opscan (warm cache)'] / med['python -I (beside warm)']:.2f}x "
            f"| {med['opscan (warm, python -c entry)'] / med['python -I (beside warm)']:.2f}x "
            f"| {med['opscan (warm, facts cache only)'] * 1000:.0f} ms "
            f"| {med['ruff'] * 1000:.0f} ms ({counts['ruff']}) | {med['opscan'] / med['ruff']:.2f}x "
            f"| {med['torchfix'] * 1000:.0f} ms ({counts['torchfix']}) | {med['torchfix'] / med['opscan']:.1f}x "
            f"| {findings['opscan']}, {findings['ruff']}, {findings['torchfix']} |"
        )
    single_opscan = rows[0][1]["opscan"]
    cold_ok = all(med["opscan"] <= 1.5 * med["parse floor"] for _, med, _, _ in rows)
    warm_ok = rows[0][1]["opscan (warm cache)"] <= 1.5 * rows[0][1]["python -I (beside warm)"]
    torchfix_ok = all(med["torchfix"] >= 30 * med["opscan"] for _, med, _, _ in rows)
    lines += [
        "",
        "`parse floor` is `benchmarks/parse_floor.py`: a process that starts Python, imports `ast` and parses "
        "every file of the input with `ast.parse`, nothing else, sharing a folder among forked processes as opscan "
        "does. No linter built on CPython's `ast` that reads every file can be faster than it.",
        "",
        f"Start-up on this machine, timed in the same rounds: the Python interpreter starts in "
        f"{floor['python start-up'] * 1000:.0f} ms, and starting it and importing opscan's lint modules "
        f"(`{IMPORTS}`) takes {floor['opscan imports'] * 1000:.0f} ms "
        f"({floor['opscan imports'] / single_opscan:.0%} of opscan's time on the single script). "
        "Inside one warm process, `ast.parse` takes "
        + " and ".join(f"{med['ast.parse'] * 1000:.0f} ms on the {label.split(' (')[0]}" for label, med, _, _ in rows)
        + "; the first parse in a fresh process costs more, which the parse floor includes.",
        "",
        "Goals (issue 9): cold, at most 1.5x the parse floor on both inputs "
        f"({'met' if cold_ok else 'missed'} in this run); warm, unchanged tree, at most 1.5x a bare `python -I -c pass` "
        f"on one file ({'met' if warm_ok else 'missed'}); at least 30x faster than TorchFix "
        f"({'met' if torchfix_ok else 'missed'}). Ruff is in the table for reference.",
        "",
    ]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace (or append) this benchmark's section, leaving other sections alone."""
    text = path.read_text() if path.exists() else "# Benchmarks\n\nEach result is a ratio measured side by side in one run, with machine and date.\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.rstrip() == SECTION), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        new = "".join(lines[:start]) + section + ("\n" + "".join(lines[end:]) if end < len(lines) else "")
    path.write_text(new.rstrip("\n") + "\n")


if __name__ == "__main__":
    sys.exit(main())
