"""What a rule sees: one entry trace, summarised once, and a way to make findings."""

from __future__ import annotations

import sys

from opscan._plain import Plain, cached_property
from opscan.codes import RuleInfo
from opscan.findings import Finding, Fix
from opscan.lint.model import CUBLAS, UNKNOWN, VALID_CUBLAS, Loc  # noqa: F401  (the rules import them from here)
from opscan.lint.model import MISSING, Call, CudaWork, Determinism, EnvRead, EnvWrite, Imported, Seed
from opscan.lint.modelled import BACKENDS, RESETTING, helper
from opscan.lint.project import EntryTrace, TraceEvent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from opscan.lint.frameworks import Resets
    from opscan.lint.target import Versions
    from opscan.versions import TorchRange

# Libraries that never run torch (top-level import names). A script whose executing code calls into
# nothing but these and the standard library has no GPU nondeterminism for DET001 and DET002 to fix
# (a data-preparation script that seeds `random`, say). Only libraries none of whose modules import
# torch belong here: batchgenerators, say, does not (its augmenter pins memory with torch, and its
# NumpyToTensor makes tensors), nor do wandb, einops or HF datasets. The build tools a setup.py imports
# are here too: a venv of Python 3.12 or later has no setuptools, and `-v` listed it as a project module.
TORCH_FREE = frozenset(
    """
    numpy scipy pandas polars pyarrow sklearn matplotlib seaborn plotly PIL cv2 skimage imageio yaml ruamel toml
    tomli tomlkit tqdm requests httpx urllib3 h5py rich click typer attr attrs pydantic jinja2 networkx sympy
    nltk boto3 jax jaxlib flax optax tensorflow
    SimpleITK nibabel pydicom nrrd tifffile zarr xarray netCDF4 soundfile librosa numba statsmodels
    joblib psutil tabulate lmdb omegaconf toolz cytoolz faker mxnet pytest _pytest
    setuptools pkg_resources distutils packaging wheel Cython pybind11
    """.split()
)


# Modules of packages that run torch elsewhere, which never do (as FunctionFacts.calls_into names them: the
# package and its first module, or a name the package re-exports):
# - nnU-Net's dataset conversions call batchgenerators' file helpers only (batchgenerators 0.25.5 wheel:
#   batchgenerators/__init__.py and utilities/__init__.py are empty, utilities/*.py import os, pickle,
#   json, typing, numpy and sklearn);
# - OpenMMLab's dataset tools call mmengine's file and progress helpers (mmengine 0.10.7 wheel: no module
#   of mmengine/fileio/ imports torch, nor does mmengine/utils/*.py, whose dl_utils subpackage is not
#   re-exported; mmengine/__init__.py re-exports both with `*`, so `mmengine.load` is fileio's).
_MMENGINE_TORCH_FREE = """
    BaseFileHandler BaseStorageBackend FileClient HTTPBackend HardDiskBackend JsonHandler LmdbBackend
    LocalBackend ManagerMeta ManagerMixin MemcachedBackend PetrelBackend PickleHandler ProgressBar
    Timer TimerError YamlHandler apply_to call_command check_file_exist check_prerequisites check_time
    concat_list copy_if_symlink_fails copyfile copyfile_from_local copyfile_to_local copytree
    copytree_from_local copytree_to_local deprecated_api_warning deprecated_function dict_from_file
    digit_version dump exists fopen generate_presigned_url get get_file_backend get_git_hash
    get_installed_path get_local_path get_object_from_string get_text has_method
    import_modules_from_strings install_package is_abs is_filepath is_installed is_list_of
    is_method_overridden is_seq_of is_str is_tuple_of isdir isfile iter_cast join_path list_cast
    list_dir_or_file list_from_file load mkdir_or_exist put put_text register_backend register_handler
    remove requires_executable requires_package rmtree scandir slice_list symlink to_1tuple to_2tuple
    to_3tuple to_4tuple to_ntuple track_iter_progress track_parallel_progress track_progress
    track_progress_rich tuple_cast
""".split()
TORCH_FREE_MODULES = frozenset(
    {"batchgenerators.utilities", "mmengine.fileio", "mmengine.utils", *(f"mmengine.{name}" for name in _MMENGINE_TORCH_FREE)}
)


def torch_free(package: str) -> bool:
    """Whether importing this top-level package cannot run torch: the standard library, or TORCH_FREE."""
    return package in TORCH_FREE or package in getattr(sys, "stdlib_module_names", ())


