"""Property tests: generated training scripts against an independent model of the rules.

Each script is a random sequence of the statements that matter (seeding,
enabling determinism, setting CUBLAS_WORKSPACE_CONFIG, CUDA work, cuDNN
benchmark, global RNG draws), at module level or inside a `main()` called
from the `__main__` block, under random import aliases. The oracle below
derives the expected findings from the sequence alone, without opscan's code.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opscan.config import Config
from opscan.lint import engine
from tests.lint.helpers import chdir

# kind, source template ({T} = torch alias, {NP} = numpy alias), attributes for the oracle
ATOMS = [
    ("seed", "{T}.manual_seed(0)", {"lib": "torch"}),
    ("seed", "random.seed(0)", {"lib": "random"}),
    ("seed", "{NP}.random.seed(0)", {"lib": "numpy"}),
    ("enable", "{T}.use_deterministic_algorithms(True)", {"warn": False}),
    ("enable", "{T}.use_deterministic_algorithms(True, warn_only=True)", {"warn": True}),
    ("disable", "{T}.use_deterministic_algorithms(False)", {}),
    ("env", 'os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"', {"valid": True}),
    ("env", 'os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":16:8")', {"valid": True}),
    ("env", 'os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:2"', {"valid": False}),
    ("cuda", "model = {T}.nn.Linear(2, 2).cuda()", {}),
    ("benchmark", "{T}.backends.cudnn.benchmark = True", {}),
    ("benchmark_off", "{T}.backends.cudnn.benchmark = False", {}),
    ("rng", "random.shuffle(items)", {"lib": "random"}),
    ("rng", "{NP}.random.rand(2)", {"lib": "numpy"}),
    ("noop", "items = [1, 2, 3]", {}),
]


def oracle(seq: list[int], first_line: int, checks_cublas: bool = True) -> set[tuple[int, str]]:
    """Expected (line, code) pairs for a straight-line script made of ATOMS[seq].

    `checks_cublas`: the targeted torch checks CUBLAS_WORKSPACE_CONFIG (before 2.10);
    where it does not, DET002, DET003 and DET004 have nothing to report.
    """
    atoms = [(first_line + i, ATOMS[k]) for i, k in enumerate(seq)]
    seeds = [ln for ln, (kind, _, _) in atoms if kind == "seed"]
    seeded = {a["lib"] for _, (kind, _, a) in atoms if kind == "seed"}
    enables = [(ln, a) for ln, (kind, _, a) in atoms if kind == "enable"]
    disabled = any(kind == "disable" for _, (kind, _, _) in atoms)
    envs = [(ln, a) for ln, (kind, _, a) in atoms if kind == "env"]
    # The script calls torch (importing it is not using it): DET001 and DET002 have GPU work to speak of.
    uses_torch = any(kind in ("enable", "disable", "cuda") or (kind == "seed" and a["lib"] == "torch") for _, (kind, _, a) in atoms)
    out = set()
    if seeds and not enables and not disabled and uses_torch:
        out.add((seeds[0], "DET001"))
    if not checks_cublas:
        pass
    elif not envs:
        if enables:
            out.add((enables[0][0], "DET002"))
        elif seeds and not disabled and uses_torch:
            out.add((seeds[0], "DET002"))
    for ln, a in envs:
        if not a["valid"] and checks_cublas:
            out.add((ln, "DET003"))
    cuda = [ln for ln, (kind, _, _) in atoms if kind == "cuda"]
    if cuda and envs and envs[0][0] > cuda[0] and checks_cublas:
        out.add((envs[0][0], "DET004"))
    def undone(i: int, undoes) -> bool:
        """Last write wins: a later atom for which `undoes` holds, before any CUDA work after atom i."""
        for _, later in atoms[i + 1 :]:
            if later[0] == "cuda":
                return False
            if undoes(later):
                return True
        return False

    if seeds or enables:
        out |= {
            (ln, "DET005")
            for i, (ln, (kind, _, _)) in enumerate(atoms)
            if kind == "benchmark" and not undone(i, lambda atom: atom[0] == "benchmark_off")
        }
    out |= {
        (ln, "DET006")
        for i, (ln, (kind, _, a)) in enumerate(atoms)
        if kind == "enable" and a["warn"] and not undone(i, lambda atom: atom[0] == "disable" or (atom[0] == "enable" and not atom[2]["warn"]))
    }
    if seeds:
        out |= {(ln, "DET009") for ln, (kind, _, a) in atoms if kind == "rng" and a["lib"] not in seeded}
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seq=st.lists(st.integers(0, len(ATOMS) - 1), max_size=10),
    in_main=st.booleans(),
    torch_alias=st.sampled_from(["torch", "T", "pt"]),
    np_alias=st.sampled_from(["np", "numpy", "onp"]),
    torch_version=st.sampled_from(["2.9", "2.14"]),  # the last release that checks CUBLAS_WORKSPACE_CONFIG, and one after
)
def test_generated_scripts_match_oracle(tmp_path, seq, in_main, torch_alias, np_alias, torch_version):
    header = [
        "import os",
        "import random",
        f"import numpy as {np_alias}" if np_alias != "numpy" else "import numpy",
        f"import torch as {torch_alias}" if torch_alias != "torch" else "import torch",
        "items = [3, 1, 2]",
    ]
    body = [ATOMS[k][1].format(T=torch_alias, NP=np_alias) for k in seq]
    if in_main:
        lines = header + ["", "", "def main():"] + ["    " + b for b in body] + ["    pass", "", "", 'if __name__ == "__main__":', "    main()"]
        first = len(header) + 4
    else:
        lines = header + body
        first = len(header) + 1
    path = tmp_path / "gen.py"
    path.write_text("\n".join(lines) + "\n")
    with chdir(tmp_path):
        report = engine.run(["gen.py"], Config(root=tmp_path), torch_version=torch_version, use_cache=False)
    got = {(f.line, f.code) for f in report.findings}
    assert got == oracle(seq, first, checks_cublas=torch_version == "2.9"), "\n".join(lines)


# Characters str.splitlines breaks at and Python's tokenizer does not, and the line ends it does.
_NOT_LINE_ENDS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(
        st.tuples(st.sampled_from(["\n", "\r\n", "\r"]), st.text(st.sampled_from([*_NOT_LINE_ENDS, "a", " ", "#"]), max_size=4)),
        min_size=1,
        max_size=8,
    ),
    last_ends=st.booleans(),
)
def test_source_lines_number_lines_as_python_does(lines, last_ends):
    """Each statement's line, by ast's numbering, is the line source_lines gives (what noqa and quotes read)."""
    import ast

    from opscan.lint.facts import source_lines

    text = "".join(f"v{i} = {i}  # {junk}{end}" for i, (end, junk) in enumerate(lines))
    if not last_ends:
        text = text.rstrip("\r\n")
    got = source_lines(text)
    assert len(got) == len(lines)
    for node in ast.parse(text).body:
        assert got[node.lineno - 1].startswith(f"{node.targets[0].id} = "), (text, got)
