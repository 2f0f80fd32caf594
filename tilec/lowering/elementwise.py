"""The lowering of element-wise ops to LLVM IR: `arith` (integer and float arithmetic,
comparisons, conversions) and `math` (through `tilec.lowering.mathlib`), one element at a time.

`ElementwiseLowering` is a part of the kernel lowering (`tilec.lowering.llvm._KernelLowering`
inherits it): its methods use the lowering's builder `self.b` and `self.elementwise(op, fn)`,
which applies `fn` to the elements of a tile a thread holds.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tilec.diagnostics import TileError
from tilec.dialects import arith
from tilec.dialects import tile as T
from tilec.dialects.tile import DotOperandLayout
from tilec.ir.attributes import BoolAttr
from tilec.ir.core import Operation, OpResult, Value
from tilec.ir.types import FloatType, IntegerType, TileType, Type, element_type
from tilec.lowering import mathlib
from tilec.lowering.exchange import thread_map
from tilec.lowering.llvm_types import constant, llvm_type

__all__ = [
    "FLOAT_BINARY",
    "INT_BINARY",
    "SKIP_UNIT_FACTOR",
    "ElementwiseLowering",
    "check_arch",
    "folded_scale",
]

F32 = ir.FloatType()

# On an `arith.mulf` (set by `skip-unit-factor`): the index of the operand that is a factor
# likely exactly 1 in every lane; the warp then multiplies only where one is not.
SKIP_UNIT_FACTOR = "tilec.skip_unit_factor"

FLOAT_BINARY = {
    arith.AddFOp: "fadd",
    arith.SubFOp: "fsub",
    arith.MulFOp: "fmul",
    arith.DivFOp: "fdiv",
}


def _approximate(op: Operation) -> bool:
    """`approx = true` (the `precision` pass): the hardware's approximate instruction."""
    attr = op.attributes.get("approx")
    return attr is not None and bool(attr.value)


def folded_scale(exp: Operation) -> tuple[Value, Value] | None:
    """`(x, c)` for an approximate f32 `math.exp` of `(x * c) - y` (either operand order of
    the product) whose `c` is the same for every element (a `tile.splat` or `tile.full`) and
    whose product is used by nothing but such differences' approximate exps: the lowering
    then computes `ex2.approx.ftz(fma(x, c·log2 e, -(y·log2 e)))`, `c·log2 e` once, and the
    product not at all (after `hoist-scale`, attention's `(q @ k.T) * scale`: one FFMA an
    element where the product was an FMUL). The same error bound as without the fold
    (`mathlib.exp2_fma_approx`), for any c. Else None."""
    if not (_approximate(exp) and element_type(exp.result.type) == FloatType("f32")):
        return None
    difference = exp.operands[0]
    if not (isinstance(difference, OpResult) and isinstance(difference.op, arith.SubFOp)):
        return None
    product = difference.op.lhs
    if not (isinstance(product, OpResult) and isinstance(product.op, arith.MulFOp)):
        return None
    for user in product.uses:
        if not (isinstance(user, arith.SubFOp) and user.lhs is product and user.rhs is not product):
            return None
        if (
            not all(
                isinstance(e, type(exp)) and _approximate(e) and e.result.type == exp.result.type
                for e in user.result.uses
            )
            or not user.result.uses
        ):
            return None
    for x, c in ((product.op.lhs, product.op.rhs), (product.op.rhs, product.op.lhs)):
        if isinstance(c, OpResult) and isinstance(c.op, (T.SplatOp, T.FullOp)):
            return x, c
    return None


INT_BINARY = {
    arith.AddIOp: "add",
    arith.SubIOp: "sub",
    arith.MulIOp: "mul",
    arith.AndIOp: "and_",
    arith.OrIOp: "or_",
    arith.XOrIOp: "xor",
}
_CMPF = {
    "oeq": (True, "=="),
    "one": (True, "!="),
    "olt": (True, "<"),
    "ole": (True, "<="),
    "ogt": (True, ">"),
    "oge": (True, ">="),
    "ord": (True, "ord"),
    "ueq": (False, "=="),
    "une": (False, "!="),
    "ult": (False, "<"),
    "ule": (False, "<="),
    "ugt": (False, ">"),
    "uge": (False, ">="),
    "uno": (False, "uno"),
}
_CMPI = {
    "eq": (True, "=="),
    "ne": (True, "!="),
    "slt": (True, "<"),
    "sle": (True, "<="),
    "sgt": (True, ">"),
    "sge": (True, ">="),
    "ult": (False, "<"),
    "ule": (False, "<="),
    "ugt": (False, ">"),
    "uge": (False, ">="),
}


