"""Counter-based random numbers: `tile.philox`, the Philox-4x32-10 generator (`tile.*` names).

    %bits = tile.philox %seed, %offsets word 0 : i64, tile<BMxBNxi32> -> tile<BMxBNxi32>

Each element of the result is word `word` (0 to 3) of Philox-4x32-10 (Salmon et al., "Parallel
random numbers: as easy as 1, 2, 3", SC 2011) run on

* the key `(k0, k1)`: the low and high 32 bits of `seed` (an i32 or i64 scalar, sign-extended
  to 64 bits first), and
* the counter `(c0, c1, c2, c3)`: the low 32 bits of the element's offset, its high 32 bits
  (0 for i32 offsets), 0, 0.

Ten rounds, each

    c0, c1, c2, c3 = hi(B * c2) ^ c1 ^ k0, lo(B * c2), hi(A * c0) ^ c3 ^ k1, lo(A * c0)
    k0, k1 = k0 + 0x9E3779B9, k1 + 0xBB67AE85            (A = 0xD2511F53, B = 0xCD9E8D57)

with `hi`/`lo` the two halves of the 64-bit product of 32-bit unsigned words, all arithmetic
modulo 2^32; the result holds the word's 32 bits as an i32. This is exactly Triton's
`tl.randint` (word 0; `tl.randint4x` gives all four), so `rand`, `randn` and `randint` of the
language (docs/language.md, "Random numbers") reproduce Triton's streams.

Philox is one op rather than a chain of integer ops because its rounds need the high half of a
32 x 32-bit unsigned product, which no other op computes, and because as one op the lowering
(`tilec/lowering/random.py`) emits each round as two `mul.wide.u32` and xors, and the
interpreter (`tilec/interp/random.py`) computes it exactly in numpy's uint64. The op is
elementwise: the seed is the same for every element, the result has the offsets' shape (and
layout).
"""

from __future__ import annotations

from tilec.ir.attributes import IntegerAttr
from tilec.ir.constraints import INT_LIKE, SCALAR
from tilec.ir.core import Attr, Operand, Operation, Pure, Result, register_op
from tilec.ir.types import IntegerType, TileType, element_type, i32, is_scalar

__all__ = ["PHILOX_KEY_STEPS", "PHILOX_MULTIPLIERS", "PHILOX_ROUNDS", "PhiloxOp"]

PHILOX_ROUNDS = 10
PHILOX_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)  # A (multiplies c0), B (multiplies c2)
PHILOX_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)  # added to k0 and k1 after every round


@register_op
class PhiloxOp(Operation):
    """Word `word` of Philox-4x32-10 with key `seed` and counter (offset lo, offset hi, 0, 0),
    per element of `offsets`, as i32 (the module docstring gives the rounds)."""

    name = "tile.philox"
    summary = "Counter-based random bits: one word of Philox-4x32-10 per offset."
    seed = Operand(SCALAR)
    offsets = Operand(INT_LIKE)
    word = Attr(IntegerAttr, doc="which of the four output words, 0 to 3")
    result = Result(INT_LIKE)
    traits = (Pure,)
    assembly_format = (
        "$seed `,` $offsets `word` $word attr-dict `:` type($seed) `,` type($offsets) "
        "`->` type($result)"
    )

    def verify_(self) -> None:
        seed = self.seed.type
        if not (isinstance(seed, IntegerType) and seed.width in (32, 64)):
            raise self.error(f"seed must be an i32 or i64 scalar, got {seed}")
        offsets = self.offsets.type
        width = getattr(element_type(offsets), "width", None)
        if not isinstance(element_type(offsets), IntegerType) or width not in (32, 64):
            raise self.error(f"offsets must be i32 or i64 values, got {offsets}")
        word = self.attributes["word"].value
        if not 0 <= word <= 3:
            raise self.error(f"word must be 0, 1, 2 or 3, got {word}")
        result = self.result.type
        if element_type(result) != i32:
            raise self.error(f"result must hold i32 values, got {result}")
        same_kind = is_scalar(result) == is_scalar(offsets)
        if not same_kind or (
            isinstance(result, TileType)
            and (result.shape != offsets.shape or result.layout != offsets.layout)
        ):
            raise self.error(
                f"result {result} must have the shape and layout of the offsets ({offsets})"
            )
