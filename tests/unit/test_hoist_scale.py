"""`hoist-scale`: the rewrite of `max(x * c)` into `max(x) * c` under the `positive` fact
(test_positive_scalars.py), checked by the interpreter before and after every pass; a zero
scale under the fact, which shows why the fact must exclude it; a negative and a zero scale
that `@tilec.jit` compiles without it (and still right); and the exponent's FMA that takes
the product in (`tilec.lowering.elementwise.folded_scale`)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import tilec
from tests.validation import run_kernel
from tilec.compiler import DEFAULT_PIPELINE
from tilec.dialects import arith
from tilec.dialects import tile as T
from tilec.interp.runner import load_reference, random_arguments, reference_path
from tilec.ir.verifier import verify
from tilec.jit import _specialization
from tilec.lowering.abi import Specialization, kernel_parameters, kernel_specialization
from tilec.passes.assume import assume_pass_text
from tilec.passmanager import PassContext, parse_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATTENTION = os.path.join(ROOT, "examples", "attention.tile")
REFERENCE = load_reference(reference_path(ATTENTION))
# Partial tiles everywhere: the loops split by mask-bounds keep their padding selects.
SIZES = {"B": 1, "H": 2, "G": 1, "M": 37, "N": 45, "S": 37, "T": 45, "D": 19}


def _extents(func) -> dict[str, int]:
    dims = {d for a in func.arguments for d in getattr(a.type, "shape", ()) if isinstance(d, str)}
    return {d: SIZES[d] for d in dims}


def _through_selects(v):
    while isinstance(getattr(v, "op", None), T.SelectOp):
        v = v.op.true_value
    return v


def _max_of_products(module) -> list:
    """The max reductions that read products (through selects): what hoist-scale rewrites."""
    return [
        op
        for op in module.walk()
        if isinstance(op, T.ReduceOp)
        and op.kind == "max"
        and isinstance(getattr(_through_selects(op.input), "op", None), arith.MulFOp)
    ]


@pytest.mark.parametrize("kernel", ["attention", "attention_causal", "attention_gqa"])
def test_every_pass_preserves_results_with_a_positive_scale(kernel):
    """Translation validation of the default pipeline with the fact: bit for bit across
    hoist-scale, as across every exact pass."""
    module = tilec.compile(ATTENTION, kernels=[kernel]).module
    func = module.lookup(kernel)
    inputs = random_arguments(func, _extents(func), seed=3, scalars={"scale": 0.3})
    context = PassContext()
    ran = []
    fact = assume_pass_text(Specialization(positive=frozenset({"scale"})))
    for p in parse_pipeline(f"{fact},{DEFAULT_PIPELINE}"):
        before = module.clone()
        context.current_pass = p.name
        p.run(module, context)
        verify(module)
        after_outputs, tile_sizes = run_kernel(module, kernel, inputs, None)
        before_outputs, _ = run_kernel(before, kernel, inputs, tile_sizes)
        for got, expected in zip(after_outputs, before_outputs):
            if p.exact:
                np.testing.assert_array_equal(got, expected, err_msg=p.name)
            else:
                scale = max(float(np.max(np.abs(expected.astype(np.float64)))), 1.0)
                np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * scale, err_msg=p.name)
        ran.append(p.name)
    assert "hoist-scale" in ran
    remarks = [r.message for r in context.remarks if r.pass_name == "hoist-scale"]
    # Both loops (the unmasked tiles and the rest) read the raw products.
    assert len(remarks) == 2 and all("max(x * scale) taken as max(x) * scale" in m for m in remarks)
    assert _max_of_products(module) == []


def _jit_compiled(kernel: str, scale: float):
    """The IR `@tilec.jit` compiles for a call with `scale` (contiguous tensors of `SIZES`),
    for sm_90a, and the call's arguments."""
    function = tilec.load_kernel(ATTENTION, kernel)
    func = function.ir.functions[0]
    values = random_arguments(func, _extents(func), seed=5, scalars={"scale": scale})
    arguments = function._checker.convert(values)
    signs = [name for _i, name, _dtype in function._sign_scalars]
    specialization = _specialization(kernel_parameters(func), arguments, signs)
    pipeline, key = function.plan_specialized(specialization, dict(arguments.extents), "sm_90a")
    program = function._compile(pipeline)
    return program, values, specialization, key


