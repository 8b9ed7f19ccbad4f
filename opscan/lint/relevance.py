"""Which calls the facts pass records: the ones a rule or the project linker can use.

Most calls in a training script (`F.relu`, `torch.cat`, `print`, `json.dumps`,
`loss.backward()`) can never matter: they are not modelled, no rule looks for
them, and they cannot lead into project code. Recording each one as an event
made lint spend as long building, caching and copying facts as CPython spends
parsing. `CallFilter` drops them, and only them:

- a call that hands a local function over by name (`spawn(worker)`) is kept;
- a method whose name an op rule lists (`.put_`, `.index_reduce_`) is kept;
- a call of an unknown callee with no such method name leads nowhere: dropped;
- a local callee (`$.`), a modelled API, an op rule's API, a callee a rule
  reads by name (`apis.READ_CALLS`) and a global-RNG function are kept;
- any other callee is dropped only when its top-level package is a library
  (the standard library, torch, numpy, ...). Whether that holds for a given
  project is checked when the project is linked: a module whose dropped calls
  name a package the project itself provides (a local `torch/` folder, say) is
  read again with every call kept (`Project.module_at`).

So the findings are those of recording every call; `tests/lint/test_relevance.py`
checks that over every fixture and over generated programs.
"""

from __future__ import annotations

import sys

from opscan.lint.apis import READ_CALLS, global_rng_library

# Top-level packages treated as libraries, besides the standard library's own names.
LIBRARIES = frozenset(
    """
    torch torchvision torchaudio torchtext functorch numpy scipy pandas sklearn matplotlib seaborn PIL cv2 tqdm
    yaml omegaconf hydra wandb tensorboard tensorboardX mlflow einops timm transformers datasets tokenizers
    accelerate lightning pytorch_lightning lightning_fabric deepspeed apex fairscale peft safetensors h5py
    requests rich click typer fire absl jax flax tensorflow keras monai mmcv mmengine composer torchtune
    """.split()
)


class CallFilter:
    """Decides, from one call's qualified name, method name and arguments, whether to record it."""

    def __init__(self, qualnames: frozenset[str], methods: frozenset[str], libraries: frozenset[str]):
        self.qualnames = qualnames  # exact callees something looks for (models, op rule APIs)
        self.methods = methods  # method names op rules match on any receiver
        self.libraries = libraries
        self._narrowed: dict[frozenset[str], CallFilter] = {}
        self._dropped: dict[tuple[str | None, str | None], str | None] = {}  # (qualname, method) -> dropped_library's answer
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        """Part of the facts cache key: facts built under another filter are not these facts.
        Made when the cache asks (a run without the cache imports no blake2)."""
        if self._fingerprint is None:
            from opscan._hash import digest

            q, m, lib = self.qualnames, self.methods, self.libraries
            self._fingerprint = digest("\n".join(sorted(q)) + "\0" + "\n".join(sorted(m)) + "\0" + "\n".join(sorted(lib)))
        return self._fingerprint

    def without(self, libraries: frozenset[str]) -> CallFilter:
        """This filter, keeping calls into `libraries` too (packages the project provides itself)."""
        narrowed = self._narrowed.get(libraries)
        if narrowed is None:
            narrowed = self._narrowed[libraries] = CallFilter(self.qualnames, self.methods, self.libraries - libraries)
        return narrowed

    def dropped_library(self, qualname: str | None, method: str | None) -> str | None:
        """None to record the call; else the library it was dropped as belonging to ("" for an unknown callee)."""
        # Asked for every call of every file, and most are of a few callees (`F.relu`, `x.size`): kept.
        key = (qualname, method)
        found = self._dropped.get(key, self)
        if found is self:
            found = self._dropped[key] = self._dropped_library(qualname, method)
        return found

    def _dropped_library(self, qualname: str | None, method: str | None) -> str | None:
        if method is not None and method in self.methods:
            return None
        if qualname is None:
            return ""
        if qualname.startswith("$.") or qualname in self.qualnames or global_rng_library(qualname):
            return None
        root = qualname.partition(".")[0]
        return root if root in self.libraries else None

    @classmethod
    def for_lint(cls) -> CallFilter:
        """The filter for the lint rules as they are: every model key, every op rule API of any torch version."""
        from opscan.lint.modelled import MODELS
        from opscan.rules import index

        rules = index()  # all versions: facts do not depend on the target version
        stdlib = getattr(sys, "stdlib_module_names", frozenset())
        return cls(rules.functions | set(MODELS) | set(READ_CALLS), rules.methods, LIBRARIES | stdlib)
