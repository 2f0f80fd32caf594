"""The pass registry, pipeline text, the pass manager's instrumentation, the greedy rewrite
driver, and canonicalize/cse/dce checked against numpy (translation validation)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilec.diagnostics import InternalCompilerError, TileError
from tilec.dialects import arith
from tilec.dialects.builtin import FuncOp, ModuleOp, ReturnOp
from tilec.ir import Block, Builder, FloatAttr, Operation, Region, parse_module, print_op, verify
from tilec.ir.core import Operand
from tilec.ir.folding import constant_value
from tilec.ir.parser import Parser
from tilec.ir.rewrite import (
    PatternRewriter,
    RewriteDidNotConverge,
    RewritePattern,
    apply_patterns_greedily,
)
from tilec.ir.types import f16, f32, i32
from tilec.passmanager import (
    Instrumentation,
    Pass,
    PassContext,
    PassManager,
    parse_pipeline,
    registered_passes,
)

KERNEL = """\
func @k(%x: f32, %lb: index, %ub: index, %st: index) {
  %a = arith.constant 1.0 : f32
  %b = arith.constant 2.0 : f32
  %c = arith.addf %a, %b : f32
  %d = arith.mulf %x, %c : f32
  %e = arith.mulf %x, %c : f32
  %r0, %r1 = scf.for %i = %lb to %ub step %st iter_args(%k0 = %d, %k1 = %e) {
    scf.yield %k0, %k1 : f32, f32
  }
  return
}
"""


# ---------------------------------------------------------------------------------------------
# Registry and pipeline text


def test_first_passes_are_registered_with_docs_and_typed_options():
    passes = registered_passes()
    for name in ("canonicalize", "cse", "dce"):
        cls = passes[name]
        assert cls.summary and (cls.__doc__ or "").strip()
        assert dataclasses.is_dataclass(cls.Options)
    options = {f.name: f for f in dataclasses.fields(passes["canonicalize"].Options)}
    assert options["max_iterations"].default == 10
    assert options["fold"].default is True
    assert all(f.metadata["help"] for f in options.values())
    described = passes["canonicalize"].describe()
    assert described.startswith("canonicalize: ")
    assert "option max_iterations: int = 10" in described
    assert "option fold: bool = true" in described


def test_pipeline_options_are_typed_and_default_when_absent():
    canon, cse, dce = parse_pipeline("canonicalize{max_iterations=3 fold=false}, cse,dce")
    assert (canon.name, cse.name, dce.name) == ("canonicalize", "cse", "dce")
    assert canon.options.max_iterations == 3 and canon.options.fold is False
    assert parse_pipeline("canonicalize")[0].options.max_iterations == 10
    assert canon.pipeline_text() == "canonicalize{max_iterations=3 fold=false}"
    assert parse_pipeline("") == []


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("cse,canonicalise", 5, "unknown pass 'canonicalise'"),
        ("canonicalize{max_iter=3}", 14, "has no option 'max_iter'"),
        ("canonicalize{max_iterations=three}", 29, "must be an integer, got 'three'"),
        ("cse,canonicalize{fold=maybe}", 23, "must be true or false, got 'maybe'"),
        ("canonicalize{fold}", 14, "option 'fold' needs a value"),
        ("canonicalize{fold=true", 13, "is never closed"),
        ("cse;dce", 4, "expected ',' between passes"),
    ],
)
def test_pipeline_errors_point_at_their_column(text, column, message):
    with pytest.raises(TileError) as info:
        parse_pipeline(text)
    error = info.value
    assert message in error.message
    assert (error.loc.line, error.loc.col) == (1, column)
    rendered = error.render().splitlines()
    assert rendered[1] == text
    assert rendered[2] == " " * (column - 1) + "^"


def test_unknown_pass_and_option_list_the_valid_ones():
    with pytest.raises(TileError) as info:
        parse_pipeline("csee")
    assert "did you mean 'cse'?" in info.value.hint
    assert "canonicalize, cse, dce" in info.value.hint
    with pytest.raises(TileError) as info:
        parse_pipeline("canonicalize{iterations=2}")
    assert info.value.hint == (
        "options of 'canonicalize': max_iterations (int), fold (bool), store_keeps_lanes (bool)"
    )


# ---------------------------------------------------------------------------------------------
# Pass manager instrumentation


class BreakIR(Pass):
    """Test-only: removes each kernel's `return`, which the verifier rejects."""

    name = "break-ir"
    summary = "Make invalid IR (tests only)"

    def run(self, module: Operation, ctx: PassContext) -> None:
        for func in module.functions:
            func.body.block.ops[-1].erase()


