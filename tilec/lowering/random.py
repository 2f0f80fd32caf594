"""Lowering of `tile.philox` (`tilec.dialects.random`): Philox-4x32-10, element by element.

A round needs the high and low halves of two 32 x 32-bit unsigned products: `mul.hi.u32`
(the `llvm.nvvm.mulhi.ui` intrinsic) and `mul.lo.s32` (a 32-bit `mul`), which ptxas pairs
into one wide multiply. The rest of the round is 32-bit xors and the key's 32-bit additions,
so the ten rounds stay in 32-bit registers. (A 64-bit multiply of zero-extended words would
select `mul.wide.u32` too, but LLVM then folds the xors of its truncated halves into 64-bit
xors of the products: twice the instructions.) The key words are the same in every element, and LLVM computes them once. Where
the counter's words are 0 (c2, c3 at the start; c1 for i32 offsets) the first round's
products fold away.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tilec.dialects.random import PHILOX_KEY_STEPS, PHILOX_MULTIPLIERS, PHILOX_ROUNDS
from tilec.ir.core import Operation
from tilec.lowering import mathlib

__all__ = ["lower_philox"]

I32 = ir.IntType(32)
I64 = ir.IntType(64)


def _to_i64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.sext(x, I64) if x.type.width < 64 else x


def _halves(b: ir.IRBuilder, multiplier: int, word: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(high, low) 32 bits of `multiplier * word`, unsigned."""
    factor = ir.Constant(I32, multiplier)
    high = mathlib.call_intrinsic(b, "llvm.nvvm.mulhi.ui", I32, [word, factor])
    return high, b.mul(word, factor)


def philox_words(b: ir.IRBuilder, seed: ir.Value, offset: ir.Value) -> list[ir.Value]:
    """The four i32 words of Philox-4x32-10 for key `seed` and counter (offset lo, offset hi,
    0, 0); `seed` and `offset` are i32 or i64 (a 32-bit offset has high word 0)."""
    key = _to_i64(b, seed)
    k0, k1 = b.trunc(key, I32), b.trunc(b.lshr(key, ir.Constant(I64, 32)), I32)
    zero = ir.Constant(I32, 0)
    c0 = b.trunc(offset, I32) if offset.type.width > 32 else offset
    c1 = b.trunc(b.lshr(offset, ir.Constant(I64, 32)), I32) if offset.type.width > 32 else zero
    c2 = c3 = zero
    a, m = PHILOX_MULTIPLIERS
    step0, step1 = (ir.Constant(I32, s) for s in PHILOX_KEY_STEPS)
    for _ in range(PHILOX_ROUNDS):
        high0, low0 = _halves(b, a, c0)
        high2, low2 = _halves(b, m, c2)
        c0, c1, c2, c3 = (
            b.xor(b.xor(high2, c1), k0),
            low2,
            b.xor(b.xor(high0, c3), k1),
            low0,
        )
        k0, k1 = b.add(k0, step0), b.add(k1, step1)
    return [c0, c1, c2, c3]


def lower_philox(lowering: Any, op: Operation) -> list[Any]:
    """`tile.philox`: the op's word of every element the thread holds."""
    word = op.attributes["word"].value
    b = lowering.b
    return lowering.elementwise(op, lambda seed, offset: philox_words(b, seed, offset)[word])