class TurnedOff(Plain):
    """`call` (a helper's, `api` from the distribution `package`) turns determinism off on the releases
    `resets` names, after `on` turned it on (Context.turned_off)."""

    _fields = ("call", "on", "resets", "package")
    __slots__ = _fields

    def __init__(self, call: TraceEvent, on: TraceEvent, resets: Resets, package: str):
        self.call = call
        self.on = on
        self.resets = resets
        self.package = package


class Context:
    """One entry trace and the torch releases it targets; rules add to `findings`.

    `versions(name)`, if given, says which versions of another package the
    entry's project may use (opscan.lint.target.PackageVersions); read only
    when a rule asks.
    """

    def __init__(self, trace: EntryTrace, torch: TorchRange, versions: Callable[[str], Versions] | None = None):
        self.trace = trace
        self.torch = torch
        self.versions = versions
        self.findings: list[Finding] = []

    def at_least(self, package: str, version: str) -> bool:
        """Whether every version of `package` (a distribution name) the project may use is `version` or later."""
        return self.versions is not None and self.versions(package).at_least(version)

    def may_use(self, package: str, releases: tuple[str, ...]) -> bool:
        """Whether the project may use a release of `package` (a distribution name) among `releases` ("1.5", ...)."""
        return self.versions is None or self.versions(package).may_be(releases)

    # -- summaries of the trace -------------------------------------------------

    def of(self, what: type) -> list[TraceEvent]:
        """The events, in execution order, of one class of effect (or Call)."""
        return [e for e in (self.trace.events if what is Call else self.trace.effects) if e.what.__class__ is what]

    @cached_property
    def seeds(self) -> list[TraceEvent]:
        """The seeding events; a helper that seeds torch only under a backend (keras') seeds it only
        where the run puts that library on torch (`backends_on_torch`)."""
        seeds = self.of(Seed)
        out = []
        for event in seeds:
            entry = helper(event.api) if event.api else None
            if entry is not None and entry.backend is not None and entry.backend not in self.backends_on_torch:
                libs = tuple(lib for lib in event.what.libs if not lib.startswith("torch"))
                if not libs:
                    continue
                event = TraceEvent(Seed(libs), event.path, event.loc, event.via, event.api, event.worker)
            out.append(event)
        return out

    @cached_property
    def seeded_libs(self) -> set[str]:
        return {lib for e in self.seeds for lib in e.what.libs}

    @cached_property
    def enables(self) -> list[TraceEvent]:
        """Calls that turn determinism on, or may (a computed mode counts: the user can opt in)."""
        return [e for e in self.of(Determinism) if e.what.mode is True or e.what.mode is UNKNOWN]

    @cached_property
    def turned_off(self) -> TurnedOff | None:
        """Where determinism, once on, is turned off again by a helper's call on older releases of it that
        the project may use (frameworks.Resets: Lightning 1.5 to 1.9's `Trainer()`), and nothing turns it
        back on after that call; None elsewhere.

        Last write wins, as the helper's releases write it: the call undoes what ran before it, for the
        work that follows (what the Trainer is built to run). Asked only of a run that turns determinism
        on and imports such a helper's package; the project's release is read only then.
        """
        if not self.enables or RESETTING.isdisjoint(self.trace.libraries):
            return None
        on = found = None  # the event that turned it on, while it is on; the last call that turned it off
        for event in self.trace.first_calls(also=Determinism):  # in execution order
            what = event.what
            if what.__class__ is Determinism:
                on = event if what.mode is not False else None
                found = None  # written again after that call
                continue
            entry = helper(event.api)
            resets = entry.resets if entry is not None else None
            if resets is None or on is None or what.args.star:
                continue
            if what.args.get(resets.keyword, entry.position(resets.keyword), MISSING) not in (MISSING, None):
                continue  # passed: it writes what it is given, as every release does (the model)
            package = resets.distribution(event.api)
            if package is not None and self.may_use(package, resets.releases):
                found, on = TurnedOff(event, on, resets, package), None
        return found

    @cached_property
    def strictly_enabled(self) -> bool:
        return any(e.what.warn_only is False for e in self.enables)

    @cached_property
    def disables(self) -> list[TraceEvent]:
        return [e for e in self.of(Determinism) if e.what.mode is False]

    @cached_property
    def cublas_sets(self) -> list[TraceEvent]:
        return [e for e in self.of(EnvWrite) if e.what.var == CUBLAS]

    @cached_property
    def cublas_handled(self) -> bool:
        """The code sets the variable, or reads it (and so handles it itself)."""
        return bool(self.cublas_sets) or any(e.what.var == CUBLAS for e in self.of(EnvRead))

    @cached_property
    def uncalled(self) -> list[TraceEvent]:
        """What the entry module's functions and methods that its run never calls do: other code may call them."""
        return self.trace.uncalled()

    @cached_property
    def uncalled_enables(self) -> bool:
        """Uncalled code (an entry point for other code) turns determinism on, or may."""
        return any(
            e.what.__class__ is Determinism and (e.what.mode is True or e.what.mode is UNKNOWN) for e in self.uncalled
        )

    @cached_property
    def uncalled_handles_cublas(self) -> bool:
        return any(e.what.__class__ in (EnvWrite, EnvRead) and e.what.var == CUBLAS for e in self.uncalled)

    @property
    def seeds_or_enables(self) -> bool:
        return bool(self.seeds or self.enables)

    # -- flow -------------------------------------------------------------------

    def overridden(self, event: TraceEvent, clears, branches: bool = False) -> TraceEvent | None:
        """The later event that undoes `event` before any CUDA work runs after it, if there is one.

        Last write wins: a flag set and then set back before the first CUDA work
        that follows it (`.cuda()`, a tensor on the GPU, ...) never applies to
        any work. `clears(effect)` says whether an effect undoes `event`'s.
        `branches`: an effect in another branch of an `if` that holds `event`
        (`if fast: benchmark = True` / `else: benchmark = False`) runs on
        another path, so it undoes nothing.
        """
        index = self._positions.get(id(event))
        if index is None:
            return None
        for later in self.trace.effects[index + 1 :]:  # CudaWork and what clears are effects, never calls
            what = later.what
            if what.__class__ is CudaWork:
                return None
            if clears(what) and not (branches and self.apart(event, later)):
                return later
        return None

    def apart(self, one: TraceEvent, other: TraceEvent) -> bool:
        """Do `one` and `other` run in two branches of one `if` (its body, an `elif`'s, its `else`), where
        they or the calls that lead to them sit in the same file: one pass through it runs one of them?"""
        from opscan.lint.branches import apart, file_lines, lines_of, parse_lines, parted

        entry = self.trace.entry.facts
        read = self._read
        for path, line in _places(one):
            for at, there in _places(other):
                if at != path or there == line:
                    continue
                if path not in read:
                    read[path] = (lines_of(entry) if path == entry.path else file_lines(path), None)
                lines, tree = read[path]
                if lines is None or not parted(lines, line, there):
                    continue  # no `else` between them: not two branches of one `if`, and no parse needed
                if tree is None:
                    tree = parse_lines(lines)
                    read[path] = (lines, tree)
                if tree is not None and apart(tree, line, there):
                    return True
        return False

    def shared_branch(self, one: TraceEvent, other: TraceEvent) -> tuple[str, int, int] | None:
        """The innermost branch of an `if` that runs both `one` and `other` (or the calls that lead to them,
        in the same file) or neither: (path, its first line, its last line); None where there is none."""
        from opscan.lint.branches import shared_branch

        for path, line in _places(one):
            for at, there in _places(other):
                if at != path:
                    continue
                tree = self._tree(path)
                found = shared_branch(tree, line, there) if tree is not None else None
                if found is not None:
                    return path, found[0], found[1]
        return None

    @staticmethod
    def runs_in(event: TraceEvent, branch: tuple[str, int, int]) -> bool:
        """Does `event`, or a call that leads to it, sit in `branch` (a `shared_branch`)?"""
        path, first, last = branch
        return any(at == path and first <= line <= last for at, line in _places(event))

    def _tree(self, path: str):
        """The syntax tree of a module of the trace, read once (Context._read); None where it cannot be read."""
        from opscan.lint.branches import file_lines, lines_of, parse_lines

        read = self._read
        if path not in read:
            entry = self.trace.entry.facts
            read[path] = (lines_of(entry) if path == entry.path else file_lines(path), None)
        lines, tree = read[path]
        if tree is None and lines is not None:
            tree = parse_lines(lines)
            read[path] = (lines, tree)
        return tree

    @cached_property
    def _read(self) -> dict[str, tuple]:
        """path -> (its lines, its tree), each read once and the tree only where asked for (Context.apart)."""
        return {}

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {id(e): i for i, e in enumerate(self.trace.effects)}

    @cached_property
    def backends_on_torch(self) -> frozenset[str]:
        """The libraries of `frameworks.BACKENDS` (keras) that this run puts on torch: it sets their
        variable (KERAS_BACKEND) to torch's value before its first import of them runs.

        Anything else is not known to run torch, and is taken not to: the variable set to another
        backend, to a computed value, after the import, only through `os.putenv` (which leaves
        `os.environ`, where keras looks, as it was), or not at all (the library's default, its
        config file or the launcher's environment decide, which lint cannot see).
        """
        env: dict[str, object] = {}
        decided: dict[str, bool] = {}
        for event in self.trace.effects:  # in execution order
            what = event.what
            if what.__class__ is EnvWrite:
                if event.api != "os.putenv":
                    env[what.var] = what.value
            elif what.__class__ is Imported and what.package not in decided:
                var, torch = BACKENDS[what.package]
                value = env.get(var)
                decided[what.package] = isinstance(value, str) and value == torch
        return frozenset(p for p, on in decided.items() if on)

    @cached_property
    def uses_torch(self) -> bool:
        """Whether the code may run torch: what runs does CUDA work (`.cuda()`), or calls into a package other
        than the standard library, TORCH_FREE (and the modules of TORCH_FREE_MODULES) and a library of
        BACKENDS the run does not put on torch
        (`torch.cat(...)`, `timm.create_model(...)`, an unknown library's function), there or in any function
        of the script (uncalled ones may be entry points). Importing one is not using it: a data-preparation
        script that imports a project module for a constant, where that module imports torch, runs no torch
        (ultralytics' data/split.py, nnU-Net's dataset conversions)."""
        if any(event.what.__class__ is CudaWork for event in self.trace.effects):
            return True
        for called in self.trace.calls_into():
            package = called.partition(".")[0]
            if torch_free(package) or called in TORCH_FREE_MODULES:
                continue
            if package not in BACKENDS or package in self.backends_on_torch:
                return True
        return False

    @cached_property
    def cublas_checked(self) -> tuple[str, ...]:
        """The targeted releases whose torch checks CUBLAS_WORKSPACE_CONFIG in deterministic mode (rules/torch.toml)."""
        from opscan.rules import index

        torch = index().env_range(CUBLAS)  # load().env_check(CUBLAS).torch, without building the ops
        return self.torch.subset(torch) if torch is not None else self.torch.releases

    @property
    def cublas_releases(self) -> str:
        """'torch < 2.10' where only some targeted releases check the variable; '' where all of them do."""
        which = self.torch.describe(self.cublas_checked)
        return f"torch {which}" if which else ""

    # -- findings ---------------------------------------------------------------

    def report(self, rule: RuleInfo, path: str, loc: Loc, message: str, fix: Fix | None = None, **properties) -> None:
        self.findings.append(
            Finding(
                code=rule.code,
                message=message,
                path=path,
                line=loc.line,
                col=loc.col,
                end_line=loc.end_line,
                end_col=loc.end_col,
                severity=rule.severity,
                fix=fix,
                properties=properties,
            )
        )


