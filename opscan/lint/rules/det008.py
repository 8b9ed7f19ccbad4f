"""DET008 runtime-pythonhashseed: `PYTHONHASHSEED` is set from inside the running program.

## What it does
Flags writes of `PYTHONHASHSEED` to `os.environ` (or through `os.putenv`,
`setdefault`, `update`) in code that runs.

## Why is this bad?
The interpreter reads `PYTHONHASHSEED` once, at start-up. Setting it later
changes nothing for the running process's hash randomisation (set and dict
order of strings stays random); it only reaches child processes started
afterwards.

## Example
```python
os.environ["PYTHONHASHSEED"] = "0"
```

## Use instead
Set it where the process starts:
```bash
PYTHONHASHSEED=0 python train.py
```
or re-exec the interpreter with it set, or avoid depending on set iteration order.

## Fix
None automatic.
"""

from opscan.codes import parse_doc
from opscan.lint.context import Context, api_name
from opscan.lint.model import EnvWrite

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    for event in ctx.of(EnvWrite):
        if event.what.var == "PYTHONHASHSEED":
            ctx.report(
                RULE,
                event.path,
                event.loc,
                f"Setting PYTHONHASHSEED{_by(event)} inside a running program does not change its hash randomisation; "
                "set it before Python starts (e.g. `PYTHONHASHSEED=0 python train.py`)",
            )


def _by(event) -> str:
    """' via `utils.seed_all`' or ' with `detectron2.utils.env.seed_all_rng`' where a helper wrote it, not the line itself."""
    # An environment write (`os.environ[...] = ...`) is a statement, not a call: it gets no name in brackets.
    call = event.api and not event.api.startswith(("os.environ", "os.putenv"))
    if event.helper:
        return f" via `{event.helper}` ({api_name(event)})" if call else f" via `{event.helper}`"
    if call:
        return f" with {api_name(event)}"
    return ""