class ElementwiseLowering:
    """`arith` and `math` ops, element by element (mixed into `_KernelLowering`)."""

    b: ir.IRBuilder

    def elementwise(self, op: Operation, fn) -> list[Any]:  # pragma: no cover - the lowering's
        raise NotImplementedError

    def elementwise_of(
        self, op: Operation, fn, operands: list[Value]
    ) -> list[Any]:  # pragma: no cover - the lowering's
        raise NotImplementedError

    def bases(self, m: Any) -> list[ir.Value]:  # pragma: no cover - the lowering's
        raise NotImplementedError

    # -- arith ----------------------------------------------------------------------------------

    def constant_op(self, op: Operation) -> list[Any]:
        attr = op.attributes["value"]
        value = attr.value if not isinstance(attr, BoolAttr) else int(attr.value)
        return [constant(op.result.type, value)]

    def float_binary(self, op: Operation) -> list[Any]:
        if _approximate(op) and element_type(op.result.type) == FloatType("f32"):
            return self.elementwise(op, lambda a, c: mathlib.div_approx(self.b, a, c))
        if isinstance(op, arith.MulFOp) and SKIP_UNIT_FACTOR in op.attributes:
            return self.multiply_unless_unit(op)
        name = FLOAT_BINARY[type(op)]
        return self.elementwise(op, lambda a, c: getattr(self.b, name)(a, c))

    def multiply_unless_unit(self, op: Operation) -> list[Any]:
        """A tile multiply marked by `skip-unit-factor`: where no lane of the warp holds a
        factor other than exactly 1.0 (`vote.sync.any` of `fcmp une`, so NaN counts as not 1),
        a uniform branch passes the other operand through -- `x * 1.0 == x` for every x, so
        the result is the same bits either way."""
        index = int(op.attributes[SKIP_UNIT_FACTOR].value)
        b = self.b
        n = thread_map(op.result.type).num_slots
        slots = [self.operand_slots(v, n) for v in op.operands]
        factors = list({id(f): f for f in slots[index]}.values())  # a row's: few distinct
        kept = slots[1 - index]
        one = ir.Constant(factors[0].type, 1.0)
        not_unit = b.fcmp_unordered("!=", factors[0], one)
        for f in factors[1:]:
            not_unit = b.or_(not_unit, b.fcmp_unordered("!=", f, one))
        full_warp = ir.Constant(ir.IntType(32), -1)
        rescale = mathlib.call_intrinsic(
            b, "llvm.nvvm.vote.any.sync", ir.IntType(1), [full_warp, not_unit]
        )
        before = b.block
        multiply = self.fn.append_basic_block("rescale")
        merge = self.fn.append_basic_block("rescale.end")
        b.cbranch(rescale, multiply, merge)
        b.position_at_end(multiply)
        products = [b.fmul(lhs, rhs) for lhs, rhs in zip(*slots)]
        b.branch(merge)
        b.position_at_end(merge)
        result = []
        for x, product in zip(kept, products):
            phi = b.phi(product.type)
            phi.add_incoming(product, multiply)
            phi.add_incoming(x, before)
            result.append(phi)
        return [result]

    def int_binary(self, op: Operation) -> list[Any]:
        name = INT_BINARY[type(op)]
        return self.elementwise(op, lambda a, c: getattr(self.b, name)(a, c))

    def min_max_float(self, op: Operation) -> list[Any]:
        which = "maximum" if isinstance(op, arith.MaximumFOp) else "minimum"
        return self.elementwise(op, lambda a, c: self._float_intrinsic(which, a, c))

    def _float_intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        t = args[0].type
        if name in ("maximum", "minimum") and t == ir.FloatType():
            # sm_80's max.NaN.f32 / min.NaN.f32: one instruction where LLVM's maximum is
            # a compare, a NaN test and two selects (a softmax's row max is all of them)
            which = "fmax" if name == "maximum" else "fmin"
            return mathlib.call_intrinsic(self.b, f"llvm.nvvm.{which}.nan.f", t, args)
        return mathlib.call_intrinsic(self.b, f"llvm.{name}.{t.intrinsic_name}", t, args)

    def min_max_int(self, op: Operation) -> list[Any]:
        relation = ">" if isinstance(op, arith.MaxSIOp) else "<"
        b = self.b
        return self.elementwise(op, lambda a, c: b.select(b.icmp_signed(relation, a, c), a, c))

    # Division and shifts whose LLVM instructions are poison or undefined behaviour for some
    # operands get the values the interpreter defines (tilec/interp/semantics.py), which are
    # what PTX's instructions give: x / 0 is -1, x % 0 is x, INT_MIN / -1 wraps, a shift by
    # the width or more (or a negative amount) shifts everything out. LLVM folds the guards
    # away when the divisor or amount is a constant; the GPU fuzzer found `x % 0` giving -1.

    def _safe_divisor(self, y: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        b = self.b
        zero = b.icmp_signed("==", y, ir.Constant(y.type, 0))
        minus_one = b.icmp_signed("==", y, ir.Constant(y.type, -1))
        return zero, minus_one, b.select(b.or_(zero, minus_one), ir.Constant(y.type, 1), y)

    def _div(self, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.b
        zero, minus_one, divisor = self._safe_divisor(y)
        q = b.select(minus_one, b.sub(ir.Constant(x.type, 0), x), b.sdiv(x, divisor))
        return b.select(zero, ir.Constant(x.type, -1), q)

    def _rem(self, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.b
        zero, minus_one, divisor = self._safe_divisor(y)
        r = b.select(minus_one, ir.Constant(x.type, 0), b.srem(x, divisor))
        return b.select(zero, x, r)

    def _shift(self, x: ir.Value, y: ir.Value, *, left: bool) -> ir.Value:
        b = self.b
        width = ir.Constant(y.type, x.type.width)
        out = b.icmp_unsigned(">=", y, width)  # negative amounts read as large unsigned ones
        amount = b.select(out, ir.Constant(y.type, 0), y)
        if left:
            return b.select(out, ir.Constant(x.type, 0), b.shl(x, amount))
        sign = b.ashr(x, ir.Constant(x.type, x.type.width - 1))
        return b.select(out, sign, b.ashr(x, amount))

    def divsi(self, op: Operation) -> list[Any]:
        return self.elementwise(op, self._div)

    def remsi(self, op: Operation) -> list[Any]:
        return self.elementwise(op, self._rem)

    def shli(self, op: Operation) -> list[Any]:
        return self.elementwise(op, lambda x, y: self._shift(x, y, left=True))

    def shrsi(self, op: Operation) -> list[Any]:
        return self.elementwise(op, lambda x, y: self._shift(x, y, left=False))

    def ceildiv(self, op: Operation) -> list[Any]:
        b = self.b

        def ceildiv(x: ir.Value, y: ir.Value) -> ir.Value:
            q, r = self._div(x, y), self._rem(x, y)
            zero = ir.Constant(x.type, 0)
            # Round up when the exact quotient is positive and not whole (never for y = 0).
            up = b.and_(
                b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("!=", y, zero)),
                b.icmp_signed("==", b.icmp_signed(">", r, zero), b.icmp_signed(">", y, zero)),
            )
            return b.add(q, b.zext(up, x.type))

        return self.elementwise(op, ceildiv)

    def negf(self, op: Operation) -> list[Any]:
        return self.elementwise(op, self.b.fneg)

    def cmpf(self, op: Operation) -> list[Any]:
        ordered, relation = _CMPF[op.predicate]
        compare = self.b.fcmp_ordered if ordered else self.b.fcmp_unordered
        return self.elementwise(op, lambda a, c: compare(relation, a, c))

    def cmpi(self, op: Operation) -> list[Any]:
        below = self._iota_below(op)
        if below is not None:
            return below
        signed, relation = _CMPI[op.predicate]
        compare = self.b.icmp_signed if signed else self.b.icmp_unsigned
        return self.elementwise(op, lambda a, c: compare(relation, a, c))

    def _iota_below(self, op: Operation) -> list[Any] | None:
        """`iota(n) < splat(s)` (i32, the frontend's padding mask `i < N`) as `k < limit` per
        slot, `limit = max(s, 0) - base` for the thread's positions `base + k`: one compare
        with a constant a slot, from one register, where `base + k < s` needs each position
        in a register of its own for as long as the predicate may be recomputed (the mask's
        use is often far from the iota: layernorm's select after the mean). Exact: positions
        lie in `[0, 2**20)`, so `s <= 0` hides every slot, and `max(s, 0) - base` cannot
        wrap. None for other compares."""
        iota, bound = op.lhs, op.rhs
        if op.predicate != "slt" or not isinstance(iota.type, TileType):
            return None
        if not (isinstance(iota, OpResult) and isinstance(iota.op, T.IotaOp)):
            return None
        if not (isinstance(bound, OpResult) and isinstance(bound.op, T.SplatOp)):
            return None
        if iota.type.rank != 1 or iota.type.element != IntegerType(32):
            return None
        b = self.b
        m = thread_map(iota.type)
        (base,) = self.bases(m)
        zero = ir.Constant(ir.IntType(32), 0)
        s = self.values[bound.op.input]
        limit = b.sub(b.select(b.icmp_signed("<", s, zero), zero, s), base)
        return [
            [b.icmp_signed(">", limit, ir.Constant(ir.IntType(32), k)) for k in m.dims[0].offsets]
        ]

    def select(self, op: Operation) -> list[Any]:
        return self.elementwise(op, self.b.select)

    def arith_cast(self, op: Operation) -> list[Any]:
        b = self.b
        src, dst = element_type(op.input.type), element_type(op.result.type)
        lt = llvm_type(dst)
        if isinstance(op, (arith.ExtFOp, arith.TruncFOp)):
            fn = lambda x: self.convert_float(x, src, dst)  # noqa: E731
        elif isinstance(op, arith.SIToFPOp):
            fn = lambda x: b.sitofp(x, lt)  # noqa: E731
        elif isinstance(op, arith.FPToSIOp):
            fn = lambda x: self.float_to_int(x, src, lt)  # noqa: E731
        else:  # extsi, trunci, index_cast: sign-extend or truncate
            fn = lambda x: self.resize_int(x, lt, signed=True)  # noqa: E731
        return self.elementwise(op, fn)

    def float_to_int(self, x: ir.Value, src: FloatType, to: ir.IntType) -> ir.Value:
        """Truncate toward zero, saturating to `to`'s range, NaN to 0 (the interpreter's
        `float_to_int`). Plain `fptosi` is poison out of range, and NVPTX converts to i8
        through a 16-bit register and wraps: 255.0 became -1 as an i8 (the GPU fuzzer)."""
        name = f"llvm.fptosi.sat.i{to.width}.{src.name}"
        return mathlib.call_intrinsic(self.b, name, to, [x])

    def resize_int(self, x: ir.Value, to: ir.IntType, *, signed: bool) -> ir.Value:
        if x.type.width == to.width:
            return x
        if x.type.width > to.width:
            return self.b.trunc(x, to)
        return self.b.sext(x, to) if signed else self.b.zext(x, to)

    def convert_float(self, x: ir.Value, src: FloatType, dst: FloatType) -> ir.Value:
        if src == dst:
            return x
        if src.width == dst.width:  # f16 <-> bf16: through f32, which holds both exactly
            return self.b.fptrunc(self.b.fpext(x, F32), llvm_type(dst))
        if src.width < dst.width:
            return self.b.fpext(x, llvm_type(dst))
        return self.b.fptrunc(x, llvm_type(dst))  # rounds to nearest even (cvt.rn)

    def convert(self, x: ir.Value, src: Type, dst: Type) -> ir.Value:
        """`tile.cast` of one element (see its docstring for the rules)."""
        b = self.b
        if src == dst:
            return x
        f32 = FloatType("f32")
        if isinstance(dst, FloatType) and dst.is_f8:
            return _f32_to_f8(b, self.convert(x, src, f32), dst)
        if isinstance(src, FloatType) and src.is_f8:
            return self.convert(b.fpext(_f8_to_f16(b, x, src), F32), f32, dst)
        lt = llvm_type(dst)
        if isinstance(src, FloatType) and isinstance(dst, FloatType):
            return self.convert_float(x, src, dst)
        if isinstance(src, FloatType):
            if dst == IntegerType(1):
                return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
            return self.float_to_int(x, src, lt)
        if isinstance(dst, FloatType):
            return b.uitofp(x, lt) if src == IntegerType(1) else b.sitofp(x, lt)
        if dst == IntegerType(1):
            return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
        return self.resize_int(x, lt, signed=src != IntegerType(1))

    def cast(self, op: Operation) -> list[Any]:
        src, dst = element_type(op.input.type), element_type(op.result.type)
        (out,) = self.elementwise(op, lambda x: self.convert(x, src, dst))
        if (
            src == FloatType("f32")
            and str(dst) in ("f16", "bf16")
            and isinstance(out, list)
            and (_packed_by_a_dot(op.result) or _stored_as_vectors(op.result))
        ):
            return [self.narrow_pairs(self.values[op.input], str(dst), out)]
        return [out]

    def narrow_pairs(self, values: list[ir.Value], dst: str, out: list[Any]) -> list[Any]:
        """f32 to f16/bf16 two elements at a time: `cvt.rn.f16x2.f32` (`.bf16x2`, sm_80)
        rounds both in one instruction where two `cvt.rn.f16.f32` and a pack take three; the
        pairs are adjacent slots, the ones a dot's register fragments and a vector store's
        32-bit registers pack together. For values that become such fragments
        (`_packed_by_a_dot`) or that only vector stores use (`_stored_as_vectors`: the store
        packs a pair as a `<2 x i16>`, so LLVM hands the pair's register to it whole). Without
        it, LLVM pairs the conversions of a store itself, but not where a select chooses the
        values (dropout's `where`): it moves the select after one conversion per element.
        (Whichever makes it, the paired form cost layernorm registers: rows of 8192 took 105
        instead of 96, of 1024 26 instead of 24, for 7% fewer instructions.)"""
        b = self.b
        half = llvm_type(FloatType(dst))
        pair = ir.VectorType(half, 2)
        result = list(out)
        if len(values) != len(out):  # a splat operand: one value for every slot
            return result
        for i in range(0, len(values) - 1, 2):
            bits = _asm_pure(
                b, ir.IntType(32), [values[i + 1], values[i]], f"cvt.rn.{dst}x2.f32 $0, $1, $2;"
            )
            both = b.bitcast(bits, pair)
            result[i] = b.extract_element(both, ir.Constant(ir.IntType(32), 0))
            result[i + 1] = b.extract_element(both, ir.Constant(ir.IntType(32), 1))
        return result

    # -- math -----------------------------------------------------------------------------------

    def math_op(self, op: Operation) -> list[Any]:
        t = element_type(op.result.type)
        name = op.name
        b = self.b
        if name == "math.fma":  # native fma.rn for every float type: rounded once
            return self.elementwise(op, lambda *xs: self._float_intrinsic("fma", *xs))
        if t == FloatType("f64"):
            if name in ("math.absf", "math.floor", "math.ceil"):
                intrinsic = "fabs" if name == "math.absf" else name[5:]
                return self.elementwise(op, lambda x: self._float_intrinsic(intrinsic, x))
            if name == "math.sqrt":
                return self.elementwise(op, lambda x: self._float_intrinsic("sqrt", x))
            if name == "math.rsqrt":
                one = ir.Constant(ir.DoubleType(), 1.0)
                return self.elementwise(op, lambda x: b.fdiv(one, self._float_intrinsic("sqrt", x)))
            fn_name = name.split(".", 1)[1]
            if fn_name == "powf":  # written `x ** y`
                what, example = "x ** y", "(x.to(f32) ** y).to(f64)"
            else:
                what, example = f"{fn_name}()", f"{fn_name}(x.to(f32)).to(f64)"
            raise TileError(
                f"{what} of f64 values is not supported yet (f64 has sqrt, rsqrt, abs, floor, "
                "ceil and fma)",
                op.loc,
                hint=f"compute it in f32: {example}",
            )
        fn = mathlib.F32_FUNCTIONS[name]
        if name == "math.exp" and _approximate(op):
            fn = mathlib.exp_approx
            difference = op.operands[0]
            if (
                t == FloatType("f32")
                and isinstance(difference, OpResult)
                and isinstance(difference.op, arith.SubFOp)
            ):
                # exp(x - y) = 2^(x log2 e - y log2 e): one fma before the ex2, the row
                # max's product computed once per row (a softmax's shape); for x = x' * c
                # (folded_scale), 2^(x' (c log2 e) - y log2 e), c log2 e once
                x, y = difference.op.operands
                folded = folded_scale(op)
                scaled: dict[int, ir.Value] = {}

                def times_log2e(v: ir.Value) -> ir.Value:
                    if id(v) not in scaled:
                        scaled[id(v)] = mathlib.times_log2e(b, v)
                    return scaled[id(v)]

                if folded is not None:
                    return self.elementwise_of(
                        op,
                        lambda xv, cv, yv: mathlib.exp2_fma_approx(
                            b, xv, times_log2e(yv), times_log2e(cv)
                        ),
                        [*folded, y],
                    )
                return self.elementwise_of(
                    op, lambda xv, yv: mathlib.exp2_fma_approx(b, xv, times_log2e(yv)), [x, y]
                )

        def in_f32(*xs: ir.Value) -> ir.Value:
            wide = [self.convert_float(x, t, FloatType("f32")) for x in xs]
            return self.convert_float(fn(b, *wide), FloatType("f32"), t)

        return self.elementwise(op, in_f32)


# The PTX names of the f8 types, in `cvt`'s packed pairs.
_F8_PTX = {"f8e4m3": "e4m3x2", "f8e5m2": "e5m2x2"}
# sm_89 has f8 `cvt` from PTX ISA 8.1 only, and tilec emits 8.0 (`tilec.lowering.ptx`):
# ptxas refuses it there.
_F8_ARCHES_WITHOUT = ("sm_80", "sm_86", "sm_89")


def check_arch(module: Operation, arch: str) -> None:
    """A located error for an f8 conversion on an architecture whose PTX ISA 8.0 has no f8
    `cvt` (it needs sm_90 or later)."""
    if arch not in _F8_ARCHES_WITHOUT:
        return
    for op in module.walk():
        if not isinstance(op, T.CastOp):
            continue
        for t in (element_type(op.input.type), element_type(op.result.type)):
            if isinstance(t, FloatType) and t.is_f8:
                raise TileError(
                    f"tile.cast to or from {t} needs sm_90 or later; {arch} has no f8 "
                    "conversions in PTX ISA 8.0",
                    op.loc,
                    hint="compile for sm_90 or sm_90a",
                )


def _f32_to_f8(b: ir.IRBuilder, x: ir.Value, dst: FloatType) -> ir.Value:
    """`cvt.rn.satfinite.e4m3x2.f32` (or `.e5m2x2`) of x and 0: the low byte of the pair is
    x, rounded to nearest even and saturated to the largest finite value (inf too)."""
    text = f"cvt.rn.satfinite.{_F8_PTX[dst.name]}.f32 $0, $1, $2;"
    zero = ir.Constant(F32, 0.0)
    fnty = ir.FunctionType(ir.IntType(16), [F32, F32])
    pair = b.asm(fnty, text, "=h,f,f", [zero, x], side_effect=False)
    return b.trunc(pair, ir.IntType(8))


def _f8_to_f16(b: ir.IRBuilder, x: ir.Value, src: FloatType) -> ir.Value:
    """`cvt.rn.f16x2.e4m3x2` (or `.e5m2x2`) of the byte x: exact; the low half is x's f16."""
    text = f"cvt.rn.f16x2.{_F8_PTX[src.name]} $0, $1;"
    fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(16)])
    pair = b.asm(fnty, text, "=r,h", [b.zext(x, ir.IntType(16))], side_effect=False)
    return b.bitcast(b.trunc(pair, ir.IntType(16)), ir.HalfType())