@pytest.mark.parametrize("kernel", ["attention", "attention_causal"])
@pytest.mark.parametrize("scale", [0.3, -0.3, 0.0, -0.0])
def test_a_scale_that_is_not_positive_compiles_without_the_rewrite_and_stays_right(kernel, scale):
    program, values, specialization, _key = _jit_compiled(kernel, scale)
    positive = scale > 0
    assert specialization.positive == (frozenset({"scale"}) if positive else frozenset())
    func = program.module.lookup(kernel)
    assert kernel_specialization(func).positive == specialization.positive
    remarks = [r for stage in program.stages for r in stage.remarks if r.pass_name == "hoist-scale"]
    assert bool(remarks) == positive
    assert bool(_max_of_products(program.module)) != positive  # both loops, or neither
    outputs, _ = run_kernel(program.module, kernel, values, None)
    expected = getattr(REFERENCE, kernel)(*values[:4], np.float32(scale))
    np.testing.assert_allclose(outputs[3].astype(np.float64), expected, rtol=2e-2, atol=2e-3)


def test_the_fact_is_what_keeps_a_zero_scale_out():
    """Under the fact a zero scale is wrong: a row the causal mask hides on a whole key tile
    (the key tiles are smaller than the query tiles) has max(x) = -inf there, and -inf · 0 is
    NaN where the max of the products was -inf. So the launcher refuses a zero scale for
    such a kernel, and the jit compiles one without the fact for it."""
    tiles = {"tile": {"S": 32, "T": 16}}

    def output(pipeline: str) -> np.ndarray:
        program = tilec.compile(
            ATTENTION, kernels=["attention_causal"], options=tiles, pipeline=pipeline
        )
        func = program.module.lookup("attention_causal")
        values = random_arguments(func, _extents(func), seed=5, scalars={"scale": 0.0})
        outputs, _ = run_kernel(program.module, "attention_causal", values, None)
        return outputs[3].astype(np.float32)

    assert np.isnan(output(f'assume{{positive="scale"}},{DEFAULT_PIPELINE}')).any()
    assert not np.isnan(output(DEFAULT_PIPELINE)).any()


def _ptx(kernel: str, facts: str) -> tilec.CompiledProgram:
    extents = "D=128,M=4096,N=4096,S=4096,T=4096,B=4,H=16,G=4"
    # 64-row blocks without a producer warpgroup (tiling's option producer = 0), whose 64 x 64
    # scores a warpgroup the counts below are of.
    tiling = {"extents": extents, "exact": "D", "arch": "sm_90a", "producer": 0}
    pipeline = tilec.compiler.build_pipeline(options={"tiling": tiling})
    return tilec.compile(
        ATTENTION,
        kernels=[kernel],
        target="ptx",
        arch="sm_90a",
        pipeline=f'assume{{all="aligned,unit,divisible"{facts}}},{pipeline}',
    )


# The exponent's FMA, `fma.rn.f32 t, x, m, -m·log2 e` before `ex2.approx.ftz`: the multiplier
# is log2 e (0f3FB8AA3B) without the fold, a register (scale·log2 e) with it.
EXPONENT = re.compile(r"fma\.rn\.f32\s+%r\d+, %r\d+, (\S+), %r\d+;\s*\n\s*ex2\.approx\.ftz")


@pytest.mark.parametrize("kernel", ["attention", "attention_causal"])
def test_the_exponent_takes_the_scale_into_its_fma(kernel):
    folded = _ptx(kernel, ' positive="scale"')
    multipliers = EXPONENT.findall(folded.ptx)
    # Both loops' 64 x 64 scores a warpgroup: 32 exps a thread each.
    assert len(multipliers) == 64 and all(m.startswith("%r") for m in multipliers)
    remarks = [r.message for stage in folded.stages for r in stage.remarks]
    assert any("exp(x * scale - m) as one FMA" in m for m in remarks)
    plain = _ptx(kernel, "")
    assert set(EXPONENT.findall(plain.ptx)) == {"0f3FB8AA3B"}

    # The products' multiplies (32 a loop a thread) are gone; a few per row came instead.
    def multiplies(ptx: str) -> int:
        return len(re.findall(r"\bmul\.rn\.f32\b", ptx))

    assert multiplies(plain.ptx) - multiplies(folded.ptx) >= 64 - 8
