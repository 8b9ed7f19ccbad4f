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


_ASSIGNED_CALLS = [
    "import torch\nclass Net(torch.nn.Module):\n    pass\nmodel = Net()\nmodel = model.to('cuda')\nmodel(x)\n",
    "import torch\nclass Net:\n    def to(self, d):\n        return self\nnet = Net()\nnet = net.to(d).cuda()\nnet(x)\n",
    "class A:\n    def f(self):\n        pass\na = A()\na = b = a.f()\nb(1)\na(2)\n",
    "import torch\nf = torch.Generator\nf = f()\nf.manual_seed(0)\n",
    "class A:\n    pass\nx = {}\nx[A()] = A()\nx(1)\n",
    "import random\nclass C:\n    def run(self):\n        self = C()\n        self = self.run()\n        self.go()\n",
]


def test_an_assigned_call_names_its_callee_as_before_its_target_was_unbound(monkeypatch):
    """`x = f(y)`: the target's instance reuses the name call_event gave the callee, except where the
    callee is named through the target itself (`model = model.to(dev)`), which the assignment unbinds
    first; then it is named again. The facts are those of naming it again every time."""
    fast = [extract("<test>", source.encode(), "", None) for source in _ASSIGNED_CALLS]
    real = _FactsBuilder.call_event

    def forgetting(self, call, scope, out):
        real(self, call, scope, out)
        self._called = (None, None)  # nothing to reuse: the callee is always named again

    monkeypatch.setattr(_FactsBuilder, "call_event", forgetting)
    slow = [extract("<test>", source.encode(), "", None) for source in _ASSIGNED_CALLS]
    for source, a, b in zip(_ASSIGNED_CALLS, fast, slow):
        assert (a.body, a.functions) == (b.body, b.functions), source