def _asm_pure(b: ir.IRBuilder, ret: ir.Type, args: list[ir.Value], text: str) -> ir.Value:
    """An inline-asm instruction without side effects, its operands `$1..` 32-bit floats."""
    fnty = ir.FunctionType(ret, [a.type for a in args])
    constraints = ",".join(["=r"] + ["f"] * len(args))
    return b.asm(fnty, text, constraints, args, side_effect=False)


def _stored_as_vectors(v: Value) -> bool:
    """Whether every use of `v` stores it with vector accesses (`tile.store` with `vector` of
    2 or more): their registers hold adjacent slots in pairs, as `narrow_pairs` makes them."""
    uses = list(v.uses)
    return bool(uses) and all(
        isinstance(use, T.StoreOp)
        and use.value is v
        and use.attributes.get("vector") is not None
        and use.attributes["vector"].value >= 2
        for use in uses
    )


def _packed_by_a_dot(v: Value) -> bool:
    """Whether `v` reaches a conversion into `#dot_operand` registers (attention's P), through
    selects only: the pairs `narrow_pairs` makes are the fragments' 32-bit registers."""
    for use in v.uses:
        if isinstance(use, T.ConvertLayoutOp) and isinstance(
            use.result.type.layout, DotOperandLayout
        ):
            return True
        if (
            isinstance(use, T.SelectOp)
            and use.operands[0] is not v
            and _packed_by_a_dot(use.result)
        ):
            return True
    return False