class Crash(Pass):
    """Test-only: fails with a Python exception."""

    name = "crash"
    summary = "Raise an exception (tests only)"

    def run(self, module: Operation, ctx: PassContext) -> None:
        raise ZeroDivisionError("boom")


def test_dump_dir_writes_numbered_files_that_parse_back(tmp_path):
    module = parse_module(KERNEL)
    pm = PassManager.from_text(
        "canonicalize,cse,dce", Instrumentation(dump_dir=str(tmp_path / "dumps"))
    )
    pm.run(module)
    names = sorted(os.listdir(tmp_path / "dumps"))
    assert names == ["00-input.tir", "01-canonicalize.tir", "02-cse.tir", "03-dce.tir"]
    texts = [(tmp_path / "dumps" / n).read_text() for n in names]
    assert "arith.addf" in texts[0] and "arith.addf" not in texts[1]
    assert texts[1].count("arith.mulf") == 2 and texts[2].count("arith.mulf") == 1
    assert texts[3] == print_op(module)
    for text in texts:
        verify(parse_module(text))


def test_verify_each_reports_the_pass_that_broke_the_ir_and_saves_it(tmp_path):
    module = parse_module(KERNEL, "kernel.tir")
    pm = PassManager([BreakIR()], Instrumentation(dump_dir=str(tmp_path)))
    with pytest.raises(InternalCompilerError) as info:
        pm.run(module)
    message = str(info.value)
    assert message.startswith("internal compiler error in pass 'break-ir'")
    assert "body must end with 'return'" in message
    saved = info.value.ir_path
    assert saved is not None and os.path.dirname(saved) == str(tmp_path)
    text = Path(saved).read_text(encoding="utf-8")
    assert "func @k" in text and "return" not in text


def test_without_verify_each_the_broken_ir_goes_through():
    module = parse_module(KERNEL)
    PassManager([BreakIR()], Instrumentation(verify_each=False)).run(module)
    with pytest.raises(TileError):
        verify(module)


def test_a_crashing_pass_is_an_internal_error_naming_it(tmp_path):
    module = parse_module(KERNEL)
    with pytest.raises(InternalCompilerError) as info:
        PassManager([Crash()], Instrumentation(dump_dir=str(tmp_path))).run(module)
    assert str(info.value).startswith(
        "internal compiler error in pass 'crash': ZeroDivisionError: boom"
    )
    # The IR the pass ran on (before it failed) is saved.
    assert Path(info.value.ir_path).read_text(encoding="utf-8") == print_op(module)


def test_timing_records_each_pass_in_order():
    pm = PassManager.from_text("canonicalize,cse,dce")
    pm.run(parse_module(KERNEL))
    assert [name for name, _ in pm.timings] == ["canonicalize", "cse", "dce"]
    report = pm.timing_report().splitlines()
    assert report[-1].split()[-1] == "Total"
    assert [line.split()[-1] for line in report[4:7]] == ["canonicalize", "cse", "dce"]


def test_stop_after_runs_the_passes_up_to_it():
    module = parse_module(KERNEL)
    pm = PassManager.from_text("canonicalize,cse,dce", Instrumentation(stop_after="cse"))
    pm.run(module)
    assert [name for name, _ in pm.timings] == ["canonicalize", "cse"]


# ---------------------------------------------------------------------------------------------
# The greedy driver


class Keep(Operation):
    """Test-only op with an effect: keeps its operands alive."""

    name = "test.keep"
    values = Operand(variadic=True)


def new_kernel(*arg_types) -> tuple[ModuleOp, FuncOp, Builder]:
    """A module with one kernel; the builder inserts before its `return`."""
    func = FuncOp.make(sym_name="k", body=Region([Block(arg_types)]))
    module = ModuleOp.make(body=Region([Block(ops=[func])]))
    ret = Builder.at_end(func.body.block).create(ReturnOp)
    return module, func, Builder.before_op(ret)


class AlwaysSwap(RewritePattern):
    """Swaps the operands of every addf and claims progress: never settles."""

    op_kind = arith.AddFOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        rewriter.set_operands(op, op.operands[::-1])
        return True


class DoubleToAdd(RewritePattern):
    """x * 2.0 -> x + x, building the new op through the rewriter."""

    op_kind = arith.MulFOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        c = constant_value(op.rhs)
        if c is None or c.value != 2.0:
            return False
        add = rewriter.create(arith.AddFOp, lhs=op.lhs, rhs=op.lhs)
        rewriter.replace_op(op, [add.result])
        return True


