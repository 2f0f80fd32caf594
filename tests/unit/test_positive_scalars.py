"""The `positive` fact of a float scalar (`Specialization.positive`): finite and above zero
as the parameter's type holds the value -- what `hoist-scale` needs to take `max(x * scale)`
as `max(x) * scale`. Where it is said (the `assume` pass, `tilec compile --assume`), how a
value is tested (`tilec.runtime.arguments.POSITIVE_RANGE`), and which scalars `@tilec.jit`
records it for. The launcher's refusal is in test_runtime.py, the fast path's signature in
test_jit_fast_path.py."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilec
from tilec.diagnostics import TileError
from tilec.jit import _specialization
from tilec.lowering.abi import Specialization, kernel_parameters, kernel_specialization
from tilec.passes.assume import assume_pass_text
from tilec.passes.hoist_scale import scalars_worth_a_sign
from tilec.runtime.arguments import POSITIVE_RANGE, _scalar, is_positive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATTENTION = os.path.join(ROOT, "examples", "attention.tile")

SCALED_MAX = """
def scaled_max(x: f32[M, N], y: f32[M], c: f16, bias: f32):
    for tm in tiles(M):
        y[tm] = max(x[tm, :] * c, axis=1) + bias
"""


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # f16: 65520 is inf
def test_positive_is_what_each_type_holds():
    for dtype, (low, high) in POSITIVE_RANGE.items():
        for value in (low, high, -1.0, 0.0, -0.0, float("nan"), float("inf"), 1.0):
            held = _scalar(dtype, value)
            assert is_positive(dtype, held) == (low < value < high), (dtype, value)
    assert is_positive("bf16", 0x3F80) and not is_positive("bf16", 0xBF80)  # 1.0 and -1.0
    assert not is_positive("bf16", 0x7F80) and not is_positive("bf16", 0x7FC0)  # inf, NaN


def test_assume_names_float_scalars_only(tmp_path):
    path = tmp_path / "k.tile"
    path.write_text(SCALED_MAX)
    program = tilec.compile(str(path), pipeline='assume{positive="c,bias"}')
    func = program.module.lookup("scaled_max")
    assert kernel_specialization(func).positive == {"c", "bias"}
    assert func.attributes["tilec.positive"] is not None
    remarks = [r.message for stage in program.stages for r in stage.remarks]
    assert "assumes positive: bias, c" in remarks
    blanket = tilec.compile(str(path), pipeline='assume{all="positive"}').module
    assert kernel_specialization(blanket.lookup("scaled_max")).positive == {"c", "bias"}
    with pytest.raises(TileError, match="has no float scalar parameter 'x' \\(for 'positive'\\)"):
        tilec.compile(str(path), pipeline='assume{positive="x"}')
    spec = Specialization(positive=frozenset({"c"}))
    assert assume_pass_text(spec) == 'assume{positive="c"}'
    assert Specialization.from_json(spec.to_json()) == spec
    assert "positive" not in Specialization().to_json()  # the keys of other kernels unchanged


def test_the_command_line_says_positive_by_name():
    from tilec.cli import _with_assumptions

    text = _with_assumptions("cse", "aligned,unit,divisible,positive=scale", "ptx")
    assert text == 'assume{all="aligned,unit,divisible" positive="scale"},cse'
    assert _with_assumptions("cse", "positive", "ptx") == 'assume{all="positive"},cse'
    for bad in ("negative=scale", "positive=", "aligned=q"):
        with pytest.raises(TileError, match="--assume: unknown fact"):
            _with_assumptions("cse", bad, "ptx")


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # f16: 70000 is inf
def test_the_jit_records_the_sign_of_the_scalars_the_pass_could_use(tmp_path):
    assert [n for _i, n, _d in tilec.load_kernel(ATTENTION, "attention")._sign_scalars] == ["scale"]
    vector_add = os.path.join(ROOT, "examples", "vector_add.tile")
    assert tilec.load_kernel(vector_add, "saxpy")._sign_scalars == ()  # alpha * x + y: no max
    path = tmp_path / "k.tile"
    path.write_text(SCALED_MAX)
    function = tilec.load_kernel(path, "scaled_max")
    assert scalars_worth_a_sign(function.ir.functions[0]) == {"c"}  # through the f16 -> f32 cast
    x, y = np.zeros((8, 40), np.float32), np.zeros(8, np.float32)
    params = kernel_parameters(function.ir.functions[0])

    def facts(c: float) -> tuple:
        arguments = function._checker.convert([x, y, c, 1.0])
        spec = _specialization(params, arguments, ["c"])
        return spec.positive, function._key(arguments)

    positive, key = facts(2.0)
    assert positive == {"c"}
    # As the f16 parameter holds them: below half its least subnormal is 0, past 65519 inf.
    for c in (-2.0, 0.0, -0.0, float("nan"), float("inf"), 1e-8, 70000.0):
        not_positive, other = facts(c)
        assert not_positive == frozenset() and other != key, c
    assert facts(3e-8) == (frozenset({"c"}), key) and facts(65519.0)[0] == {"c"}
