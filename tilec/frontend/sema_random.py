"""The random-number builtins `rand`, `randn` and `randint`: their arguments, and the checked
expressions they stand for, built from `Philox` nodes (`tile.philox`: four consecutive offsets
share one Philox run, a word each) and ordinary arithmetic -- the same operations, in the same
order and f32 constants, as Triton's `tl.rand4x`, `tl.randn4x` and `tl.randint4x`
(triton/language/random.py) at counter `offset // 4`, so both give the same stream
(docs/language.md, "Random numbers").

A part of the checker `tilec.frontend.sema._KernelChecker` (a mixin, like
`tilec.frontend.sema_builtins`)."""

from __future__ import annotations

from tilec.diagnostics import Location, TileError
from tilec.dialects.random import RAND_SCALE
from tilec.frontend import syntax as ast
from tilec.frontend.checked import (
    Cast,
    Constant,
    DType,
    Expr,
    Math,
    Philox,
    Select,
    TileType,
    Unary,
)

__all__ = ["RandomChecks"]

# Triton's map of a random word to [0, 1): the word as an i32 x, x >= 0 ? x : ~x (a value in
# [0, 2^31 - 1]), converted to f32 and multiplied by RAND_SCALE, the largest f32 below 2^-31
# for which (2^31 - 1) * scale still rounds below 1. (Its comparisons with a scalar become
# integer compares of the word: `CompareRandWithUniform` matches this form.)
# Box-Muller's guard against log(0), and 2*pi, as Triton writes them (both rounded to f32).
_SMALLEST_UNIFORM = 1.0e-7
_TWO_PI = 6.283185307179586

_OFFSETS_HINT = "offsets count elements, e.g. offsets(tm)[:, None] * N + offsets(tn)[None, :]"


class RandomChecks:
    """`rand`, `randn`, `randint`: the checker's methods for them."""

    def _random_call(self, node: ast.Call) -> Expr:
        name = node.func.id  # type: ignore[union-attr]
        args = self._arguments(node, name, ("seed", "offsets"))
        seed = self._random_seed(name, args["seed"])
        offsets = self._random_offsets(name, args["offsets"])

        def word(xor: int) -> Expr:
            shape = offsets.type.shape
            return Philox(
                seed=seed,
                offsets=offsets,
                xor=xor,
                type=TileType(DType.I32, shape),
                loc=node.loc,
            )

        if name == "randint":
            return word(0)
        if name == "rand":
            return self._uniform(word(0), node.loc)
        return self._normal(
            offsets, self._uniform(word(0), node.loc), self._uniform(word(1), node.loc)
        )

    def _random_seed(self, name: str, node: ast.Expr) -> Expr:
        seed = self._expr(node)
        if not seed.type.is_scalar:
            raise TileError(
                f"{name}() needs a scalar seed, not the tile {seed.type}",
                seed.loc,
                hint="a seed is one integer for the whole stream, e.g. an argument 'seed: i32'",
            )
        if not seed.type.dtype.is_int:
            raise TileError(
                f"{name}() needs an integer seed, not {seed.type.dtype}",
                seed.loc,
                hint="declare the seed as an integer argument, e.g. 'seed: i32' or 'seed: i64'",
            )
        return self._random_integer(seed)

    def _random_offsets(self, name: str, node: ast.Expr) -> Expr:
        offsets = self._expr(node)
        if not offsets.type.dtype.is_int:
            raise TileError(
                f"{name}() needs integer offsets, not {offsets.type}",
                offsets.loc,
                hint=_OFFSETS_HINT,
            )
        return self._random_integer(offsets)

    def _random_integer(self, value: Expr) -> Expr:
        """`value` as i32 or i64, the widths Philox takes: narrower integers sign-extend to
        i32 (as Triton's conversion to uint32 does), a literal keeps its default dtype."""
        dtype = value.type.dtype if value.type.dtype.bits >= 32 else DType.I32
        if isinstance(value, Constant):
            return Constant(value=value.value, type=value.type.with_dtype(dtype), loc=value.loc)
        return self._convert(value, dtype, value.loc)

    def _uniform(self, bits: Expr, loc: Location) -> Expr:
        """An i32 random word mapped to f32 in [0, 1), as Triton's uint_to_uniform_float."""
        shape = bits.type.shape
        negative = self._binary("lt", bits, _constant(0, DType.I32, loc), loc, "rand()")
        flipped = Unary(op="not", operand=bits, type=bits.type, loc=loc)
        magnitude = Select(cond=negative, on_true=flipped, on_false=bits, type=bits.type, loc=loc)
        as_float = Cast(operand=magnitude, type=TileType(DType.F32, shape), loc=loc)
        scale = _constant(RAND_SCALE, DType.F32, loc)
        return self._binary("mul", as_float, scale, loc, "rand()")

    def _normal(self, offsets: Expr, own: Expr, partner: Expr) -> Expr:
        """Box-Muller of the element's pair of words, as Triton's pair_uniform_to_normal:
        words 2j and 2j + 1 of a run give u1 and u2, and the normals
        sqrt(-2 log(max(1e-7, u1))) * cos(2 pi u2) (even offsets) and the same times
        sin(2 pi u2) (odd offsets). `own` is the element's uniform, `partner` its pair's other."""
        loc = own.loc
        binary = self._binary
        odd_bit = binary("and", offsets, _constant(1, offsets.type.dtype, loc), loc, "randn()")
        even = binary("eq", odd_bit, _constant(0, offsets.type.dtype, loc), loc, "randn()")

        def pick(on_even: Expr, on_odd: Expr) -> Expr:
            return Select(cond=even, on_true=on_even, on_false=on_odd, type=on_even.type, loc=loc)

        u1, u2 = pick(own, partner), pick(partner, own)
        u1 = binary("maximum", _constant(_SMALLEST_UNIFORM, DType.F32, loc), u1, loc, "randn()")
        theta = binary("mul", _constant(_TWO_PI, DType.F32, loc), u2, loc, "randn()")
        log = Math(fn="log", operand=u1, type=u1.type, loc=loc)
        radius_squared = binary("mul", _constant(-2.0, DType.F32, loc), log, loc, "randn()")
        radius = Math(fn="sqrt", operand=radius_squared, type=u1.type, loc=loc)
        cos = Math(fn="cos", operand=theta, type=u1.type, loc=loc)
        sin = Math(fn="sin", operand=theta, type=u1.type, loc=loc)
        return binary("mul", radius, pick(cos, sin), loc, "randn()")


def _constant(value: int | float, dtype: DType, loc: Location) -> Constant:
    return Constant(value=value, type=TileType(dtype), loc=loc)
