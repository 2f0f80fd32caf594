"""Lowering of `tile.philox` (`tilec.dialects.random`): Philox-4x32-10, once per run of offsets
the op's `group` proves to share a counter, else once per element.

A round needs the high and low halves of two 32 x 32-bit unsigned products: `mul.hi.u32`
(the `llvm.nvvm.mulhi.ui` intrinsic) and `mul.lo.s32` (a 32-bit `mul`), which ptxas pairs
into one wide multiply. The rest of the round is 32-bit xors and the key's 32-bit additions,
so the ten rounds stay in 32-bit registers. (A 64-bit multiply of zero-extended words would
select `mul.wide.u32` too, but LLVM then folds the xors of its truncated halves into 64-bit
xors of the products: twice the instructions.) The key words are the same in every element, and
LLVM computes them once. So are some counter words in the first rounds (c0 after round 1 for
i32 offsets is k0, whose product round 2 multiplies): a xor of three words takes the key
together with such a word first (`_mix`), once per block, and the thread's own is one xor.
Where the counter's words are 0 (c2, c3 at the start; c1 for i32 offsets) the first round's
products fold away.

An element of offset o gets word `(o mod 4) xor x` of the run at counter `o div 4`. With
`group = g` (vectorize's promise: the thread's slots along the last dimension come in aligned
runs of g consecutive offsets from a multiple of g), the g slots of a run share one Philox run:
for g = 4 slot i takes word `i xor x`, known here; for g = 2 the run's first offset says which
half of the four words is its (one select). Without it each slot runs Philox on its own counter
and selects its word (three selects).

`tile.rand_threshold` (the word cut of a comparison `rand(x) pred p`) is a few scalar
instructions, by a closed form of its definition. `rand` of a magnitude y > 0 is
`RN(RN(y) * RAND_SCALE)`, and as `RAND_SCALE = 2^-31 (1 - 2^-24)`, that product rounds to
2^-31 times the f32 just below `RN(y)`. So `rand(y) > p` (p > 0, scaled `q = p * 2^31`, exact)
holds exactly when `RN(y)` exceeds `w`, the f32 two above q (one above for `>=`), and the
magnitudes with `RN(y) <= w` are those up to `floor(w)` for w below 2^24 (integers are exact
there) and up to the midpoint `w + ulp/2` above it, less one when the tie rounds up (w odd).
Below 0, at 0, from 2^31 on and at NaN the answer is a constant. tests/unit/test_random.py
runs this code on the host against the definition, for every f32 p from 0 to 1.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tilec.dialects.random import PHILOX_KEY_STEPS, PHILOX_MULTIPLIERS, PHILOX_ROUNDS
from tilec.ir.core import Operation
from tilec.ir.types import TileType
from tilec.lowering import mathlib
from tilec.lowering.exchange import thread_map

__all__ = ["lower_philox", "lower_rand_threshold", "rand_threshold"]

I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()


def _to_i64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.sext(x, I64) if x.type.width < 64 else x


def _halves(b: ir.IRBuilder, multiplier: int, word: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(high, low) 32 bits of `multiplier * word`, unsigned."""
    factor = ir.Constant(I32, multiplier)
    high = mathlib.call_intrinsic(b, "llvm.nvvm.mulhi.ui", I32, [word, factor])
    return high, b.mul(word, factor)


def philox_words(b: ir.IRBuilder, seed: ir.Value, offset: ir.Value) -> list[ir.Value]:
    """The four i32 words of Philox-4x32-10 for key `seed` and counter (offset lo, offset hi,
    0, 0); `seed` and `offset` are i32 or i64 (a 32-bit offset has high word 0). `offset` here
    is the counter itself (the stream's `o div 4`)."""
    key = _to_i64(b, seed)
    k0, k1 = b.trunc(key, I32), b.trunc(b.lshr(key, ir.Constant(I64, 32)), I32)
    zero = ir.Constant(I32, 0)
    c0 = b.trunc(offset, I32) if offset.type.width > 32 else offset
    c1 = b.trunc(b.lshr(offset, ir.Constant(I64, 32)), I32) if offset.type.width > 32 else zero
    c2 = c3 = zero
    # The words that depend on the seed alone (the same in every thread), by id.
    seed_only = {id(zero)}
    a, m = PHILOX_MULTIPLIERS
    step0, step1 = (ir.Constant(I32, s) for s in PHILOX_KEY_STEPS)
    for _ in range(PHILOX_ROUNDS):
        high0, low0 = _halves(b, a, c0)
        high2, low2 = _halves(b, m, c2)
        for word, halves in ((c0, (high0, low0)), (c2, (high2, low2))):
            if id(word) in seed_only:
                seed_only.update(id(h) for h in halves)
        c0, c1, c2, c3 = (
            _mix(b, high2, c1, k0, seed_only),
            low2,
            _mix(b, high0, c3, k1, seed_only),
            low0,
        )
        k0, k1 = b.add(k0, step0), b.add(k1, step1)
    return [c0, c1, c2, c3]


