"""The facts walk records calls in the order Python evaluates them, whatever shortcuts it takes.

`_FactsBuilder.expression_events` walks an expression with an explicit stack,
handling names, attribute chains and calls without its per-class field table.
It is checked here against a plain recursive walk over `ast.iter_child_nodes`
(children in field order, a call after its callee and arguments, lambda
bodies left out): on hypothesmith's programs and on hand-written cases. The
assignments that make a name a CUDA device are checked case by case.
"""

from __future__ import annotations

import ast

import hypothesmith
from hypothesis import HealthCheck, given, settings

from opscan.lint.facts import _ENV_NAMES, Event, ModuleFacts, _call_loc, _FactsBuilder, _Scope, extract, loc_of
from opscan.lint.model import Call, CudaWork, EnvRead


def reference(node: ast.AST, out: list) -> None:
    """(kind, loc) of each call and environment-name constant, in evaluation order."""
    if isinstance(node, ast.Lambda):  # its body runs when it is called
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str) and node.value in _ENV_NAMES:
            out.append(("env", loc_of(node)))
        return
    for child in ast.iter_child_nodes(node):
        reference(child, out)
    if isinstance(node, ast.Call):
        out.append(("call", _call_loc(node)))


def walked(node: ast.AST) -> list:
    builder = _FactsBuilder(ModuleFacts(path="<test>"), "", calls=None)
    out: list[Event] = []
    builder.expression_events(node, _Scope(None), out)
    kinds = {Call: "call", EnvRead: "env"}
    return [(kinds[e.what.__class__], e.loc) for e in out if e.what.__class__ in kinds]


def expressions(tree: ast.AST):
    """Every expression a statement hands to the walk whole (values, tests, iterables, ...)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expr, ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            yield node.value
        elif isinstance(node, (ast.If, ast.While)):
            yield node.test
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            yield node.iter


def check(source: str) -> None:
    tree = ast.parse(source)
    for expr in expressions(tree):
        want: list = []
        reference(expr, want)
        assert walked(expr) == want, ast.dump(expr)


CASES = [
    "f(a.b(c()), k=g(h()))",
    "a.b.c.d(e)(f)(g=h())",
    "x = torch.nn.functional.relu(torch.cat([a(), b()], dim=c()))",
    "os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', v())",
    "y = {k(): v() for k in it() if p()}",
    "z = [f(x) for x in g()] + (lambda q: h(q))(i())",
    "w = {**a(), 'b': c(), None: d()}",
    "f(*args(), **kwargs())",
    "x = a().b().c(d().e())",
    "if f() and g(h()) or not i(): pass",
    "for _ in range(n()): pass",
    "x = f'{a()}:{b()!r:{c()}}'",
    "x = a[b()][c():d()]",
    "x = 'PYTHONHASHSEED' in os.environ or check('NCCL_ALGO')",
    "x = a if b() else c(d())",
    "x = (yield f())",
    "x = await g(h())",
]


def test_hand_written_cases():
    for source in CASES:
        wrapped = f"async def outer():\n    {source}\n" if "await" in source or "yield" in source else source
        check(wrapped)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(hypothesmith.from_grammar())
def test_generated_programs(source):
    try:
        compile(source, "<generated>", "exec", ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    try:
        check(source)
    except RecursionError:  # deeper than the recursive reference can go; the walk itself has no limit
        pass


def cuda_work(source: str) -> list[str]:
    facts = extract("<test>", source.encode(), "", None)
    return [e.what.call for e in facts.body if isinstance(e.what, CudaWork)]


def test_names_that_hold_a_cuda_device():
    imports = "import torch\nfrom torch import device\n"
    assert cuda_work(imports + "dev = torch.device('cuda')\nx.to(dev)\n") == [".to(cuda)"]
    assert cuda_work(imports + "dev = device('cuda:0')\nx.to(dev)\n") == [".to(cuda)"]
    assert cuda_work(imports + "dev = torch.device(f'cuda:{rank}')\nx.to(dev)\n") == [".to(cuda)"]
    assert cuda_work(imports + "other = 'cuda'\ndev = torch.device(other)\nx.to(dev)\n") == [".to(cuda)"]
    assert cuda_work(imports + "dev = torch.device('cuda')\nd2 = dev\nx.to(d2)\n") == [".to(cuda)"]
    assert cuda_work(imports + "dev = 'cuda' if ok else 'cpu'\nx.to(dev)\n") == [".to(cuda)"]
    assert cuda_work(imports + "dev = torch.device('cpu')\nx.to(dev)\n") == []
    assert cuda_work(imports + "dev = torch.device('cuda')\ndev = make()\nx.to(dev)\n") == []
    assert cuda_work(imports + "g = torch.Generator()\ndev = g.device('cuda')\nx.to(dev)\n") == []
    assert cuda_work(imports + "dev = dev.device('cuda')\nx.to(dev)\n") == []
