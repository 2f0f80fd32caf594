"""The registry of builtins (`tilec.frontend.builtins`): every builtin is declared once, and its
declaration leads to its typing rule, its IR generation, and the ops whose interpreter
semantics and lowering implement it."""

from __future__ import annotations

import pytest

import tilec.interp  # noqa: F401  (registers every op's semantics)
from tilec.frontend import analyze, builtins, checked, parse_source
from tilec.frontend.irgen import generate_ir
from tilec.interp.semantics import SEMANTICS
from tilec.lowering.llvm import LOWERINGS

# The kernel each declaration's `example` runs in: `x` is an f32 tile of a[tm, tn] and `offs`
# the row-major offsets of its elements.
TEMPLATE = """\
def k(a: f32[M, N], b: f32[N, N], t: f32[N, M], out: f32[M, N], v: f32[N], r: i32[M],
      flags: i32[M, N], seed: i32):
    for tm, tn in tiles(M, N):
        x = a[tm, tn]
        offs = offsets(tm)[:, None] * N + offsets(tn)[None, :]
        {example}
"""

NAMES = [(b, name) for b in builtins.REGISTRY for name in b.names]


def _ops(text: str) -> set[type]:
    module = generate_ir(analyze(parse_source(text, "registry.tile")))
    return {type(op) for op in module.walk()}


@pytest.mark.parametrize("builtin, name", NAMES, ids=[name for _, name in NAMES])
def test_the_example_of_each_builtin_generates_its_main_op(builtin, name):
    ops = _ops(TEMPLATE.format(example=builtin.example.format(name=name)))
    assert builtin.ops[0] in ops, f"{name}: {builtin.ops[0].__name__} not in {ops}"


@pytest.mark.parametrize("builtin, name", NAMES, ids=[name for _, name in NAMES])
def test_every_op_of_a_builtin_has_semantics_and_a_lowering(builtin, name):
    for op in builtin.ops:
        assert op in SEMANTICS, f"{name}: {op.__name__} has no interpreter semantics"
        assert op in LOWERINGS, f"{name}: {op.__name__} has no lowering to LLVM"


def test_each_name_is_declared_once():
    names = [name for b in builtins.REGISTRY for name in b.names]
    assert len(names) == len(set(names))
    assert set(builtins.CALLS) == set(names)
    assert {*names, "tiles", "kernel", "inf"} == builtins.BUILTIN_NAMES


def test_a_declaration_with_nodes_names_their_generator():
    for b in builtins.REGISTRY:
        assert b.nodes == () or b.generate is not None, b.names
        for node in b.nodes:
            assert issubclass(node, checked.Expr)
            assert builtins.GENERATORS[node] is b.generate


def test_the_checker_dispatches_every_call_through_the_registry(monkeypatch):
    # A rule replaced in the declaration is the rule calls reach: no table of its own.
    seen = []
    declared = builtins.CALLS["exp"]

    def check(checker, node):
        seen.append(node.func.id)
        return declared.check(checker, node)

    monkeypatch.setitem(
        builtins.CALLS,
        "exp",
        declared.__class__(
            declared.names, check, declared.nodes, declared.generate, declared.ops, declared.example
        ),
    )
    _ops(TEMPLATE.format(example="out[tm, tn] = exp(x)"))
    assert seen == ["exp"]