def _mix(
    b: ir.IRBuilder, high: ir.Value, word: ir.Value, key: ir.Value, seed_only: set[int]
) -> ir.Value:
    """`high ^ word ^ key`, the key xored first with whichever of the other two depends on
    the seed alone: that xor is then one per block (ptxas keeps it in a uniform register),
    and the thread's own is one two-input xor with a uniform operand. (In the order of the
    formula, the thread's xor takes two uniform operands, and a LOP3 reads only one: ptxas
    moved the other into a register first, in rounds 2 and 3 of every run.)"""
    if id(high) in seed_only and id(word) in seed_only:
        mixed = b.xor(b.xor(high, word), key)
        seed_only.add(id(mixed))
        return mixed
    if id(high) in seed_only:
        return b.xor(word, b.xor(high, key))
    if id(word) in seed_only:
        return b.xor(high, b.xor(word, key))
    return b.xor(b.xor(high, word), key)


def _counter(b: ir.IRBuilder, offset: ir.Value) -> ir.Value:
    """`o div 4`, the bits of `o` read unsigned."""
    return b.lshr(offset, ir.Constant(offset.type, 2))


def _pick(b: ir.IRBuilder, words: list[ir.Value], which: ir.Value) -> ir.Value:
    """`words[which]` for a 2-bit `which` (of any integer width): two levels of selects."""
    bit = [
        b.trunc(
            b.and_(b.lshr(which, ir.Constant(which.type, k)), ir.Constant(which.type, 1)),
            ir.IntType(1),
        )
        for k in (0, 1)
    ]
    low = b.select(bit[0], words[1], words[0])
    high = b.select(bit[0], words[3], words[2])
    return b.select(bit[1], high, low)


def _element(b: ir.IRBuilder, seed: ir.Value, offset: ir.Value, xor: int) -> ir.Value:
    """One element on its own: its run, and its word picked at run time."""
    which = b.xor(offset, ir.Constant(offset.type, xor))
    return _pick(b, philox_words(b, seed, _counter(b, offset)), which)


def _run(b: ir.IRBuilder, seed: ir.Value, offsets: list[ir.Value], xor: int) -> list[ir.Value]:
    """The words of a run of g = len(offsets) slots of consecutive offsets from a multiple of
    g (2 or 4): one Philox run."""
    first = offsets[0]
    words = philox_words(b, seed, _counter(b, first))
    if len(offsets) == 4:
        return [words[i ^ xor] for i in range(4)]
    # g = 2: the run is words 0, 1 or 2, 3, as bit 1 of its first offset says.
    upper = b.trunc(
        b.and_(b.lshr(first, ir.Constant(first.type, 1)), ir.Constant(first.type, 1)), ir.IntType(1)
    )
    return [b.select(upper, words[2 | (i ^ xor)], words[i ^ xor]) for i in range(2)]


def lower_philox(lowering: Any, op: Operation) -> list[Any]:
    """`tile.philox`: the stream's word of every element the thread holds, one Philox run per
    run of `group` slots when the op has one."""
    xor = op.attributes["xor"].value
    group = op.attributes.get("group")
    b = lowering.b
    if group is None or not isinstance(op.result.type, TileType):
        return lowering.elementwise(op, lambda seed, offset: _element(b, seed, offset, xor))
    g = group.value
    n = thread_map(op.result.type).num_slots
    seed = lowering.values[op.seed]
    offsets = lowering.operand_slots(op.offsets, n)
    slots: list[ir.Value] = []
    for start in range(0, n, g):
        slots.extend(_run(b, seed, offsets[start : start + g], xor))
    return [slots]


def rand_threshold(b: ir.IRBuilder, p: ir.Value, predicate: str) -> ir.Value:
    """`tile.rand_threshold predicate, p` (f32 -> i32), by the closed form of the module
    docstring."""

    def i32(x: int) -> ir.Constant:
        return ir.Constant(I32, x)

    scaled = b.fmul(p, ir.Constant(F32, 2.0**31))
    # |q|'s bits: +0 for -0, a positive pattern for NaN (the sign is decided below).
    magnitude = b.and_(b.bitcast(scaled, I32), i32(0x7FFFFFFF))
    # w, as bits: the f32 above q for `>` (and `<=`, its complement), q itself for `>=`, `<`.
    w_bits = b.add(magnitude, i32(1 if predicate in ("ogt", "ole") else 0))
    every = b.icmp_signed(">=", w_bits, i32(0x4F000000))  # w >= 2^31: every magnitude
    w_bits = b.select(every, i32(0), w_bits)
    w = b.bitcast(w_bits, F32)
    ulp = b.fsub(b.bitcast(b.add(w_bits, i32(1)), F32), w)
    half_ulp = b.fptosi(b.fmul(ulp, ir.Constant(F32, 0.5)), I32)  # 0 below 2^24
    tie_rounds_up = b.select(b.icmp_signed("!=", half_ulp, i32(0)), b.and_(w_bits, i32(1)), i32(0))
    cut = b.sub(b.add(b.fptosi(w, I32), half_ulp), tie_rounds_up)
    cut = b.select(every, i32(0x7FFFFFFF), cut)
    # p below 0 (at or below for `>=` and `<`): rand pred p holds for no magnitude (ogt, oge:
    # fails for none).
    strict = predicate in ("ogt", "ole")
    below = b.fcmp_ordered("<" if strict else "<=", p, ir.Constant(F32, 0.0))
    cut = b.select(below, i32(-1), cut)
    if predicate in ("olt", "ole"):  # a comparison with NaN holds for no magnitude
        cut = b.select(b.fcmp_unordered("uno", p, p), i32(-1), cut)
    return cut


def lower_rand_threshold(lowering: Any, op: Operation) -> list[Any]:
    """`tile.rand_threshold`: a scalar, computed where the op is (once per block)."""
    return [rand_threshold(lowering.b, lowering.values[op.p], op.predicate)]
