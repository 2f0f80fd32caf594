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

`tile.rand_threshold` serves a comparison of `rand` with a value the same for every element
(a dropout's `rand(seed, offs) > p`):

    %t = tile.rand_threshold ogt, %p : f32 -> i32

`rand` maps a word x to `f32(x < 0 ? ~x : x) * RAND_SCALE`, a non-decreasing function of the
magnitude `x < 0 ? ~x : x` (0 to 2^31 - 1). So the magnitudes for which `rand pred p` fails
(ogt, oge) or holds (olt, ole) are those up to some `t` (-1 when none), and the comparison is
`x > t or x < ~t` (ogt, oge) or `~t <= x <= t` (olt, ole) on the word itself, for every `p`
(negative, 0, 1 or more, inf, NaN). The canonicalization pattern `CompareRandWithUniform`
(below, on `arith.cmpf`) makes that rewrite: per element two integer compares instead of the
magnitude, an int-to-float conversion, a multiply and a float compare; `t` once per block.
The lowering computes `t` in a few scalar instructions (`tilec/lowering/random.py`);
`rand_threshold` below is its definition, which the interpreter and the folder use.
"""

from __future__ import annotations

import functools

import numpy as np

from tilec.dialects import arith
from tilec.dialects.tile import CastOp, SelectOp
from tilec.dialects.tile_shapes import SplatOp
from tilec.ir.attributes import FloatAttr, IntegerAttr, StringAttr
from tilec.ir.constraints import INT_LIKE, SCALAR
from tilec.ir.core import Attr, Operand, Operation, OpResult, Pure, Result, Value, register_op
from tilec.ir.folding import constant_value
from tilec.ir.rewrite import PatternRewriter, RewritePattern
from tilec.ir.types import IntegerType, TileType, element_type, f32, i32, is_scalar

__all__ = [
    "PHILOX_KEY_STEPS",
    "PHILOX_MULTIPLIERS",
    "PHILOX_ROUNDS",
    "RAND_PREDICATES",
    "RAND_SCALE",
    "CompareRandWithUniform",
    "PhiloxOp",
    "RandThresholdOp",
    "rand_of_words",
    "rand_threshold",
]

PHILOX_ROUNDS = 10
PHILOX_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)  # A (multiplies c0), B (multiplies c2)
PHILOX_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)  # added to k0 and k1 after every round
# `rand`'s map of a word to [0, 1) multiplies the magnitude by this f32 (Triton's constant: the
# largest f32 below 2^-31 for which (2^31 - 1) * scale still rounds below 1).
RAND_SCALE = 4.6566127342e-10
RAND_PREDICATES = ("ogt", "oge", "olt", "ole")
_MAGNITUDES = 1 << 31
_COMPARISONS = {"ogt": np.greater, "oge": np.greater_equal, "olt": np.less, "ole": np.less_equal}


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


def rand_of_words(words: np.ndarray) -> np.ndarray:
    """`rand` of i32 words: `f32(x < 0 ? ~x : x) * RAND_SCALE`, in f32."""
    words = np.asarray(words, np.int64)
    magnitude = np.where(words < 0, ~words, words)
    return magnitude.astype(np.float32) * np.float32(RAND_SCALE)


@functools.lru_cache(maxsize=256)  # the interpreter asks once per block, with the same p
def rand_threshold(p: float, predicate: str) -> int:
    """`tile.rand_threshold`'s value, by its definition: the largest magnitude y (0 to
    2^31 - 1) for which `rand(y) predicate p` fails (ogt, oge) or holds (olt, ole), or -1 when
    there is none. A bisection: those magnitudes are the ones up to it, as rand is
    non-decreasing in the magnitude."""
    compare = _COMPARISONS[predicate]
    threshold = np.float32(p)

    def inside(y: int) -> bool:
        holds = bool(compare(rand_of_words(np.array([y]))[0], threshold))
        return holds != (predicate in ("ogt", "oge"))

    if not inside(0):
        return -1
    low, high = 0, _MAGNITUDES - 1
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if inside(middle) else (low, middle - 1)
    return low


@register_op
class RandThresholdOp(Operation):
    """The i32 `t` for which `rand(x) predicate p` holds exactly when `x > t or x < ~t`
    (ogt, oge) or `~t <= x <= t` (olt, ole), for every i32 word x (the module docstring says
    why one exists; `rand_threshold` gives it)."""

    name = "tile.rand_threshold"
    summary = "The word cut of a comparison of rand with a scalar: -1 to 2^31 - 1."
    predicate = Attr(StringAttr, choices=RAND_PREDICATES)
    p = Operand(SCALAR)
    result = Result(SCALAR)
    traits = (Pure,)
    assembly_format = "$predicate `,` $p attr-dict `:` type($p) `->` type($result)"

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [i32]

    def verify_(self) -> None:
        if self.p.type != f32:
            raise self.error(f"p must be an f32 scalar, got {self.p.type}")
        if self.result.type != i32:
            raise self.error(f"result must be an i32 scalar, got {self.result.type}")

    def fold(self):
        p = constant_value(self.p)
        if p is None:
            return None
        return [IntegerAttr(rand_threshold(p.value, self.predicate))]


def _rand_word(v: Value) -> Value | None:
    """The word x if `v` is `rand`'s map of it as irgen builds it (sema_random.py):
    `cast(select(x < 0, x ^ -1, x)) * RAND_SCALE`."""
    product = _defining(v, arith.MulFOp)
    if product is None or element_type(v.type) != f32:
        return None
    if not _constant_is(product.rhs, np.float32(RAND_SCALE)):
        return None
    converted = _defining(product.lhs, (CastOp, arith.SIToFPOp))
    if converted is None or element_type(converted.input.type) != i32:
        return None
    magnitude = _defining(converted.input, SelectOp)
    if magnitude is None:
        return None
    word = magnitude.false_value
    negative = _defining(magnitude.condition, arith.CmpIOp)
    flipped = _defining(magnitude.true_value, arith.XOrIOp)
    if (
        negative is None
        or negative.predicate != "slt"
        or negative.lhs is not word
        or not _constant_is(negative.rhs, 0)
        or flipped is None
        or flipped.lhs is not word
        or not _constant_is(flipped.rhs, -1)
    ):
        return None
    return word


def _defining(v: Value, kind: type | tuple[type, ...]) -> Operation | None:
    return v.op if isinstance(v, OpResult) and isinstance(v.op, kind) else None


def _constant_is(v: Value, expected: object) -> bool:
    attr = constant_value(v)
    return attr is not None and attr.value == expected


# The predicate that holds for (b, a) exactly when `predicate` holds for (a, b).
_MIRRORED = {"ogt": "olt", "oge": "ole", "olt": "ogt", "ole": "oge"}


class CompareRandWithUniform(RewritePattern):
    """`rand(x) pred p` (or `p pred rand(x)`) with `p` a scalar, a splat or a constant ->
    integer compares of the word x with `t = tile.rand_threshold pred, p` (once per block):
    `x > t or x < ~t` for ogt and oge, `x <= t and x >= ~t` for olt and ole. Exact for every
    p (the module docstring)."""

    op_kind = arith.CmpFOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        predicate, value, bound = op.predicate, op.lhs, op.rhs
        if _rand_word(value) is None and predicate in _MIRRORED:
            predicate, value, bound = _MIRRORED[predicate], bound, value
        word = _rand_word(value)
        if predicate not in RAND_PREDICATES or word is None:
            return False
        p = _uniform(bound, rewriter)
        if p is None:
            return False
        t = rewriter.create(RandThresholdOp, predicate=predicate, p=p).result
        other = rewriter.create(arith.XOrIOp, lhs=t, rhs=rewriter.constant(IntegerAttr(-1), i32))
        t, other = (_like(rewriter, s, word) for s in (t, other.result))
        if predicate in ("ogt", "oge"):
            above = rewriter.create(arith.CmpIOp, predicate="sgt", lhs=word, rhs=t).result
            below = rewriter.create(arith.CmpIOp, predicate="slt", lhs=word, rhs=other).result
            kept = rewriter.create(arith.OrIOp, lhs=above, rhs=below)
        else:
            within = rewriter.create(arith.CmpIOp, predicate="sle", lhs=word, rhs=t).result
            not_below = rewriter.create(arith.CmpIOp, predicate="sge", lhs=word, rhs=other).result
            kept = rewriter.create(arith.AndIOp, lhs=within, rhs=not_below)
        rewriter.replace_op(op, [kept.result])
        return True


def _uniform(v: Value, rewriter: PatternRewriter) -> Value | None:
    """The f32 scalar every element of `v` holds, if `v` says so by its form."""
    if is_scalar(v.type):
        return v
    splat = _defining(v, SplatOp)
    if splat is not None:
        return splat.input
    attr = constant_value(v)
    if isinstance(attr, FloatAttr):
        return rewriter.constant(attr, f32)
    return None


def _like(rewriter: PatternRewriter, scalar: Value, like: Value) -> Value:
    """`scalar`, splat to `like`'s tile type when `like` is a tile."""
    if is_scalar(like.type):
        return scalar
    return rewriter.create(SplatOp, input=scalar, result_types=[like.type]).result


arith.CmpFOp.canonicalization_patterns = (
    *arith.CmpFOp.canonicalization_patterns,
    CompareRandWithUniform(),
)
