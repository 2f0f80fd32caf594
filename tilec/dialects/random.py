"""Counter-based random numbers: `tile.philox`, the Philox-4x32-10 generator (`tile.*` names).

    %bits = tile.philox %seed, %offsets xor 0 : i64, tile<BMxBNxi32> -> tile<BMxBNxi32>

One run of Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC
2011) gives four 32-bit words; the stream gives each word to one offset, so four consecutive
offsets share a run. An element of offset `o` (its bits read unsigned, at the offsets' width)
gets word `(o mod 4) xor x` (`x` the op's `xor`, 0 to 3) of Philox-4x32-10 run on

* the key `(k0, k1)`: the low and high 32 bits of `seed` (an i32 or i64 scalar, sign-extended
  to 64 bits first), and
* the counter `(c0, c1, c2, c3)`: the low 32 bits of `o div 4`, its high 32 bits (0 for i32
  offsets), 0, 0.

Ten rounds, each

    c0, c1, c2, c3 = hi(B * c2) ^ c1 ^ k0, lo(B * c2), hi(A * c0) ^ c3 ^ k1, lo(A * c0)
    k0, k1 = k0 + 0x9E3779B9, k1 + 0xBB67AE85            (A = 0xD2511F53, B = 0xCD9E8D57)

with `hi`/`lo` the two halves of the 64-bit product of 32-bit unsigned words, all arithmetic
modulo 2^32; the result holds the word's 32 bits as an i32. With `xor 0` this is word `o mod 4`
of Triton's `tl.randint4x(seed, o // 4)` (o >= 0); `xor 1` is the other word of the element's
pair, which Box-Muller (`randn`) needs. The language's `rand`, `randn` and `randint` are built
on it (docs/language.md, "Random numbers").

Why four offsets a run: Philox costs about sixty integer instructions, which an element of a
memory-bound kernel cannot afford (dropout on the H200 moves an f16 element in well under the
time of one Philox run). A thread that holds four consecutive offsets starting at a multiple
of four runs Philox once for the four. The `vectorize` pass proves that of the offsets (their
index arithmetic and layout) and records it as `group = g` (2 or 4): every aligned run of g
elements along the last dimension holds consecutive offsets starting at a multiple of g, and a
thread holds whole runs. The lowering (`tilec/lowering/random.py`) then runs Philox once per
run; without `group` it runs it once per element and picks the word. The interpreter
(`tilec/interp/random.py`) computes it exactly in numpy's uint64 and checks a `group` promise.

Philox is one op rather than a chain of integer ops because its rounds need the high half of a
32 x 32-bit unsigned product, which no other op computes. The op is elementwise: the seed is
the same for every element, the result has the offsets' shape (and layout).
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
    """Word `(offset mod 4) xor x` of Philox-4x32-10 with key `seed` and counter `offset div 4`,
    per element of `offsets`, as i32 (the module docstring gives the rounds)."""

    name = "tile.philox"
    summary = "Counter-based random bits: Philox-4x32-10, one run per four offsets."
    seed = Operand(SCALAR)
    offsets = Operand(INT_LIKE)
    xor = Attr(IntegerAttr, doc="the word is (offset mod 4) xor this, 0 to 3")
    group = Attr(
        IntegerAttr,
        optional=True,
        doc="2 or 4 (vectorize's promise): along the last dimension, aligned runs of this many "
        "elements hold consecutive offsets from a multiple of it, and a thread holds whole runs",
    )
    result = Result(INT_LIKE)
    traits = (Pure,)
    assembly_format = (
        "$seed `,` $offsets `xor` $xor attr-dict `:` type($seed) `,` type($offsets) "
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
        xor = self.attributes["xor"].value
        if not 0 <= xor <= 3:
            raise self.error(f"xor must be 0, 1, 2 or 3, got {xor}")
        group = self.attributes.get("group")
        if group is not None and group.value not in (2, 4):
            raise self.error(f"group must be 2 or 4, got {group.value}")
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