def process_text(ctx: Context, path: str) -> str:
    """' in the fresh process `torch.multiprocessing.spawn` starts (line 14)' where the trace is such a
    process (EntryTrace.processes), for a finding at `path`; '' for the script's own run."""
    started = ctx.trace.started
    if started is None:
        return ""
    import os.path

    at = f"line {started.loc.line}" if started.path == path else f"{os.path.basename(started.path)}:{started.loc.line}"
    return f" in the fresh process `{started.callee}` starts ({at}), a new interpreter that inherits the parent's environment variables but not its determinism flags or seeds"


def script_name(ctx: Context) -> str | None:
    """'the `mytrain` console script' where the run is that script (or GUI script) of the project's
    packaging (a module without a `__main__` block, see opscan.lint.scripts); None for `python FILE`."""
    script = ctx.trace.script
    return f"the `{script.name}` {script.kind} script" if script is not None else None


def script_text(ctx: Context) -> str:
    """' when run as the `mytrain` console script' for a console script's run (script_name); '' otherwise."""
    name = script_name(ctx)
    return f" when run as {name}" if name else ""


def via_text(event: TraceEvent) -> str:
    """' via `pkg.helper`' when the event happened inside a project helper."""
    return f" via `{event.helper}`" if event.helper else ""


def api_name(event: TraceEvent) -> str:
    return f"`{event.api}`" if event.api else "this call"


def how(event: TraceEvent) -> str:
    """'with `torch.manual_seed`', or 'via `utils.seed.set_seed` (`torch.manual_seed`)' for a project helper."""
    if event.helper:
        return f"via `{event.helper}` ({api_name(event)})" if event.api else f"via `{event.helper}`"
    return f"with {api_name(event)}"


def _places(event: TraceEvent) -> list[tuple[str, int]]:
    """The lines that run `event`: its own, and each call site on the way to it."""
    return [(event.path, event.loc.line), *((frame.path, frame.loc.line) for frame in event.via)]