def test_cycling_patterns_are_reported_not_looped_forever():
    module, func, b = new_kernel(f32, f32)
    x, y = func.arguments
    b.create(Keep, values=[b.create(arith.AddFOp, lhs=x, rhs=y).result])
    with pytest.raises(RewriteDidNotConverge):
        apply_patterns_greedily(module, [AlwaysSwap()])


def test_extra_patterns_rewrite_and_new_ops_are_folded_in_turn():
    module, func, b = new_kernel()
    three = b.create(arith.ConstantOp, value=3.0, result_types=[f32]).result
    two = b.create(arith.ConstantOp, value=2.0, result_types=[f32]).result
    keep = b.create(Keep, values=[b.create(arith.MulFOp, lhs=three, rhs=two).result])
    # Without folding, the pattern rewrites 3.0 * 2.0 into 3.0 + 3.0 (and the dead 2.0 goes).
    assert apply_patterns_greedily(module, [DoubleToAdd()], fold=False)
    (add,) = [op for op in func.walk() if isinstance(op, arith.AddFOp)]
    assert add.lhs is three and add.rhs is three
    assert all(op.attributes.get("value") != FloatAttr(2.0) for op in func.walk())
    # Folding then turns the new addf into 6.0.
    assert apply_patterns_greedily(module)
    assert constant_value(keep.operands[0]) == FloatAttr(6.0)
    verify(module)
    assert not apply_patterns_greedily(module)  # a fixpoint stays one


# ---------------------------------------------------------------------------------------------
# Translation validation: folding random expressions gives numpy's result, bit for bit

_INT_OPS = {
    arith.AddIOp: np.add,
    arith.SubIOp: np.subtract,
    arith.MulIOp: np.multiply,
    arith.AndIOp: np.bitwise_and,
    arith.OrIOp: np.bitwise_or,
    arith.XOrIOp: np.bitwise_xor,
    arith.MaxSIOp: np.maximum,
    arith.MinSIOp: np.minimum,
}
_FLOAT_OPS = {
    arith.AddFOp: np.add,
    arith.SubFOp: np.subtract,
    arith.MulFOp: np.multiply,
    arith.DivFOp: np.divide,
}
_CASES = {
    # Edge values are drawn often, so that sums and products overflow.
    "i32": (
        i32,
        np.int32,
        st.integers(-(2**31), 2**31 - 1) | st.sampled_from([-(2**31), -1, 1, 2**31 - 1]),
        _INT_OPS,
    ),
    "f32": (f32, np.float32, st.floats(width=32), _FLOAT_OPS),
    "f16": (f16, np.float16, st.floats(width=16), _FLOAT_OPS),
}


def _expressions(type_name: str):
    _, _, leaves, ops = _CASES[type_name]
    return st.recursive(
        leaves,
        lambda children: st.tuples(st.sampled_from(sorted(ops, key=str)), children, children),
        max_leaves=12,
    )


def _build(b: Builder, tree, t):
    if not isinstance(tree, tuple):
        return b.create(arith.ConstantOp, value=tree, result_types=[t]).result
    kind, lhs, rhs = tree
    return b.create(kind, lhs=_build(b, lhs, t), rhs=_build(b, rhs, t)).result


def _evaluate(tree, dtype, ops):
    if not isinstance(tree, tuple):
        return dtype(tree)
    kind, lhs, rhs = tree
    return ops[kind](_evaluate(lhs, dtype, ops), _evaluate(rhs, dtype, ops))


def _same_bits(actual, expected) -> bool:
    if np.isnan(expected):
        return bool(np.isnan(actual))  # NaN payloads are not specified
    return actual.tobytes() == expected.tobytes()


@pytest.mark.parametrize("type_name", sorted(_CASES))
def test_folding_matches_numpy(type_name):
    t, dtype, _, ops = _CASES[type_name]

    @settings(max_examples=200, deadline=None)
    @given(_expressions(type_name))
    def check(tree):
        with np.errstate(all="ignore"):
            expected = _evaluate(tree, dtype, ops)
        module, _, b = new_kernel()
        keep = b.create(Keep, values=[_build(b, tree, t)])
        PassManager.from_text("canonicalize").run(module)
        folded = constant_value(keep.operands[0])
        assert folded is not None, print_op(module)
        assert _same_bits(dtype(folded.value), expected)
        # The constant as printed reads back as the same value.
        reparsed = Parser(str(folded)).parse_attribute()
        assert _same_bits(dtype(reparsed.value), expected)

    check()
