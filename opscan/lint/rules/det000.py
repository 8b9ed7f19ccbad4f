"""DET000 unanalysable-file: A file could not be read, decoded or parsed, so it was not checked.

## What it does
Reports a file that opscan could not analyse: a syntax error, bytes that are not
valid in the file's encoding, a NUL byte, expressions nested too deeply for the
parser, or a file that cannot be read. The run goes on with the other files.

## Why is this bad?
Nothing in the file was checked, so a clean run would say nothing about it.

## Example
```python
def train(:
    torch.manual_seed(0)
```

## Use instead
```python
def train():
    torch.manual_seed(0)
```

## Fix
Make the file valid Python in its declared encoding. opscan never rewrites such a file.
"""

from opscan.codes import parse_doc

RULE = parse_doc(__doc__)
